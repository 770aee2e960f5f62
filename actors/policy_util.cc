#include "actors/policy_util.h"

#include <torch/torch.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/token_logprobs.h"
#include "models/tensor_proto.h"

namespace troupe::actors {

absl::StatusOr<PolicyModel> LoadPolicy(const std::string& dir) {
  PolicyModel p;
  p.dir = dir;
  TROUPE_ASSIGN_OR_RETURN(p.model, models::LoadCausalLM(dir));
  TROUPE_ASSIGN_OR_RETURN(p.tokenizer, models::LoadTokenizer(dir + "/tokenizer.json"));
  const std::string generation_path = dir + "/generation_config.json";
  absl::StatusOr<models::GenerationConfig> generation =
      models::LoadGenerationConfig(generation_path);
  if (generation.ok()) {
    TROUPE_RETURN_IF_ERROR(
        models::CheckGenerationConfigIds(*generation, p.model->config(), generation_path));
    p.generation = *std::move(generation);
  } else if (!absl::IsNotFound(generation.status())) {
    return generation.status();
  }
  p.stop_token_ids =
      models::StopTokenIds(p.model->config(), p.generation.has_value() ? &*p.generation : nullptr,
                           p.tokenizer->eos_id());
  if (p.stop_token_ids.empty()) p.stop_token_ids = {2};
  return p;
}

absl::StatusOr<SequenceBatch> BuildBatch(const std::vector<const proto::Sample*>& samples,
                                         int64_t pad_id) {
  if (samples.empty()) return absl::InvalidArgumentError("BuildBatch: no samples");
  SequenceBatch b;
  int64_t max_len = 0;
  for (const proto::Sample* s : samples) {
    if (s->prompt_tokens().empty() || s->response_tokens().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("sample of prompt ", s->prompt_id(), " #",
                                                     s->sample_index(),
                                                     " has an empty prompt or response"));
    }
    b.prompt_lengths.push_back(s->prompt_tokens_size());
    b.response_lengths.push_back(s->response_tokens_size());
    max_len = std::max<int64_t>(max_len, s->prompt_tokens_size() + s->response_tokens_size());
  }
  const int64_t n = static_cast<int64_t>(samples.size());
  std::vector<int64_t> ids(n * max_len, pad_id);
  std::vector<int64_t> attn(n * max_len, 0);
  std::vector<float> resp(n * (max_len - 1), 0.f);
  for (int64_t i = 0; i < n; ++i) {
    const proto::Sample& s = *samples[i];
    int64_t t = 0;
    for (int32_t tok : s.prompt_tokens()) ids[i * max_len + t++] = tok;
    for (int32_t tok : s.response_tokens()) ids[i * max_len + t++] = tok;
    for (int64_t j = 0; j < t; ++j) attn[i * max_len + j] = 1;
    // Positions predicting response tokens: prompt_len - 1 .. prompt_len + resp_len - 2.
    for (int64_t j = 0; j < s.response_tokens_size(); ++j) {
      resp[i * (max_len - 1) + s.prompt_tokens_size() - 1 + j] = 1.f;
    }
  }
  b.input_ids = torch::tensor(ids, torch::kLong).view({n, max_len});
  b.attention_mask = torch::tensor(attn, torch::kLong).view({n, max_len});
  b.targets = b.input_ids.slice(1, 1).contiguous();
  b.response_mask = torch::tensor(resp, torch::kFloat).view({n, max_len - 1});
  return b;
}

absl::StatusOr<at::Tensor> ResponseLogprobs(models::CausalLMImpl& model,
                                            const SequenceBatch& batch) {
  TROUPE_ASSIGN_OR_RETURN(at::Tensor logits, model.Forward(batch.input_ids, batch.attention_mask));
  at::Tensor predicting = logits.slice(1, 0, logits.size(1) - 1);
  TROUPE_ASSIGN_OR_RETURN(at::Tensor logp, kernels::TryTokenLogProbs(predicting, batch.targets));
  return logp * batch.response_mask;
}

std::pair<int64_t, int64_t> RowShare(const trainers::GradientCollective* collective,
                                     const SequenceBatch& batch, int64_t begin, int64_t end) {
  return trainers::RankShare(collective, begin, end, [&](int64_t i) {
    return batch.prompt_lengths[i] + batch.response_lengths[i];
  });
}

absl::StatusOr<SequenceBatch> SliceBatch(const SequenceBatch& batch, int64_t begin, int64_t end) {
  const int64_t n = static_cast<int64_t>(batch.prompt_lengths.size());
  if (begin < 0 || begin >= end || end > n) {
    return absl::InvalidArgumentError(
        absl::StrCat("SliceBatch: rows [", begin, ", ", end, ") of a batch of ", n));
  }
  SequenceBatch s;
  s.prompt_lengths.assign(batch.prompt_lengths.begin() + begin, batch.prompt_lengths.begin() + end);
  s.response_lengths.assign(batch.response_lengths.begin() + begin,
                            batch.response_lengths.begin() + end);
  int64_t len = 0;
  for (size_t i = 0; i < s.prompt_lengths.size(); ++i) {
    len = std::max(len, s.prompt_lengths[i] + s.response_lengths[i]);
  }
  s.input_ids = batch.input_ids.slice(0, begin, end).slice(1, 0, len);
  s.attention_mask = batch.attention_mask.slice(0, begin, end).slice(1, 0, len);
  s.targets = batch.targets.slice(0, begin, end).slice(1, 0, len - 1);
  s.response_mask = batch.response_mask.slice(0, begin, end).slice(1, 0, len - 1);
  return s;
}

absl::StatusOr<ResponseLogprobsAndEntropy> ResponseLogprobsWithEntropy(models::CausalLMImpl& model,
                                                                       const SequenceBatch& batch) {
  TROUPE_ASSIGN_OR_RETURN(at::Tensor logits, model.Forward(batch.input_ids, batch.attention_mask));
  at::Tensor predicting = logits.slice(1, 0, logits.size(1) - 1);
  TROUPE_ASSIGN_OR_RETURN(kernels::LogProbsAndEntropy out,
                          kernels::TryTokenLogProbsWithEntropy(predicting, batch.targets));
  return ResponseLogprobsAndEntropy{out.logprobs * batch.response_mask,
                                    out.entropy * batch.response_mask};
}

absl::StatusOr<at::Tensor> ScatterResponseValues(const SequenceBatch& batch,
                                                 const std::vector<std::vector<float>>& values) {
  const int64_t n = batch.input_ids.size(0), len = batch.targets.size(1);
  if (static_cast<int64_t>(values.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected per-token values for ", n, " samples, got ", values.size()));
  }
  std::vector<float> out(n * len, 0.f);
  for (int64_t i = 0; i < n; ++i) {
    if (static_cast<int64_t>(values[i].size()) != batch.response_lengths[i]) {
      return absl::InvalidArgumentError(
          absl::StrCat("sample ", i, " has ", batch.response_lengths[i], " response tokens but ",
                       values[i].size(), " per-token values"));
    }
    for (size_t j = 0; j < values[i].size(); ++j) {
      out[i * len + batch.prompt_lengths[i] - 1 + j] = values[i][j];
    }
  }
  return torch::tensor(out, torch::kFloat).view({n, len});
}

std::vector<std::vector<float>> GatherResponseValues(const SequenceBatch& batch,
                                                     const at::Tensor& values) {
  at::Tensor v = values.detach().to(torch::kFloat).contiguous();
  const int64_t len = v.size(1);
  const float* p = v.data_ptr<float>();
  std::vector<std::vector<float>> out(batch.prompt_lengths.size());
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t start = batch.prompt_lengths[i] - 1;
    out[i].assign(p + i * len + start, p + i * len + start + batch.response_lengths[i]);
  }
  return out;
}

std::vector<collective::NamedTensor> StateDict(models::CausalLMImpl& model) {
  std::vector<collective::NamedTensor> out;
  for (const auto& item : model.named_parameters()) out.push_back({item.key(), item.value()});
  return out;
}

std::vector<collective::NamedTensor> CopyStateDict(models::CausalLMImpl& model) {
  torch::NoGradGuard no_grad;
  std::vector<collective::NamedTensor> out;
  for (const auto& item : model.named_parameters()) {
    out.push_back({item.key(), item.value().detach().clone().contiguous()});
  }
  return out;
}

absl::StatusOr<proto::TensorMap> StateDictToProto(models::CausalLMImpl& model, int64_t version) {
  models::NamedTensors tensors;
  for (const auto& item : model.named_parameters()) {
    tensors.emplace_back(item.key(), item.value().detach());
  }
  return models::TensorMapToProto(tensors, version);
}

}  // namespace troupe::actors
