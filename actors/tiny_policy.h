// WriteRandomPolicy: a random-init policy checkpoint directory, for tests and benchmarks that need
// a model LoadPolicy (actors/policy_util.h) can read without running the SFT recipe first.
//
// The directory gets config.json + model.safetensors (models::SavePretrained) and tokenizer.json
// (a models::CharTokenizer over `alphabet` with <pad>=0 <bos>=1 <eos>=2, then one id per
// character). The vocabulary and special-token ids of the model come from that tokenizer; the
// other sizes from `config`.
//
//   models::ModelConfig c;
//   c.hidden_size = 32; c.intermediate_size = 64; c.num_hidden_layers = 2;
//   c.num_attention_heads = 4; c.num_key_value_heads = 2;
//   TROUPE_RETURN_IF_ERROR(WriteRandomPolicy(dir, c, /*seed=*/1));
//
// Thread-safety: the function is pure apart from writing `dir`.
#ifndef TROUPE_ACTORS_TINY_POLICY_H_
#define TROUPE_ACTORS_TINY_POLICY_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "models/model_config.h"
#include "models/tokenizers/tokenizer.h"

namespace troupe::actors {

// The arithmetic task's characters (15 ids with the three special tokens).
inline constexpr char kTinyPolicyAlphabet[] = "0123456789+=";

// Creates `dir` (not its parents) and writes the three files; the weights are InitWeights(seed).
// InvalidArgument for a config that does not validate; the writer's error otherwise.
absl::Status WriteRandomPolicy(const std::string& dir, models::ModelConfig config, uint64_t seed,
                               const std::string& alphabet = kTinyPolicyAlphabet);

// The same with any tokenizer: the vocabulary and special-token ids come from `tokenizer`, and
// `tokenizer_json` (its file form) is written as tokenizer.json. InvalidArgument when it has no
// bos or eos token.
absl::Status WriteRandomPolicy(const std::string& dir, models::ModelConfig config, uint64_t seed,
                               const models::Tokenizer& tokenizer,
                               const std::string& tokenizer_json);

// A policy with known output, for tests that need one (a judge whose verdict is a function of what
// it reads): a model of MicroModelConfig()'s sizes over a CharTokenizer of `alphabet` whose every
// attention and MLP output is zero, so its next token depends only on the current one, a bigram
// table. After character a it emits next[a] (a character of the alphabet, or '\0' for the eos),
// and `otherwise` after a character not in `next` (and after bos/eos/pad); the chosen token's logit
// leads the others by about 57, so greedy and sampled outputs agree. Writes `dir` as
// WriteRandomPolicy does. InvalidArgument for a character outside the alphabet.
absl::Status WriteBigramPolicy(const std::string& dir, const std::string& alphabet,
                               const std::map<char, char>& next, char otherwise);

// examples/models/tiny.json's sizes (hidden 128, 4 layers, 4 heads, 2 key/value heads).
models::ModelConfig TinyModelConfig();

// The smallest sizes the actors' unit tests use (hidden 32, intermediate 64, 2 layers, 4 heads,
// 2 key/value heads, 64 positions): fast to build and to step.
models::ModelConfig MicroModelConfig();

}  // namespace troupe::actors

#endif  // TROUPE_ACTORS_TINY_POLICY_H_
