#include "actors/tiny_policy.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/atomic_file.h"
#include "base/status_macros.h"
#include "models/tokenizers/char_tokenizer.h"
#include "models/transformer.h"

namespace troupe::actors {

absl::Status WriteRandomPolicy(const std::string& dir, models::ModelConfig config, uint64_t seed,
                               const std::string& alphabet) {
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<models::CharTokenizer> tokenizer,
                          models::CharTokenizer::Create(alphabet));
  return WriteRandomPolicy(dir, std::move(config), seed, *tokenizer, tokenizer->ToJson());
}

absl::Status WriteRandomPolicy(const std::string& dir, models::ModelConfig config, uint64_t seed,
                               const models::Tokenizer& tokenizer,
                               const std::string& tokenizer_json) {
  if (!tokenizer.bos_id().has_value() || !tokenizer.eos_id().has_value()) {
    return absl::InvalidArgumentError(
        "WriteRandomPolicy: the tokenizer needs a bos and an eos token to start and end responses");
  }
  config.vocab_size = tokenizer.vocab_size();
  config.bos_token_id = *tokenizer.bos_id();
  config.eos_token_ids = {*tokenizer.eos_id()};
  config.pad_token_id = tokenizer.pad_id();
  TROUPE_RETURN_IF_ERROR(config.Validate("WriteRandomPolicy"));
  TROUPE_ASSIGN_OR_RETURN(models::CausalLM model, models::CreateCausalLM(config));
  model->InitWeights(seed);
  TROUPE_RETURN_IF_ERROR(models::SavePretrained(*model, dir));
  return WriteFileAtomically(absl::StrCat(dir, "/tokenizer.json"), tokenizer_json);
}

models::ModelConfig TinyModelConfig() {
  models::ModelConfig c;
  c.hidden_size = 128;
  c.intermediate_size = 352;
  c.num_hidden_layers = 4;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.max_position_embeddings = 256;
  return c;
}

models::ModelConfig MicroModelConfig() {
  models::ModelConfig c;
  c.hidden_size = 32;
  c.intermediate_size = 64;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.max_position_embeddings = 64;
  return c;
}

}  // namespace troupe::actors
