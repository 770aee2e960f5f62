// Sampling parameters and the token sampler of the generation engine: temperature, top-k and
// top-p (nucleus) filtering of next-token logits, and a counter-based random source that makes a
// sample depend only on (seed, prompt, sample, position) — not on which batch or slot computed it.
//
// The processed distribution q of one row of logits z (what a token is drawn from):
//   temperature T = 0:  q = one-hot at argmax(z) (ties go to the lowest id); greedy decoding.
//   T > 0:              p = softmax(z / T);
//                       top-k (k > 0): keep the k most probable tokens (ties: lower id first);
//                       top-p (p < 1): of what is left, renormalised, keep the smallest prefix of
//                         the tokens sorted by probability whose mass reaches top_p (the most
//                         probable token is always kept);
//                       q = p restricted to the kept tokens, renormalised.
// This is the order of Hugging Face's and vLLM's logits processors (temperature, top-k, top-p).
//
// Drawing: token = the first id whose cumulative q reaches u · Σq, with u in (0, 1) from
// SampleUniform(seed, prompt_index, sample_index, token_index): a SplitMix64 hash of the four
// numbers. A token outside the kept set is never drawn (it has q = 0).
//
//   TROUPE_RETURN_IF_ERROR(ValidateSamplingParams(params, vocab_size));
//   at::Tensor logq = ProcessedLogProbs(logits, params);           // [B, V], -inf off the support
//   at::Tensor tokens = DrawTokens(logq, uniforms);                // [B] int64
//
// Thread-safety: all functions are pure and may be called concurrently.
#ifndef TROUPE_ROLLOUT_SAMPLER_H_
#define TROUPE_ROLLOUT_SAMPLER_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace troupe::rollout {

struct SamplingParams {
  double temperature = 1.0;  // >= 0; 0 = greedy.
  int64_t top_k = 0;         // >= 0; 0 = no top-k filter.
  double top_p = 1.0;        // In (0, 1]; 1 = no nucleus filter.
  // Generation of a sequence ends after it emits one of these (the token is kept in the output).
  std::vector<int32_t> stop_token_ids;
  int64_t max_new_tokens = 16;  // > 0.
  int64_t n = 1;                // > 0 samples per prompt.
  uint64_t seed = 0;
  // GenerationEngine: no weight update above this version is applied during the call (it stays
  // queued for the next), so an evaluation reads one version while training publishes the next;
  // -1 = apply every update at the next step boundary.
  int64_t max_weight_version = -1;
  // GenerationEngine with kept versions (GenerationEngineOptions::weight_versions_kept): kept
  // versions below this one are never used for the call (a worker that restarted keeps its
  // initial weights beside the newest it received: a call pinned to a version it never had runs
  // on the oldest newer one it has, not on the initial weights); -1 = no floor.
  int64_t min_weight_version = -1;
};

// OK iff the fields are in the ranges above and every stop token is in [0, vocab_size).
// InvalidArgument naming the field otherwise.
absl::Status ValidateSamplingParams(const SamplingParams& params, int64_t vocab_size);

// log q for logits [B, V] (any floating dtype): [B, V] float32 with -inf on tokens outside the
// support; each row's exp sums to 1. `params` must be valid. Throws c10::Error on bad shapes.
at::Tensor ProcessedLogProbs(const at::Tensor& logits, const SamplingParams& params);

// One token per row of `logq` [B, V] (as ProcessedLogProbs returns) by inverse-CDF with
// uniforms[b] in (0, 1): the first id whose cumulative probability reaches uniforms[b] times the
// row's total. Returns [B] int64. Throws c10::Error if uniforms.size() != B.
at::Tensor DrawTokens(const at::Tensor& logq, absl::Span<const double> uniforms);

// A uniform number in (0, 1) determined by the four arguments alone (SplitMix64 of each in turn).
double SampleUniform(uint64_t seed, int64_t prompt_index, int64_t sample_index,
                     int64_t token_index);

}  // namespace troupe::rollout

#endif  // TROUPE_ROLLOUT_SAMPLER_H_
