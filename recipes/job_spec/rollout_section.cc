// The rollout and async sections: how the rollout workers sample, and how far behind the trainer
// a sample may be.
#include "recipes/job_spec/sections.h"

namespace troupe::recipes::job_spec_internal {

void WalkAsync(Section& top, JobSpec& spec) {
  Section async = top.Sub("async");
  async.Int("max_staleness", &spec.async.max_staleness, NonNegative(),
            {.doc = "weight versions a sample may lag; 0 = synchronous, on-policy"});
  async.Finish();
}

void WalkRollout(Section& top, JobSpec& spec) {
  RolloutSpec& rollout = spec.rollout;
  Section r = top.Sub("rollout");
  r.Double("temperature", &rollout.temperature, NonNegative(),
           {.doc = "sampling temperature; 0 = greedy"});
  r.Double("top_p", &rollout.top_p, LeftOpen(0, 1), {.doc = "nucleus filter; 1 = none"});
  r.Int("top_k", &rollout.top_k, NonNegative(), {.doc = "top-k filter; 0 = none (verl: -1)"});
  r.Int("max_new_tokens", &rollout.max_new_tokens, Positive(),
        {.doc = "generated tokens per response, <= data.max_response_length",
         .default_text = "data.max_response_length"});
  r.Finish();
}

void CheckRolloutRules(const JobSpec& s, Context& ctx) {
  if (s.rollout.max_new_tokens > s.data.max_response_length) {
    ctx.Add("rollout.max_new_tokens",
            absl::StrCat(s.rollout.max_new_tokens, " exceeds data.max_response_length (",
                         s.data.max_response_length, ")"));
  }
}

}  // namespace troupe::recipes::job_spec_internal
