// Shared by the torch-based RL actors (rollout worker, reference, trainer): loading a policy
// checkpoint, batching samples, per-token log-probs of responses, state dicts.
//
// A policy checkpoint directory holds config.json + model.safetensors (models::SavePretrained)
// or shards + index, tokenizer.json, and optionally generation_config.json (what the SFT recipe,
// models/hf_checkpoint and the checkpointer write).
//
// Thread-safety: functions are pure; a PolicyModel is used by one thread at a time.
#ifndef TROUPE_ACTORS_POLICY_UTIL_H_
#define TROUPE_ACTORS_POLICY_UTIL_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/generation_config.h"
#include "models/tokenizers/tokenizer.h"
#include "models/transformer.h"
#include "proto/rl.pb.h"
#include "runtime/collective/weight_sync.h"
#include "trainers/data_parallel.h"

namespace troupe::actors {

struct PolicyModel {
  models::CausalLM model{nullptr};
  std::unique_ptr<models::Tokenizer> tokenizer;
  std::string dir;
  // generation_config.json, if the directory has one.
  std::optional<models::GenerationConfig> generation;
  // Every id that ends a response (models::StopTokenIds: generation_config's eos ids,
  // config.json's, the tokenizer's eos); never empty (id 2 if none of them names one, the tiny
  // tokenizers' eos).
  std::vector<int32_t> stop_token_ids;
};

// Loads `dir`/config.json + weights + tokenizer.json (+ generation_config.json when present, its
// ids checked against vocab_size). Errors name the file.
absl::StatusOr<PolicyModel> LoadPolicy(const std::string& dir);

// Prompt + response of each sample, right-padded into one batch.
//   input_ids      [B, L]      prompt then response tokens, pad after
//   attention_mask [B, L]      1 on real tokens
//   targets        [B, L - 1]  input_ids shifted left: the token each position predicts
//   response_mask  [B, L - 1]  1 where the predicted token is a response token
// Per-token values of sample b's response token j sit at [b, prompt_len_b - 1 + j].
struct SequenceBatch {
  at::Tensor input_ids, attention_mask, targets, response_mask;
  std::vector<int64_t> prompt_lengths, response_lengths;
};

// This rank's share of rows [begin, end) of `batch` in a data-parallel group, balanced by the
// rows' tokens (prompt + response; trainers::RankShare); all of them when `collective` is null.
std::pair<int64_t, int64_t> RowShare(const trainers::GradientCollective* collective,
                                     const SequenceBatch& batch, int64_t begin, int64_t end);

// INVALID_ARGUMENT for a sample with an empty prompt or response.
absl::StatusOr<SequenceBatch> BuildBatch(const std::vector<const proto::Sample*>& samples,
                                         int64_t pad_id);

// Rows [begin, end) of `batch` (0 <= begin < end <= B), cut to the longest of their sequences:
// per-token tensors of the slice are [end - begin, len - 1], and a whole-batch per-token tensor
// maps to it as values.slice(0, begin, end).slice(1, 0, len - 1). INVALID_ARGUMENT for a bad
// range.
absl::StatusOr<SequenceBatch> SliceBatch(const SequenceBatch& batch, int64_t begin, int64_t end);

// log pi(target) at every position [B, L - 1] (zero where response_mask is 0), through
// kernels::TokenLogProbs; differentiable when grad mode is on.
absl::StatusOr<at::Tensor> ResponseLogprobs(models::CausalLMImpl& model,
                                            const SequenceBatch& batch);

// ResponseLogprobs plus the entropy of the policy's next-token distribution at every position
// [B, L - 1] (zero where response_mask is 0), both from one pass over the logits
// (kernels::TokenLogProbsWithEntropy); both differentiable when grad mode is on.
struct ResponseLogprobsAndEntropy {
  at::Tensor logp;
  at::Tensor entropy;
};
absl::StatusOr<ResponseLogprobsAndEntropy> ResponseLogprobsWithEntropy(models::CausalLMImpl& model,
                                                                       const SequenceBatch& batch);

// Lays per-response values (one list per sample, in response order) into [B, L - 1] positions.
absl::StatusOr<at::Tensor> ScatterResponseValues(const SequenceBatch& batch,
                                                 const std::vector<std::vector<float>>& values);

// The inverse: per-sample lists of the response positions of `values` [B, L - 1].
std::vector<std::vector<float>> GatherResponseValues(const SequenceBatch& batch,
                                                     const at::Tensor& values);

// The model's parameters by HF name (shared storage, not copies).
std::vector<collective::NamedTensor> StateDict(models::CausalLMImpl& model);

// Deep copies of the parameters (detached, contiguous).
std::vector<collective::NamedTensor> CopyStateDict(models::CausalLMImpl& model);

// Parameters as a proto TensorMap at `version` (for checkpoints and tests).
absl::StatusOr<proto::TensorMap> StateDictToProto(models::CausalLMImpl& model, int64_t version);

}  // namespace troupe::actors

#endif  // TROUPE_ACTORS_POLICY_UTIL_H_
