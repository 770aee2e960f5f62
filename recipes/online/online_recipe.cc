#include "recipes/online/online_recipe.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "actors/reference.h"
#include "actors/replay_buffer.h"
#include "actors/roles.h"
#include "base/status_macros.h"
#include "base/trace/span_recorder.h"
#include "metrics/metric_catalog.h"
#include "models/tokenizers/tokenizer.h"
#include "recipes/online/online_config.h"
#include "recipes/rl/step_metrics.h"
#include "recipes/rl/task_prompts.h"
#include "recipes/sft/initial_policy.h"

namespace troupe::recipes {
namespace roles = actors::roles;
namespace {

namespace n = metrics::metric_names;

trainers::GroupFilterOptions GroupFilterOptionsOf(const JobSpec& spec) {
  return {.overlong_buffer_len =
              spec.reward.overlong_buffer.enable ? spec.reward.overlong_buffer.len : 0,
          .overlong_penalty_factor = spec.reward.overlong_buffer.penalty_factor,
          .max_response_length = spec.data.max_response_length,
          .filter_groups = spec.algorithm.filter_groups.enable,
          .max_num_gen_batches = spec.algorithm.filter_groups.max_num_gen_batches,
          .batch_size = spec.data.train_batch_size};
}

trainers::KlControllerOptions KlControllerOptionsOf(const AlgorithmSpec& a) {
  return {.enabled = a.use_kl_in_reward,
          .adaptive = a.kl_ctrl.type == KlCtrlType::kAdaptive,
          .kl_coef = a.kl_ctrl.kl_coef,
          .target_kl = a.kl_ctrl.target_kl,
          .horizon = a.kl_ctrl.horizon};
}

}  // namespace

OnlineRecipe::OnlineRecipe(const JobSpec& spec, Cluster& cluster, const RunOptions& options)
    : spec_(spec),
      cluster_(cluster),
      options_(LogAboveProgress(options, [this] { return state_.progress(); })),
      state_(spec, options_),
      prefix_(options.job_id.empty() ? spec.name : options.job_id),
      kl_(KlControllerOptionsOf(spec.algorithm)),
      filter_(GroupFilterOptionsOf(spec)) {}

OnlineRecipe::~OnlineRecipe() {
  if (pool_ != nullptr) pool_->ClearRendezvousKeys();
}

absl::StatusOr<RunResult> OnlineRecipe::Run() {
  absl::StatusOr<RunResult> result = RunStages();
  if (!result.ok()) {
    RefreshAccounting();
    if (absl::Status s = state_.Finish(result.status()); !s.ok()) {
      state_.Log(absl::StrCat("summary.json not written: ", s.ToString()));
    }
  }
  return result;
}

absl::StatusOr<RunResult> OnlineRecipe::RunStages() {
  TROUPE_RETURN_IF_ERROR(Prepare());
  TROUPE_RETURN_IF_ERROR(Spawn());
  TROUPE_RETURN_IF_ERROR(state_.OpenMetrics());
  if (state_.result().initial_accuracy < 0) TROUPE_RETURN_IF_ERROR(Evaluate(nullptr));
  state_.Log(absl::StrCat(eta() == 0 ? "synchronous " : "asynchronous ", Describe(), ": ",
                          spec_.trainer.total_steps - state_.step(), " steps of ", batch(),
                          BatchUnit(), eta() == 0 ? "" : absl::StrCat(", max staleness ", eta())));
  if (eta() > 0 && generates()) {
    // What makes this asynchronous run differ from another with the same seeds (see Generate).
    std::vector<std::string> timing;
    if (spec_.algorithm.filter_groups.enable) timing.push_back("algorithm.filter_groups");
    if (spec_.data.sampler.prioritized) timing.push_back("data.sampler.type: prioritized");
    if (!timing.empty()) {
      state_.Log(absl::StrCat("not reproducible from its seeds: with ",
                              absl::StrJoin(timing, " and "),
                              " the prompts drawn depend on when groups are scored "
                              "(docs/reproducibility.md)"));
    }
  }
  state_.StartLoop();
  absl::Status loop = Loop();
  if (loop.ok()) loop = Drain();
  state_.result().seconds = state_.loop_seconds();
  state_.result().weight_group_epochs = pool_->epochs();
  state_.result().replay_buffer_restarts = replay_restarts_before_ + replay_->restores();
  if (!loop.ok()) {
    // Whatever checkpoints are under way still reach the disk before the actors go away.
    if (absl::Status f = state_.FlushCheckpoints(trainer_, -1); !f.ok()) state_.Log(f.ToString());
    return loop;
  }
  const std::vector<RlEvalPoint>& curve = state_.result().curve;
  if (curve.empty() || curve.back().step != state_.step()) {
    TROUPE_RETURN_IF_ERROR(Evaluate(nullptr));
  }
  const bool checkpoints = spec_.actors.checkpointer.every_steps > 0;
  if (checkpoints && !state_.checkpoint_due()) TROUPE_RETURN_IF_ERROR(Checkpoint());
  if (checkpoints) TROUPE_RETURN_IF_ERROR(state_.FlushCheckpoints(trainer_, state_.step()));
  TROUPE_RETURN_IF_ERROR(state_.Finish());
  return state_.result();
}

std::string OnlineRecipe::BatchUnit() const {
  return absl::StrCat(" prompts x ", spec_.algorithm.n, " samples");
}

// Prepare: the run's state (RunState::Begin: the earlier-run check, a resumed run's state), the
// initial policy, the prompts and the recipe's data, the KL coefficient of a resumed run.
absl::Status OnlineRecipe::Prepare() {
  TROUPE_RETURN_IF_ERROR(state_.Begin());
  TROUPE_RETURN_IF_ERROR(PrepareResume());
  filter_.Restore(state_.result().groups_filtered, state_.result().samples_filtered);
  TROUPE_ASSIGN_OR_RETURN(policy_dir_, PrepareInitialPolicy(spec_, options_, &state_.result()));
  TROUPE_RETURN_IF_ERROR(PreparePrompts());
  TROUPE_RETURN_IF_ERROR(PrepareRecipeData());
  if (state_.resumed_state().contains("kl_in_reward_coef")) {
    const nlohmann::json& coef = state_.resumed_state()["kl_in_reward_coef"];
    if (!coef.is_number()) {
      return absl::DataLossError(absl::StrCat(state_.resume_dir(),
                                              "/driver_state.json: kl_in_reward_coef is not a "
                                              "number"));
    }
    TROUPE_RETURN_IF_ERROR(kl_.Restore(coef.get<double>()));
  }
  return absl::OkStatus();
}

absl::Status OnlineRecipe::PreparePrompts() {
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<models::Tokenizer> tok,
                          models::LoadTokenizer(policy_dir_ + "/tokenizer.json"));
  TROUPE_ASSIGN_OR_RETURN(auto dataset, MakeJobPrompts(spec_, std::move(tok), options_.log));
  state_.result().prompts_filtered = dataset->filtered();
  prompts_ = std::make_unique<PromptSource>(
      std::move(dataset), PromptSamplerOptions{.prioritized = spec_.data.sampler.prioritized,
                                               .uniform_weight = spec_.data.sampler.uniform_weight,
                                               .seed = static_cast<uint64_t>(spec_.data.seed)});
  if (state_.resumed_state().contains("prompts")) {
    TROUPE_RETURN_IF_ERROR(prompts_->Restore(state_.resumed_state()["prompts"]));
  }
  return absl::OkStatus();
}

absl::StatusOr<ActorGroup> OnlineRecipe::SpawnGroup(ActorGroupOptions o) {
  o.libraries = JobLibraries(spec_);  // user code any of the job's actors may run or look up
  o.nice = o.role == roles::kRollout || o.role == roles::kReference
               ? options_.off_critical_path_nice
               : 0;
  return ActorGroup::Spawn(cluster_, std::move(o));
}

// Spawn: every role's replicas, by the type the spec names, up before the loop starts; the
// clients of the replay buffer, reward servers and rollout workers; the weight group formed.
absl::Status OnlineRecipe::Spawn() {
  const ActorsSpec& a = spec_.actors;
  const bool kl = NeedsReference(spec_);
  std::string recipe_roles;
  for (const std::string& role : RecipeRoles()) absl::StrAppend(&recipe_roles, role, ", ");
  state_.Log(absl::StrCat(
      "starting actors: ", a.rollout.replicas, " rollout, ", a.reward.replicas, " reward, ",
      kl ? a.reference.replicas : 0, " reference, ",
      a.trainer.replicas > 1 ? absl::StrCat(a.trainer.replicas, " trainer ranks") : "trainer", ", ",
      recipe_roles, "replay buffer, checkpointer"));
  TROUPE_ASSIGN_OR_RETURN(replay_group_,
                          SpawnGroup(RoleOptions(prefix_, roles::kReplay, a.replay_buffer, 1, {})));
  TROUPE_ASSIGN_OR_RETURN(ActorGroup rewards, SpawnGroup(RewardRoleOptions(prefix_, spec_)));
  if (kl) {
    TROUPE_ASSIGN_OR_RETURN(
        reference_group_,
        SpawnGroup(RoleOptions(prefix_, roles::kReference, a.reference, a.reference.replicas,
                               ConfigJson(OnlineReferenceConfig(policy_dir_)))));
  }
  TROUPE_RETURN_IF_ERROR(SpawnRecipeRoles());
  TROUPE_ASSIGN_OR_RETURN(checkpointer_,
                          SpawnGroup(RoleOptions(prefix_, roles::kCheckpointer, a.checkpointer, 1,
                                                 ConfigJson(OnlineCheckpointerConfig(spec_)))));
  TROUPE_ASSIGN_OR_RETURN(
      trainer_group_,
      SpawnGroup(RoleOptions(prefix_, roles::kTrainer, a.trainer, a.trainer.replicas,
                             ConfigJson(OnlineTrainerConfig(spec_, policy_dir_, state_.resume_dir(),
                                                            checkpointer_.name(0))))));
  ActorGroupOptions ro = RoleOptions(prefix_, roles::kRollout, a.rollout, a.rollout.replicas,
                                     ConfigJson(OnlineRolloutConfig(spec_, policy_dir_)),
                                     /*indexed=*/true);
  ro.max_concurrency = 3;  // Generate beside JoinWeightGroup and Status
  TROUPE_ASSIGN_OR_RETURN(ActorGroup workers, SpawnGroup(std::move(ro)));
  for (ActorGroup* g :
       {&replay_group_, &rewards, &reference_group_, &checkpointer_, &trainer_group_, &workers}) {
    TROUPE_RETURN_IF_ERROR(g->WaitAlive());
  }
  TROUPE_RETURN_IF_ERROR(RecipeRolesUp());
  TROUPE_ASSIGN_OR_RETURN(auto replay, replay_group_.As<actors::ReplayBuffer>(0));
  TROUPE_ASSIGN_OR_RETURN(std::vector<ActorHandle<actors::Trainer>> ranks,
                          trainer_group_.AllAs<actors::Trainer>());
  trainer_ = ranks[0];
  trainer_peers_.assign(ranks.begin() + 1, ranks.end());
  TROUPE_RETURN_IF_ERROR(FormTrainerGroup(ranks));
  TROUPE_ASSIGN_OR_RETURN(auto references, reference_group_.AllAs<actors::Reference>());
  // A replay buffer that dies is restarted and restored from the driver's record; the groups it
  // held are generated again (RegenerateLost).
  replay_restarts_before_ = state_.result().replay_buffer_restarts;
  replay_ = std::make_unique<ReplayBufferClient>(
      replay, options_.retry,
      [this, id = replay.id()] { return AwaitAlive(cluster_, id, options_.retry.restart_wait); },
      options_.log);
  feed_ = std::make_unique<TrainingFeed>(replay_.get(), std::move(references), options_.retry,
                                         &wake_, options_.log, &state_.result().call_retries);
  ConfigureFeed(*feed_);
  // A resumed run's buffered groups are ahead of training as they were when the checkpoint was
  // made: counted in pending_, or Generate would draw a full pipeline more on top of them and
  // the surplus would go stale (the prompts that were out are drawn again and counted then).
  TROUPE_ASSIGN_OR_RETURN(pending_, feed_->Import(state_.resumed_replay_state(),
                                                  state_.resume_dir() + "/replay_buffer.pb"));
  TROUPE_ASSIGN_OR_RETURN(scoring_, ScoringPool::Create(cluster_, std::move(rewards),
                                                        options_.retry, &wake_, options_.log));
  RolloutPoolOptions po{.group_name = absl::StrCat(prefix_, "/weights"),
                        .generate_timeout = options_.generate_timeout,
                        .eval_timeout = options_.eval_timeout,
                        .weight_group_timeout = options_.weight_group_timeout,
                        .retry = options_.retry,
                        .no_worker_patience = options_.no_worker_patience,
                        .log = options_.log};
  pool_ = std::make_unique<RolloutPool>(cluster_, std::move(workers), trainer_, prompts_.get(),
                                        &wake_, std::move(po));
  pool_->ClearRendezvousKeys();  // the names were free: keys under this id are a dead run's
  TROUPE_ASSIGN_OR_RETURN(int64_t version, pool_->FormWeightGroup());
  state_.set_version(version);
  return absl::OkStatus();
}

absl::Status OnlineRecipe::Evaluate(std::map<std::string, double>* m) {
  ScopedSpan span("eval", "evaluate", "driver");
  const absl::Time start = absl::Now();
  TROUPE_ASSIGN_OR_RETURN(std::vector<proto::Prompt> heldout, prompts_->dataset().HeldOut());
  if (heldout.empty()) return absl::OkStatus();  // a dataset job without data.val_files
  TROUPE_ASSIGN_OR_RETURN(auto c, pool_->Evaluate(std::move(heldout), state_.version(),
                                                  static_cast<int>(spec_.rollout.max_new_tokens),
                                                  &state_.result().call_retries));
  TROUPE_ASSIGN_OR_RETURN(
      ScoringPool::EvalScores scores,
      scoring_->ScoreEvaluation(std::move(c.groups), &state_.result().call_retries));
  c.correct = scores.correct;
  const double acc = 1.0 * c.correct / c.total, took = SecondsSince(start);
  state_.Log(absl::StrFormat(
      "eval at step %d (weights %s): held-out exact match %.1f%% (%d/%d) "
      "in %.1fs%s",
      state_.step(), c.versions(), 100 * acc, c.correct, c.total, took,
      scores.failures == 0 ? ""
                           : absl::StrCat(" (", scores.failures, " scored as failed)").c_str()));
  std::map<std::string, double> eval = {{n::kTimingTesting, took},
                                        {n::kValScoreFailures, scores.failures}};
  for (const auto& [source, mean] : scores.mean_reward) {
    eval[absl::StrCat(n::kValTestScorePrefix, source.empty() ? "unknown" : source)] = mean;
  }
  state_.RecordEval(acc, eval, /*log=*/m == nullptr);
  if (m != nullptr) {
    (*m)[n::kValAccuracy] = acc;
    m->insert(eval.begin(), eval.end());
  }
  return absl::OkStatus();
}

// collect → buffer → (the recipe's update stages) → finish the step → update → generate, each
// stage doing what is ready.
absl::Status OnlineRecipe::Loop() {
  while (!(state_.Done() && !busy())) {
    TROUPE_RETURN_IF_ERROR(Collect());
    TROUPE_ASSIGN_OR_RETURN(std::vector<proto::ScoreReply> scored, scoring_->Poll());
    TROUPE_RETURN_IF_ERROR(Buffer(std::move(scored)));
    TROUPE_RETURN_IF_ERROR(AdvanceUpdate());
    TROUPE_RETURN_IF_ERROR(FinishStep());
    if (state_.Done() && !busy()) break;
    // Weight-group changes happen between training steps.
    TROUPE_ASSIGN_OR_RETURN(std::optional<int64_t> regrouped,
                            pool_->Maintain(!busy(), publish_failed_));
    if (regrouped.has_value()) {
      state_.set_version(*regrouped);
      publish_failed_ = false;
    }
    if (!state_.Done()) {
      TROUPE_RETURN_IF_ERROR(Update());
      TROUPE_RETURN_IF_ERROR(RegenerateLost());
      TROUPE_RETURN_IF_ERROR(Generate());
    }
    wake_.WaitUntil(
        std::min({absl::Now() + absl::Seconds(1), scoring_->next_retry(), feed_->next_retry()}));
  }
  return absl::OkStatus();
}

// Generate: sync, one batch at the current weights once the previous step is trained; async,
// as many calls as keep the groups ahead of training within eta batches, decided as soon as
// there is room for them and started as workers come free.
//
// Reproducible asynchronous runs. Two runs with the same seeds train on the same samples,
// whichever worker answers which call and whenever replies and weights arrive, because nothing
// the samples depend on is left to timing:
//   - a call's prompts: calls are drawn in prompt order the moment room opens (a batch handed to
//     the trainer, the run's start), in chunks of gen_batch / replicas, so the chunks are the
//     same in every run; its seed comes from its first prompt id (OnlineGenerateRequest);
//   - a call's weights: it is pinned to one version, the trainer's when its room opened (which
//     is the number of steps trained then, as a step is handed over only when the previous one
//     is done), and the worker generates every token with that version (it keeps the weights
//     of the last max_staleness + 1 versions, rollout/generation_engine.h); without the pin a
//     worker switched to newer weights in the middle of a call when they happened to arrive;
//   - a batch's groups: the oldest groups whose prompt ids are all below the lowest prompt
//     still being generated or scored (Frontier), not whichever arrived first.
// Given up (docs/reproducibility.md, and said when the run starts) by what frees room at
// a moment set by timing, so that the prompts drawn in its place get a version that depends on
// it: dynamic sampling (algorithm.filter_groups) and samples dropped as stale; and by
// prioritized sampling (data.sampler.type), whose draws depend on which groups were scored
// before them. A fault (a retried call, a restarted worker) gives it up for that run too.
absl::Status OnlineRecipe::Generate() {
  if (state_.Done()) return absl::OkStatus();
  auto draw = [this](int64_t n) {
    pending_ += n;  // (an error ends the run)
    return prompts_->Next(n);
  };
  if (eta() == 0) {
    if (pool_->idle() == 0) return absl::OkStatus();
    if (busy() || feed_->has_batch() || pending_ >= batch()) return absl::OkStatus();
    TROUPE_ASSIGN_OR_RETURN(std::vector<proto::Prompt> ps, draw(batch() - pending_));
    return pool_->StartSplit(std::move(ps), [this](std::vector<proto::Prompt> part) {
      return OnlineGenerateRequest(spec_, std::move(part), state_.version());
    });
  }
  const int64_t chunk = std::max<int64_t>(1, gen_batch() / spec_.actors.rollout.replicas);
  // The weights of the version the trainer has now, or of the next one when eta is 1 and a step
  // is running (version + 2 - eta: recent enough to be within eta when taken, at version + 2 at
  // the latest).
  const int64_t version = std::max({pool_->group_version(), state_.version(),
                                    state_.version() + (bumps_version() ? 2 : 1) - eta()});
  // A smaller last chunk fills the room: groups dropped as stale or by dynamic sampling leave
  // pending_ at any count, and a batch short of a few groups must still be completed.
  for (int64_t room;
       (room = std::max<int64_t>(1, eta()) * std::max(batch(), gen_batch()) - pending_) > 0;) {
    TROUPE_ASSIGN_OR_RETURN(std::vector<proto::Prompt> ps, draw(std::min(chunk, room)));
    pool_->Enqueue(OnlineGenerateRequest(spec_, std::move(ps), version));
  }
  pool_->Dispatch();
  return absl::OkStatus();
}

// Being generated, queued, scored or given back to be drawn again, or the next new id: a batch
// takes only groups below it, so it is the same whatever order the groups arrived in.
int64_t OnlineRecipe::Frontier() const {
  int64_t frontier = prompts_->lowest_undrawn_id();
  for (int64_t id : pool_->InFlightPromptIds()) frontier = std::min(frontier, id);
  for (int64_t id : scoring_->OutstandingPromptIds()) frontier = std::min(frontier, id);
  return frontier;
}

int64_t OnlineRecipe::drawn() const { return prompts_->drawn(); }

// Groups a replay buffer held when it died: their samples are discarded (counted apart) and their
// prompts given back to be generated again first (ReplaceLost). (With prioritized sampling, a
// given-back id whose group was already observed has its record picked again under the current
// weights, as a resumed run's redraws are.)
absl::Status OnlineRecipe::RegenerateLost() {
  ReplayBufferClient::Lost lost = replay_->TakeLost();
  if (lost.prompt_ids.empty()) return absl::OkStatus();
  RunResult& r = state_.result();
  r.prompts_regenerated += static_cast<int64_t>(lost.prompt_ids.size());
  r.samples_discarded += lost.samples;
  return ReplaceLost(lost.prompt_ids);
}

absl::Status OnlineRecipe::ReplaceLost(const std::vector<int64_t>& prompt_ids) {
  std::vector<proto::Prompt> again(prompt_ids.size());
  for (size_t i = 0; i < again.size(); ++i) again[i].set_prompt_id(prompt_ids[i]);
  prompts_->GiveBack(again);
  pending_ -= static_cast<int64_t>(prompt_ids.size());
  return absl::OkStatus();
}

// Collect: finished generations (counted from the generators' side) go to the reward servers; a
// failed call's prompts went back to the prompt source.
absl::Status OnlineRecipe::Collect(bool drain) {
  const int64_t before = state_.result().prompts_regenerated;
  std::vector<Generated> done = drain ? pool_->Drain(&state_.result().prompts_regenerated)
                                      : pool_->Collect(&state_.result().prompts_regenerated);
  pending_ -= state_.result().prompts_regenerated - before;
  for (Generated& g : done) {
    state_.RecordGenerated(g.reply);
    ++generate_calls_;
    prompts_generated_ += g.reply.groups_size();
    proto::ScoreRequest sr;
    *sr.mutable_groups() = std::move(*g.reply.mutable_groups());
    scoring_->Submit(std::move(sr));
  }
  return absl::OkStatus();
}

// A dropped group leaves the groups ahead of training, so Generate draws another prompt in its
// place.
absl::Status OnlineRecipe::Buffer(std::vector<proto::ScoreReply> scored) {
  const int64_t before = filter_.filtered_groups();
  std::vector<std::pair<int64_t, bool>> uniform;
  const bool observe = spec_.data.sampler.prioritized && generates();
  TROUPE_RETURN_IF_ERROR(filter_.Apply(scored, observe ? &uniform : nullptr));
  for (const auto& [prompt_id, all_equal] : uniform) prompts_->Observe(prompt_id, all_equal);
  pending_ -= filter_.filtered_groups() - before;
  state_.result().groups_filtered = filter_.filtered_groups();
  state_.result().samples_filtered = filter_.filtered_samples();
  return feed_->Add(std::move(scored));
}

absl::Status OnlineRecipe::Update() {
  TROUPE_ASSIGN_OR_RETURN(
      auto taken,
      feed_->Prefetch(batch(), state_.version() + (bumps_version() ? 1 : 0), eta(), Frontier()));
  pending_ -= taken.second / std::max<int64_t>(1, spec_.algorithm.n);  // dropped as stale
  if (busy()) return absl::OkStatus();
  TROUPE_ASSIGN_OR_RETURN(std::optional<proto::TrainStepRequest> req,
                          feed_->Next(&training_groups_, &reference_seconds_));
  if (!req.has_value()) return absl::OkStatus();
  filter_.OnBatchTaken();
  pending_ -= static_cast<int64_t>(training_groups_.size());
  req->set_step(state_.step());
  req->set_kl_in_reward_coef(kl_.coef());
  SendUpdate(*std::move(req));
  return absl::OkStatus();
}

void OnlineRecipe::SendUpdate(proto::TrainStepRequest req) {
  MarkUpdateStart();
  SendPolicyUpdate(std::move(req));
}

// The trainer's ranks form their data-parallel group: every rank joins at once (the group forms
// when all have), rank r of N.
absl::Status OnlineRecipe::FormTrainerGroup(
    const std::vector<ActorHandle<actors::Trainer>>& ranks) {
  if (ranks.size() < 2) return absl::OkStatus();
  std::vector<Future<proto::JoinWeightGroupReply>> joins;
  for (size_t r = 0; r < ranks.size(); ++r) {
    proto::JoinWeightGroupRequest req;
    req.set_group_name(absl::StrCat(prefix_, "/trainer"));
    req.set_epoch(0);
    req.set_rank(static_cast<int32_t>(r));
    req.set_world_size(static_cast<int32_t>(ranks.size()));
    joins.push_back(ranks[r].Call(&actors::Trainer::JoinTrainGroup, std::move(req),
                                  {.timeout = options_.weight_group_timeout}));
  }
  for (size_t r = 0; r < joins.size(); ++r) {
    if (absl::StatusOr<proto::JoinWeightGroupReply> joined = joins[r].Get(); !joined.ok()) {
      return absl::Status(joined.status().code(),
                          absl::StrCat("trainer rank ", r, " could not join the trainer group: ",
                                       joined.status().message()));
    }
  }
  state_.Log(absl::StrCat("trainer group formed: ", ranks.size(), " data-parallel ranks"));
  return absl::OkStatus();
}

void OnlineRecipe::SendPolicyUpdate(proto::TrainStepRequest req) {
  // Every rank of the trainer group gets the whole batch and trains on its share of it.
  training_peers_.clear();
  for (const ActorHandle<actors::Trainer>& peer : trainer_peers_) {
    training_peers_.push_back(
        wake_.Watch(peer.Call(&actors::Trainer::Step, req, {.timeout = options_.train_timeout})));
  }
  training_ = wake_.Watch(
      trainer_.Call(&actors::Trainer::Step, std::move(req), {.timeout = options_.train_timeout}));
}

absl::StatusOr<std::optional<proto::TrainStepReply>> OnlineRecipe::TakeUpdate() {
  return TakePolicyUpdate(/*stand_in=*/false);
}

absl::StatusOr<std::optional<proto::TrainStepReply>> OnlineRecipe::TakePolicyUpdate(bool stand_in) {
  if (training_.has_value()) {
    if (!training_->ready()) return std::nullopt;
    for (const Future<proto::TrainStepReply>& peer : training_peers_) {
      if (!peer.ready()) return std::nullopt;
    }
    absl::StatusOr<proto::TrainStepReply> trained = training_->Get();
    training_.reset();
    // The group's metrics are in rank 0's reply; the other ranks' only say they stepped too. A
    // rank that died fails its own call and the others' collective sums: every failing rank is
    // named, the first peer's error leading (rank 0's is then only the sums that broke).
    std::vector<std::string> failed;
    absl::StatusCode code = absl::StatusCode::kOk;
    for (size_t r = 0; r < training_peers_.size(); ++r) {
      if (absl::StatusOr<proto::TrainStepReply> peer = training_peers_[r].Get(); !peer.ok()) {
        if (code == absl::StatusCode::kOk) code = peer.status().code();
        failed.push_back(absl::StrCat("trainer rank ", r + 1, ": ", peer.status().message()));
      }
    }
    training_peers_.clear();
    if (!trained.ok()) {
      if (failed.empty()) return trained.status();
      failed.push_back(absl::StrCat("trainer rank 0: ", trained.status().message()));
    }
    if (!failed.empty()) return absl::Status(code, absl::StrJoin(failed, "; "));
    return *std::move(trained);
  }
  if (!stand_in) return std::nullopt;
  proto::TrainStepReply reply;
  reply.set_step(state_.step());
  reply.set_weight_version(state_.version());
  return reply;
}

// FinishStep: the step's weights went out with it (the group is re-formed if that failed); then
// its metrics, evaluation and checkpoint.
absl::Status OnlineRecipe::FinishStep() {
  TROUPE_ASSIGN_OR_RETURN(std::optional<proto::TrainStepReply> reply, TakeUpdate());
  if (!reply.has_value()) return absl::OkStatus();
  const int64_t previous = state_.version();
  std::map<std::string, double> m(reply->metrics().begin(), reply->metrics().end());
  state_.Advance(*reply, &m);
  publish_failed_ |= reply->publish_failed();
  const SampleSummary samples = SummarizeSamples(training_groups_, previous);
  RunResult& r = state_.result();
  r.max_staleness_seen = std::max(r.max_staleness_seen, samples.max_staleness);
  for (const auto& [k, v] : samples.Metrics()) m[k] = v;
  m[n::kTimingTrainCall] = SecondsSince(train_start_);
  m[n::kTimingRef] = reference_seconds_;
  AddStepMetrics(m);
  if (kl_.enabled() && m.count(n::kRewardKlPenalty) > 0) {
    int64_t samples_trained = 0;
    for (const proto::SampleGroup& g : training_groups_) samples_trained += g.samples_size();
    TROUPE_RETURN_IF_ERROR(kl_.Update(m[n::kRewardKlPenalty], samples_trained));
  }
  const trainers::ScoredGroupStats scored = filter_.TakeScoredStats();
  if (scored.groups_judged > 0) {
    m[n::kGroupsAllCorrect] = 1.0 * scored.groups_all_correct / scored.groups_judged;
    m[n::kGroupsNoneCorrect] = 1.0 * scored.groups_none_correct / scored.groups_judged;
  }
  if (scored.tokens > 0) m[n::kNegLogprob] = scored.neg_logprob_sum / scored.tokens;
  if (generate_calls_ > 0) {
    m[n::kPromptsPerCall] = static_cast<double>(prompts_generated_) / generate_calls_;
    generate_calls_ = prompts_generated_ = 0;
  }
  if (spec_.data.sampler.prioritized && prompts_->dataset().size() > 0) {
    m[n::kPromptsDownWeighted] =
        static_cast<double>(prompts_->down_weighted()) / prompts_->dataset().size();
  }
  TROUPE_ASSIGN_OR_RETURN(proto::ReplayStats stats, feed_->Stats());
  state_.RecordAccounting(stats, drawn(), &m);
  if (spec_.trainer.eval_every > 0 && state_.step() % spec_.trainer.eval_every == 0) {
    // Async: the next step trains meanwhile (the evaluation's weights are pinned).
    const bool overlap = eta() > 0 && !publish_failed_ && !state_.checkpoint_due();
    if (overlap && !state_.Done()) TROUPE_RETURN_IF_ERROR(Update());
    TROUPE_RETURN_IF_ERROR(Evaluate(&m));
  }
  state_.LogStep(m, {{n::kStaleness, samples.staleness}},
                 {{"reward", m[n::kScoreMean]},
                  {"acc%", 100 * std::max(0.0, r.final_accuracy)},
                  {"kl", m[n::kKlLoss]},
                  {"v", static_cast<double>(state_.version())}});
  if (state_.checkpoint_due()) TROUPE_RETURN_IF_ERROR(Checkpoint());
  return absl::OkStatus();
}

// Checkpoint: the current step's. The prompts (those out are drawn again by a resumed run), the
// replay buffer's groups (a batch waiting for the trainer goes back there first) and counters,
// with the trainer's snapshot; then the recipe's roles'.
absl::Status OnlineRecipe::Checkpoint() {
  TROUPE_RETURN_IF_ERROR(feed_->ReturnBatch().status());
  std::vector<int64_t> out = pool_->InFlightPromptIds();
  for (int64_t id : scoring_->OutstandingPromptIds()) out.push_back(id);
  TROUPE_ASSIGN_OR_RETURN(std::string replay, feed_->Export());
  // (A buffer that died meanwhile lost groups: their prompts are in the prompt state's redraws.)
  TROUPE_RETURN_IF_ERROR(RegenerateLost());
  state_.result().replay_buffer_restarts = replay_restarts_before_ + replay_->restores();
  nlohmann::json recipe_state = {{"prompts", prompts_->State(out)}};
  SaveRecipeState(recipe_state);
  if (kl_.enabled()) recipe_state["kl_in_reward_coef"] = kl_.coef();
  TROUPE_RETURN_IF_ERROR(state_.Checkpoint(trainer_, std::move(recipe_state), std::move(replay),
                                           scoring_->OutstandingSamples(), trainer_peers_));
  return CheckpointRecipeRoles();
}

// Drain: every call in flight finishes, its samples scored and buffered.
absl::Status OnlineRecipe::Drain() {
  // (The loop ends with no step in flight; an error ends the run without a drain.)
  if (busy()) return absl::InternalError("drain with a training step in flight");
  TROUPE_RETURN_IF_ERROR(feed_->ReturnBatch().status());
  TROUPE_RETURN_IF_ERROR(Collect(/*drain=*/true));
  TROUPE_ASSIGN_OR_RETURN(std::vector<proto::ScoreReply> scored, scoring_->Drain());
  TROUPE_RETURN_IF_ERROR(Buffer(std::move(scored)));
  state_.result().call_retries += scoring_->retries();
  // Groups lost at the very end: their prompts are given back (a resumed run draws them again),
  // recorded pairs read into the buffer again. (Each round needs the buffer to die again.)
  proto::ReplayStats stats;
  do {
    TROUPE_RETURN_IF_ERROR(RegenerateLost());
    TROUPE_ASSIGN_OR_RETURN(stats, feed_->Stats());
  } while (replay_->has_lost());
  state_.RecordAccounting(stats, drawn(), nullptr);
  return absl::OkStatus();
}

// Its counters, as far as the replay buffer still answers, and the samples being scored
// (generated, not yet buffered).
void OnlineRecipe::RefreshAccounting() {
  RunResult& r = state_.result();
  if (scoring_ != nullptr) r.samples_in_flight = scoring_->OutstandingSamples();
  if (replay_ == nullptr || feed_ == nullptr) return;
  absl::StatusOr<proto::ReplayStats> stats = feed_->Stats();
  // Groups lost with a buffer that died (this call's included) are out of it, counted apart;
  // their prompts go back (the prompt state a checkpoint would save).
  const ReplayBufferClient::Lost lost = replay_->TakeLost();
  r.samples_discarded += lost.samples;
  if (generates()) {
    std::vector<proto::Prompt> again(lost.prompt_ids.size());
    for (size_t i = 0; i < again.size(); ++i) again[i].set_prompt_id(lost.prompt_ids[i]);
    prompts_->GiveBack(again);
  }
  r.replay_buffer_restarts = replay_restarts_before_ + replay_->restores();
  if (stats.ok()) state_.RecordAccounting(*stats, drawn(), nullptr);
}

}  // namespace troupe::recipes
