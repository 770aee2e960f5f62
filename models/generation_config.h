// GenerationConfig: the token ids of a Hugging Face `generation_config.json` (eos, bos, pad), and
// the stop ids generation derives from them.
//
// Hugging Face's generate() stops at any id of generation_config.eos_token_id, which may be one id
// or a list (Llama-3 and Qwen2.5 instruct models list two or three: end-of-turn and
// end-of-text). troupe's rollouts stop at every one of them (StopTokenIds).
//
// Only the token ids are read. The file's other keys (do_sample, temperature, top_p, ...) are
// sampling defaults for transformers' generate(); troupe's rollouts take their sampling from the
// job spec instead. They are kept verbatim in `other_keys` so a checkpoint writes them back
// unchanged, and are not otherwise used.
//
// Example:
//   TROUPE_ASSIGN_OR_RETURN(GenerationConfig g, LoadGenerationConfig(dir +
//   "/generation_config.json")); std::vector<int32_t> stop = StopTokenIds(config, &g,
//   tokenizer->eos_id());
//
// Thread-safety: a plain value type; the free functions are thread-safe.
#ifndef TROUPE_MODELS_GENERATION_CONFIG_H_
#define TROUPE_MODELS_GENERATION_CONFIG_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "models/model_config.h"

namespace troupe {
namespace models {

struct GenerationConfig {
  std::optional<int64_t> bos_token_id;
  std::optional<int64_t> pad_token_id;
  // eos_token_id: one id or a list; empty if absent.
  std::vector<int64_t> eos_token_ids;
  // Every other key: name -> its JSON value as text, written back by ToJson.
  std::map<std::string, std::string> other_keys;

  // A pretty-printed generation_config.json with sorted keys; ParseGenerationConfig turns it back
  // into an equal GenerationConfig. One eos id is written as a number, several as a list.
  std::string ToJson() const;
};

bool operator==(const GenerationConfig& a, const GenerationConfig& b);

// Parses generation_config.json text; `source_name` prefixes every error. InvalidArgument for
// malformed JSON, a non-object, or a token id key that is not a non-negative integer (eos: or a
// list of them); the message names the key.
absl::StatusOr<GenerationConfig> ParseGenerationConfig(absl::string_view json_text,
                                                       absl::string_view source_name);

// Reads and parses `path`: NotFound if there is no such file, otherwise as ParseGenerationConfig.
absl::StatusOr<GenerationConfig> LoadGenerationConfig(const std::string& path);

// InvalidArgument "<source_name>: key '<key>': ..." if an id is outside [0, config.vocab_size).
absl::Status CheckGenerationConfigIds(const GenerationConfig& generation, const ModelConfig& config,
                                      absl::string_view source_name);

// The ids that end a generated sequence: generation_config's eos ids (if `generation` is given),
// config.json's eos ids and `tokenizer_eos`, each once, in that order. Empty if none say any.
std::vector<int32_t> StopTokenIds(const ModelConfig& config, const GenerationConfig* generation,
                                  std::optional<int32_t> tokenizer_eos);

}  // namespace models
}  // namespace troupe

#endif  // TROUPE_MODELS_GENERATION_CONFIG_H_
