#include "recipes/grpo/grpo_recipe.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "actors/critic.h"
#include "actors/reference.h"
#include "actors/replay_buffer.h"
#include "base/status_macros.h"
#include "base/trace/span_recorder.h"
#include "metrics/metric_catalog.h"
#include "models/tokenizers/tokenizer.h"
#include "recipes/grpo/grpo_config.h"
#include "recipes/grpo/offline_pairs.h"
#include "recipes/rl/initial_policy.h"
#include "recipes/rl/replay_buffer_client.h"
#include "recipes/rl/rollout_pool.h"
#include "recipes/rl/run_state.h"
#include "recipes/rl/scoring_pool.h"
#include "recipes/rl/step_metrics.h"
#include "recipes/rl/task_prompts.h"
#include "recipes/rl/training_feed.h"
#include "recipes/rm/preference_pairs.h"
#include "trainers/group_filter.h"
#include "trainers/kl_controller.h"

namespace troupe::recipes {
namespace {

namespace n = metrics::metric_names;

// The online RL loop of recipes grpo (critic-free estimators), ppo (gae, with a critic) and dpo
// (on-policy preference optimisation): the same stages. For ppo the batch's values come from the
// critic before the policy and the critic train on it side by side (the critic alone for
// trainer.critic_warmup steps). For dpo the trainer's update is the preference loss
// (algorithm.dpo) on pairs of each group's samples the reward labelled, against the reference's
// log-probs (the feed's, as for a KL loss); dynamic sampling replaces groups with no preference.
class GrpoRecipe : public Recipe {
 public:
  GrpoRecipe(const JobSpec& spec, Cluster& cluster, const RunOptions& options)
      : spec_(spec),
        cluster_(cluster),
        options_(LogAboveProgress(options, [this] { return state_.progress(); })),
        state_(spec, options_),
        prefix_(options.job_id.empty() ? spec.name : options.job_id),
        ppo_(spec.recipe == "ppo"),
        kl_(trainers::KlControllerOptions{
            .enabled = spec.algorithm.use_kl_in_reward,
            .adaptive = spec.algorithm.kl_ctrl.type == KlCtrlType::kAdaptive,
            .kl_coef = spec.algorithm.kl_ctrl.kl_coef,
            .target_kl = spec.algorithm.kl_ctrl.target_kl,
            .horizon = spec.algorithm.kl_ctrl.horizon}),
        filter_(trainers::GroupFilterOptions{
            .overlong_buffer_len =
                spec.reward.overlong_buffer.enable ? spec.reward.overlong_buffer.len : 0,
            .overlong_penalty_factor = spec.reward.overlong_buffer.penalty_factor,
            .max_response_length = spec.data.max_response_length,
            .filter_groups = spec.algorithm.filter_groups.enable,
            .max_num_gen_batches = spec.algorithm.filter_groups.max_num_gen_batches,
            .batch_size = spec.data.train_batch_size}) {}
  // The job's actors end with it (their groups kill them), whether it succeeded or not.
  ~GrpoRecipe() override {
    if (pool_ != nullptr) pool_->ClearRendezvousKeys();
  }

  // However the run ends — finished, stopped, failed, refused after it began — summary.json says
  // so, with its accounting.
  absl::StatusOr<RunResult> Run() override {
    absl::StatusOr<RunResult> result = RunStages();
    if (!result.ok()) {
      RefreshAccounting();
      if (absl::Status s = state_.Finish(result.status()); !s.ok()) {
        state_.Log(absl::StrCat("summary.json not written: ", s.ToString()));
      }
    }
    return result;
  }

 private:
  absl::StatusOr<RunResult> RunStages() {
    TROUPE_RETURN_IF_ERROR(state_.Begin());
    if (ppo_) {
      TROUPE_ASSIGN_OR_RETURN(critic_resume_, CriticResumeDir());
    }
    filter_.Restore(state_.result().groups_filtered, state_.result().samples_filtered);
    TROUPE_ASSIGN_OR_RETURN(policy_dir_, PrepareInitialPolicy(spec_, options_, &state_.result()));
    TROUPE_RETURN_IF_ERROR(PreparePrompts());
    if (state_.resumed_state().contains("kl_in_reward_coef")) {
      const nlohmann::json& coef = state_.resumed_state()["kl_in_reward_coef"];
      if (!coef.is_number()) {
        return absl::DataLossError(absl::StrCat(state_.resume_dir(),
                                                "/driver_state.json: kl_in_reward_coef is not a "
                                                "number"));
      }
      TROUPE_RETURN_IF_ERROR(kl_.Restore(coef.get<double>()));
    }
    TROUPE_RETURN_IF_ERROR(SpawnRoles());
    pool_->ClearRendezvousKeys();  // the names were free: keys under this id are a dead run's
    TROUPE_ASSIGN_OR_RETURN(int64_t version, pool_->FormWeightGroup());
    state_.set_version(version);
    TROUPE_RETURN_IF_ERROR(state_.OpenMetrics());
    if (state_.result().initial_accuracy < 0) TROUPE_RETURN_IF_ERROR(Evaluate(nullptr));
    state_.Log(absl::StrCat(
        eta() == 0 ? "synchronous" : "asynchronous", pairs_ ? " offline " : " ",
        absl::AsciiStrToUpper(spec_.recipe),
        spec_.recipe == "dpo"
            ? absl::StrCat(" (", PreferenceLossName(spec_.algorithm.dpo.loss), " loss): ")
            : ": ",
        spec_.trainer.total_steps - state_.step(), " steps of ", batch(),
        pairs_ ? " preference pairs" : absl::StrCat(" prompts x ", spec_.algorithm.n, " samples"),
        eta() == 0 ? "" : absl::StrCat(", max staleness ", eta())));
    if (eta() > 0 && pairs_ == nullptr) {
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

  // A failed run's accounting, as far as the replay buffer still answers: its counters, and the
  // samples being scored (generated, not yet buffered).
  void RefreshAccounting() {
    RunResult& r = state_.result();
    if (scoring_ != nullptr) r.samples_in_flight = scoring_->OutstandingSamples();
    if (replay_ == nullptr || feed_ == nullptr) return;
    absl::StatusOr<proto::ReplayStats> stats = feed_->Stats();
    // Groups lost with a buffer that died (this call's included) are out of it, counted apart;
    // their prompts go back (the prompt state a checkpoint would save).
    const ReplayBufferClient::Lost lost = replay_->TakeLost();
    r.samples_discarded += lost.samples;
    if (pairs_ == nullptr) {
      std::vector<proto::Prompt> again(lost.prompt_ids.size());
      for (size_t i = 0; i < again.size(); ++i) again[i].set_prompt_id(lost.prompt_ids[i]);
      prompts_->GiveBack(again);
    }
    r.replay_buffer_restarts = replay_restarts_before_ + replay_->restores();
    if (stats.ok()) state_.RecordAccounting(*stats, drawn(), nullptr);
  }

  int64_t eta() const { return spec_.async.max_staleness; }
  int64_t batch() const { return spec_.data.train_batch_size; }
  // Prompts of an asynchronous generation round (data.gen_batch_size, default the batch).
  int64_t gen_batch() const {
    return spec_.data.gen_batch_size > 0 ? spec_.data.gen_batch_size : batch();
  }

  absl::Status PreparePrompts() {
    TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<models::Tokenizer> tok,
                            models::LoadTokenizer(policy_dir_ + "/tokenizer.json"));
    TROUPE_ASSIGN_OR_RETURN(auto dataset, MakeJobPrompts(spec_, std::move(tok), options_.log));
    state_.result().prompts_filtered = dataset->filtered();
    prompts_ = std::make_unique<PromptSource>(
        std::move(dataset),
        PromptSamplerOptions{.prioritized = spec_.data.sampler.prioritized,
                             .uniform_weight = spec_.data.sampler.uniform_weight,
                             .seed = static_cast<uint64_t>(spec_.data.seed)});
    if (state_.resumed_state().contains("prompts")) {
      TROUPE_RETURN_IF_ERROR(prompts_->Restore(state_.resumed_state()["prompts"]));
    }
    return spec_.data.preference_files.empty() ? absl::OkStatus() : ReadOfflinePairs();
  }

  // Recipe dpo's data.preference_files: every record read, checked and encoded with the policy's
  // tokenizer before any actor starts (a bad record is refused naming its file and line).
  absl::Status ReadOfflinePairs() {
    const DataSpec& d = spec_.data;
    TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<models::Tokenizer> tok,
                            models::LoadTokenizer(policy_dir_ + "/tokenizer.json"));
    absl::StatusOr<std::vector<PreferencePair>> read =
        LoadPreferencePairs(d.preference_files, PreferenceKeysOf(spec_), nullptr);
    if (!read.ok()) return spec_.ErrorAt("data.preference_files", read.status().message());
    absl::StatusOr<std::vector<EncodedPair>> encoded =
        EncodePairs(*read, *tok,
                    {.max_prompt_length = d.max_prompt_length,
                     .max_response_length = d.max_response_length,
                     .truncation = d.truncation});
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

  // Every role's replicas, by the type the spec names, up before the loop starts.
  absl::Status SpawnRoles() {
    const ActorsSpec& a = spec_.actors;
    const bool kl = NeedsReference(spec_);
    state_.Log(absl::StrCat("starting actors: ", a.rollout.replicas, " rollout, ",
                            a.reward.replicas, " reward, ", kl ? a.reference.replicas : 0,
                            " reference, trainer, ", ppo_ ? "critic, " : "",
                            "replay buffer, checkpointer"));
    auto spawn = [this, libraries = JobLibraries(spec_)](ActorGroupOptions o) {
      o.libraries = libraries;  // user code any of the job's actors may run or look up
      o.nice = o.role == "rollout" || o.role == "reference" ? options_.off_critical_path_nice : 0;
      return ActorGroup::Spawn(cluster_, std::move(o));
    };
    TROUPE_ASSIGN_OR_RETURN(replay_group_,
                            spawn(RoleOptions(prefix_, "replay", a.replay_buffer, 1, {})));
    TROUPE_ASSIGN_OR_RETURN(ActorGroup rewards,
                            spawn(RoleOptions(prefix_, "reward", a.reward, a.reward.replicas,
                                              RewardRoleConfig(spec_), /*indexed=*/true)));
    if (kl) {
      TROUPE_ASSIGN_OR_RETURN(
          reference_group_,
          spawn(RoleOptions(prefix_, "reference", a.reference, a.reference.replicas,
                            ConfigJson(GrpoReferenceConfig(policy_dir_)))));
    }
    if (ppo_) {
      TROUPE_ASSIGN_OR_RETURN(
          critic_group_,
          spawn(RoleOptions(prefix_, "critic", a.critic, 1,
                            ConfigJson(PpoCriticConfig(spec_, policy_dir_, critic_resume_)))));
    }
    TROUPE_ASSIGN_OR_RETURN(checkpointer_,
                            spawn(RoleOptions(prefix_, "checkpointer", a.checkpointer, 1,
                                              ConfigJson(GrpoCheckpointerConfig(spec_)))));
    TROUPE_ASSIGN_OR_RETURN(
        trainer_group_,
        spawn(RoleOptions(prefix_, "trainer", a.trainer, 1,
                          ConfigJson(GrpoTrainerConfig(spec_, policy_dir_, state_.resume_dir(),
                                                       checkpointer_.name(0))))));
    ActorGroupOptions ro = RoleOptions(prefix_, "rollout", a.rollout, a.rollout.replicas,
                                       ConfigJson(GrpoRolloutConfig(spec_, policy_dir_)),
                                       /*indexed=*/true);
    ro.max_concurrency = 3;  // Generate beside JoinWeightGroup and Status
    TROUPE_ASSIGN_OR_RETURN(ActorGroup workers, spawn(std::move(ro)));
    for (ActorGroup* g : {&replay_group_, &rewards, &reference_group_, &critic_group_,
                          &checkpointer_, &trainer_group_, &workers}) {
      TROUPE_RETURN_IF_ERROR(g->WaitAlive());
    }
    if (ppo_) {
      TROUPE_ASSIGN_OR_RETURN(critic_, critic_group_.As<actors::Critic>(0));
      critic_restore_dir_ = critic_resume_;
    }
    TROUPE_ASSIGN_OR_RETURN(auto replay, replay_group_.As<actors::ReplayBuffer>(0));
    TROUPE_ASSIGN_OR_RETURN(trainer_, trainer_group_.As<actors::Trainer>(0));
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
    if (pairs_ != nullptr) {  // the same pairs every epoch
      feed_->EnableReferenceCache([this](int64_t id) { return pairs_->RecordOf(id); });
    }
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
    return absl::OkStatus();
  }

  // Held-out accuracy (the reward's "correct") at the current weights, into the curve (and `m`).
  absl::Status Evaluate(std::map<std::string, double>* m) {
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

  // generate → score → buffer → reference → train → publish, each stage doing what is ready.
  absl::Status Loop() {
    while (!(state_.Done() && !busy())) {
      TROUPE_RETURN_IF_ERROR(Collect());
      TROUPE_ASSIGN_OR_RETURN(std::vector<proto::ScoreReply> scored, scoring_->Poll());
      TROUPE_RETURN_IF_ERROR(Buffer(std::move(scored)));
      TROUPE_RETURN_IF_ERROR(TakeValues());
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
        TROUPE_RETURN_IF_ERROR(StartNext());
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
  //     same in every run; its seed comes from its first prompt id (GrpoGenerateRequest);
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
  absl::Status Generate() {
    if (pairs_ != nullptr) return DrawPairs();
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
        return GrpoGenerateRequest(spec_, std::move(part), state_.version());
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
      pool_->Enqueue(GrpoGenerateRequest(spec_, std::move(ps), version));
    }
    pool_->Dispatch();
    return absl::OkStatus();
  }

  // The lowest prompt id not yet in the replay buffer (being generated, queued, scored or given
  // back to be drawn again), or the next new id: a batch takes only groups below it, so it is the
  // same whatever order the groups arrived in. (Offline pairs arrive in order: no bound.)
  int64_t Frontier() const {
    if (pairs_ != nullptr) return -1;
    int64_t frontier = prompts_->lowest_undrawn_id();
    for (int64_t id : pool_->InFlightPromptIds()) frontier = std::min(frontier, id);
    for (int64_t id : scoring_->OutstandingPromptIds()) frontier = std::min(frontier, id);
    return frontier;
  }

  // Offline pairs instead of generations: as many groups as Generate would start, straight into
  // the buffer (their labels are the records': chosen 1, rejected 0).
  absl::Status DrawPairs() {
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
    return StartNext();  // nothing else would wake the loop for them
  }

  // Prompts (or offline pairs) drawn and not given back.
  int64_t drawn() const { return pairs_ != nullptr ? pairs_->drawn() : prompts_->drawn(); }

  // Groups a replay buffer held when it died: their samples are discarded (counted apart) and their
  // prompts given back to be generated again first; offline pairs are read again into the buffer.
  // (With prioritized sampling, a given-back id whose group was already observed has its record
  // picked again under the current weights, as a resumed run's redraws are.)
  absl::Status RegenerateLost() {
    ReplayBufferClient::Lost lost = replay_->TakeLost();
    if (lost.prompt_ids.empty()) return absl::OkStatus();
    RunResult& r = state_.result();
    const int64_t groups = static_cast<int64_t>(lost.prompt_ids.size());
    r.prompts_regenerated += groups;
    r.samples_discarded += lost.samples;
    if (pairs_ != nullptr) {  // still drawn and pending: back into the buffer at once
      proto::ScoreReply read;
      for (proto::SampleGroup& g : pairs_->Again(lost.prompt_ids, state_.version())) {
        r.samples_generated += g.samples_size();  // (read, not generated)
        *read.add_groups() = std::move(g);
      }
      std::vector<proto::ScoreReply> scored;
      scored.push_back(std::move(read));
      return Buffer(std::move(scored));
    }
    std::vector<proto::Prompt> again(lost.prompt_ids.size());
    for (size_t i = 0; i < again.size(); ++i) again[i].set_prompt_id(lost.prompt_ids[i]);
    prompts_->GiveBack(again);
    pending_ -= groups;
    return absl::OkStatus();
  }

  // Score: finished generations (counted from the generators' side) go to the reward servers; a
  // failed call's prompts went back to the prompt source.
  absl::Status Collect(bool drain = false) {
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

  // Buffer: scored groups, shaped and filtered (DAPO), into the replay buffer. A dropped group
  // leaves the groups ahead of training, so Generate draws another prompt in its place.
  absl::Status Buffer(std::vector<proto::ScoreReply> scored) {
    const int64_t before = filter_.filtered_groups();
    std::vector<std::pair<int64_t, bool>> uniform;
    const bool observe = spec_.data.sampler.prioritized && pairs_ == nullptr;
    TROUPE_RETURN_IF_ERROR(filter_.Apply(scored, observe ? &uniform : nullptr));
    for (const auto& [prompt_id, all_equal] : uniform) prompts_->Observe(prompt_id, all_equal);
    pending_ -= filter_.filtered_groups() - before;
    state_.result().groups_filtered = filter_.filtered_groups();
    state_.result().samples_filtered = filter_.filtered_samples();
    return feed_->Add(std::move(scored));
  }

  // Train: the next batch (taken against the version the running step will produce), with its
  // reference log-probs, to the trainer once it is free.
  absl::Status StartNext() {
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
    values_seconds_ = 0;
    if (!ppo_) {
      StartUpdates(*std::move(req));
      return absl::OkStatus();
    }
    // PPO: the critic's values of the batch first (the policy's GAE and the critic's targets).
    valued_ = *std::move(req);
    values_start_ = absl::Now();
    SendValues();
    return absl::OkStatus();
  }

  // PPO: the critic's Values call for the batch waiting in valued_.
  void SendValues() {
    proto::LogprobRequest values;
    for (const proto::SampleGroup& g : valued_->groups()) {
      for (const proto::Sample& sample : g.samples()) *values.add_samples() = sample;
    }
    valuing_ = wake_.Watch(critic_.Call(&actors::Critic::Values, std::move(values),
                                        {.timeout = options_.train_timeout}));
  }

  // A step's calls are in flight: the critic's values, the trainer's or the critic's update (or
  // the critic's reply waits for the trainer's).
  bool busy() const {
    return training_.has_value() || valuing_.has_value() || critic_update_.has_value() ||
           critic_reply_.has_value();
  }
  // The step in flight trains the critic alone (trainer.critic_warmup), or not.
  bool warming_up() const { return ppo_ && state_.step() < spec_.trainer.critic_warmup; }
  // The step in flight will produce a new weight version (a policy update: not a warm-up step).
  bool bumps_version() const { return training_.has_value() || (busy() && !warming_up()); }

  // The policy's update (the trainer's Step) and, for ppo, the critic's, side by side; during
  // the critic's warm-up only the critic's.
  void StartUpdates(proto::TrainStepRequest req) {
    train_start_ = absl::Now();
    if (ppo_) {
      critic_request_ = req;  // kept to send again if the critic dies under it
      SendCriticUpdate();
    }
    if (!warming_up()) {
      training_ = wake_.Watch(trainer_.Call(&actors::Trainer::Step, std::move(req),
                                            {.timeout = options_.train_timeout}));
    }
  }

  void SendCriticUpdate() {
    critic_update_ = wake_.Watch(critic_.Call(&actors::Critic::Update, *critic_request_,
                                              {.timeout = options_.train_timeout}));
  }

  // PPO: the critic's values into the waiting batch's samples, then its updates start. A critic
  // that died under the call is restored (RecoverCritic) and asked again.
  absl::Status TakeValues() {
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

  // The step's replies: the trainer's (during the critic's warm-up, the step without a policy
  // update: the weight version stays) with the critic's metrics. A critic that diverged ends the
  // run here, its last good checkpoint intact.
  absl::StatusOr<std::optional<proto::TrainStepReply>> TakeUpdates() {
    if (valuing_.has_value()) return std::nullopt;
    if (critic_update_ && critic_update_->ready()) {
      absl::StatusOr<proto::TrainStepReply> critic = critic_update_->Get();
      critic_update_.reset();
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
    if (critic_update_ || (!training_ && !critic_reply_)) return std::nullopt;
    if (training_ && !training_->ready()) return std::nullopt;
    proto::TrainStepReply reply;
    if (training_) {
      absl::StatusOr<proto::TrainStepReply> trained = training_->Get();
      training_.reset();
      TROUPE_RETURN_IF_ERROR(trained.status());
      reply = *std::move(trained);
    } else {
      reply.set_step(state_.step());
      reply.set_weight_version(state_.version());
    }
    if (critic_reply_) {
      for (const auto& [k, v] : critic_reply_->metrics()) (*reply.mutable_metrics())[k] = v;
      (*reply.mutable_metrics())[n::kTimingValues] = values_seconds_;
      critic_reply_.reset();
      critic_request_.reset();
    }
    return reply;
  }

  // PPO: a critic call failed with `error`. OK when the call is to be sent again: the critic was
  // unreachable (UNAVAILABLE, ABORTED: sent again once the head has it ALIVE), or it restarted
  // (DATA_LOSS: a restarted Critic serves nothing until restored, actors/critic.h) and was
  // restored from its newest checkpoint (or its starting state before the first), losing the
  // updates since — counted, and at most actors.checkpointer.every_steps of them. Without
  // checkpoints a restarted critic that had been updated cannot be restored: its initial weights
  // would silently give untrained values, so the run ends, saying so. Any other error is returned
  // as it is; so is the last of RetryOptions::max_attempts failures in a row.
  absl::Status RecoverCritic(const absl::Status& error) {
    if (!IsRetryable(error) && !absl::IsDataLoss(error)) return error;
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

  // Publish: the step's weights went out with it (the group is re-formed if that failed); then
  // its metrics, evaluation and checkpoint.
  absl::Status FinishStep() {
    TROUPE_ASSIGN_OR_RETURN(std::optional<proto::TrainStepReply> reply, TakeUpdates());
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
    if (pairs_ != nullptr) {
      m[n::kPrefReferenceCached] =
          static_cast<double>(feed_->reference_cache_hits() - cache_hits_before_);
      cache_hits_before_ = feed_->reference_cache_hits();
    }
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
      if (overlap && !state_.Done()) TROUPE_RETURN_IF_ERROR(StartNext());
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

  // The checkpoint of the current step: the prompts (those out are drawn again by a resumed
  // run), the replay buffer's groups (a batch waiting for the trainer goes back there first) and
  // counters, with the trainer's snapshot.
  absl::Status Checkpoint() {
    TROUPE_RETURN_IF_ERROR(feed_->ReturnBatch().status());
    std::vector<int64_t> out = pool_->InFlightPromptIds();
    for (int64_t id : scoring_->OutstandingPromptIds()) out.push_back(id);
    TROUPE_ASSIGN_OR_RETURN(std::string replay, feed_->Export());
    // (A buffer that died meanwhile lost groups: their prompts are in the prompt state's redraws.)
    TROUPE_RETURN_IF_ERROR(RegenerateLost());
    state_.result().replay_buffer_restarts = replay_restarts_before_ + replay_->restores();
    nlohmann::json recipe_state = {{"prompts", prompts_->State(out)}};
    if (pairs_ != nullptr) recipe_state["pairs"] = pairs_->State();
    if (kl_.enabled()) recipe_state["kl_in_reward_coef"] = kl_.coef();
    TROUPE_RETURN_IF_ERROR(state_.Checkpoint(trainer_, std::move(recipe_state), std::move(replay),
                                             scoring_->OutstandingSamples()));
    return ppo_ ? CheckpointCritic() : absl::OkStatus();
  }

  // PPO: the critic's weights and optimizer beside the trainer's checkpoints, in
  // <checkpointer dir>/critic/step_<N> (written atomically by the critic); those older than the
  // oldest trainer checkpoint left are removed.
  absl::Status CheckpointCritic() {
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

  // PPO resuming: the critic's checkpoint of the step the run resumes from ("" when not
  // resuming); NOT_FOUND if it is missing (the critic cannot start again from scratch unseen).
  absl::StatusOr<std::string> CriticResumeDir() const {
    if (!state_.resuming()) return std::string();
    const std::filesystem::path resume(state_.resume_dir());
    const std::string dir =
        (resume.parent_path() / "critic" / resume.filename()).lexically_normal().string();
    if (!std::filesystem::is_directory(dir)) {
      return absl::NotFoundError(absl::StrCat("--resume: ", state_.resume_dir(),
                                              " has no critic checkpoint beside it (", dir,
                                              "); recipe ppo cannot resume without its critic"));
    }
    return dir;
  }

  // The end: every call in flight finishes, its samples scored and buffered.
  absl::Status Drain() {
    // (The loop ends with no step in flight; an error ends the run without a drain.)
    if (busy()) return absl::InternalError("drain with a training step in flight");
    TROUPE_RETURN_IF_ERROR(feed_->ReturnBatch().status());
    TROUPE_RETURN_IF_ERROR(Collect(/*drain=*/true));
    TROUPE_ASSIGN_OR_RETURN(std::vector<proto::ScoreReply> scored, scoring_->Drain());
    TROUPE_RETURN_IF_ERROR(Buffer(std::move(scored)));
    state_.result().call_retries += scoring_->retries();
    // Groups lost at the very end: their prompts are given back (a resumed run draws them again),
    // offline pairs read into the buffer again. (Each round needs the buffer to die again.)
    proto::ReplayStats stats;
    do {
      TROUPE_RETURN_IF_ERROR(RegenerateLost());
      TROUPE_ASSIGN_OR_RETURN(stats, feed_->Stats());
    } while (replay_->has_lost());
    state_.RecordAccounting(stats, drawn(), nullptr);
    return absl::OkStatus();
  }

  const JobSpec& spec_;
  Cluster& cluster_;
  const RunOptions options_;
  RunState state_;
  const std::string prefix_;
  const bool ppo_;             // recipe ppo: a critic
  trainers::KlController kl_;  // the KL in the reward's coefficient (algorithm.kl_ctrl)
  std::string policy_dir_;
  Wakeup wake_;
  std::unique_ptr<PromptSource> prompts_;
  // Generate calls completed since the last step, and their prompts (rollout/prompts_per_call).
  int64_t generate_calls_ = 0, prompts_generated_ = 0;
  // Recipe dpo's data.preference_files (trained instead of generations); null otherwise.
  std::unique_ptr<OfflinePairs> pairs_;
  int64_t cache_hits_before_ = 0;
  ActorGroup replay_group_, reference_group_, checkpointer_, trainer_group_;
  ActorHandle<actors::Trainer> trainer_;
  ActorGroup critic_group_;
  std::string critic_resume_;  // the critic's checkpoint to resume from ("" = a fresh critic)
  ActorHandle<actors::Critic> critic_;
  // PPO, a restarted critic: the state it is restored from (its newest checkpoint, at first the one
  // it started from), the updates it has had (counted by this run) and those in that state.
  std::string critic_restore_dir_;
  int64_t critic_updates_ = 0, critic_saved_updates_ = 0;
  int critic_failures_ = 0;  // critic calls failed in a row
  // The critic's update request in flight (sent again after a restore), and its reply waiting for
  // the trainer's.
  std::optional<proto::TrainStepRequest> critic_request_;
  std::optional<proto::TrainStepReply> critic_reply_;
  // PPO: the batch waiting for its values, the Values call, the critic's update.
  std::optional<proto::TrainStepRequest> valued_;
  std::optional<Future<proto::ValuesReply>> valuing_;
  std::optional<Future<proto::TrainStepReply>> critic_update_;
  absl::Time values_start_;
  double values_seconds_ = 0;
  std::unique_ptr<RolloutPool> pool_;
  std::unique_ptr<ScoringPool> scoring_;
  std::unique_ptr<ReplayBufferClient> replay_;
  int64_t replay_restarts_before_ = 0;  // the lineage's, before this run
  std::unique_ptr<TrainingFeed> feed_;
  std::optional<Future<proto::TrainStepReply>> training_;
  std::vector<proto::SampleGroup> training_groups_;
  int64_t pending_ = 0;           // groups drawn, not yet sent to the trainer nor dropped (bounded)
  trainers::GroupFilter filter_;  // overlong shaping and dynamic sampling (DAPO)
  bool publish_failed_ = false;
  absl::Time train_start_;
  double reference_seconds_ = 0;
};

}  // namespace

absl::StatusOr<RunResult> RunGrpo(const JobSpec& spec, Cluster& cluster,
                                  const RunOptions& options) {
  GrpoRecipe recipe(spec, cluster, options);
  return recipe.Run();
}

TROUPE_REGISTER_RECIPE("grpo", GrpoRecipe, CheckGrpoSpec);
TROUPE_REGISTER_RECIPE("ppo", GrpoRecipe, CheckPpoSpec);
TROUPE_REGISTER_RECIPE("dpo", GrpoRecipe, CheckDpoSpec);

}  // namespace troupe::recipes
