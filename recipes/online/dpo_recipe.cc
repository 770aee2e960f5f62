// The DPO recipe (`recipe: dpo`, on-policy preference optimisation): the online loop
// (online_recipe.h) whose trainer's update is the preference loss of algorithm.dpo (dpo, ipo or
// kto, trainers/policy_losses.h) on pairs of each group's samples the job's reward labelled,
// against the reference's log-probs (the feed's, as for a KL loss); dynamic sampling replaces the
// groups with no preference (the pairs are chosen by the trainer, actors/trainer_core.h).
//
// Offline, with data.preference_files: the recorded pairs (offline_pairs.h), every record read,
// checked and encoded with the policy's tokenizer before any actor starts, take the place of
// generations, straight into the replay buffer (their labels are the records': chosen 1,
// rejected 0), in a seeded order per epoch; the rollout workers serve the held-out evaluation
// only. The reference's log-probs of a record are computed once (the same pairs every epoch).
//
//   Generate ─▶ OfflinePairs.Next ─▶ Buffer ─▶ ReplayBuffer ─▶ Update ─▶ Trainer
#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "data/preference_pairs.h"
#include "metrics/metric_catalog.h"
#include "models/tokenizers/tokenizer.h"
#include "recipes/online/offline_pairs.h"
#include "recipes/online/online_config.h"
#include "recipes/online/online_recipe.h"
#include "recipes/online/online_rules.h"
#include "recipes/online/online_summary.h"
#include "recipes/rl/job_data.h"

namespace troupe::recipes {
namespace {

namespace n = metrics::metric_names;

class DpoRecipe final : public OnlineRecipe {
 public:
  using OnlineRecipe::OnlineRecipe;

 private:
  std::string Describe() const override {
    return absl::StrCat(pairs_ != nullptr ? "offline " : "", "DPO (",
                        PreferenceLossName(spec_.algorithm.dpo.loss), " loss)");
  }
  std::string BatchUnit() const override {
    return pairs_ != nullptr ? " preference pairs" : OnlineRecipe::BatchUnit();
  }

  // data.preference_files: every record read, checked and encoded (a bad record is refused
  // naming its file and line); a resumed run's place in them restored.
  absl::Status PrepareRecipeData() override {
    const DataSpec& d = spec_.data;
    if (d.preference_files.empty()) return absl::OkStatus();
    TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<models::Tokenizer> tok,
                            models::LoadTokenizer(policy_dir_ + "/tokenizer.json"));
    absl::StatusOr<std::vector<data::PreferencePair>> read =
        data::LoadPreferencePairs(d.preference_files, PreferenceKeysOf(spec_), nullptr);
    if (!read.ok()) return spec_.ErrorAt("data.preference_files", read.status().message());
    absl::StatusOr<std::vector<data::EncodedPair>> encoded =
        data::EncodePairs(*read, *tok,
                          {.max_prompt_length = d.max_prompt_length,
                           .max_response_length = d.max_response_length,
                           .truncation = DataTruncation(d.truncation)});
    if (!encoded.ok()) return spec_.ErrorAt("data.preference_files", encoded.status().message());
    pairs_ = std::make_unique<OfflinePairs>(*std::move(encoded), static_cast<uint64_t>(d.seed));
    state_.Log(absl::StrCat("offline pairs: ", pairs_->size(), " preference records from ",
                            absl::StrJoin(d.preference_files, ", ")));
    if (!state_.resumed_state().contains("pairs")) return absl::OkStatus();
    absl::Status restored = pairs_->Restore(state_.resumed_state()["pairs"]);
    if (!restored.ok()) {
      return absl::Status(
          restored.code(),
          absl::StrCat(state_.resume_dir(), "/driver_state.json: ", restored.message()));
    }
    return absl::OkStatus();
  }

  void ConfigureFeed(TrainingFeed& feed) override {
    if (pairs_ == nullptr) return;
    feed.EnableReferenceCache([this](int64_t id) { return pairs_->RecordOf(id); });
  }

  bool generates() const override { return pairs_ == nullptr; }

  // Offline: as many pairs as the online loop would start groups, straight into the buffer.
  absl::Status Generate() override {
    if (pairs_ == nullptr) return OnlineRecipe::Generate();
    if (state_.Done()) return absl::OkStatus();
    int64_t room = std::max<int64_t>(1, eta()) * batch() - pending_;
    if (eta() == 0 && (busy() || feed_->has_batch())) room = 0;
    if (room <= 0) return absl::OkStatus();
    proto::ScoreReply read;
    for (proto::SampleGroup& g : pairs_->Next(room, state_.version())) {
      *read.add_groups() = std::move(g);
    }
    pending_ += room;
    state_.result().samples_generated += 2 * room;  // (read, not generated)
    std::vector<proto::ScoreReply> scored;
    scored.push_back(std::move(read));
    TROUPE_RETURN_IF_ERROR(Buffer(std::move(scored)));
    return Update();  // nothing else would wake the loop for them
  }

  // Recorded pairs arrive in order: no bound.
  int64_t Frontier() const override { return pairs_ != nullptr ? -1 : OnlineRecipe::Frontier(); }
  int64_t drawn() const override {
    return pairs_ != nullptr ? pairs_->drawn() : OnlineRecipe::drawn();
  }

  // Recorded pairs lost with a replay buffer: still drawn and pending, back into the buffer at
  // once.
  absl::Status ReplaceLost(const std::vector<int64_t>& prompt_ids) override {
    if (pairs_ == nullptr) return OnlineRecipe::ReplaceLost(prompt_ids);
    proto::ScoreReply read;
    for (proto::SampleGroup& g : pairs_->Again(prompt_ids, state_.version())) {
      state_.result().samples_generated += g.samples_size();  // (read, not generated)
      *read.add_groups() = std::move(g);
    }
    std::vector<proto::ScoreReply> scored;
    scored.push_back(std::move(read));
    return Buffer(std::move(scored));
  }

  // Offline: the reference's log-probs the cache served this step.
  void AddStepMetrics(std::map<std::string, double>& m) override {
    if (pairs_ == nullptr) return;
    m[n::kPrefReferenceCached] =
        static_cast<double>(feed_->reference_cache_hits() - cache_hits_before_);
    cache_hits_before_ = feed_->reference_cache_hits();
  }

  void SaveRecipeState(nlohmann::json& state) override {
    if (pairs_ != nullptr) state["pairs"] = pairs_->State();
  }

  // data.preference_files (trained instead of generations); null when sampling on-policy.
  std::unique_ptr<OfflinePairs> pairs_;
  int64_t cache_hits_before_ = 0;
};

}  // namespace

TROUPE_REGISTER_RECIPE(DpoRules(), DpoRecipe, CheckDpoSpec, PrintDpoSummary);

}  // namespace troupe::recipes
