#include "actors/tiny_policy.h"

#include <torch/torch.h>

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

absl::Status WriteBigramPolicy(const std::string& dir, const std::string& alphabet,
                               const std::map<char, char>& next, char otherwise) {
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<models::CharTokenizer> tokenizer,
                          models::CharTokenizer::Create(alphabet));
  auto id = [&](char c) -> absl::StatusOr<int64_t> {
    if (c == '\0') return *tokenizer->eos_id();
    absl::StatusOr<std::vector<int32_t>> ids = tokenizer->Encode(std::string(1, c));
    if (!ids.ok() || ids->size() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("WriteBigramPolicy: '", std::string(1, c), "' is not in the alphabet"));
    }
    return (*ids)[0];
  };
  models::ModelConfig config = MicroModelConfig();
  config.vocab_size = tokenizer->vocab_size();
  if (config.vocab_size > config.hidden_size) {
    return absl::InvalidArgumentError("WriteBigramPolicy: the alphabet is larger than the model");
  }
  config.bos_token_id = *tokenizer->bos_id();
  config.eos_token_ids = {*tokenizer->eos_id()};
  config.pad_token_id = tokenizer->pad_id();
  TROUPE_ASSIGN_OR_RETURN(models::CausalLM model, models::CreateCausalLM(config));
  torch::NoGradGuard no_grad;
  auto params = model->named_parameters();
  for (auto& p : params) p.value().zero_();
  params["model.norm.weight"].fill_(1);
  at::Tensor embed = params["model.embed_tokens.weight"];
  at::Tensor head = params["lm_head.weight"];  // [vocab, hidden]
  // Token t's embedding is the unit vector e_t; after the final norm it is sqrt(hidden) e_t, so
  // row `to` of the head with 10 at column `from` gives `to` a logit of ~57 after `from`.
  TROUPE_ASSIGN_OR_RETURN(const int64_t fallback, id(otherwise));
  for (int64_t t = 0; t < config.vocab_size; ++t) {
    embed[t][t] = 1;
    head[fallback][t] = 10;
  }
  for (const auto& [from, to] : next) {
    TROUPE_ASSIGN_OR_RETURN(const int64_t a, id(from));
    TROUPE_ASSIGN_OR_RETURN(const int64_t b, id(to));
    head[fallback][a] = 0;
    head[b][a] = 10;
  }
  TROUPE_RETURN_IF_ERROR(models::SavePretrained(*model, dir));
  return WriteFileAtomically(absl::StrCat(dir, "/tokenizer.json"), tokenizer->ToJson());
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
