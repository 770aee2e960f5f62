// GenerationEngine: batched autoregressive sampling from a CausalLM with an external KV cache,
// continuous batching over a fixed number of slots, and weight updates between decode steps.
//
// Work: Generate(prompts, params) expands every prompt into params.n samples, queued in order
// (prompt 0 sample 0, prompt 0 sample 1, ..., prompt 1 sample 0, ...). Each of `num_slots` cache
// slots holds one running sequence. One engine *step*:
//
//   step boundary:  on_step(step) callback ─▶ apply a pending weight update (if any)
//        │          ─▶ refill free slots with the next queued samples
//        ▼
//   forward:  slots with several uncached tokens (a fresh prompt, or a sequence being
//             recomputed after a weight update) are prefilled in one ForwardWithCache call;
//             slots with one uncached token (the last sampled one) decode in another call
//        ▼
//   sample:   one token per running slot (see rollout/sampler.h); a sequence that emitted a stop
//             token or reached its length limit finishes, and its slot is free at the next boundary
//
// so a slot freed by a short sequence is refilled (prefilled) while the others keep decoding.
//
// Shared prompts. The n samples of a prompt are queued one after another, so they usually start
// at the same step boundary. Only the first of those (the leader) is prefilled; every other one
// (a follower) gets a copy of the leader's KV cache and samples its first token from the leader's
// logits with its own random number. This is the computation a separate prefill would do (equal up
// to float rounding of the batched matmuls), at 1/n of the prompt cost, which dominates when
// prompts are longer than responses. A sample whose cache is being rebuilt after a weight update
// is never shared.
//
// Log-probs. Each generated token carries two log-probabilities:
//   logprobs           log π(y_t | prefix) of the model at temperature 1, without top-k / top-p:
//                      kernels::TokenLogProbs of the raw logits. This is what a trainer recomputes
//                      on the same tokens (TokenLogProbs over a full forward), so it is the
//                      *behaviour log-prob* for RL: with on-policy samples the ratio
//                      π_θ / π_behav starts at exactly 1 (up to float error).
//   sampling_logprobs  log q(y_t | prefix) of the processed distribution the token was actually
//                      drawn from (temperature, top-k, top-p; 0 for greedy). This is what vLLM and
//                      verl's rollout report as "logprobs".
// The two are equal when temperature = 1, top_k = 0 and top_p = 1: the setting RL rollouts should
// use, and then either is the behaviour log-prob. Otherwise the samples come from q, not π, and the
// trainer must pick one consistent pair:
//   - its policy is the raw model (TokenLogProbs of its logits): the behaviour log-prob is
//     `logprobs`; ratios start at 1, but the sampling distortion q ≠ π is ignored (biased unless
//     the weight π / q = exp(logprobs - sampling_logprobs) is applied as well);
//   - its policy is the tempered model (it divides its logits by the temperature, as verl does)
//     and top_k = 0, top_p = 1: the behaviour log-prob is `sampling_logprobs`, exactly.
// Top-k / top-p truncation has no differentiable counterpart in the trainer; avoid it for RL.
//
// Weight versions and updates. The engine starts at `initial_weight_version`. UpdateWeights (any
// thread) validates a new state dict at once, copies it, and queues it; it is applied at the next
// step boundary, when no forward is running. Every token records the version of the weights
// whose forward produced its logits, so one sequence can span versions. After an update the KV
// cache of every running sequence (computed with the old weights) is discarded and rebuilt from
// the new weights over prompt + tokens generated so far (as AReaL does on an interrupted
// generation): the tokens after the swap are exactly what the new weights generate from that
// prefix. Updates queued while the engine is idle apply at the first boundary of the next
// Generate. Two updates queued before a boundary: the later one wins (a partial later update is
// merged over the earlier one).
// SamplingParams::max_weight_version holds an update above it back for a later call, so a call
// (an evaluation) can read one version while newer weights arrive. With
// GenerationEngineOptions::weight_versions_kept > 0 the engine keeps the weights of its newest
// versions and goes to the newest kept version at most max_weight_version, also back from a newer
// one: a call pinned to version V (min = max = V upstream) then generates every token with V,
// whatever arrived before or during it. That is what makes asynchronous RL reproducible: the
// driver chooses each call's version, not the moment weights happen to arrive (see
// recipes/online/online_recipe.cc, "Reproducible asynchronous runs").
//
// Serving (continuous batching for a server, e.g. a judge). Serve(params, source, sink) runs
// until `source` says stop: work — ServeItems, each a prompt and a caller's tag — is pulled from
// `source` at every step boundary and joins the running batch in free slots (queued in the order
// given until a slot frees), so requests arriving from many callers while others are being
// decoded are batched together instead of waiting for the batch to end. Every item ends in exactly
// one sink(tag, result) call: its GeneratedSample (prompt_index = tag, sample_index 0), or the
// InvalidArgument of a bad prompt (the others go on), or, if the model fails, that error for every
// item in flight (Serve then returns it; the engine is reset and may Serve again). The source is
// called with wait = true when nothing is running: it should then block until there is work (or a
// timeout: an empty list), and with wait = false at step boundaries: return what is there now.
// std::nullopt = stop: the items already accepted are finished, then Serve returns OK. Weight
// updates apply at step boundaries as in Generate.
//
// Determinism: the random number of token t of (prompt p, sample s) is
// SampleUniform(seed, p, s, t), so for a fixed seed the output does not depend on the number of
// slots or the scheduling order (up to float rounding of the batched matmuls, which only matters
// when a random number falls on a probability boundary).
//
// Ownership: the engine shares the model (a CausalLM holder) with the caller and writes weight
// updates into its parameters; the caller must not change the parameters while Generate runs,
// other than through UpdateWeights. The engine owns its KV cache.
// Thread-safety: Generate, stats() and the constructor path are for one thread at a time;
// UpdateWeights and weight_version() may be called from any thread, also while Generate runs.
//
// Example:
//   GenerationEngineOptions options;
//   options.num_slots = 32;
//   TROUPE_ASSIGN_OR_RETURN(auto engine, GenerationEngine::Create(model.ptr(), options));
//   SamplingParams params;
//   params.stop_token_ids = {eos};
//   params.n = 8;
//   TROUPE_ASSIGN_OR_RETURN(std::vector<GeneratedSample> samples,
//                           engine->Generate(prompts, params));
#ifndef TROUPE_ROLLOUT_GENERATION_ENGINE_H_
#define TROUPE_ROLLOUT_GENERATION_ENGINE_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "rollout/sampler.h"

namespace troupe::models {
class CausalLMImpl;
struct KVCache;
}  // namespace troupe::models

namespace troupe::rollout {

struct GenerationEngineOptions {
  int64_t num_slots = 8;  // > 0: sequences decoded together (KV-cache slots).
  // > 1: the most tokens (prompt + generated) one sequence may hold; a sequence that reaches it
  // finishes with kLength. Each slot caches max_seq_len positions.
  int64_t max_seq_len = 256;
  int64_t initial_weight_version = 0;
  // 0: one pending update (the newest received wins; dropped once applied). > 0: the weights of
  // this many newest versions are kept (the initial weights and every update received, applied
  // or not), so that a call pinned to a version (SamplingParams::max_weight_version) runs on
  // exactly that version while it is kept, even after newer or older ones were applied (see
  // "Weight versions and updates"). Costs one copy of the parameters per version kept.
  int64_t weight_versions_kept = 0;
};

enum class FinishReason {
  kStop,    // Emitted one of params.stop_token_ids (the last token of `tokens`).
  kLength,  // Reached max_new_tokens or max_seq_len.
};

// "stop" or "length".
const char* FinishReasonName(FinishReason reason);

// One generated continuation. All per-token vectors have tokens.size() entries.
struct GeneratedSample {
  int64_t prompt_index = 0;              // Index into the prompts given to Generate.
  int64_t sample_index = 0;              // 0 .. n - 1.
  std::vector<int32_t> tokens;           // Generated tokens (not the prompt), stop token included.
  std::vector<float> logprobs;           // log π at temperature 1, unfiltered (see above).
  std::vector<float> sampling_logprobs;  // log q of the processed sampling distribution.
  std::vector<int64_t> weight_versions;  // Weight version that produced each token.
  FinishReason finish_reason = FinishReason::kLength;
};

// A new state dict for the model: parameter name (as named_parameters(), i.e. HF names) → tensor.
struct WeightUpdate {
  int64_t version = 0;  // Must exceed every version accepted before.
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  // false: every parameter must be present. true: the named ones change, the others keep their
  // current values.
  bool partial = false;
};

// Cumulative counters since Create.
struct GenerationStats {
  int64_t steps = 0;              // Engine steps (step boundaries passed).
  int64_t forward_calls = 0;      // ForwardWithCache calls.
  int64_t prefill_tokens = 0;     // Tokens fed in prefill calls (prompts and recomputation).
  int64_t decode_tokens = 0;      // Tokens fed in decode calls.
  int64_t generated_tokens = 0;   // Tokens sampled.
  int64_t recomputed_tokens = 0;  // Prefill tokens spent rebuilding caches after weight updates.
  // Prompt tokens not prefilled because a sibling sample of the same prompt, filled at the same
  // step boundary, was: its cache was copied instead (see "Shared prompts" above).
  int64_t shared_prefill_tokens = 0;
  int64_t weight_updates_applied = 0;
  int64_t max_active_slots = 0;  // Most slots running in one step.
};

class GenerationEngine {
 public:
  // Called at every step boundary, before pending weight updates are applied, with the 0-based
  // step index within the current Generate call.
  using StepCallback = std::function<void(int64_t step)>;

  // Borrows (shares) `model` and allocates the KV cache. InvalidArgument for a null model or bad
  // options; ResourceExhausted if the cache cannot be allocated.
  static absl::StatusOr<std::unique_ptr<GenerationEngine>> Create(
      std::shared_ptr<models::CausalLMImpl> model, const GenerationEngineOptions& options);
  ~GenerationEngine();

  // Generates params.n samples for each prompt; returns them ordered by (prompt_index,
  // sample_index). InvalidArgument for no prompts, an empty prompt, a token outside the
  // vocabulary, a prompt of max_seq_len tokens or more (no room to generate), or bad params
  // (ValidateSamplingParams). A failure inside the model returns its status; the engine is then
  // reset and usable again.
  absl::StatusOr<std::vector<GeneratedSample>> Generate(
      absl::Span<const std::vector<int32_t>> prompts, const SamplingParams& params,
      const StepCallback& on_step = nullptr);

  // Validates `update` against the model's parameters (names, shapes, floating dtype; version
  // greater than any accepted so far), copies its tensors and queues it for the next step
  // boundary. InvalidArgument naming the tensor or field otherwise; nothing is queued then.
  absl::Status UpdateWeights(WeightUpdate update) ABSL_LOCKS_EXCLUDED(mutex_);

  // The version of the weights the next forward will use (pending updates not yet applied are not
  // counted).
  int64_t weight_version() const ABSL_LOCKS_EXCLUDED(mutex_);

  // One prompt to serve, and the caller's tag for its result.
  struct ServeItem {
    int64_t tag = 0;
    std::vector<int32_t> prompt;
  };
  // wait: block until there is work (see the file comment). nullopt = stop serving.
  using WorkSource = std::function<std::optional<std::vector<ServeItem>>(bool wait)>;
  using ServeSink = std::function<void(int64_t tag, absl::StatusOr<GeneratedSample> result)>;

  // Continuous batching of work that keeps arriving (see the file comment). params.n must be 1;
  // the random numbers of item `tag` are SampleUniform(params.seed, tag, 0, t). InvalidArgument
  // for bad params (nothing is pulled then); a model failure's status after every item in flight
  // got it.
  absl::Status Serve(const SamplingParams& params, const WorkSource& source, const ServeSink& sink);

  const GenerationStats& stats() const { return stats_; }
  const GenerationEngineOptions& options() const { return options_; }

 private:
  struct Slot;

  GenerationEngine(std::shared_ptr<models::CausalLMImpl> model,
                   std::unique_ptr<models::KVCache> cache, const GenerationEngineOptions& options);

  // The step loop of Generate and Serve: at every boundary on_step, a pending weight update, then
  // fill(slot) for free slots (a freshly reset Slot; false = no work for it now); a finished
  // sequence is handed to finish(slot). Returns once no slot is running after a refill.
  absl::Status RunSteps(const SamplingParams& params, const StepCallback& on_step,
                        const std::function<bool(Slot&)>& fill,
                        const std::function<void(Slot&)>& finish);
  // Frees every slot and its cache.
  void ResetSlots();
  // InvalidArgument starting with `what` for an empty prompt, one with no room to generate, or a
  // token outside the vocabulary.
  absl::Status CheckPrompt(const std::vector<int32_t>& prompt, const std::string& what) const;
  // Applies the pending update, if any and of at most `max_version` (-1: any); with kept versions,
  // goes to the newest kept version in [min_version, max_version] (-1: no bound); if there is
  // none, stays on the weights in effect if they are in that range, else goes to the oldest kept
  // version above min_version (if min_version >= 0). Returns whether the weights changed.
  bool ApplyPendingUpdate(int64_t max_version, int64_t min_version = -1)
      ABSL_LOCKS_EXCLUDED(mutex_);
  // Runs one ForwardWithCache over `rows` (indices into slots_) and returns the last-token
  // logits [rows.size(), V].
  absl::StatusOr<at::Tensor> ForwardRows(const std::vector<int64_t>& rows, bool prefill);

  std::shared_ptr<models::CausalLMImpl> model_;
  std::unique_ptr<models::KVCache> cache_;
  GenerationEngineOptions options_;
  int64_t vocab_size_ = 0;
  absl::flat_hash_map<std::string, at::Tensor> params_;  // The model's, by name.
  std::vector<Slot> slots_;
  GenerationStats stats_;

  mutable absl::Mutex mutex_;
  int64_t version_ ABSL_GUARDED_BY(mutex_) = 0;           // In effect.
  int64_t accepted_version_ ABSL_GUARDED_BY(mutex_) = 0;  // Latest queued or applied.
  std::optional<WeightUpdate> pending_ ABSL_GUARDED_BY(mutex_);
  // weight_versions_kept > 0: version -> every parameter's weights (tensors shared between
  // versions where a partial update left them alone), the newest weight_versions_kept of them.
  using Weights = std::vector<std::pair<std::string, at::Tensor>>;
  std::map<int64_t, std::shared_ptr<const Weights>> kept_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace troupe::rollout

#endif  // TROUPE_ROLLOUT_GENERATION_ENGINE_H_
