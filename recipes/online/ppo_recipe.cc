// The PPO recipe (`recipe: ppo`): the online loop (online_recipe.h) with a Critic actor
// (actors/critic.h). A taken batch goes to the critic for its values first (Critic.Values; each
// sample's Sample.values), then to the trainer (GAE advantages, trainers/advantage_estimators.h)
// and the critic (its update towards the GAE returns) side by side; the step ends when both
// replied. For trainer.critic_warmup steps only the critic trains (the weight version stays).
//
//   Update ─▶ Critic.Values ─▶ AdvanceUpdate ─┬─▶ Trainer.Step  ─┬─▶ TakeUpdate ─▶ FinishStep
//                                             └─▶ Critic.Update ─┘   (the critic's metrics merged)
//
// The critic's ranks (actors.critic.replicas = N > 1): the driver spawns N critics and forms their
// data-parallel group (Critic.JoinTrainGroup, rank r of N, group "<job>/critic.0"); every rank
// gets every Critic.Update and trains on its share of the batch (actors/critic.h), and the step
// takes rank 0's reply (the group's metrics) once every rank replied; an error of any rank fails
// the step, naming the rank. Rank 0 alone computes the values and writes the checkpoints (the
// ranks hold one state).
//
// Checkpoints hold the critic's state in <ckpt dir>/critic/step_N (Critic.Save), which a resumed
// run needs. A critic whose values or loss are not finite fails the run at that step (no
// checkpoint of it is written; the earlier ones stay). A critic of one rank that dies is restored
// from its newest checkpoint (at first the state it started from), losing the updates since
// (RunResult::critic_updates_lost); without checkpoints (actors.checkpointer.every_steps = 0) a
// critic that had been updated cannot be, and the run ends saying so. A critic of several ranks
// is not restarted (the spec refuses actors.critic.max_restarts != 0 for it: a restarted rank
// would leave its group and the state the group trained, and the survivors' update of the step
// could have been partly applied): a rank that dies ends the run, which --resume continues from
// its newest checkpoint (the critic's through rank 0). Calls that only rank 0 serves (values,
// checkpoints) are sent again after a lost reply as for one critic; an update is not.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "actors/critic.h"
#include "actors/roles.h"
#include "base/status_macros.h"
#include "metrics/metric_catalog.h"
#include "recipes/online/online_config.h"
#include "recipes/online/online_recipe.h"
#include "recipes/online/online_rules.h"
#include "recipes/online/online_summary.h"

#include "actors/roles.h"
#include "recipes/rl/actor_retry.h"
#include "recipes/rl/step_metrics.h"

namespace troupe::recipes {
namespace {

namespace n = metrics::metric_names;

class PpoRecipe final : public OnlineRecipe {
 public:
  using OnlineRecipe::OnlineRecipe;

 private:
  std::string Describe() const override { return "PPO"; }

  // A resumed run's critic checkpoint: NOT_FOUND if it is missing (the critic cannot start again
  // from scratch unseen).
  absl::Status PrepareResume() override {
    if (!state_.resuming()) return absl::OkStatus();
    const std::filesystem::path resume(state_.resume_dir());
    const std::string dir =
        (resume.parent_path() / "critic" / resume.filename()).lexically_normal().string();
    if (!std::filesystem::is_directory(dir)) {
      return absl::NotFoundError(absl::StrCat("--resume: ", state_.resume_dir(),
                                              " has no critic checkpoint beside it (", dir,
                                              "); recipe ppo cannot resume without its critic"));
    }
    critic_resume_ = dir;
    return absl::OkStatus();
  }

  std::vector<std::string> RecipeRoles() const override { return {actors::roles::kCritic}; }

  absl::Status SpawnRecipeRoles() override {
    TROUPE_ASSIGN_OR_RETURN(
        critic_group_,
        SpawnGroup(RoleOptions(prefix_, actors::roles::kCritic, spec_.actors.critic,
                               std::max<int64_t>(1, spec_.actors.critic.replicas),
                               ConfigJson(PpoCriticConfig(spec_, policy_dir_, critic_resume_)))));
    return absl::OkStatus();
  }

  absl::Status RecipeRolesUp() override {
    TROUPE_RETURN_IF_ERROR(critic_group_.WaitAlive());
    TROUPE_ASSIGN_OR_RETURN(std::vector<ActorHandle<actors::Critic>> ranks,
                            critic_group_.AllAs<actors::Critic>());
    critic_ = ranks[0];
    critic_peers_.assign(ranks.begin() + 1, ranks.end());
    TROUPE_RETURN_IF_ERROR(FormCriticGroup(ranks));
    critic_restore_dir_ = critic_resume_;
    return absl::OkStatus();
  }

  // The critic's ranks form their data-parallel group: every rank joins at once (the group forms
  // when all have), rank r of N.
  absl::Status FormCriticGroup(const std::vector<ActorHandle<actors::Critic>>& ranks) {
    if (ranks.size() < 2) return absl::OkStatus();
    std::vector<Future<proto::JoinWeightGroupReply>> joins;
    for (size_t r = 0; r < ranks.size(); ++r) {
      proto::JoinWeightGroupRequest req;
      req.set_group_name(absl::StrCat(prefix_, "/critic"));
      req.set_epoch(0);
      req.set_rank(static_cast<int32_t>(r));
      req.set_world_size(static_cast<int32_t>(ranks.size()));
      joins.push_back(ranks[r].Call(&actors::Critic::JoinTrainGroup, std::move(req),
                                    {.timeout = options_.weight_group_timeout}));
    }
    for (size_t r = 0; r < joins.size(); ++r) {
      if (absl::StatusOr<proto::JoinWeightGroupReply> joined = joins[r].Get(); !joined.ok()) {
        return absl::Status(joined.status().code(),
                            absl::StrCat("critic rank ", r, " could not join the critic group: ",
                                         joined.status().message()));
      }
    }
    state_.Log(absl::StrCat("critic group formed: ", ranks.size(), " data-parallel ranks"));
    return absl::OkStatus();
  }

  // The critic's values of the batch first (the policy's GAE and the critic's targets).
  void SendUpdate(proto::TrainStepRequest req) override {
    values_seconds_ = 0;
    valued_ = std::move(req);
    values_start_ = absl::Now();
    SendValues();
  }

  void SendValues() {
    proto::LogprobRequest values;
    for (const proto::SampleGroup& g : valued_->groups()) {
      for (const proto::Sample& sample : g.samples()) *values.add_samples() = sample;
    }
    valuing_ = wake_.Watch(critic_.Call(&actors::Critic::Values, std::move(values),
                                        {.timeout = options_.train_timeout}));
  }

  // The critic's values into the waiting batch's samples, then its updates start. A critic that
  // died under the call is restored (RecoverCritic) and asked again.
  absl::Status AdvanceUpdate() override {
    if (!valuing_ || !valuing_->ready()) return absl::OkStatus();
    absl::StatusOr<proto::ValuesReply> values = valuing_->Get();
    valuing_.reset();
    if (!values.ok()) {
      TROUPE_RETURN_IF_ERROR(RecoverCritic(values.status()));
      SendValues();
      return absl::OkStatus();
    }
    critic_failures_ = 0;
    values_seconds_ = SecondsSince(values_start_);
    proto::TrainStepRequest req = *std::move(valued_);
    valued_.reset();
    int samples = 0;
    for (const proto::SampleGroup& g : req.groups()) samples += g.samples_size();
    if (samples != values->values_size()) {
      return absl::InternalError(absl::StrCat("Critic.Values returned ", values->values_size(),
                                              " value lists for a batch of ", samples, " samples"));
    }
    int k = 0;
    for (proto::SampleGroup& g : *req.mutable_groups()) {
      for (proto::Sample& sample : *g.mutable_samples()) {
        const proto::FloatList& v = values->values(k++);
        for (float x : v.values()) {
          if (!std::isfinite(x)) {
            return absl::FailedPreconditionError(
                absl::StrCat("step ", state_.step() + 1,
                             ": the critic's values are not finite (sample ", sample.sample_index(),
                             " of prompt ", sample.prompt_id(), "): the critic diverged"));
          }
        }
        *sample.mutable_values() = v.values();
      }
    }
    StartUpdates(std::move(req));
    return absl::OkStatus();
  }

  // The policy's update (the trainer's Step) and the critic's, side by side; during the critic's
  // warm-up only the critic's.
  void StartUpdates(proto::TrainStepRequest req) {
    MarkUpdateStart();
    critic_request_ = req;  // kept to send again if the critic dies under it
    SendCriticUpdate();
    if (!warming_up()) SendPolicyUpdate(std::move(req));
  }

  // Every rank of the critic group gets the whole batch and trains on its share of it.
  void SendCriticUpdate() {
    critic_peer_updates_.clear();
    for (const ActorHandle<actors::Critic>& peer : critic_peers_) {
      critic_peer_updates_.push_back(wake_.Watch(peer.Call(
          &actors::Critic::Update, *critic_request_, {.timeout = options_.train_timeout})));
    }
    critic_update_ = wake_.Watch(critic_.Call(&actors::Critic::Update, *critic_request_,
                                              {.timeout = options_.train_timeout}));
  }

  // Once every rank of a critic group replied (rank 0's reply `rank0`): OK if every rank's update
  // succeeded, else an error (the first failing rank's code) naming each failing rank with its
  // error (a rank that died, and the ranks whose gradient sums failed with it).
  absl::Status CriticGroupStatus(const absl::Status& rank0) {
    std::vector<std::string> failures;
    absl::StatusCode code = absl::StatusCode::kOk;
    const auto add = [&](size_t rank, const absl::Status& s) {
      if (s.ok()) return;
      if (code == absl::StatusCode::kOk) code = s.code();
      failures.push_back(absl::StrCat("critic rank ", rank, ": ", s.message()));
    };
    add(0, rank0);
    for (size_t r = 0; r < critic_peer_updates_.size(); ++r) {
      add(r + 1, critic_peer_updates_[r].Get().status());
    }
    critic_peer_updates_.clear();
    if (failures.empty()) return absl::OkStatus();
    return absl::Status(code, absl::StrCat("step ", state_.step() + 1, ": the update of ",
                                           failures.size(), " of ", critic_peers_.size() + 1,
                                           " critic ranks failed (a data-parallel critic is not "
                                           "restarted): ",
                                           absl::StrJoin(failures, "; ")));
  }

  // The trainer's reply (during the critic's warm-up, the step without a policy update: the
  // weight version stays) with the critic's metrics. A critic that diverged ends the run here,
  // its last good checkpoint intact.
  absl::StatusOr<std::optional<proto::TrainStepReply>> TakeUpdate() override {
    if (valuing_.has_value()) return std::nullopt;
    const bool peers_ready =
        std::all_of(critic_peer_updates_.begin(), critic_peer_updates_.end(),
                    [](const Future<proto::TrainStepReply>& f) { return f.ready(); });
    if (critic_update_ && critic_update_->ready() && peers_ready) {
      absl::StatusOr<proto::TrainStepReply> critic = critic_update_->Get();
      critic_update_.reset();
      // A group's update is not sent again: any rank's error ends the step.
      if (!critic_peers_.empty()) TROUPE_RETURN_IF_ERROR(CriticGroupStatus(critic.status()));
      if (!critic.ok()) {
        // Died under the update: restored, then the same update again (the trainer's goes on).
        absl::Status again = RecoverCritic(critic.status());
        if (!again.ok()) {
          return absl::Status(again.code(),
                              absl::StrCat("step ", state_.step() + 1,
                                           ": the critic's update failed: ", again.message()));
        }
        SendCriticUpdate();
        return std::nullopt;
      }
      critic_failures_ = 0;
      ++critic_updates_;
      critic_reply_ = *std::move(critic);
    }
    if (critic_update_) return std::nullopt;
    if (!critic_reply_) return OnlineRecipe::TakeUpdate();
    TROUPE_ASSIGN_OR_RETURN(std::optional<proto::TrainStepReply> reply,
                            TakePolicyUpdate(/*stand_in=*/true));
    if (!reply.has_value()) return std::nullopt;
    for (const auto& [k, v] : critic_reply_->metrics()) (*reply->mutable_metrics())[k] = v;
    (*reply->mutable_metrics())[n::kTimingValues] = values_seconds_;
    critic_reply_.reset();
    critic_request_.reset();
    return reply;
  }

  // The critic's values, its update, or its reply waiting for the trainer's.
  bool UpdateInFlight() const override {
    return valuing_.has_value() || critic_update_.has_value() || critic_reply_.has_value();
  }
  bool UpdatesPolicy() const override { return !warming_up(); }
  // The step in flight trains the critic alone (trainer.critic_warmup).
  bool warming_up() const { return state_.step() < spec_.trainer.critic_warmup; }

  // A critic call failed with `error`. OK when the call is to be sent again: the critic was
  // unreachable (UNAVAILABLE, ABORTED: sent again once the head has it ALIVE), or it restarted
  // (DATA_LOSS: a restarted Critic serves nothing until restored, actors/critic.h) and was
  // restored from its newest checkpoint (or its starting state before the first), losing the
  // updates since — counted, and at most actors.checkpointer.every_steps of them. Without
  // checkpoints a restarted critic that had been updated cannot be restored: its initial weights
  // would silently give untrained values, so the run ends, saying so. Any other error is returned
  // as it is; so is the last of RetryOptions::max_attempts failures in a row.
  absl::Status RecoverCritic(const absl::Status& error) {
    if (!IsRetryable(error) && !absl::IsDataLoss(error)) return error;
    if (absl::IsDataLoss(error) && !critic_peers_.empty()) {
      return absl::Status(
          error.code(),
          absl::StrCat("critic rank 0 restarted, and a critic of ", critic_peers_.size() + 1,
                       " data-parallel ranks is not restored: ", error.message()));
    }
    const int max_attempts = std::max(1, options_.retry.max_attempts);
    if (++critic_failures_ >= max_attempts) {
      return absl::Status(error.code(), absl::StrCat("the critic failed ", critic_failures_,
                                                     " times in a row; last: ", error.message()));
    }
    if (!absl::IsDataLoss(error)) {
      state_.Log(absl::StrCat("critic call failed (", error.ToString(),
                              "); calling again once it is back"));
      ++state_.result().call_retries;
      absl::SleepFor(Backoff(options_.retry, critic_failures_ + 1));
      return AwaitAlive(cluster_, critic_.id(), options_.retry.restart_wait);
    }
    const int64_t lost = critic_updates_ - critic_saved_updates_;
    if (lost > 0 && spec_.actors.checkpointer.every_steps == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the critic died and restarted after ", critic_updates_,
          " update(s) with no checkpoint to restore them from (actors.checkpointer.every_steps "
          "is 0); its initial weights would give untrained values. Set "
          "actors.checkpointer.every_steps so that a restarted critic resumes from its newest "
          "checkpoint"));
    }
    proto::CriticRestoreRequest restore;
    restore.set_dir(critic_restore_dir_);
    absl::StatusOr<proto::CriticRestoreReply> restored =
        critic_.Call(&actors::Critic::Restore, restore, {.timeout = options_.checkpoint_timeout})
            .Get();
    if (!restored.ok()) {
      // Died again: the call sent again finds out (and comes back here within the attempts).
      if (IsRetryable(restored.status())) return absl::OkStatus();
      return absl::Status(
          restored.status().code(),
          absl::StrCat("restoring the restarted critic from ",
                       critic_restore_dir_.empty() ? "its initial weights" : critic_restore_dir_,
                       ": ", restored.status().message()));
    }
    RunResult& r = state_.result();
    ++r.critic_restarts;
    r.critic_updates_lost += lost;
    critic_updates_ = critic_saved_updates_;
    state_.Log(absl::StrCat(
        "critic restarted: restored from ",
        critic_restore_dir_.empty() ? "its initial weights" : critic_restore_dir_, " (",
        restored->optimizer_steps(), " optimizer steps); ", lost, " update(s) since are lost"));
    return absl::OkStatus();
  }

  // The critic's weights and optimizer beside the trainer's checkpoints, in
  // <checkpointer dir>/critic/step_<N> (written atomically by the critic); those older than the
  // oldest trainer checkpoint left are removed.
  absl::Status CheckpointRecipeRoles() override {
    const std::string root = spec_.actors.checkpointer.dir;
    proto::CriticSaveRequest req;
    req.set_step(state_.step());
    req.set_dir(absl::StrFormat("%s/critic/step_%08d", root, state_.step()));
    std::error_code ec;
    std::filesystem::create_directories(root + "/critic", ec);
    while (true) {
      // A step written again (the run's final checkpoint of a step already saved, or a Save the
      // critic died under) replaces it.
      std::filesystem::remove_all(req.dir(), ec);
      absl::Status saved =
          critic_.Call(&actors::Critic::Save, req, {.timeout = options_.checkpoint_timeout})
              .Get()
              .status();
      if (saved.ok()) break;
      TROUPE_RETURN_IF_ERROR(RecoverCritic(saved));
    }
    critic_failures_ = 0;
    critic_restore_dir_ = req.dir();
    critic_saved_updates_ = critic_updates_;
    int64_t oldest = state_.step();
    for (const auto& e : std::filesystem::directory_iterator(root, ec)) {
      int64_t step = 0;
      if (absl::SimpleAtoi(absl::StripPrefix(e.path().filename().string(), "step_"), &step) &&
          absl::StartsWith(e.path().filename().string(), "step_")) {
        oldest = std::min(oldest, step);
      }
    }
    for (const auto& e : std::filesystem::directory_iterator(root + "/critic", ec)) {
      const std::string name = e.path().filename().string();
      int64_t step = 0;
      if (absl::StartsWith(name, "step_") &&
          absl::SimpleAtoi(absl::StripPrefix(name, "step_"), &step) && step < oldest) {
        std::filesystem::remove_all(e.path(), ec);
      }
    }
    return absl::OkStatus();
  }

  ActorGroup critic_group_;
  std::string critic_resume_;  // the critic's checkpoint to resume from ("" = a fresh critic)
  ActorHandle<actors::Critic> critic_;  // rank 0: values, checkpoints, the step's metrics
  std::vector<ActorHandle<actors::Critic>> critic_peers_;  // ranks 1..N-1 of a critic group
  // A restarted critic: the state it is restored from (its newest checkpoint, at first the one it
  // started from), the updates it has had (counted by this run) and those in that state.
  std::string critic_restore_dir_;
  int64_t critic_updates_ = 0, critic_saved_updates_ = 0;
  int critic_failures_ = 0;  // critic calls failed in a row
  // The critic's update request in flight (sent again after a restore), and its reply waiting for
  // the trainer's.
  std::optional<proto::TrainStepRequest> critic_request_;
  std::optional<proto::TrainStepReply> critic_reply_;
  // The batch waiting for its values, the Values call, the critic's update.
  std::optional<proto::TrainStepRequest> valued_;
  std::optional<Future<proto::ValuesReply>> valuing_;
  std::optional<Future<proto::TrainStepReply>> critic_update_;
  std::vector<Future<proto::TrainStepReply>> critic_peer_updates_;  // ranks 1..N-1's
  absl::Time values_start_;
  double values_seconds_ = 0;
};

}  // namespace

TROUPE_REGISTER_RECIPE(PpoRules(), PpoRecipe, CheckPpoSpec, PrintOnlineSummary);

}  // namespace troupe::recipes
