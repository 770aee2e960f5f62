// The shapes of a checkpoint's tensors, read from its safetensors headers without LibTorch, and
// the shapes a ModelConfig's CausalLM (models/transformer.h) has: so that a job can be refused
// for weights that do not fit its model.config before any actor loads them.
//
//   TROUPE_ASSIGN_OR_RETURN(WeightShapes file, ReadSafetensorsShapes("ckpt/"));
//   std::vector<std::string> problems = CausalLmShapeMismatches(file, config);
//   // {"model.embed_tokens.weight is [100, 32] in the checkpoint, [100, 64] in the config"}
//
// Reading: `path` is a .safetensors file, a sharded index (*.json), or a directory holding
// model.safetensors or else model.safetensors.index.json (as SafetensorsReader::Open chooses). Only
// regular files are opened (a FIFO or device is refused without blocking), and only their headers
// are read: 8 bytes of length, then at most kMaxSafetensorsHeaderBytes of JSON; an index at most
// kMaxSafetensorsIndexBytes. The rest of each file (the tensor data) is never read;
// SafetensorsReader validates it when the weights are loaded.
//
// Thread-safety: pure functions.
#ifndef TROUPE_MODELS_WEIGHT_SHAPES_H_
#define TROUPE_MODELS_WEIGHT_SHAPES_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/model_config.h"

namespace troupe {
namespace models {

// safetensors' own bound on a header (its Rust reader refuses larger ones) and ours on an index.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = uint64_t{100} << 20;
inline constexpr uint64_t kMaxSafetensorsIndexBytes = uint64_t{64} << 20;

// Tensor name -> shape.
using WeightShapes = std::map<std::string, std::vector<int64_t>>;

// The shapes of the tensors at `path` (see above). NotFound for a missing file or a directory
// with neither weights file; InvalidArgument naming the file (and the tensor or field) for a file
// that is not regular, a header that is not a safetensors header, or an index naming a shard that
// does not hold its tensor.
absl::StatusOr<WeightShapes> ReadSafetensorsShapes(const std::string& path);

// The parameters of CausalLM(config) with their shapes, by their names in a checkpoint
// ("model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight", ..., "lm_head.weight"
// unless the embeddings are tied).
WeightShapes CausalLmWeightShapes(const ModelConfig& config);

// What would stop the weights `file` from loading into CausalLM(config) (LoadCausalLM), or, with
// `value_model_too`, also not into a value model (LoadValueModel: a causal LM's backbone, or a
// directory with a value head score.weight [1, hidden] and no lm_head): one line per tensor,
// sorted by name, at most `max_lines` (then "... and N more"):
//   "NAME is [a, b] in the checkpoint, [c, d] for the config"
//   "NAME is missing from the checkpoint"
//   "NAME [a, b] in the checkpoint has no place in a model of the config"
// Ignored as the loaders ignore them: rotary buffers (*rotary_emb.inv_freq) and lm_head.weight
// when the embeddings are tied. Empty = it fits.
std::vector<std::string> CausalLmShapeMismatches(const WeightShapes& file,
                                                 const ModelConfig& config,
                                                 bool value_model_too = false,
                                                 size_t max_lines = 4);

// "[2, 3]".
std::string ShapeString(const std::vector<int64_t>& shape);

}  // namespace models
}  // namespace troupe

#endif  // TROUPE_MODELS_WEIGHT_SHAPES_H_
