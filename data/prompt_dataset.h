// PromptDataset: the prompts an RL run draws from, by index: a task's problems or a dataset's
// records (record_prompts.h), each as a proto::Prompt with its tokens. The order a run draws them
// in, and what it gives back after a failure, is the run's own state (recipes/rl/prompt_source.h).
//
// Thread-safety: implementations' const methods may be called concurrently.
#ifndef TROUPE_DATA_PROMPT_DATASET_H_
#define TROUPE_DATA_PROMPT_DATASET_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "proto/rl.pb.h"

namespace troupe::data {

// The prompts of a task, by index.
class PromptDataset {
 public:
  virtual ~PromptDataset() = default;
  // Training prompt `index` (>= 0; past size() it wraps around), with tokens, text and the
  // reference answer; prompt_id is left to the caller.
  virtual absl::StatusOr<proto::Prompt> Get(int64_t index) const = 0;
  // Number of distinct training prompts (one epoch).
  virtual int64_t size() const = 0;
  // The held-out prompts evaluations score (prompt_id = position).
  virtual absl::StatusOr<std::vector<proto::Prompt>> HeldOut() const = 0;
  // What makes index i mean the same prompt in another run (files with sizes and mtimes, seed,
  // shuffle, ...); null = nothing to compare. Checkpointed with the cursor.
  virtual nlohmann::json Identity() const { return nullptr; }
  // Training prompts dropped before the run as longer than data.max_prompt_length
  // (data.filter_overlong_prompts); 0 for a dataset that drops none.
  virtual int64_t filtered() const { return 0; }
};

}  // namespace troupe::data

#endif  // TROUPE_DATA_PROMPT_DATASET_H_
