// PromptSource: an RL run's prompts, in order, each drawn once.
//
// Prompts come from a PromptDataset (data/prompt_dataset.h) by index: the i-th prompt drawn is
// dataset.Get(i) (indices past the dataset's size wrap around: epochs), and its prompt_id is i. A
// prompt whose generation failed is given back and drawn again before any new one. The source's
// state — the cursor and the ids given back — goes into a checkpoint together with the ids that
// were out (generating or being scored) at that moment, which a resumed run draws again first:
// across a crash and
// --resume no prompt is skipped or drawn twice (ids already in the replay buffer are saved with
// it). The dataset's Identity() is saved with the cursor and compared on Restore.
//
// Prioritized sampling (data.sampler.type: prioritized): the dataset index of each new draw is
// picked at random instead of in order, and a training prompt whose last scored group had all
// rewards equal (all solved or all failed: no group-baseline advantage, and dropped by dynamic
// sampling) is drawn `uniform_weight` times as often as one never drawn or whose last group was
// mixed. The driver reports each scored group with Observe(). A draw is a pure function of
// (seed, prompt_id, the down-weighted set): the index is found by rejection (a uniform index is
// kept with probability 1, or uniform_weight if it is down-weighted; on average at most
// 1 / uniform_weight tries), so the state to checkpoint is the down-weighted set and the indices
// of the prompts to draw again. In the spirit of the prioritized sampling of Kimi k1.5 (Kimi
// Team 2025), with the two classes dynamic sampling already uses.
//
//   PromptSource prompts(std::move(dataset));
//   proto::Prompt p = *prompts.Next();
//   prompts.GiveBack({p});                 // its worker died: drawn again next
//   nlohmann::json st = prompts.State(out_now);   // into driver_state.json
//   prompts.Restore(st);                   // in the resumed run
//   prompts.Observe(p.prompt_id(), /*uniform=*/true);   // prioritized: its group was all-equal
//
// Thread-safety: not thread-safe (the driver's thread owns it).
#ifndef TROUPE_RECIPES_RL_PROMPT_SOURCE_H_
#define TROUPE_RECIPES_RL_PROMPT_SOURCE_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "data/prompt_dataset.h"
#include "nlohmann/json.hpp"
#include "proto/rl.pb.h"

namespace troupe::recipes {

// How a PromptSource picks the dataset index of a new draw (see the file comment).
struct PromptSamplerOptions {
  bool prioritized = false;     // false: index = prompt_id (in order, epochs)
  double uniform_weight = 0.1;  // in (0, 1]; prioritized only
  uint64_t seed = 0;
};

class PromptSource {
 public:
  explicit PromptSource(std::unique_ptr<data::PromptDataset> dataset,
                        PromptSamplerOptions sampler = {});

  // The next prompt: a given-back one first, else the next index.
  absl::StatusOr<proto::Prompt> Next();
  // The next `n` prompts, in order; on an error none is drawn (those drawn are given back).
  absl::StatusOr<std::vector<proto::Prompt>> Next(int64_t n);
  // Gives prompts back (in their order) to be drawn again before any new one.
  void GiveBack(const std::vector<proto::Prompt>& prompts);
  // Prompts drawn and not given back (so out somewhere: generating, scoring, buffered, trained).
  int64_t drawn() const { return cursor_ - static_cast<int64_t>(given_back_.size()); }
  // The lowest prompt id not drawn now: the lowest given back, else the next new one. Every id
  // below it is out (or was trained or dropped).
  int64_t lowest_undrawn_id() const;

  // Prioritized: the prompt drawn as `prompt_id` had its group scored, with all rewards equal
  // (`uniform`) or not; its dataset index is down-weighted or weighted 1 again for later draws.
  // Ignored for an id not drawn since the run (re)started and for sequential sampling.
  void Observe(int64_t prompt_id, bool uniform);
  // Prioritized: training prompts whose last group was uniform (0 for sequential sampling).
  int64_t down_weighted() const { return down_weighted_; }

  // The state to checkpoint; `out` are the ids drawn and not yet in the replay buffer (in flight),
  // which a resumed run draws again first.
  nlohmann::json State(const std::vector<int64_t>& out) const;
  // Restores a State (INVALID_ARGUMENT naming the field if malformed; FAILED_PRECONDITION naming
  // what differs if the state's dataset identity is not this dataset's: a cursor into other
  // files would draw other records).
  absl::Status Restore(const nlohmann::json& state);

  const data::PromptDataset& dataset() const { return *dataset_; }

 private:
  // The dataset index of new draw `id`.
  int64_t PickIndex(int64_t id) const;
  // The dataset index of drawn prompt `id` (remembered for prioritized sampling).
  int64_t IndexOf(int64_t id) const;

  std::unique_ptr<data::PromptDataset> dataset_;
  PromptSamplerOptions sampler_;
  int64_t cursor_ = 0;
  std::deque<int64_t> given_back_;
  // Prioritized only: per dataset index, whether its last group was uniform; and the indices of
  // the ids drawn and not yet observed.
  std::vector<bool> uniform_;
  int64_t down_weighted_ = 0;
  absl::flat_hash_map<int64_t, int64_t> index_of_;
};

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_RL_PROMPT_SOURCE_H_
