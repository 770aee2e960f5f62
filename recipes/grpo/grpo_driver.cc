#include "recipes/grpo/grpo_driver.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "actors/checkpointer.h"
#include "actors/reference.h"
#include "actors/replay_buffer.h"
#include "actors/reward_server.h"
#include "actors/rollout_worker.h"
#include "actors/trainer.h"
#include "models/model_config.h"
#include "models/tokenizers/tokenizer.h"
#include "nlohmann/json.hpp"
#include "recipes/metrics/metrics_logger.h"
#include "recipes/metrics/progress_line.h"
#include "recipes/sft/arithmetic_task.h"
#include "recipes/sft/sft_recipe.h"
#include "runtime/atomic_file.h"
#include "runtime/collective/collective_group.h"
#include "runtime/status_macros.h"

namespace troupe::recipes {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// SplitMix64: per-call generation seeds from the job seed and the first prompt id.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

struct Worker {
  std::string name;
  ActorHandle<actors::RolloutWorker> handle;
  std::optional<Future<proto::GenerateReply>> call;
  std::vector<proto::Prompt> in_flight;
  bool down = false;
  // Back after a restart but not yet in the weight group: no work until it joins.
  bool needs_group = false;
  int restarts_seen = 0;
};

class Driver {
 public:
  Driver(const JobSpec& spec, Cluster& cluster, const GrpoRunOptions& options)
      : spec_(spec), cluster_(cluster), options_(options) {
    prefix_ = options.job_id.empty() ? spec.name : options.job_id;
  }

  // The job's actors end with the job (Ray's non-detached actors), whether it succeeded or not.
  ~Driver() { Teardown(); }

  absl::StatusOr<GrpoResult> Run();

 private:
  void Teardown();
  void Log(const std::string& line) {
    if (options_.log) options_.log(line);
  }
  std::string Name(const std::string& role) const { return absl::StrCat(prefix_, "/", role); }

  absl::Status PrepareTask();
  absl::Status PrepareSft();
  absl::Status LoadResume();
  absl::Status SpawnActors();
  // Deletes the rendezvous keys of this job's weight groups (every epoch) from the head's KV.
  void ClearWeightGroupKeys();
  absl::Status WaitAlive(const UntypedActorHandle& h);
  // Refuses (FAILED_PRECONDITION, nothing changed) when an earlier run's outputs are there and
  // the run neither resumes nor overwrites; with overwrite, removes the earlier checkpoints.
  absl::Status CheckEarlierRun();
  absl::Status FormWeightGroup();
  absl::Status FormWeightGroupOnce();
  // Asks every worker in the group whether it is still there; marks the ones that are not.
  void ProbeWorkers();
  absl::StatusOr<double> Evaluate();
  proto::Prompt NextPrompt();
  proto::GenerateRequest MakeRequest(std::vector<proto::Prompt> prompts, bool sync);
  absl::StatusOr<std::vector<proto::SampleGroup>> ScoreGroups(
      std::vector<proto::SampleGroup> groups);
  // One Score call, retried across reward replicas and restarts (blocking).
  absl::StatusOr<proto::ScoreReply> Score(const proto::ScoreRequest& req);
  // The next reward replica that is not known to be DEAD; -1 if none is left.
  int NextReward();
  // Reference log-probs of `groups`' samples, retried across a restart (blocking).
  absl::StatusOr<proto::LogprobReply> ReferenceLogprobs(
      const std::vector<proto::SampleGroup>& groups);
  absl::StatusOr<proto::TrainStepReply> Train(std::vector<proto::SampleGroup> groups);
  absl::Status AfterStep(const proto::TrainStepReply& reply,
                         const std::vector<proto::SampleGroup>& used, double step_seconds);
  absl::Status SyncLoop();
  absl::Status AsyncLoop();
  void RecordVersions(const proto::GenerateReply& r);
  absl::Status CheckRestartedWorkers(bool* changed);
  absl::Status Checkpoint();
  // Records the trainer's report on its checkpoint writes.
  void NoteCheckpoints(const proto::CheckpointWrites& writes);
  // Waits (up to options.checkpoint_flush_timeout) until every checkpoint write of the run has
  // finished; DATA_LOSS if the checkpoint of `last_step` could not be written.
  absl::Status FlushCheckpoints(int64_t last_step);
  absl::Status WriteSummary();

  const JobSpec& spec_;
  Cluster& cluster_;
  const GrpoRunOptions options_;
  std::string prefix_;
  std::optional<ArithmeticTask> task_;
  TaskSplit prompt_split_ = TaskSplit::kPool;
  std::unique_ptr<models::Tokenizer> tokenizer_;
  std::string policy_dir_;
  std::string resume_dir_;

  ActorHandle<actors::ReplayBuffer> replay_;
  std::vector<ActorHandle<actors::RewardServer>> rewards_;
  std::optional<ActorHandle<actors::Reference>> reference_;
  ActorHandle<actors::Trainer> trainer_;
  ActorHandle<actors::Checkpointer> checkpointer_;
  std::vector<Worker> workers_;

  int64_t step_ = 0;
  int64_t version_ = 0;
  // Weight version when the weight group was last formed.
  int64_t group_version_ = 0;
  int64_t cursor_ = 0;
  int64_t epoch_ = 0;
  size_t next_reward_ = 0;
  std::vector<bool> reward_dead_;
  std::deque<proto::Prompt> requeued_;
  std::unique_ptr<metrics::MetricsLogger> metrics_;
  std::unique_ptr<metrics::ProgressLine> progress_;
  Clock::time_point loop_start_;
  Clock::time_point last_step_end_;
  int64_t tokens_since_step_ = 0;
  double generate_seconds_ = 0;
  double reference_seconds_ = 0;  // the last step's reference log-probs call
  GrpoResult result_;
  int64_t steps_this_run_ = 0;
  bool stop_requested_ = false;
};

void Driver::Teardown() {
  std::vector<UntypedActorHandle> all;
  for (auto& w : workers_) all.push_back(w.handle);
  if (trainer_.valid()) all.push_back(trainer_);
  if (reference_.has_value()) all.push_back(*reference_);
  for (auto& r : rewards_) all.push_back(r);
  if (replay_.valid()) all.push_back(replay_);
  if (checkpointer_.valid()) all.push_back(checkpointer_);
  for (const UntypedActorHandle& h : all) {
    absl::Status s = cluster_.Kill(h, /*no_restart=*/true);
    if (!s.ok()) Log(absl::StrCat("ending the job: ", s.ToString()));
  }
  ClearWeightGroupKeys();
}

void Driver::ClearWeightGroupKeys() {
  // The trainer (rank 0) is killed, not closed, so its groups' rendezvous keys stay in the head's
  // KV; a later job with the same id would find "<id>/weights.1" taken. Every epoch's keys go.
  std::string prefix = collective::CollectiveGroup::KeyPrefix(absl::StrCat(prefix_, "/weights"));
  prefix.back() = '.';  // "collective/<id>/weights." + epoch + "/..."
  absl::StatusOr<int64_t> n = cluster_.KvDelete(prefix, /*prefix=*/true);
  if (!n.ok()) Log(absl::StrCat("clearing the weight groups' keys: ", n.status().ToString()));
}

absl::Status Driver::PrepareTask() {
  if (spec_.data.task != "arithmetic") {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.task: the GRPO recipe runs the arithmetic task, not '", spec_.data.task, "'"));
  }
  ArithmeticTaskOptions o;
  o.digits = spec_.data.task_params.value("digits", 2);
  o.num_train = spec_.data.task_params.value("num_train", 0);
  o.dropped_carry_rate = spec_.data.task_params.value("dropped_carry_rate", 0.0);
  o.num_heldout = spec_.data.heldout_size;
  o.seed = static_cast<uint64_t>(spec_.data.seed);
  TROUPE_ASSIGN_OR_RETURN(ArithmeticTask task, ArithmeticTask::Create(o));
  task_.emplace(std::move(task));
  // RL prompts: problems in neither split if there are any, else the SFT problems themselves
  // (the reward checks the true answer, whatever the SFT targets said).
  prompt_split_ = task_->size(TaskSplit::kPool) > 0 ? TaskSplit::kPool : TaskSplit::kTrain;
  return absl::OkStatus();
}

absl::Status Driver::PrepareSft() {
  if (spec_.model.init == ModelInit::kPath) {
    policy_dir_ = spec_.model.init_path;
    return absl::OkStatus();
  }
  policy_dir_ = spec_.sft.dir;
  result_.sft_dir = policy_dir_;
  if (fs::exists(policy_dir_ + "/model.safetensors") &&
      fs::exists(policy_dir_ + "/tokenizer.json")) {
    Log(absl::StrCat("SFT warm start: using the checkpoint in ", policy_dir_));
    try {
      result_.sft_accuracy = nlohmann::json::parse(ReadAll(policy_dir_ + "/sft_metrics.json"))
                                 .value("final_heldout_accuracy", -1.0);
    } catch (...) {
    }
    return absl::OkStatus();
  }
  if (spec_.model.init == ModelInit::kRandom) {
    return absl::UnimplementedError(
        "model.init: random is not supported by the GRPO recipe; use sft");
  }
  SftOptions o;
  o.task.digits = spec_.data.task_params.value("digits", 2);
  o.task.num_train = spec_.data.task_params.value("num_train", 0);
  o.task.dropped_carry_rate = spec_.data.task_params.value("dropped_carry_rate", 0.0);
  o.task.num_heldout = spec_.data.heldout_size;
  o.task.seed = static_cast<uint64_t>(spec_.data.seed);
  TROUPE_ASSIGN_OR_RETURN(o.model, models::LoadModelConfig(spec_.model.config));
  o.steps = spec_.sft.steps;
  o.batch_size = spec_.sft.batch_size;
  o.learning_rate = spec_.sft.lr;
  o.warmup_steps = spec_.sft.warmup_steps;
  o.min_lr_ratio = spec_.sft.min_lr_ratio;
  o.weight_decay = spec_.sft.weight_decay;
  o.max_grad_norm = spec_.sft.grad_clip;
  o.eval_every = spec_.sft.eval_every;
  o.target_accuracy = spec_.sft.target_accuracy;
  o.cancelled = options_.should_stop;
  o.seed = static_cast<uint64_t>(spec_.trainer.seed);
  o.out_dir = policy_dir_;
  Log(absl::StrCat("SFT warm start: training ", spec_.model.config, " for up to ", o.steps,
                   " steps into ", policy_dir_));
  TROUPE_ASSIGN_OR_RETURN(SftResult sft,
                          RunSft(o, [this](const std::string& l) { Log("  sft: " + l); }));
  result_.sft_accuracy = sft.final_accuracy;
  Log(absl::StrFormat("SFT done: held-out exact match %.1f%% after %d steps",
                      100 * sft.final_accuracy, sft.steps));
  return absl::OkStatus();
}

absl::Status Driver::LoadResume() {
  if (!options_.resume) return absl::OkStatus();
  absl::StatusOr<std::string> latest = actors::LatestCheckpoint(spec_.actors.checkpointer.dir);
  if (!latest.ok()) {
    return absl::NotFoundError(absl::StrCat("--resume: ", latest.status().message()));
  }
  resume_dir_ = *latest;
  try {
    nlohmann::json st = nlohmann::json::parse(ReadAll(resume_dir_ + "/driver_state.json"));
    step_ = st.at("step").get<int64_t>();
    version_ = st.at("weight_version").get<int64_t>();
    cursor_ = st.at("cursor").get<int64_t>();
    result_.initial_accuracy = st.value("initial_accuracy", -1.0);
    for (const auto& p : st.value("curve", nlohmann::json::array())) {
      result_.curve.push_back({p.at("step").get<int64_t>(), p.at("accuracy").get<double>(),
                               p.at("seconds").get<double>()});
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat(resume_dir_, "/driver_state.json: ", e.what()));
  }
  Log(absl::StrCat("resuming from ", resume_dir_, " (step ", step_, ", weights v", version_, ")"));
  return absl::OkStatus();
}

absl::Status Driver::WaitAlive(const UntypedActorHandle& h) {
  TROUPE_ASSIGN_OR_RETURN(proto::ActorInfo info, cluster_.GetActorInfo(h.id(), absl::Minutes(3)));
  if (info.state() != proto::ALIVE) {
    return absl::FailedPreconditionError(absl::StrCat("actor ", info.spec().type_name(), " '",
                                                      info.spec().name(),
                                                      "' did not start: ", info.status_message()));
  }
  return absl::OkStatus();
}

absl::Status Driver::SpawnActors() {
  auto opts = [&](const ActorGroupSpec& g, const std::string& name, nlohmann::json config) {
    ClusterActorOptions o;
    o.name = name;
    o.resources = g.resources.AsMap();
    o.max_restarts = static_cast<int>(g.max_restarts);
    for (auto it = g.config.begin(); it != g.config.end(); ++it) config[it.key()] = it.value();
    o.config = std::move(config);
    o.job_id = prefix_;
    o.default_call_timeout = absl::Minutes(10);
    return o;
  };
  const int threads = 1;
  TROUPE_ASSIGN_OR_RETURN(replay_, cluster_.Spawn<actors::ReplayBuffer>(
                                       opts(spec_.actors.replay_buffer, Name("replay"), {})));
  for (int64_t i = 0; i < std::max<int64_t>(1, spec_.actors.reward.replicas); ++i) {
    TROUPE_ASSIGN_OR_RETURN(auto r, cluster_.Spawn<actors::RewardServer>(
                                        opts(spec_.actors.reward, Name(absl::StrCat("reward-", i)),
                                             {{"task", "arithmetic"}})));
    rewards_.push_back(r);
  }
  if (spec_.algorithm.kl.coef != 0) {
    TROUPE_ASSIGN_OR_RETURN(auto ref, cluster_.Spawn<actors::Reference>(opts(
                                          spec_.actors.reference, Name("reference"),
                                          {{"model_dir", policy_dir_}, {"threads", threads}})));
    reference_ = ref;
  }
  TROUPE_ASSIGN_OR_RETURN(
      checkpointer_,
      cluster_.Spawn<actors::Checkpointer>(opts(
          spec_.actors.checkpointer, Name("checkpointer"),
          {{"dir", spec_.actors.checkpointer.dir}, {"keep", spec_.actors.checkpointer.keep}})));
  nlohmann::json tc = {
      {"model_dir", policy_dir_},
      {"resume_dir", resume_dir_},
      {"lr", spec_.trainer.lr},
      {"warmup_steps", spec_.trainer.warmup_steps},
      {"total_steps", spec_.trainer.total_steps},
      {"min_lr_ratio",
       spec_.trainer.lr_schedule == LrSchedule::kConstant ? 1.0 : spec_.trainer.min_lr_ratio},
      {"weight_decay", spec_.trainer.weight_decay},
      {"grad_clip", spec_.trainer.grad_clip},
      {"seed", spec_.trainer.seed},
      {"threads", threads},
      {"clip_eps_low", spec_.algorithm.clip_eps_low},
      {"clip_eps_high", spec_.algorithm.clip_eps_high},
      {"kl_coef", spec_.algorithm.kl.coef},
      {"kl_type", KlTypeName(spec_.algorithm.kl.type)},
      {"entropy_coeff", spec_.algorithm.entropy_coeff},
      {"loss_agg_mode", LossAggModeName(spec_.algorithm.loss_agg_mode)},
      {"norm_adv_by_std", spec_.algorithm.norm_adv_by_std},
      {"off_policy", OffPolicyModeName(spec_.algorithm.off_policy.correction)},
      {"importance_cap", spec_.algorithm.off_policy.cap},
      {"max_response_length", spec_.data.max_response_length},
      {"checkpointer", Name("checkpointer")}};
  TROUPE_ASSIGN_OR_RETURN(
      trainer_, cluster_.Spawn<actors::Trainer>(opts(spec_.actors.trainer, Name("trainer"), tc)));
  for (int64_t i = 0; i < spec_.actors.rollout.replicas; ++i) {
    ClusterActorOptions o =
        opts(spec_.actors.rollout, Name(absl::StrCat("rollout-", i)),
             {{"model_dir", policy_dir_},
              {"threads", threads},
              {"num_slots", std::max<int64_t>(8, spec_.data.train_batch_size * spec_.algorithm.n /
                                                     spec_.actors.rollout.replicas)},
              {"max_seq_len", spec_.data.max_prompt_length + spec_.data.max_response_length + 2}});
    o.max_concurrency = 3;  // Generate beside JoinWeightGroup and Status
    TROUPE_ASSIGN_OR_RETURN(auto h, cluster_.Spawn<actors::RolloutWorker>(o));
    workers_.push_back({o.name, h});
  }
  // Everyone up before the loop starts (a constructor error ends the job here, with its reason).
  TROUPE_RETURN_IF_ERROR(WaitAlive(replay_));
  for (auto& r : rewards_) TROUPE_RETURN_IF_ERROR(WaitAlive(r));
  if (reference_.has_value()) TROUPE_RETURN_IF_ERROR(WaitAlive(*reference_));
  TROUPE_RETURN_IF_ERROR(WaitAlive(checkpointer_));
  TROUPE_RETURN_IF_ERROR(WaitAlive(trainer_));
  for (auto& w : workers_) TROUPE_RETURN_IF_ERROR(WaitAlive(w.handle));
  return absl::OkStatus();
}

absl::Status Driver::FormWeightGroup() {
  absl::Status last;
  const int attempts = std::max(1, options_.retry.max_attempts);
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    last = FormWeightGroupOnce();
    if (last.ok() || attempt == attempts) break;
    // A member died while the group formed (or had died unnoticed): find out who is still
    // there and form the group again without the ones that are gone.
    Log(absl::StrCat("forming the weight group failed (", last.ToString(),
                     "); checking the rollout workers and trying again"));
    ProbeWorkers();
    bool changed = false;
    TROUPE_RETURN_IF_ERROR(CheckRestartedWorkers(&changed));
    absl::SleepFor(Backoff(options_.retry, attempt + 1));
  }
  return last;
}

void Driver::ProbeWorkers() {
  for (auto& w : workers_) {
    if (w.down) continue;
    absl::StatusOr<proto::WorkerStatus> st =
        w.handle.Call(&actors::RolloutWorker::Status, proto::Empty(), {.timeout = absl::Seconds(5)})
            .Get();
    if (!st.ok()) {
      Log(absl::StrCat(w.name, " does not answer (", st.status().ToString(), ")"));
      w.down = true;
    }
  }
}

absl::Status Driver::FormWeightGroupOnce() {
  ++epoch_;
  ++result_.weight_group_epochs;
  std::vector<Worker*> members;
  for (auto& w : workers_) {
    if (!w.down) members.push_back(&w);
  }
  const int world = static_cast<int>(members.size()) + 1;
  const std::string group = absl::StrCat(prefix_, "/weights");
  for (size_t i = 0; i < members.size(); ++i) {
    proto::JoinWeightGroupRequest req;
    req.set_group_name(group);
    req.set_epoch(epoch_);
    req.set_rank(static_cast<int>(i) + 1);
    req.set_world_size(world);
    absl::StatusOr<proto::JoinWeightGroupReply> r =
        members[i]
            ->handle
            .Call(&actors::RolloutWorker::JoinWeightGroup, req, {.timeout = absl::Seconds(30)})
            .Get();
    if (!r.ok()) return r.status();
  }
  proto::JoinWeightGroupRequest req;
  req.set_group_name(group);
  req.set_epoch(epoch_);
  req.set_rank(0);
  req.set_world_size(world);
  absl::StatusOr<proto::JoinWeightGroupReply> r =
      trainer_.Call(&actors::Trainer::JoinWeightGroup, req, {.timeout = absl::Minutes(3)}).Get();
  if (!r.ok()) return r.status();
  version_ = r->weight_version();
  group_version_ = version_;
  for (Worker* w : members) w->needs_group = false;
  Log(absl::StrCat("weight group epoch ", epoch_, ": trainer + ", members.size(),
                   " rollout workers at v", version_));
  return absl::OkStatus();
}

proto::Prompt Driver::NextPrompt() {
  if (!requeued_.empty()) {
    proto::Prompt p = std::move(requeued_.front());
    requeued_.pop_front();
    return p;
  }
  const int64_t id = cursor_++;
  ArithmeticProblem problem = task_->Problem(prompt_split_, id % task_->size(prompt_split_));
  proto::Prompt p;
  p.set_prompt_id(id);
  p.set_text(problem.prompt);
  p.set_reference_answer(problem.answer);
  p.add_tokens(tokenizer_->bos_id().value_or(1));
  absl::StatusOr<std::vector<int32_t>> ids = tokenizer_->Encode(problem.prompt);
  if (ids.ok()) {
    for (int32_t t : *ids) p.add_tokens(t);
  }
  return p;
}

proto::GenerateRequest Driver::MakeRequest(std::vector<proto::Prompt> prompts, bool sync) {
  proto::GenerateRequest req;
  const uint64_t first = prompts.empty() ? 0 : static_cast<uint64_t>(prompts[0].prompt_id());
  for (auto& p : prompts) *req.add_prompts() = std::move(p);
  req.set_n(static_cast<int>(spec_.algorithm.n));
  req.set_temperature(static_cast<float>(spec_.rollout.temperature));
  req.set_top_p(static_cast<float>(spec_.rollout.top_p));
  req.set_top_k(static_cast<int>(spec_.rollout.top_k));
  req.set_max_new_tokens(static_cast<int>(spec_.rollout.max_new_tokens));
  req.set_seed(Mix(static_cast<uint64_t>(spec_.trainer.seed) * 1000003 + first));
  // Synchronous: exactly the current weights. Asynchronous: never older than the weights the
  // group was (re)formed with, so a restarted worker does not generate with its initial ones.
  req.set_min_weight_version(sync ? version_
                                  : std::max(group_version_, version_ - spec_.async.max_staleness));
  return req;
}

absl::StatusOr<double> Driver::Evaluate() {
  const Clock::time_point start = Clock::now();
  std::vector<ArithmeticProblem> problems = task_->Problems(TaskSplit::kHeldout);
  std::vector<proto::Prompt> remaining;
  for (size_t i = 0; i < problems.size(); ++i) {
    proto::Prompt p;
    p.set_prompt_id(static_cast<int64_t>(i));
    p.set_reference_answer(problems[i].answer);
    p.add_tokens(tokenizer_->bos_id().value_or(1));
    TROUPE_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer_->Encode(problems[i].prompt));
    for (int32_t t : ids) p.add_tokens(t);
    remaining.push_back(std::move(p));
  }
  int64_t correct = 0, total = 0;
  // A worker that died or restarted since the last step fails its share; that share goes to the
  // others (after the group is re-formed with whoever is back), a bounded number of times.
  const int max_rounds = std::max(1, options_.retry.max_attempts);
  for (int round = 1; !remaining.empty(); ++round) {
    if (round > max_rounds) {
      return absl::UnavailableError(absl::StrCat("evaluation: ", remaining.size(),
                                                 " held-out prompts still unanswered after ",
                                                 max_rounds, " rounds"));
    }
    bool regroup = false;
    for (const auto& w : workers_) regroup |= !w.down && w.needs_group;
    if (round > 1) {
      bool changed = false;
      TROUPE_RETURN_IF_ERROR(CheckRestartedWorkers(&changed));
      regroup |= changed;
    }
    if (regroup) TROUPE_RETURN_IF_ERROR(FormWeightGroup());
    std::vector<Worker*> alive;
    for (auto& w : workers_) {
      if (!w.down && !w.needs_group) alive.push_back(&w);
    }
    if (alive.empty()) {
      if (round == max_rounds) return absl::UnavailableError("evaluation: no rollout worker is up");
      absl::SleepFor(Backoff(options_.retry, round + 1));
      continue;
    }
    const size_t per = (remaining.size() + alive.size() - 1) / alive.size();
    std::vector<std::pair<Worker*, std::vector<proto::Prompt>>> parts;
    std::vector<Future<proto::GenerateReply>> calls;
    for (size_t w = 0; w < alive.size() && w * per < remaining.size(); ++w) {
      std::vector<proto::Prompt> part(
          remaining.begin() + w * per,
          remaining.begin() + std::min(remaining.size(), (w + 1) * per));
      proto::GenerateRequest req;
      for (const proto::Prompt& p : part) *req.add_prompts() = p;
      req.set_n(1);
      req.set_greedy(true);
      req.set_max_new_tokens(static_cast<int>(spec_.rollout.max_new_tokens));
      req.set_min_weight_version(version_);
      calls.push_back(alive[w]->handle.Call(&actors::RolloutWorker::Generate, req,
                                            {.timeout = absl::Minutes(5)}));
      parts.emplace_back(alive[w], std::move(part));
    }
    remaining.clear();
    for (size_t i = 0; i < calls.size(); ++i) {
      absl::StatusOr<proto::GenerateReply> r = calls[i].Get();
      Worker* w = parts[i].first;
      if (!r.ok()) {
        Log(absl::StrCat(w->name, ": evaluation failed (", r.status().ToString(), "); its ",
                         parts[i].second.size(), " prompts go to the other workers"));
        if (r.status().code() == absl::StatusCode::kFailedPrecondition) {
          w->needs_group = true;  // restarted: alive, but outside the weight group
        } else {
          w->down = true;
        }
        ++result_.call_retries;
        for (proto::Prompt& p : parts[i].second) remaining.push_back(std::move(p));
        continue;
      }
      for (const auto& g : r->groups()) {
        for (const auto& s : g.samples()) {
          ++total;
          correct += s.finish_reason() == "stop" && s.response_text() == s.reference_answer();
        }
      }
    }
  }
  if (total == 0) return absl::InternalError("evaluation produced no samples");
  const double acc = static_cast<double>(correct) / total;
  Log(absl::StrFormat("eval at step %d (weights v%d): held-out exact match %.1f%% (%d/%d) in %.1fs",
                      step_, version_, 100 * acc, correct, total, Seconds(start)));
  return acc;
}

void Driver::RecordVersions(const proto::GenerateReply& r) {
  for (const auto& g : r.groups()) {
    for (const auto& s : g.samples()) {
      result_.worker_versions[s.worker()].push_back(s.policy_version());
      ++result_.samples_generated;
    }
  }
}

int Driver::NextReward() {
  for (size_t tried = 0; tried < rewards_.size(); ++tried) {
    const size_t i = next_reward_++ % rewards_.size();
    if (!reward_dead_[i]) return static_cast<int>(i);
  }
  return -1;
}

absl::StatusOr<proto::ScoreReply> Driver::Score(const proto::ScoreRequest& req) {
  absl::Status last = absl::UnavailableError("no reward server is left");
  for (int i = NextReward(); i >= 0; i = NextReward()) {
    absl::StatusOr<proto::ScoreReply> r =
        CallWithRetry(cluster_, rewards_[i], &actors::RewardServer::Score, req, options_.retry,
                      absl::StrCat("reward-", i, " Score"), options_.log, &result_.call_retries);
    if (r.ok()) return r;
    // Still failing after every attempt, or DEAD: the other replicas take its work. Any other
    // error is the request's, and another replica would fail it too.
    const bool replica_gone =
        IsRetryable(r.status()) || r.status().code() == absl::StatusCode::kFailedPrecondition;
    if (!replica_gone) return r.status();
    last = r.status();
    reward_dead_[i] = true;
    Log(absl::StrCat("reward-", i, " is out of the job: ", last.ToString()));
  }
  return absl::UnavailableError(
      absl::StrCat("scoring: no reward server is left (last error: ", last.ToString(), ")"));
}

absl::StatusOr<std::vector<proto::SampleGroup>> Driver::ScoreGroups(
    std::vector<proto::SampleGroup> groups) {
  proto::ScoreRequest req;
  for (auto& g : groups) *req.add_groups() = std::move(g);
  TROUPE_ASSIGN_OR_RETURN(proto::ScoreReply r, Score(req));
  return std::vector<proto::SampleGroup>(r.groups().begin(), r.groups().end());
}

absl::StatusOr<proto::LogprobReply> Driver::ReferenceLogprobs(
    const std::vector<proto::SampleGroup>& groups) {
  proto::LogprobRequest lr;
  for (const auto& g : groups) {
    for (const auto& s : g.samples()) *lr.add_samples() = s;
  }
  const Clock::time_point start = Clock::now();
  absl::StatusOr<proto::LogprobReply> ref =
      CallWithRetry(cluster_, *reference_, &actors::Reference::Logprobs, lr, options_.retry,
                    "reference Logprobs", options_.log, &result_.call_retries);
  reference_seconds_ = Seconds(start);
  return ref;
}

absl::StatusOr<proto::TrainStepReply> Driver::Train(std::vector<proto::SampleGroup> groups) {
  proto::TrainStepRequest req;
  req.set_step(step_);
  if (reference_.has_value()) {
    TROUPE_ASSIGN_OR_RETURN(proto::LogprobReply ref, ReferenceLogprobs(groups));
    *req.mutable_ref_logprobs() = std::move(*ref.mutable_logprobs());
  }
  for (auto& g : groups) *req.add_groups() = std::move(g);
  return trainer_.Call(&actors::Trainer::Step, req).Get(absl::Minutes(10));
}

absl::Status Driver::AfterStep(const proto::TrainStepReply& reply,
                               const std::vector<proto::SampleGroup>& used, double step_seconds) {
  const int64_t previous_version = version_;
  version_ = reply.weight_version();
  ++step_;
  ++steps_this_run_;
  std::map<std::string, double> m(reply.metrics().begin(), reply.metrics().end());
  std::vector<double> staleness;
  double correct = 0, samples = 0, response_tokens = 0;
  for (const auto& g : used) {
    for (const auto& s : g.samples()) {
      const double st = static_cast<double>(previous_version - s.policy_version());
      staleness.push_back(st);
      result_.max_staleness_seen = std::max(result_.max_staleness_seen, st);
      auto it = s.reward_components().find("correct");
      correct += it != s.reward_components().end() ? it->second : 0;
      response_tokens += s.response_tokens_size();
      ++samples;
    }
  }
  m["reward/accuracy"] = samples > 0 ? correct / samples : 0;
  m["rollout/response_length"] = samples > 0 ? response_tokens / samples : 0;
  m["weights/version"] = static_cast<double>(version_);
  const double wall = std::chrono::duration<double>(Clock::now() - last_step_end_).count();
  last_step_end_ = Clock::now();
  m["time/step_s"] = wall;
  m["time/train_s"] = step_seconds;
  m["throughput/generate_tokens_per_s"] = wall > 0 ? tokens_since_step_ / wall : 0;
  m["throughput/train_tokens_per_s"] = step_seconds > 0 ? m["train/tokens"] / step_seconds : 0;
  m["time/generate_s"] = generate_seconds_;
  m["time/reference_s"] = reference_seconds_;
  tokens_since_step_ = 0;
  generate_seconds_ = 0;
  absl::StatusOr<proto::ReplayStats> stats =
      replay_.Call(&actors::ReplayBuffer::Stats, proto::Empty()).Get();
  if (stats.ok()) {
    result_.accounting = *stats;
    m["samples/added"] = static_cast<double>(stats->added());
    m["samples/used"] = static_cast<double>(stats->used());
    m["samples/dropped_stale"] = static_cast<double>(stats->dropped_stale());
    m["samples/buffered"] = static_cast<double>(stats->buffered());
  }
  if (spec_.trainer.eval_every > 0 && step_ % spec_.trainer.eval_every == 0) {
    const Clock::time_point eval_start = Clock::now();
    TROUPE_ASSIGN_OR_RETURN(double acc, Evaluate());
    m["eval/accuracy"] = acc;
    m["time/eval_s"] = Seconds(eval_start);
    result_.curve.push_back({step_, acc, Seconds(loop_start_)});
    result_.final_accuracy = acc;
    if (options_.stop_at_accuracy > 0 && acc >= options_.stop_at_accuracy) stop_requested_ = true;
  }
  if (metrics_ != nullptr) {
    (void)metrics_->Log(step_, m, {{"rollout/staleness", staleness}});
  }
  if (progress_ != nullptr) {
    progress_->Update(step_, {{"reward", m["reward/mean"]},
                              {"acc%", 100 * std::max(0.0, result_.final_accuracy)},
                              {"kl", m["train/kl"]},
                              {"v", static_cast<double>(version_)}});
  }
  NoteCheckpoints(reply.checkpoints());
  if (options_.on_step) options_.on_step(step_, m);
  if (spec_.actors.checkpointer.every_steps > 0 &&
      step_ % spec_.actors.checkpointer.every_steps == 0) {
    // Handed over asynchronously; the end of the run waits for every write (FlushCheckpoints).
    TROUPE_RETURN_IF_ERROR(Checkpoint());
  }
  return absl::OkStatus();
}

absl::Status Driver::Checkpoint() {
  nlohmann::json st = {{"step", step_},
                       {"weight_version", version_},
                       {"cursor", cursor_ - static_cast<int64_t>(requeued_.size())},
                       {"initial_accuracy", result_.initial_accuracy}};
  nlohmann::json curve = nlohmann::json::array();
  for (const RlEvalPoint& p : result_.curve) {
    curve.push_back({{"step", p.step}, {"accuracy", p.accuracy}, {"seconds", p.seconds}});
  }
  st["curve"] = curve;
  proto::CheckpointRequest req;
  req.set_step(step_);
  req.set_driver_state_json(st.dump(2));
  TROUPE_ASSIGN_OR_RETURN(proto::CheckpointReply r,
                          trainer_.Call(&actors::Trainer::Checkpoint, req).Get(absl::Minutes(5)));
  return absl::OkStatus();
}

void Driver::NoteCheckpoints(const proto::CheckpointWrites& writes) {
  result_.checkpoints_written += writes.written_steps_size();
  result_.checkpoint_retries = std::max(result_.checkpoint_retries, writes.retries());
  for (const std::string& f : writes.failures()) {
    Log(absl::StrCat("CHECKPOINT LOST: the trainer gave up writing the checkpoint of ", f));
    result_.checkpoint_failures.push_back(f);
  }
}

absl::Status Driver::FlushCheckpoints(int64_t last_step) {
  const Clock::time_point start = Clock::now();
  const double limit = absl::ToDoubleSeconds(options_.checkpoint_flush_timeout);
  for (int round = 1;; ++round) {
    absl::StatusOr<proto::CheckpointWrites> w =
        trainer_.Call(&actors::Trainer::FlushCheckpoints, proto::Empty())
            .Get(options_.checkpoint_flush_timeout);
    if (!w.ok()) {
      return absl::Status(w.status().code(), absl::StrCat("waiting for the checkpoint writes: ",
                                                          w.status().message()));
    }
    NoteCheckpoints(*w);
    if (w->pending_steps().empty()) break;
    if (Seconds(start) > limit) {
      return absl::DeadlineExceededError(
          absl::StrCat("checkpoints of steps ", absl::StrJoin(w->pending_steps(), ", "),
                       " still not written after ", static_cast<int>(limit), " s"));
    }
    Log(absl::StrCat("waiting for the checkpoint(s) of step ",
                     absl::StrJoin(w->pending_steps(), ", "),
                     " to be written again (the checkpointer failed)"));
    absl::SleepFor(Backoff(options_.retry, round + 1));
  }
  const std::string prefix = absl::StrCat("step ", last_step, ":");
  for (const std::string& f : result_.checkpoint_failures) {
    if (absl::StartsWith(f, prefix)) {
      return absl::DataLossError(absl::StrCat("the run's last checkpoint was not written: ", f));
    }
  }
  return absl::OkStatus();
}

absl::Status Driver::CheckRestartedWorkers(bool* changed) {
  *changed = false;
  for (auto& w : workers_) {
    if (!w.down) continue;
    absl::StatusOr<proto::ActorInfo> info = cluster_.GetActorInfo(w.handle.id());
    if (!info.ok() || info->state() != proto::ALIVE) continue;  // DEAD stays down
    // ALIVE and answering (a restarted instance, or one that only looked dead): back in, once it
    // has joined the weight group.
    absl::StatusOr<proto::WorkerStatus> st =
        w.handle.Call(&actors::RolloutWorker::Status, proto::Empty(), {.timeout = absl::Seconds(5)})
            .Get();
    if (!st.ok()) continue;
    w.restarts_seen = info->num_restarts();
    w.down = false;
    w.needs_group = true;
    *changed = true;
    Log(absl::StrCat(w.name, " is back (restarts: ", w.restarts_seen, ")"));
  }
  return absl::OkStatus();
}

absl::Status Driver::SyncLoop() {
  const int64_t batch = spec_.data.train_batch_size;
  while (step_ < spec_.trainer.total_steps &&
         (options_.stop_after_steps == 0 || steps_this_run_ < options_.stop_after_steps) &&
         !stop_requested_ && !(options_.should_stop && options_.should_stop())) {
    const Clock::time_point gen_start = Clock::now();
    // Prompts of this step, split across the workers that are up (deterministically by index).
    std::vector<proto::Prompt> prompts;
    for (int64_t i = 0; i < batch; ++i) prompts.push_back(NextPrompt());
    std::vector<proto::SampleGroup> groups;
    while (!prompts.empty()) {
      std::vector<Worker*> up;
      for (auto& w : workers_) {
        if (!w.down && !w.needs_group) up.push_back(&w);
      }
      if (up.empty()) {
        // Every worker is down: wait (bounded) for one to come back from a restart.
        const Clock::time_point since = Clock::now();
        const double patience = absl::ToDoubleSeconds(options_.retry.restart_wait);
        bool changed = false;
        for (int round = 2; !changed; ++round) {
          if (Seconds(since) > patience) {
            return absl::UnavailableError(
                absl::StrCat("every rollout worker is down, and none came back within ",
                             static_cast<int>(patience), " s"));
          }
          absl::SleepFor(Backoff(options_.retry, round));
          TROUPE_RETURN_IF_ERROR(CheckRestartedWorkers(&changed));
        }
        TROUPE_RETURN_IF_ERROR(FormWeightGroup());
        continue;
      }
      const size_t per = (prompts.size() + up.size() - 1) / up.size();
      std::vector<std::pair<Worker*, std::vector<proto::Prompt>>> parts;
      for (size_t i = 0; i < up.size() && i * per < prompts.size(); ++i) {
        parts.emplace_back(up[i], std::vector<proto::Prompt>(
                                      prompts.begin() + i * per,
                                      prompts.begin() + std::min(prompts.size(), (i + 1) * per)));
      }
      std::vector<Future<proto::GenerateReply>> calls;
      for (auto& [w, ps] : parts) {
        calls.push_back(w->handle.Call(&actors::RolloutWorker::Generate, MakeRequest(ps, true),
                                       {.timeout = absl::Minutes(10)}));
      }
      prompts.clear();
      bool lost = false;
      for (size_t i = 0; i < calls.size(); ++i) {
        absl::StatusOr<proto::GenerateReply> r = calls[i].Get();
        if (!r.ok()) {
          Log(absl::StrCat(parts[i].first->name, ": generation failed (", r.status().ToString(),
                           "); its ", parts[i].second.size(), " prompts go to the other workers"));
          if (r.status().code() == absl::StatusCode::kFailedPrecondition) {
            parts[i].first->needs_group = true;  // restarted while idle
          } else {
            parts[i].first->down = true;
          }
          result_.prompts_regenerated += static_cast<int64_t>(parts[i].second.size());
          for (auto& p : parts[i].second) prompts.push_back(std::move(p));
          lost = true;
          continue;
        }
        RecordVersions(*r);
        tokens_since_step_ += r->tokens_generated();
        generate_seconds_ += r->seconds();
        for (auto& g : *r->mutable_groups()) groups.push_back(std::move(g));
      }
      if (lost) {
        bool changed;
        TROUPE_RETURN_IF_ERROR(CheckRestartedWorkers(&changed));
        TROUPE_RETURN_IF_ERROR(FormWeightGroup());
      }
    }
    (void)gen_start;
    TROUPE_ASSIGN_OR_RETURN(std::vector<proto::SampleGroup> scored, ScoreGroups(std::move(groups)));
    proto::ReplayAddRequest add;
    for (auto& g : scored) *add.add_groups() = std::move(g);
    TROUPE_RETURN_IF_ERROR(replay_.Call(&actors::ReplayBuffer::Add, add).Get().status());
    proto::ReplayTakeRequest take;
    take.set_num_groups(static_cast<int>(batch));
    take.set_current_version(version_);
    take.set_max_staleness(0);
    TROUPE_ASSIGN_OR_RETURN(proto::ReplayTakeReply taken,
                            replay_.Call(&actors::ReplayBuffer::Take, take).Get());
    std::vector<proto::SampleGroup> used(taken.groups().begin(), taken.groups().end());
    const Clock::time_point train_start = Clock::now();
    TROUPE_ASSIGN_OR_RETURN(proto::TrainStepReply reply, Train(used));
    TROUPE_RETURN_IF_ERROR(AfterStep(reply, used, Seconds(train_start)));
    bool changed = false;
    TROUPE_RETURN_IF_ERROR(CheckRestartedWorkers(&changed));
    if (reply.publish_failed() || changed) TROUPE_RETURN_IF_ERROR(FormWeightGroup());
  }
  return absl::OkStatus();
}

absl::Status Driver::AsyncLoop() {
  const int64_t batch = spec_.data.train_batch_size;
  const int64_t eta = spec_.async.max_staleness;
  const int64_t n = spec_.algorithm.n;
  const int64_t chunk =
      std::max<int64_t>(1, batch / std::max<int64_t>(1, spec_.actors.rollout.replicas));
  // Groups launched and not yet trained on or dropped: bounded (below), so samples stay fresh.
  int64_t pending_groups = 0;
  // A Score call in flight, or waiting to be sent again after its reward server failed.
  struct Scoring {
    Future<proto::ScoreReply> call;
    proto::ScoreRequest request;  // kept for a retry
    int replica = 0;
    int attempts = 1;
    std::optional<Clock::time_point> retry_at;
  };
  std::vector<Scoring> scoring;
  const int max_score_attempts =
      std::max(1, options_.retry.max_attempts) * static_cast<int>(rewards_.size());
  auto start_scoring = [&](proto::ScoreRequest sr) -> absl::Status {
    const int i = NextReward();
    if (i < 0) return absl::UnavailableError("scoring: no reward server is left");
    Scoring sc;
    sc.call = rewards_[i].Call(&actors::RewardServer::Score, sr,
                               {.timeout = options_.retry.call_timeout});
    sc.request = std::move(sr);
    sc.replica = i;
    scoring.push_back(std::move(sc));
    return absl::OkStatus();
  };
  std::optional<Future<proto::TrainStepReply>> training;
  std::vector<proto::SampleGroup> training_groups;
  Clock::time_point train_start;
  bool regroup = false;
  Clock::time_point last_restart_check = Clock::now();
  Clock::time_point last_usable = Clock::now();
  while (step_ < spec_.trainer.total_steps &&
         (options_.stop_after_steps == 0 || steps_this_run_ < options_.stop_after_steps) &&
         !stop_requested_ && !(options_.should_stop && options_.should_stop())) {
    bool progressed = false;
    // 1. Finished generations go to scoring; failed ones give their prompts back.
    for (auto& w : workers_) {
      if (!w.call.has_value() || !w.call->ready()) continue;
      absl::StatusOr<proto::GenerateReply> r = w.call->Get();
      w.call.reset();
      progressed = true;
      if (!r.ok()) {
        Log(absl::StrCat(w.name, ": generation failed (", r.status().ToString(), "); its ",
                         w.in_flight.size(), " prompts go back in the queue"));
        result_.prompts_regenerated += static_cast<int64_t>(w.in_flight.size());
        for (auto it = w.in_flight.rbegin(); it != w.in_flight.rend(); ++it)
          requeued_.push_front(*it);
        pending_groups -= static_cast<int64_t>(w.in_flight.size());
        w.in_flight.clear();
        if (r.status().code() == absl::StatusCode::kFailedPrecondition) {
          w.needs_group = true;  // restarted while idle: alive, but outside the weight group
        } else {
          w.down = true;
        }
        regroup = true;
        continue;
      }
      w.in_flight.clear();
      RecordVersions(*r);
      tokens_since_step_ += r->tokens_generated();
      generate_seconds_ += r->seconds();
      proto::ScoreRequest sr;
      for (auto& g : *r->mutable_groups()) *sr.add_groups() = std::move(g);
      TROUPE_RETURN_IF_ERROR(start_scoring(std::move(sr)));
    }
    // 2. Scored groups into the replay buffer; a failed Score is sent again (same samples) once
    //    its reward server is back, or to another replica.
    for (auto it = scoring.begin(); it != scoring.end();) {
      if (it->retry_at.has_value()) {
        if (Clock::now() < *it->retry_at) {
          ++it;
          continue;
        }
        const int i = NextReward();
        if (i < 0) return absl::UnavailableError("scoring: no reward server is left");
        it->call = rewards_[i].Call(&actors::RewardServer::Score, it->request,
                                    {.timeout = options_.retry.call_timeout});
        it->replica = i;
        it->retry_at.reset();
        ++it->attempts;
        ++result_.call_retries;
        progressed = true;
        ++it;
        continue;
      }
      if (!it->call.ready()) {
        ++it;
        continue;
      }
      absl::StatusOr<proto::ScoreReply> r = it->call.Get();
      progressed = true;
      if (!r.ok()) {
        const int count = it->request.groups_size();
        if (!IsRetryable(r.status()) || it->attempts >= max_score_attempts) {
          return absl::Status(r.status().code(),
                              absl::StrCat("scoring ", count, " groups failed ", it->attempts,
                                           " times; last: ", r.status().message()));
        }
        absl::StatusOr<proto::ActorInfo> info = cluster_.GetActorInfo(rewards_[it->replica].id());
        if (info.ok() && info->state() == proto::DEAD) {
          reward_dead_[it->replica] = true;
          Log(absl::StrCat("reward-", it->replica, " is DEAD: the other replicas take its work"));
        }
        Log(absl::StrCat("reward-", it->replica, ": scoring failed (", r.status().ToString(),
                         "); its ", count, " groups will be scored again"));
        it->retry_at =
            Clock::now() + absl::ToChronoNanoseconds(Backoff(options_.retry, it->attempts + 1));
        ++it;
        continue;
      }
      it = scoring.erase(it);
      proto::ReplayAddRequest add;
      *add.mutable_groups() = std::move(*r->mutable_groups());
      absl::StatusOr<proto::ReplayAddReply> added =
          replay_.Call(&actors::ReplayBuffer::Add, add).Get();
      if (!added.ok()) return added.status();
    }
    // 3. A finished training step.
    if (training.has_value() && training->ready()) {
      absl::StatusOr<proto::TrainStepReply> reply = training->Get();
      training.reset();
      progressed = true;
      if (!reply.ok()) return reply.status();
      TROUPE_RETURN_IF_ERROR(AfterStep(*reply, training_groups, Seconds(train_start)));
      training_groups.clear();
      if (reply->publish_failed()) regroup = true;
    }
    // 4. Worker restarts and weight-group changes happen between training steps.
    if (!training.has_value()) {
      if (Seconds(last_restart_check) > 0.5) {
        bool changed = false;
        TROUPE_RETURN_IF_ERROR(CheckRestartedWorkers(&changed));
        regroup |= changed;
        last_restart_check = Clock::now();
      }
      if (regroup) {
        TROUPE_RETURN_IF_ERROR(FormWeightGroup());
        regroup = false;
        progressed = true;
      }
    }
    // 5. Start a training step when a batch within the staleness bound is there.
    if (!training.has_value() && step_ < spec_.trainer.total_steps) {
      proto::ReplayTakeRequest take;
      take.set_num_groups(static_cast<int>(batch));
      take.set_min_groups(static_cast<int>(batch));
      take.set_current_version(version_);
      take.set_max_staleness(eta);
      TROUPE_ASSIGN_OR_RETURN(proto::ReplayTakeReply taken,
                              replay_.Call(&actors::ReplayBuffer::Take, take).Get());
      pending_groups -= taken.dropped_stale() / std::max<int64_t>(1, n);
      if (taken.groups_size() > 0) {
        pending_groups -= taken.groups_size();
        training_groups.assign(taken.groups().begin(), taken.groups().end());
        train_start = Clock::now();
        proto::TrainStepRequest req;
        req.set_step(step_);
        if (reference_.has_value()) {
          TROUPE_ASSIGN_OR_RETURN(proto::LogprobReply ref, ReferenceLogprobs(training_groups));
          *req.mutable_ref_logprobs() = std::move(*ref.mutable_logprobs());
        }
        *req.mutable_groups() = taken.groups();
        training = trainer_.Call(&actors::Trainer::Step, std::move(req));
        progressed = true;
      }
    }
    // 6. Keep every worker generating while the samples ahead of training stay within eta.
    for (auto& w : workers_) {
      if (w.down || w.needs_group || w.call.has_value()) continue;
      // Samples generated now are trained on about pending / batch steps later: keep that lag
      // within eta (and at least one batch ahead, so the trainer never waits on a full pipeline).
      if (pending_groups + chunk > std::max<int64_t>(1, eta) * batch) break;
      std::vector<proto::Prompt> prompts;
      for (int64_t i = 0; i < chunk; ++i) prompts.push_back(NextPrompt());
      w.in_flight = prompts;
      pending_groups += chunk;
      w.call = w.handle.Call(&actors::RolloutWorker::Generate, MakeRequest(prompts, false),
                             {.timeout = absl::Minutes(10)});
      progressed = true;
    }
    bool any_usable = false;
    for (const auto& w : workers_) any_usable |= !w.down;
    if (any_usable) {
      last_usable = Clock::now();
    } else if (Seconds(last_usable) > 300) {
      return absl::UnavailableError("no rollout worker has been up for 5 minutes");
    }
    if (!progressed) absl::SleepFor(absl::Milliseconds(2));
  }
  // Drain: let calls in flight finish so nothing is left half-done (their samples stay buffered).
  if (training.has_value()) {
    absl::StatusOr<proto::TrainStepReply> reply = training->Get();
    if (reply.ok())
      TROUPE_RETURN_IF_ERROR(AfterStep(*reply, training_groups, Seconds(train_start)));
  }
  for (auto& w : workers_) {
    if (w.call.has_value()) {
      absl::StatusOr<proto::GenerateReply> r = w.call->Get();
      if (r.ok()) {
        RecordVersions(*r);
        proto::ScoreRequest sr;
        for (auto& g : *r->mutable_groups()) *sr.add_groups() = std::move(g);
        TROUPE_RETURN_IF_ERROR(start_scoring(std::move(sr)));
      }
      w.call.reset();
    }
  }
  // Every generated sample reaches the replay buffer (buffered), scored again if need be.
  for (Scoring& sc : scoring) {
    absl::StatusOr<proto::ScoreReply> r =
        sc.retry_at.has_value() ? absl::UnavailableError("waiting for a retry") : sc.call.Get();
    if (!r.ok()) {
      Log(absl::StrCat("scoring failed (", r.status().ToString(), "); scoring its ",
                       sc.request.groups_size(), " groups again"));
      r = Score(sc.request);
      TROUPE_RETURN_IF_ERROR(r.status());
    }
    proto::ReplayAddRequest add;
    *add.mutable_groups() = std::move(*r->mutable_groups());
    TROUPE_RETURN_IF_ERROR(replay_.Call(&actors::ReplayBuffer::Add, add).Get().status());
  }
  absl::StatusOr<proto::ReplayStats> stats =
      replay_.Call(&actors::ReplayBuffer::Stats, proto::Empty()).Get();
  if (stats.ok()) result_.accounting = *stats;
  return absl::OkStatus();
}

absl::Status Driver::WriteSummary() {
  nlohmann::json s = {{"name", spec_.name},
                      {"steps", step_},
                      {"max_staleness", spec_.async.max_staleness},
                      {"sft_accuracy", result_.sft_accuracy},
                      {"initial_accuracy", result_.initial_accuracy},
                      {"final_accuracy", result_.final_accuracy},
                      {"seconds", result_.seconds},
                      {"samples_generated", result_.samples_generated},
                      {"samples_lost", result_.samples_lost},
                      {"prompts_regenerated", result_.prompts_regenerated},
                      {"call_retries", result_.call_retries},
                      {"checkpoints",
                       {{"written", result_.checkpoints_written},
                        {"retries", result_.checkpoint_retries},
                        {"failures", result_.checkpoint_failures}}},
                      {"accounting",
                       {{"added", result_.accounting.added()},
                        {"used", result_.accounting.used()},
                        {"dropped_stale", result_.accounting.dropped_stale()},
                        {"buffered", result_.accounting.buffered()},
                        {"duplicates", result_.accounting.duplicates()}}}};
  nlohmann::json curve = nlohmann::json::array();
  for (const RlEvalPoint& p : result_.curve) {
    curve.push_back({{"step", p.step}, {"accuracy", p.accuracy}, {"seconds", p.seconds}});
  }
  s["curve"] = curve;
  return WriteFileAtomically(spec_.logging.dir + "/summary.json", s.dump(2) + "\n");
}

absl::Status Driver::CheckEarlierRun() {
  if (options_.resume) return absl::OkStatus();
  std::vector<std::string> found = FindEarlierRun(spec_);
  if (found.empty()) return absl::OkStatus();
  if (!options_.overwrite) {
    return absl::FailedPreconditionError(absl::StrCat(
        "an earlier run's outputs are here (", absl::StrJoin(found, ", "),
        "); nothing was changed. Continue that run with --resume, replace its outputs with "
        "--overwrite, or choose another logging.dir / actors.checkpointer.dir"));
  }
  // Checkpoints of the earlier run would be mistaken for this run's by a later --resume.
  Log(absl::StrCat("--overwrite: replacing an earlier run's outputs (", absl::StrJoin(found, ", "),
                   ")"));
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(spec_.actors.checkpointer.dir, ec)) {
    if (e.path().filename().string().rfind("step_", 0) != 0) continue;
    std::error_code rm;
    fs::remove_all(e.path(), rm);
    if (rm) {
      return absl::InternalError(
          absl::StrCat("cannot remove ", e.path().string(), ": ", rm.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<GrpoResult> Driver::Run() {
  // Before anything is written: an earlier run's outputs are refused or (overwrite) replaced.
  TROUPE_RETURN_IF_ERROR(CheckEarlierRun());
  std::error_code ec;
  fs::create_directories(spec_.logging.dir, ec);
  if (ec)
    return absl::InternalError(
        absl::StrCat("cannot create ", spec_.logging.dir, ": ", ec.message()));
  TROUPE_RETURN_IF_ERROR(WriteFileAtomically(spec_.logging.dir + "/job.yaml", ToYaml(spec_)));
  TROUPE_RETURN_IF_ERROR(PrepareTask());
  TROUPE_RETURN_IF_ERROR(PrepareSft());
  TROUPE_ASSIGN_OR_RETURN(tokenizer_, models::LoadTokenizer(policy_dir_ + "/tokenizer.json"));
  TROUPE_RETURN_IF_ERROR(LoadResume());
  Log(absl::StrCat("starting actors: ", spec_.actors.rollout.replicas, " rollout, ",
                   spec_.actors.reward.replicas, " reward, ",
                   spec_.algorithm.kl.coef != 0 ? "1" : "0",
                   " reference, 1 trainer, 1 replay buffer, 1 checkpointer"));
  TROUPE_RETURN_IF_ERROR(SpawnActors());
  reward_dead_.assign(rewards_.size(), false);
  // The names were free, so no live job shares this id: keys under it are a dead run's.
  ClearWeightGroupKeys();
  TROUPE_RETURN_IF_ERROR(FormWeightGroup());
  metrics::MetricsLoggerOptions mo;
  mo.tensorboard = spec_.logging.tensorboard;
  // A resumed run continues the metrics after its checkpoint's step; a fresh run replaces them.
  mo.resume_step = options_.resume ? step_ : 0;
  TROUPE_ASSIGN_OR_RETURN(metrics_, metrics::MetricsLogger::Open(spec_.logging.dir, mo));
  if (result_.initial_accuracy < 0) {
    TROUPE_ASSIGN_OR_RETURN(result_.initial_accuracy, Evaluate());
    result_.curve.push_back({step_, result_.initial_accuracy, 0});
  }
  result_.final_accuracy =
      result_.curve.empty() ? result_.initial_accuracy : result_.curve.back().accuracy;
  Log(absl::StrCat(spec_.async.max_staleness == 0 ? "synchronous" : "asynchronous",
                   " GRPO: ", spec_.trainer.total_steps - step_, " steps of ",
                   spec_.data.train_batch_size, " prompts x ", spec_.algorithm.n, " samples",
                   spec_.async.max_staleness == 0
                       ? ""
                       : absl::StrCat(", max staleness ", spec_.async.max_staleness)));
  progress_ = std::make_unique<metrics::ProgressLine>(
      metrics::ProgressLineOptions{.total_steps = spec_.trainer.total_steps});
  progress_->Update(step_, {});
  loop_start_ = Clock::now();
  last_step_end_ = loop_start_;
  absl::Status loop = spec_.async.max_staleness == 0 ? SyncLoop() : AsyncLoop();
  progress_->Finish();
  result_.seconds = Seconds(loop_start_);
  if (!loop.ok()) {
    // Whatever checkpoints are under way still reach the disk before the actors go away.
    if (absl::Status f = FlushCheckpoints(-1); !f.ok()) Log(f.ToString());
    return loop;
  }
  if (result_.curve.empty() || result_.curve.back().step != step_) {
    TROUPE_ASSIGN_OR_RETURN(double acc, Evaluate());
    result_.curve.push_back({step_, acc, Seconds(loop_start_)});
    result_.final_accuracy = acc;
    (void)metrics_->Log(step_, {{"eval/accuracy", acc}});
  }
  if (spec_.actors.checkpointer.every_steps > 0 &&
      step_ % spec_.actors.checkpointer.every_steps != 0) {
    TROUPE_RETURN_IF_ERROR(Checkpoint());
  }
  // The run's checkpoints are on disk (written again if the checkpointer failed) before the
  // job's actors go away.
  absl::Status flushed =
      spec_.actors.checkpointer.every_steps > 0 ? FlushCheckpoints(step_) : absl::OkStatus();
  result_.steps = step_;
  const proto::ReplayStats& a = result_.accounting;
  result_.samples_lost = result_.samples_generated - (a.used() + a.dropped_stale() + a.buffered());
  if (result_.samples_lost != 0) {
    Log(absl::StrCat("SAMPLES LOST: ", result_.samples_generated, " generated but only ",
                     a.used() + a.dropped_stale() + a.buffered(),
                     " used, dropped as stale or buffered"));
  }
  TROUPE_RETURN_IF_ERROR(WriteSummary());
  TROUPE_RETURN_IF_ERROR(flushed);
  return result_;
}

}  // namespace

std::vector<std::string> FindEarlierRun(const JobSpec& spec) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const char* f : {"metrics.jsonl", "summary.json"}) {
    if (fs::exists(fs::path(spec.logging.dir) / f, ec)) {
      found.push_back(absl::StrCat(spec.logging.dir, "/", f));
    }
  }
  int checkpoints = 0;
  for (const auto& e : fs::directory_iterator(spec.actors.checkpointer.dir, ec)) {
    checkpoints += e.path().filename().string().rfind("step_", 0) == 0;
  }
  if (checkpoints > 0) {
    found.push_back(absl::StrCat(checkpoints, " checkpoint(s) in ", spec.actors.checkpointer.dir));
  }
  return found;
}

absl::StatusOr<GrpoResult> RunGrpo(const JobSpec& spec, Cluster& cluster,
                                   const GrpoRunOptions& options) {
  Driver driver(spec, cluster, options);
  return driver.Run();
}

}  // namespace troupe::recipes
