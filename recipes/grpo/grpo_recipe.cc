#include "recipes/grpo/grpo_recipe.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "actors/reference.h"
#include "actors/replay_buffer.h"
#include "actors/reward_server.h"
#include "models/tokenizers/tokenizer.h"
#include "recipes/rl/initial_policy.h"
#include "recipes/rl/rollout_pool.h"
#include "recipes/rl/run_state.h"
#include "recipes/rl/task_prompts.h"
#include "runtime/collective/collective_group.h"
#include "runtime/status_macros.h"

namespace troupe::recipes {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// SplitMix64: per-call generation seeds from the job seed and the first prompt id.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

int64_t SampleCount(const google::protobuf::RepeatedPtrField<proto::SampleGroup>& groups) {
  int64_t n = 0;
  for (const auto& g : groups) n += g.samples_size();
  return n;
}

class GrpoRecipe : public Recipe {
 public:
  GrpoRecipe(const JobSpec& spec, Cluster& cluster, const RunOptions& options)
      : spec_(spec), cluster_(cluster), options_(options), state_(spec, options_) {
    prefix_ = options.job_id.empty() ? spec.name : options.job_id;
  }
  // The job's actors end with it (Ray's non-detached actors), whether it succeeded or not.
  ~GrpoRecipe() override { ClearWeightGroupKeys(); }

  absl::StatusOr<RunResult> Run() override {
    TROUPE_RETURN_IF_ERROR(state_.Begin());
    TROUPE_ASSIGN_OR_RETURN(policy_dir_, PrepareInitialPolicy(spec_, options_, &state_.result()));
    TROUPE_RETURN_IF_ERROR(PreparePrompts());
    TROUPE_RETURN_IF_ERROR(SpawnRoles());
    ClearWeightGroupKeys();  // the names were free: keys under this id are a dead run's
    TROUPE_ASSIGN_OR_RETURN(int64_t version, pool_->FormWeightGroup());
    state_.set_version(version);
    TROUPE_RETURN_IF_ERROR(state_.OpenMetrics());
    if (state_.result().initial_accuracy < 0) {
      TROUPE_ASSIGN_OR_RETURN(double acc, Evaluate());
      state_.RecordEval(acc, /*log=*/true);
    }
    const bool sync = spec_.async.max_staleness == 0;
    state_.Log(absl::StrCat(sync ? "synchronous" : "asynchronous",
                            " GRPO: ", spec_.trainer.total_steps - state_.step(), " steps of ",
                            spec_.data.train_batch_size, " prompts x ", spec_.algorithm.n,
                            " samples", sync ? "" : absl::StrCat(", max staleness ", eta())));
    state_.StartLoop();
    last_step_end_ = Clock::now();
    absl::Status loop = Loop();
    if (loop.ok()) loop = Drain();
    state_.result().seconds = state_.loop_seconds();
    state_.result().weight_group_epochs = pool_->epochs();
    if (!loop.ok()) {
      // Whatever checkpoints are under way still reach the disk before the actors go away.
      if (absl::Status f = state_.FlushCheckpoints(trainer_, -1); !f.ok()) state_.Log(f.ToString());
      return loop;
    }
    RunResult& r = state_.result();
    if (r.curve.empty() || r.curve.back().step != state_.step()) {
      TROUPE_ASSIGN_OR_RETURN(double acc, Evaluate());
      state_.RecordEval(acc, /*log=*/true);
    }
    const bool checkpoints = spec_.actors.checkpointer.every_steps > 0;
    if (checkpoints && !state_.checkpoint_due()) TROUPE_RETURN_IF_ERROR(Checkpoint());
    absl::Status flushed =
        checkpoints ? state_.FlushCheckpoints(trainer_, state_.step()) : absl::OkStatus();
    TROUPE_RETURN_IF_ERROR(state_.Finish());
    TROUPE_RETURN_IF_ERROR(flushed);
    return r;
  }

 private:
  int64_t eta() const { return spec_.async.max_staleness; }
  int64_t batch() const { return spec_.data.train_batch_size; }

  absl::Status PreparePrompts() {
    TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<models::Tokenizer> tok,
                            models::LoadTokenizer(policy_dir_ + "/tokenizer.json"));
    TROUPE_ASSIGN_OR_RETURN(auto dataset, MakeTaskPrompts(spec_, std::move(tok)));
    prompts_ = std::make_unique<PromptSource>(std::move(dataset));
    if (state_.resumed_state().contains("prompts")) {
      TROUPE_RETURN_IF_ERROR(prompts_->Restore(state_.resumed_state()["prompts"]));
    }
    return absl::OkStatus();
  }

  // Every role's replicas, by the type the spec names, up before the loop starts.
  absl::Status SpawnRoles() {
    auto group = [&](const ActorGroupSpec& g, const std::string& role, int replicas,
                     nlohmann::json config) -> absl::StatusOr<ActorGroup> {
      for (auto it = g.config.begin(); it != g.config.end(); ++it) config[it.key()] = it.value();
      ActorGroupOptions o{.job_id = prefix_,
                          .role = role,
                          .type_name = g.type,
                          .replicas = replicas,
                          .indexed_names = replicas > 1 || role == "rollout" || role == "reward",
                          .resources = g.resources.AsMap(),
                          .max_restarts = static_cast<int>(g.max_restarts),
                          .max_concurrency = role == "rollout" ? 3 : 1};  // Generate beside Join
      o.config = [config](int) { return config; };
      TROUPE_ASSIGN_OR_RETURN(ActorGroup spawned, ActorGroup::Spawn(cluster_, std::move(o)));
      return spawned;
    };
    const ActorsSpec& a = spec_.actors;
    state_.Log(absl::StrCat("starting actors: ", a.rollout.replicas, " rollout, ",
                            a.reward.replicas, " reward, ", spec_.algorithm.kl.coef != 0 ? 1 : 0,
                            " reference, 1 trainer, 1 replay buffer, 1 checkpointer"));
    TROUPE_ASSIGN_OR_RETURN(replay_group_, group(a.replay_buffer, "replay", 1, {}));
    TROUPE_ASSIGN_OR_RETURN(rewards_,
                            group(a.reward, "reward", std::max<int64_t>(1, a.reward.replicas),
                                  {{"task", spec_.data.task}}));
    if (spec_.algorithm.kl.coef != 0) {
      TROUPE_ASSIGN_OR_RETURN(
          reference_group_,
          group(a.reference, "reference", 1, {{"model_dir", policy_dir_}, {"threads", 1}}));
    }
    TROUPE_ASSIGN_OR_RETURN(checkpointer_,
                            group(a.checkpointer, "checkpointer", 1,
                                  {{"dir", a.checkpointer.dir}, {"keep", a.checkpointer.keep}}));
    const TrainerSpec& t = spec_.trainer;
    const AlgorithmSpec& al = spec_.algorithm;
    TROUPE_ASSIGN_OR_RETURN(
        trainer_group_,
        group(a.trainer, "trainer", 1,
              {{"model_dir", policy_dir_},
               {"resume_dir", state_.resume_dir()},
               {"lr", t.lr},
               {"warmup_steps", t.warmup_steps},
               {"total_steps", t.total_steps},
               {"min_lr_ratio", t.lr_schedule == LrSchedule::kConstant ? 1.0 : t.min_lr_ratio},
               {"weight_decay", t.weight_decay},
               {"grad_clip", t.grad_clip},
               {"seed", t.seed},
               {"threads", 1},
               {"micro_batch_size", t.micro_batch_size},
               {"clip_eps_low", al.clip_eps_low},
               {"clip_eps_high", al.clip_eps_high},
               {"kl_coef", al.kl.coef},
               {"kl_type", KlTypeName(al.kl.type)},
               {"entropy_coeff", al.entropy_coeff},
               {"loss_agg_mode", LossAggModeName(al.loss_agg_mode)},
               {"norm_adv_by_std", al.norm_adv_by_std},
               {"off_policy", OffPolicyModeName(al.off_policy.correction)},
               {"importance_cap", al.off_policy.cap},
               {"max_response_length", spec_.data.max_response_length},
               {"checkpointer", checkpointer_.name(0)}}));
    TROUPE_ASSIGN_OR_RETURN(
        ActorGroup workers,
        group(
            a.rollout, "rollout", static_cast<int>(a.rollout.replicas),
            {{"model_dir", policy_dir_},
             {"threads", 1},
             {"num_slots", std::max<int64_t>(8, batch() * al.n / a.rollout.replicas)},
             {"max_seq_len", spec_.data.max_prompt_length + spec_.data.max_response_length + 2}}));
    for (ActorGroup* g : {&replay_group_, &rewards_, &reference_group_, &checkpointer_,
                          &trainer_group_, &workers}) {
      TROUPE_RETURN_IF_ERROR(g->WaitAlive());
    }
    TROUPE_ASSIGN_OR_RETURN(replay_, replay_group_.As<actors::ReplayBuffer>(0));
    TROUPE_ASSIGN_OR_RETURN(trainer_, trainer_group_.As<actors::Trainer>(0));
    if (!reference_group_.empty()) {
      TROUPE_ASSIGN_OR_RETURN(reference_, reference_group_.As<actors::Reference>(0));
    }
    reward_dead_.assign(rewards_.size(), false);
    for (size_t i = 0; i < rewards_.size(); ++i) {
      TROUPE_ASSIGN_OR_RETURN(ActorHandle<actors::RewardServer> h,
                              rewards_.As<actors::RewardServer>(i));
      reward_handles_.push_back(std::move(h));
    }
    if (!state_.resumed_replay_state().empty()) {
      proto::ReplayState rs;
      if (!rs.ParseFromString(state_.resumed_replay_state())) {
        return absl::DataLossError(
            absl::StrCat(state_.resume_dir(), "/replay_buffer.pb is corrupt"));
      }
      TROUPE_RETURN_IF_ERROR(replay_.Call(&actors::ReplayBuffer::Import, rs).Get().status());
    }
    RolloutPoolOptions po{.group_name = absl::StrCat(prefix_, "/weights"),
                          .generate_timeout = options_.generate_timeout,
                          .eval_timeout = options_.eval_timeout,
                          .weight_group_timeout = options_.weight_group_timeout,
                          .retry = options_.retry,
                          .log = options_.log};
    pool_ = std::make_unique<RolloutPool>(cluster_, std::move(workers), trainer_, prompts_.get(),
                                          &wake_, std::move(po));
    return absl::OkStatus();
  }

  // The rendezvous keys of this job's weight groups (every epoch) in the head's KV: the trainer
  // is killed, not closed, so they would stay and a later job with this id would find them taken.
  void ClearWeightGroupKeys() {
    std::string prefix = collective::CollectiveGroup::KeyPrefix(absl::StrCat(prefix_, "/weights"));
    prefix.back() = '.';  // "collective/<id>/weights." + epoch + "/..."
    (void)cluster_.KvDelete(prefix, /*prefix=*/true);
  }

  absl::StatusOr<double> Evaluate() {
    const Clock::time_point start = Clock::now();
    TROUPE_ASSIGN_OR_RETURN(std::vector<proto::Prompt> heldout, prompts_->dataset().HeldOut());
    TROUPE_ASSIGN_OR_RETURN(auto counts,
                            pool_->Evaluate(std::move(heldout), state_.version(),
                                            static_cast<int>(spec_.rollout.max_new_tokens),
                                            &state_.result().call_retries));
    if (counts.second == 0) return absl::InternalError("evaluation produced no samples");
    const double acc = static_cast<double>(counts.first) / counts.second;
    state_.Log(absl::StrFormat(
        "eval at step %d (weights v%d): held-out exact match %.1f%% (%d/%d) in %.1fs",
        state_.step(), state_.version(), 100 * acc, counts.first, counts.second, Since(start)));
    return acc;
  }

  // ---- the loop ---------------------------------------------------------------------------------
  absl::Status Loop() {
    Clock::time_point last_usable = Clock::now(), last_restart_check = Clock::now();
    while (!(state_.Done() && !training_.has_value())) {
      TROUPE_RETURN_IF_ERROR(Collect());
      TROUPE_RETURN_IF_ERROR(Buffer());
      TROUPE_RETURN_IF_ERROR(FinishStep());
      if (state_.Done() && !training_.has_value()) break;
      if (!training_.has_value()) {  // membership changes happen between steps
        bool changed = false;
        if (Since(last_restart_check) > 0.5 || pool_->usable() == 0) {
          pool_->CheckRestarts(&changed);
          last_restart_check = Clock::now();
        }
        if (pool_->regroup_needed() || publish_failed_) {
          TROUPE_ASSIGN_OR_RETURN(int64_t version, pool_->FormWeightGroup());
          state_.set_version(version);
          publish_failed_ = false;
        }
      }
      if (pool_->usable() > 0) last_usable = Clock::now();
      if (Since(last_usable) > absl::ToDoubleSeconds(options_.no_worker_patience)) {
        return absl::UnavailableError("no rollout worker has been up for " +
                                      absl::FormatDuration(options_.no_worker_patience));
      }
      TROUPE_RETURN_IF_ERROR(NextBatch());
      TROUPE_RETURN_IF_ERROR(StartStep());
      TROUPE_RETURN_IF_ERROR(Generate());
      absl::Time next = absl::Now() + absl::Seconds(1);
      for (auto& sc : scoring_) next = std::min(next, sc.call.next_retry());
      if (next_ && next_->ref) next = std::min(next, next_->ref->next_retry());
      wake_.Wait(std::max(absl::ZeroDuration(), next - absl::Now()));
    }
    return absl::OkStatus();
  }

  // Generate: sync, one batch at the current weights once the previous step is trained; async,
  // keep every worker busy while the groups ahead of training stay within eta batches.
  absl::Status Generate() {
    if (state_.Done() || pool_->ready() == 0) return absl::OkStatus();
    const bool sync = eta() == 0;
    if (sync) {
      if (training_ || next_ || pending_ >= batch() || pool_->idle() == 0) return absl::OkStatus();
      std::vector<proto::Prompt> ps;
      for (int64_t i = pending_; i < batch(); ++i) {
        TROUPE_ASSIGN_OR_RETURN(proto::Prompt p, prompts_->Next());
        ps.push_back(std::move(p));
      }
      pending_ += static_cast<int64_t>(ps.size());
      return pool_->StartSplit(std::move(ps), [this](std::vector<proto::Prompt> part) {
        return Request(std::move(part), state_.version());
      });
    }
    const int64_t chunk = std::max<int64_t>(1, batch() / spec_.actors.rollout.replicas);
    while (pool_->idle() > 0 && pending_ + chunk <= std::max<int64_t>(1, eta()) * batch()) {
      std::vector<proto::Prompt> ps;
      for (int64_t i = 0; i < chunk; ++i) {
        TROUPE_ASSIGN_OR_RETURN(proto::Prompt p, prompts_->Next());
        ps.push_back(std::move(p));
      }
      pending_ += chunk;
      // Never older than the weights the group was (re)formed with.
      TROUPE_RETURN_IF_ERROR(pool_->Start(
          Request(std::move(ps), std::max(pool_->group_version(), state_.version() - eta()))));
    }
    return absl::OkStatus();
  }

  proto::GenerateRequest Request(std::vector<proto::Prompt> prompts, int64_t min_version) {
    proto::GenerateRequest req;
    const uint64_t first = prompts.empty() ? 0 : static_cast<uint64_t>(prompts[0].prompt_id());
    for (auto& p : prompts) *req.add_prompts() = std::move(p);
    req.set_n(static_cast<int>(spec_.algorithm.n));
    req.set_temperature(static_cast<float>(spec_.rollout.temperature));
    req.set_top_p(static_cast<float>(spec_.rollout.top_p));
    req.set_top_k(static_cast<int>(spec_.rollout.top_k));
    req.set_max_new_tokens(static_cast<int>(spec_.rollout.max_new_tokens));
    req.set_seed(Mix(static_cast<uint64_t>(spec_.trainer.seed) * 1000003 + first));
    req.set_min_weight_version(min_version);
    return req;
  }

  // Score: finished generations go to a reward server; a failed call's prompts went back.
  absl::Status Collect() {
    const int64_t before = state_.result().prompts_regenerated;
    for (Generated& g : pool_->Collect(&state_.result().prompts_regenerated)) Score(g);
    pending_ -= state_.result().prompts_regenerated - before;
    return absl::OkStatus();
  }

  // Counts a finished generation's samples (from the generators' side) and sends them to scoring.
  void Score(Generated& g) {
    RunResult& r = state_.result();
    for (const auto& group : g.reply.groups()) {
      for (const auto& s : group.samples())
        r.worker_versions[s.worker()].push_back(s.policy_version());
    }
    r.samples_generated += SampleCount(g.reply.groups());
    tokens_since_step_ += g.reply.tokens_generated();
    generate_seconds_ += g.reply.seconds();
    proto::ScoreRequest sr;
    *sr.mutable_groups() = std::move(*g.reply.mutable_groups());
    StartScoring(std::move(sr));
  }

  void StartScoring(proto::ScoreRequest sr) {
    auto req = std::make_shared<const proto::ScoreRequest>(std::move(sr));
    auto replica = std::make_shared<int>(-1);
    RetriedCall<proto::ScoreReply> call(
        [this, req, replica](int) {
          *replica = NextReward();
          if (*replica < 0) {
            return MakeReadyFuture<proto::ScoreReply>(
                absl::FailedPreconditionError("scoring: no reward server is left"));
          }
          return reward_handles_[*replica].Call(&actors::RewardServer::Score, *req,
                                                {.timeout = options_.retry.call_timeout});
        },
        {.max_attempts = options_.retry.max_attempts * static_cast<int>(rewards_.size()),
         .initial_backoff = options_.retry.initial_backoff,
         .max_backoff = options_.retry.max_backoff},
        &wake_,
        [this, replica](const absl::Status& error, int) {
          ++state_.result().call_retries;
          absl::StatusOr<proto::ActorInfo> info =
              cluster_.GetActorInfo(rewards_.handle(*replica).id());
          if (info.ok() && info->state() == proto::DEAD) reward_dead_[*replica] = true;
          state_.Log(absl::StrCat(rewards_.name(*replica), ": scoring failed (", error.ToString(),
                                  "); scoring its groups again"));
        });
    scoring_.push_back({std::move(call), req});
  }

  int NextReward() {
    for (size_t tried = 0; tried < rewards_.size(); ++tried) {
      const size_t i = next_reward_++ % rewards_.size();
      if (!reward_dead_[i]) return static_cast<int>(i);
    }
    return -1;
  }

  // Buffer: scored groups into the replay buffer.
  absl::Status Buffer() {
    for (auto it = scoring_.begin(); it != scoring_.end();) {
      std::optional<absl::StatusOr<proto::ScoreReply>> done = it->call.Poll();
      if (!done.has_value()) {
        ++it;
        continue;
      }
      TROUPE_RETURN_IF_ERROR(done->status());
      proto::ReplayAddRequest add;
      *add.mutable_groups() = std::move(*(*done)->mutable_groups());
      TROUPE_RETURN_IF_ERROR(replay_.Call(&actors::ReplayBuffer::Add, add).Get().status());
      it = scoring_.erase(it);
    }
    return absl::OkStatus();
  }

  // Reference: take the next batch (while the trainer runs a step, against the version that
  // step will produce) and start its reference log-probs.
  absl::Status NextBatch() {
    if (next_ || state_.Done()) return absl::OkStatus();
    const int64_t at = state_.version() + (training_ ? 1 : 0);
    proto::ReplayTakeRequest take;
    take.set_num_groups(static_cast<int>(batch()));
    take.set_min_groups(static_cast<int>(batch()));
    take.set_current_version(at);
    take.set_max_staleness(eta());
    TROUPE_ASSIGN_OR_RETURN(proto::ReplayTakeReply taken,
                            replay_.Call(&actors::ReplayBuffer::Take, take).Get());
    pending_ -= taken.dropped_stale() / std::max<int64_t>(1, spec_.algorithm.n);
    if (taken.groups_size() == 0) return absl::OkStatus();
    pending_ -= taken.groups_size();
    next_.emplace();
    next_->taken_at = at;
    next_->groups.assign(taken.groups().begin(), taken.groups().end());
    if (reference_.valid()) {
      auto lr = std::make_shared<proto::LogprobRequest>();
      for (const auto& g : next_->groups) {
        for (const auto& s : g.samples()) *lr->add_samples() = s;
      }
      next_->ref_start = Clock::now();
      next_->ref.emplace(
          [this, lr](int) {
            return reference_.Call(&actors::Reference::Logprobs, *lr,
                                   {.timeout = options_.retry.call_timeout});
          },
          options_.retry, &wake_,
          [this](const absl::Status& e, int) {
            ++state_.result().call_retries;
            state_.Log(absl::StrCat("reference Logprobs failed (", e.ToString(), "); retrying"));
          });
    }
    return absl::OkStatus();
  }

  // Train: the taken batch (and its reference log-probs) to the trainer.
  absl::Status StartStep() {
    if (training_ || !next_ || state_.Done()) return absl::OkStatus();
    proto::TrainStepRequest req;
    if (next_->ref) {
      std::optional<absl::StatusOr<proto::LogprobReply>> ref = next_->ref->Poll();
      if (!ref.has_value()) return absl::OkStatus();
      TROUPE_RETURN_IF_ERROR(ref->status());
      *req.mutable_ref_logprobs() = std::move(*(*ref)->mutable_logprobs());
      reference_seconds_ = Since(next_->ref_start);
    }
    req.set_step(state_.step());
    for (const auto& g : next_->groups) *req.add_groups() = g;
    training_groups_ = std::move(next_->groups);
    next_.reset();
    train_start_ = Clock::now();
    training_ = wake_.Watch(
        trainer_.Call(&actors::Trainer::Step, std::move(req), {.timeout = options_.train_timeout}));
    return absl::OkStatus();
  }

  // Publish: a finished step's weights went out with it (re-form the group if that failed);
  // metrics, evaluation and the checkpoint of the step.
  absl::Status FinishStep() {
    if (!training_ || !training_->ready()) return absl::OkStatus();
    absl::StatusOr<proto::TrainStepReply> reply = training_->Get();
    training_.reset();
    TROUPE_RETURN_IF_ERROR(reply.status());
    const int64_t previous = state_.version();
    state_.Advance(*reply);
    publish_failed_ |= reply->publish_failed();
    std::map<std::string, double> m(reply->metrics().begin(), reply->metrics().end());
    std::vector<double> staleness;
    double correct = 0, samples = 0, tokens = 0;
    RunResult& r = state_.result();
    for (const auto& g : training_groups_) {
      for (const auto& s : g.samples()) {
        staleness.push_back(static_cast<double>(previous - s.policy_version()));
        r.max_staleness_seen = std::max(r.max_staleness_seen, staleness.back());
        auto it = s.reward_components().find("correct");
        correct += it != s.reward_components().end() ? it->second : 0;
        tokens += s.response_tokens_size();
        ++samples;
      }
    }
    const double wall = Since(last_step_end_);
    last_step_end_ = Clock::now();
    m["reward/accuracy"] = samples > 0 ? correct / samples : 0;
    m["rollout/response_length"] = samples > 0 ? tokens / samples : 0;
    m["time/step_s"] = wall;
    m["time/train_s"] = Since(train_start_);
    m["time/generate_s"] = generate_seconds_;
    m["time/reference_s"] = reference_seconds_;
    m["throughput/generate_tokens_per_s"] = wall > 0 ? tokens_since_step_ / wall : 0;
    m["throughput/train_tokens_per_s"] =
        m["time/train_s"] > 0 ? m["train/tokens"] / m["time/train_s"] : 0;
    tokens_since_step_ = 0;
    generate_seconds_ = 0;
    TROUPE_RETURN_IF_ERROR(UpdateAccounting(&m));
    if (spec_.trainer.eval_every > 0 && state_.step() % spec_.trainer.eval_every == 0) {
      const Clock::time_point eval_start = Clock::now();
      TROUPE_ASSIGN_OR_RETURN(m["eval/accuracy"], Evaluate());
      m["time/eval_s"] = Since(eval_start);
      state_.RecordEval(m["eval/accuracy"], /*log=*/false);
    }
    state_.LogStep(m, {{"rollout/staleness", staleness}},
                   {{"reward", m["reward/mean"]},
                    {"acc%", 100 * std::max(0.0, r.final_accuracy)},
                    {"kl", m["train/kl"]},
                    {"v", static_cast<double>(state_.version())}});
    if (state_.checkpoint_due()) TROUPE_RETURN_IF_ERROR(Checkpoint());
    return absl::OkStatus();
  }

  absl::Status UpdateAccounting(std::map<std::string, double>* m) {
    TROUPE_ASSIGN_OR_RETURN(proto::ReplayStats stats,
                            replay_.Call(&actors::ReplayBuffer::Stats, proto::Empty()).Get());
    state_.result().accounting = stats;
    state_.result().prompts_drawn = prompts_->drawn();
    if (m != nullptr) {
      (*m)["samples/added"] = static_cast<double>(stats.added());
      (*m)["samples/used"] = static_cast<double>(stats.used());
      (*m)["samples/dropped_stale"] = static_cast<double>(stats.dropped_stale());
      (*m)["samples/buffered"] = static_cast<double>(stats.buffered());
    }
    return absl::OkStatus();
  }

  // A batch taken and not trained on goes back to the replay buffer (it is buffered, not used).
  absl::Status ReturnNextBatch() {
    if (!next_) return absl::OkStatus();
    proto::ReplayReturnRequest back;
    for (auto& g : next_->groups) *back.add_groups() = std::move(g);
    back.set_taken_at_version(next_->taken_at);
    pending_ += back.groups_size();
    next_.reset();
    return replay_.Call(&actors::ReplayBuffer::Return, back).Get().status();
  }

  // The checkpoint of the current step: the prompts (those out are drawn again by a resumed
  // run), the replay buffer's groups and counters, with the trainer's snapshot.
  absl::Status Checkpoint() {
    TROUPE_RETURN_IF_ERROR(ReturnNextBatch());
    std::vector<int64_t> out = pool_->InFlightPromptIds();
    int64_t samples_out = 0;
    for (const Scoring& sc : scoring_) {
      for (const auto& g : sc.request->groups()) out.push_back(g.prompt_id());
      samples_out += SampleCount(sc.request->groups());
    }
    TROUPE_ASSIGN_OR_RETURN(proto::ReplayState rs,
                            replay_.Call(&actors::ReplayBuffer::Export, proto::Empty()).Get());
    return state_.Checkpoint(trainer_, {{"prompts", prompts_->State(out)}}, rs.SerializeAsString(),
                             samples_out);
  }

  // The end: every call in flight finishes, its samples scored and buffered.
  absl::Status Drain() {
    if (training_) {
      TROUPE_RETURN_IF_ERROR(training_->Get().status());
      training_.reset();
    }
    TROUPE_RETURN_IF_ERROR(ReturnNextBatch());
    TROUPE_RETURN_IF_ERROR(Collect());
    for (Generated& g : pool_->Drain(&state_.result().prompts_regenerated)) Score(g);
    while (!scoring_.empty()) {
      TROUPE_RETURN_IF_ERROR(Buffer());
      if (!scoring_.empty()) wake_.Wait(absl::Milliseconds(200));
    }
    return UpdateAccounting(nullptr);
  }

  struct Scoring {
    RetriedCall<proto::ScoreReply> call;
    std::shared_ptr<const proto::ScoreRequest> request;
  };
  struct NextBatchState {
    std::vector<proto::SampleGroup> groups;
    int64_t taken_at = 0;
    std::optional<RetriedCall<proto::LogprobReply>> ref;
    Clock::time_point ref_start;
  };

  const JobSpec& spec_;
  Cluster& cluster_;
  const RunOptions options_;
  RunState state_;
  std::string prefix_;
  std::string policy_dir_;
  Wakeup wake_;
  std::unique_ptr<PromptSource> prompts_;
  ActorGroup replay_group_, rewards_, reference_group_, checkpointer_, trainer_group_;
  ActorHandle<actors::ReplayBuffer> replay_;
  ActorHandle<actors::Trainer> trainer_;
  ActorHandle<actors::Reference> reference_;
  std::unique_ptr<RolloutPool> pool_;
  std::vector<ActorHandle<actors::RewardServer>> reward_handles_;
  std::vector<bool> reward_dead_;
  size_t next_reward_ = 0;
  std::vector<Scoring> scoring_;
  std::optional<NextBatchState> next_;
  std::optional<Future<proto::TrainStepReply>> training_;
  std::vector<proto::SampleGroup> training_groups_;
  // Groups drawn and not yet trained on or dropped: bounded, so samples stay fresh.
  int64_t pending_ = 0;
  bool publish_failed_ = false;
  Clock::time_point last_step_end_, train_start_;
  int64_t tokens_since_step_ = 0;
  double generate_seconds_ = 0, reference_seconds_ = 0;
};

}  // namespace

absl::StatusOr<RunResult> RunGrpo(const JobSpec& spec, Cluster& cluster,
                                  const RunOptions& options) {
  GrpoRecipe recipe(spec, cluster, options);
  return recipe.Run();
}

TROUPE_REGISTER_RECIPE("grpo", GrpoRecipe);

}  // namespace troupe::recipes
