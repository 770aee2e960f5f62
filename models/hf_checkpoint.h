// Hugging Face model directories, written whole and read back: the layout transformers'
// from_pretrained / save_pretrained use.
//
//   config.json                   ModelConfig (torch_dtype = the dtype the weights are saved in)
//   generation_config.json        GenerationConfig, if given
//   model.safetensors             the weights, when they fit in max_shard_bytes; otherwise
//   model-0000i-of-0000n.safetensors + model.safetensors.index.json (weight_map, total_size)
//   tokenizer.json                the tokenizer text given, if any
//   tokenizer_config.json         the text given, if any
//
// SaveHfCheckpoint writes everything into a scratch directory next to `dir` (every file fsynced),
// then renames it into place: a reader sees the old directory or the complete new one, never a
// mix. WriteHfModelFiles writes the same files into a directory the caller makes atomic (the
// RL checkpointer's step directory). LoadHfCheckpoint reads such a directory back; saved in the
// model's dtype, the weights come back bit for bit.
//
// Example:
//   HfModelFiles files{.config = model->config(), .generation = generation,
//                      .tokenizer_json = tokenizer_text};
//   TROUPE_RETURN_IF_ERROR(SaveHfCheckpoint("out/step_10", *model, files,
//                                           {.dtype = at::kBFloat16}));
//   TROUPE_ASSIGN_OR_RETURN(HfCheckpoint ckpt, LoadHfCheckpoint("out/step_10", at::kBFloat16));
//
// Errors: InvalidArgument for bad content (naming the file and key / tensor), NotFound for a
// missing config.json or weights, Internal for file-system failures (naming the path).
// Thread-safety: the functions are thread-safe for distinct directories.
#ifndef TROUPE_MODELS_HF_CHECKPOINT_H_
#define TROUPE_MODELS_HF_CHECKPOINT_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "models/generation_config.h"
#include "models/model_config.h"
#include "models/safetensors.h"
#include "models/transformer.h"

namespace troupe {
namespace models {

// The non-weight files of a model directory.
struct HfModelFiles {
  ModelConfig config;
  std::optional<GenerationConfig> generation;  // generation_config.json when set
  std::string tokenizer_json;                  // tokenizer.json when non-empty
  std::string tokenizer_config_json;           // tokenizer_config.json when non-empty
};

struct HfSaveOptions {
  // Weights larger than this (in bytes of the saved dtype) are split into shards of at most this
  // size (a larger single tensor gets a shard of its own) plus the index. transformers' default.
  int64_t max_shard_bytes = int64_t{5} * 1000 * 1000 * 1000;
  // float32 / float16 / bfloat16 to convert floating weights to while writing; unset keeps the
  // weights' own dtype. Either way config.json's torch_dtype names the dtype written.
  std::optional<at::ScalarType> dtype;
  // Added to every shard's "__metadata__".
  std::map<std::string, std::string> metadata;
};

// Writes `weights` and `files` into the existing directory `dir` (meant to be fresh: stale weight
// files of another layout are not removed), each file atomically. torch_dtype is the written
// dtype of the floating weights (files.config's when there are none). InvalidArgument for an
// unsupported dtype, an invalid config, or generation ids outside the vocabulary.
absl::Status WriteHfModelFiles(const std::string& dir, const NamedTensors& weights,
                               const HfModelFiles& files, const HfSaveOptions& options = {});

// The model's tensors and `files` (files.config is taken as given, e.g. model.config()) written
// to `dir` as a whole: scratch directory "<dir>.tmp-<pid>", then renamed over `dir` (an existing
// `dir` is replaced; its parent must exist). On error `dir` is left as it was.
absl::Status SaveHfCheckpoint(const std::string& dir, const torch::nn::Module& model,
                              const HfModelFiles& files, const HfSaveOptions& options = {});

struct HfCheckpoint {
  CausalLM model{nullptr};
  HfModelFiles files;
};

// Reads `dir` written by SaveHfCheckpoint (or by transformers): config.json, the weights (single
// or sharded, F32/F16/BF16 converted to `dtype`) into a new CausalLM of `dtype`, and the optional
// generation_config.json (its ids checked against vocab_size), tokenizer.json and
// tokenizer_config.json (empty / unset when absent).
absl::StatusOr<HfCheckpoint> LoadHfCheckpoint(const std::string& dir,
                                              at::ScalarType dtype = at::kFloat);

}  // namespace models
}  // namespace troupe

#endif  // TROUPE_MODELS_HF_CHECKPOINT_H_
