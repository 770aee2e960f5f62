#include "recipes/rl/run_state.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "actors/checkpointer.h"
#include "base/atomic_file.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "base/trace/span_recorder.h"
#include "metrics/metric_catalog.h"

namespace troupe::recipes {
namespace {

namespace fs = std::filesystem;
namespace n = metrics::metric_names;

nlohmann::json CurveJson(const std::vector<RlEvalPoint>& curve) {
  nlohmann::json out = nlohmann::json::array();
  for (const RlEvalPoint& p : curve) {
    out.push_back({{"step", p.step}, {"accuracy", p.accuracy}, {"seconds", p.seconds}});
  }
  return out;
}

// Whether `summary` records a run that failed or was stopped before its first step (nothing
// trained, nothing to resume): a later run may replace it without being told to.
bool TookNoStep(const fs::path& summary) {
  absl::StatusOr<std::string> text = ReadFileToString(summary.string(), /*max_bytes=*/1 << 20);
  if (!text.ok()) return false;
  const nlohmann::json s = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!s.is_object() || !s.contains("status") || !s.contains("steps")) return false;
  return s["status"] != "succeeded" && s["steps"].is_number_integer() &&
         s["steps"].get<int64_t>() == 0;
}

}  // namespace

std::vector<std::string> FindEarlierRun(const JobSpec& spec) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const char* f : {"metrics.jsonl", "summary.json"}) {
    const fs::path path = fs::path(spec.logging.dir) / f;
    if (fs::exists(path, ec) && !(f == std::string("summary.json") && TookNoStep(path))) {
      found.push_back(absl::StrCat(spec.logging.dir, "/", f));
    }
  }
  int checkpoints = 0;
  // (critic/: recipe ppo's critic checkpoints, beside the trainer's.)
  for (const std::string& dir :
       {spec.actors.checkpointer.dir, spec.actors.checkpointer.dir + "/critic"}) {
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      checkpoints += e.path().filename().string().rfind("step_", 0) == 0;
    }
  }
  if (checkpoints > 0) {
    found.push_back(absl::StrCat(checkpoints, " checkpoint(s) in ", spec.actors.checkpointer.dir));
  }
  return found;
}

RunOptions LogAboveProgress(RunOptions options, std::function<metrics::ProgressLine*()> progress) {
  options.log = [log = std::move(options.log),
                 progress = std::move(progress)](const std::string& line) {
    if (metrics::ProgressLine* bar = progress ? progress() : nullptr) bar->Clear();
    if (log) log(line);
  };
  return options;
}

RunState::RunState(const JobSpec& spec, const RunOptions& options)
    : spec_(spec), options_(options) {}

absl::Status RunState::Begin() {
  if (!options_.resume) {
    std::vector<std::string> found = FindEarlierRun(spec_);
    if (!found.empty() && !options_.overwrite) {
      return absl::FailedPreconditionError(absl::StrCat(
          "an earlier run's outputs are here (", absl::StrJoin(found, ", "),
          "); nothing was changed. Continue that run with --resume, replace its outputs with "
          "--overwrite, or choose another logging.dir / actors.checkpointer.dir"));
    }
    if (!found.empty()) {
      // Checkpoints of the earlier run would be mistaken for this run's by a later --resume.
      Log(absl::StrCat("--overwrite: replacing an earlier run's outputs (",
                       absl::StrJoin(found, ", "), ")"));
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(spec_.actors.checkpointer.dir, ec)) {
        const std::string name = e.path().filename().string();
        // latest: their pointer; critic: recipe ppo's critic checkpoints.
        if (name.rfind("step_", 0) != 0 && name != "latest" && name != "critic") continue;
        std::error_code rm;
        fs::remove_all(e.path(), rm);
        if (rm) {
          return absl::InternalError(
              absl::StrCat("cannot remove ", e.path().string(), ": ", rm.message()));
        }
      }
    }
  }
  std::error_code ec;
  fs::create_directories(spec_.logging.dir, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot create ", spec_.logging.dir, ": ", ec.message()));
  }
  TROUPE_RETURN_IF_ERROR(WriteFileAtomically(spec_.logging.dir + "/job.yaml", ToYaml(spec_)));
  if (!options_.resume) {
    begun_ = true;
    return absl::OkStatus();
  }

  // A checkpointer killed between the renames of a retried step left that step only under a
  // scratch name: put back before choosing the newest.
  if (const actors::AbandonedScratch s =
          actors::RecoverAbandonedScratch(spec_.actors.checkpointer.dir);
      s.restored > 0) {
    Log(absl::StrCat("--resume: restored ", s.restored, " checkpoint(s) in ",
                     spec_.actors.checkpointer.dir, " that a killed checkpointer had moved aside"));
  }
  absl::StatusOr<std::string> latest = actors::LatestCheckpoint(spec_.actors.checkpointer.dir);
  if (!latest.ok()) {
    return absl::NotFoundError(absl::StrCat("--resume: ", latest.status().message()));
  }
  resume_dir_ = *latest;
  const std::string path = resume_dir_ + "/driver_state.json";
  TROUPE_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  try {
    nlohmann::json st = nlohmann::json::parse(text);
    step_ = st.at("step").get<int64_t>();
    version_ = st.at("weight_version").get<int64_t>();
    result_.initial_accuracy = st.value("initial_accuracy", -1.0);
    for (const auto& p : st.value("curve", nlohmann::json::array())) {
      result_.curve.push_back({p.at("step").get<int64_t>(), p.at("accuracy").get<double>(),
                               p.at("seconds").get<double>()});
    }
    const nlohmann::json counters = st.value("counters", nlohmann::json::object());
    result_.samples_generated = counters.value("samples_generated", int64_t{0});
    result_.prompts_regenerated = counters.value("prompts_regenerated", int64_t{0});
    result_.samples_filtered = counters.value("samples_filtered", int64_t{0});
    result_.groups_filtered = counters.value("groups_filtered", int64_t{0});
    result_.call_retries = counters.value("call_retries", int64_t{0});
    result_.samples_discarded = counters.value("samples_discarded", int64_t{0});
    result_.replay_buffer_restarts = counters.value("replay_buffer_restarts", int64_t{0});
    result_.critic_restarts = counters.value("critic_restarts", int64_t{0});
    result_.critic_updates_lost = counters.value("critic_updates_lost", int64_t{0});
    if (st.contains("recipe")) {
      resumed_state_ = st["recipe"];
    } else if (st.contains("cursor")) {
      // Written before the recipe state had its own section: only the data cursor.
      resumed_state_ = {{"prompts", {{"cursor", st["cursor"]}}}};
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat(path, ": ", e.what()));
  }
  if (fs::exists(resume_dir_ + "/replay_buffer.pb", ec)) {
    TROUPE_ASSIGN_OR_RETURN(resumed_replay_, ReadFileToString(resume_dir_ + "/replay_buffer.pb"));
    // The accounting as of the checkpoint, until the restored buffer is read (a run that fails
    // before then says so in its summary).
    proto::ReplayState replay;
    if (replay.ParseFromString(resumed_replay_)) {
      result_.accounting = replay.stats();
      accounting_step_ = step_;
    }
  }
  if (!result_.curve.empty()) result_.final_accuracy = result_.curve.back().accuracy;
  Log(absl::StrCat("resuming from ", resume_dir_, " (step ", step_, ", weights v", version_, ")"));
  begun_ = true;
  return absl::OkStatus();
}

absl::Status RunState::OpenMetrics() {
  metrics::MetricsLoggerOptions mo;
  mo.tensorboard = spec_.logging.tensorboard;
  // A resumed run continues the metrics after its checkpoint's step; a fresh run replaces them
  // (-1: every record of an earlier run goes, the initial evaluation's too).
  mo.resume_step = resuming() ? step_ : -1;
  TROUPE_ASSIGN_OR_RETURN(metrics_, metrics::MetricsLogger::Open(spec_.logging.dir, mo));
  return absl::OkStatus();
}

void RunState::StartLoop() {
  progress_ = std::make_unique<metrics::ProgressLine>(
      metrics::ProgressLineOptions{.total_steps = spec_.trainer.total_steps});
  progress_->Update(step_, {});
  loop_start_ = Clock::now();
  last_step_end_ = loop_start_;
}

double RunState::loop_seconds() const {
  return std::chrono::duration<double>(Clock::now() - loop_start_).count();
}

bool RunState::Done() const {
  return step_ >= spec_.trainer.total_steps ||
         (options_.stop_after_steps > 0 && steps_this_run_ >= options_.stop_after_steps) ||
         accuracy_reached_ || stop_requested();
}

void RunState::RecordGenerated(const proto::GenerateReply& reply) {
  for (const proto::SampleGroup& g : reply.groups()) {
    for (const proto::Sample& s : g.samples()) {
      result_.worker_versions[s.worker()].push_back(s.policy_version());
      ++result_.samples_generated;
    }
  }
  tokens_since_step_ += reply.tokens_generated();
  generate_seconds_ += reply.seconds();
}

void RunState::RecordAccounting(const proto::ReplayStats& stats, int64_t prompts_drawn,
                                std::map<std::string, double>* m) {
  result_.accounting = stats;
  accounting_step_ = step_;
  result_.prompts_drawn = prompts_drawn;
  if (m == nullptr) return;
  (*m)[n::kSamplesAdded] = static_cast<double>(stats.added());
  (*m)[n::kSamplesUsed] = static_cast<double>(stats.used());
  (*m)[n::kSamplesDroppedStale] = static_cast<double>(stats.dropped_stale());
  (*m)[n::kSamplesBuffered] = static_cast<double>(stats.buffered());
  (*m)[n::kSamplesFiltered] = static_cast<double>(result_.samples_filtered);
}

void RunState::Advance(const proto::TrainStepReply& reply, std::map<std::string, double>* m) {
  const double wall = std::chrono::duration<double>(Clock::now() - last_step_end_).count();
  last_step_end_ = Clock::now();
  (*m)[n::kTimingStep] = wall;
  (*m)[n::kTimePerStep] = wall;
  (*m)[n::kTimingGen] = std::exchange(generate_seconds_, 0);
  (*m)[n::kGenThroughput] =
      wall > 0 ? static_cast<double>(std::exchange(tokens_since_step_, 0)) / wall : 0;
  auto tokens = m->find(n::kTotalNumTokens);
  if (tokens != m->end()) (*m)[n::kThroughput] = wall > 0 ? tokens->second / wall : 0;
  version_ = reply.weight_version();
  ++step_;
  ++steps_this_run_;
  NoteCheckpoints(reply.checkpoints());
}

void RunState::LogStep(std::map<std::string, double> m,
                       const std::map<std::string, std::vector<double>>& histograms,
                       const metrics::ProgressLine::Fields& progress_fields) {
  m[n::kWeightsVersion] = static_cast<double>(version_);
  // Every log_every-th step, the last, and a step with an evaluation are logged.
  const bool due = step_ % std::max<int64_t>(1, spec_.logging.log_every) == 0 || Done() ||
                   m.count(n::kValAccuracy) > 0;
  if (due && metrics_ != nullptr) (void)metrics_->Log(step_, m, histograms);
  if (due && progress_ != nullptr) progress_->Update(step_, progress_fields);
  if (options_.on_step) options_.on_step(step_, m);
}

void RunState::RecordEval(double accuracy, const std::map<std::string, double>& extra, bool log) {
  if (result_.initial_accuracy < 0 && result_.curve.empty()) result_.initial_accuracy = accuracy;
  const double seconds = loop_start_ == Clock::time_point() ? 0 : loop_seconds();
  result_.curve.push_back({step_, accuracy, seconds});
  result_.final_accuracy = accuracy;
  if (log && metrics_ != nullptr) {
    std::map<std::string, double> m = extra;
    m[n::kValAccuracy] = accuracy;
    (void)metrics_->Log(step_, m);
  }
  if (options_.stop_at_accuracy > 0 && accuracy >= options_.stop_at_accuracy) {
    accuracy_reached_ = true;
  }
}

bool RunState::checkpoint_due() const {
  const int64_t every = spec_.actors.checkpointer.every_steps;
  return every > 0 && step_ % every == 0;
}

absl::Status RunState::Checkpoint(ActorHandle<actors::Trainer>& trainer, nlohmann::json state,
                                  std::string replay_state, int64_t samples_out,
                                  const std::vector<ActorHandle<actors::Trainer>>& peers) {
  ScopedSpan span("checkpoint", "checkpoint", "driver");
  nlohmann::json st = {{"step", step_},
                       {"weight_version", version_},
                       {"initial_accuracy", result_.initial_accuracy},
                       {"curve", CurveJson(result_.curve)},
                       {"counters",
                        {{"samples_generated", result_.samples_generated - samples_out},
                         {"prompts_regenerated", result_.prompts_regenerated},
                         {"samples_filtered", result_.samples_filtered},
                         {"groups_filtered", result_.groups_filtered},
                         {"call_retries", result_.call_retries},
                         {"samples_discarded", result_.samples_discarded},
                         {"replay_buffer_restarts", result_.replay_buffer_restarts},
                         {"critic_restarts", result_.critic_restarts},
                         {"critic_updates_lost", result_.critic_updates_lost}}},
                       {"recipe", std::move(state)}};
  proto::CheckpointRequest req;
  req.set_step(step_);
  req.set_driver_state_json(st.dump(2));
  req.set_replay_state(std::move(replay_state));
  // The other ranks of a trainer group take part in the snapshot (a sharded optimizer's moments
  // are gathered to rank 0); rank 0 hands it to the checkpointer.
  std::vector<Future<proto::CheckpointReply>> joined;
  for (const ActorHandle<actors::Trainer>& peer : peers) {
    joined.push_back(
        peer.Call(&actors::Trainer::Checkpoint, req, {.timeout = options_.checkpoint_timeout}));
  }
  absl::Status status =
      trainer.Call(&actors::Trainer::Checkpoint, req, {.timeout = options_.checkpoint_timeout})
          .Get()
          .status();
  for (size_t r = 0; r < joined.size(); ++r) {
    if (absl::Status s = joined[r].Get().status(); !s.ok() && status.ok()) {
      status = absl::Status(s.code(), absl::StrCat("trainer rank ", r + 1, ": ", s.message()));
    }
  }
  return status;
}

void RunState::NoteCheckpoints(const proto::CheckpointWrites& writes) {
  result_.checkpoints_written += writes.written_steps_size();
  result_.checkpoint_retries = std::max(result_.checkpoint_retries, writes.retries());
  for (const std::string& f : writes.failures()) {
    Log(absl::StrCat("CHECKPOINT LOST: the trainer gave up writing the checkpoint of ", f));
    result_.checkpoint_failures.push_back(f);
  }
}

absl::Status RunState::FlushCheckpoints(ActorHandle<actors::Trainer>& trainer, int64_t last_step) {
  const Clock::time_point start = Clock::now();
  const double limit = absl::ToDoubleSeconds(options_.checkpoint_flush_timeout);
  for (int round = 1;; ++round) {
    absl::StatusOr<proto::CheckpointWrites> w =
        trainer
            .Call(&actors::Trainer::FlushCheckpoints, proto::Empty(),
                  {.timeout = options_.checkpoint_flush_timeout})
            .Get();
    if (!w.ok()) {
      return absl::Status(w.status().code(), absl::StrCat("waiting for the checkpoint writes: ",
                                                          w.status().message()));
    }
    NoteCheckpoints(*w);
    if (w->pending_steps().empty()) break;
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (waited > limit) {
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

absl::Status RunState::Finish(const absl::Status& outcome) {
  if (!begun_ || finished_) return absl::OkStatus();
  finished_ = true;
  if (progress_ != nullptr) progress_->Finish();
  result_.steps = step_;
  const proto::ReplayStats& a = result_.accounting;
  const int64_t accounted = a.used() + a.dropped_stale() + a.buffered() + result_.samples_filtered +
                            result_.samples_discarded +
                            (outcome.ok() ? 0 : result_.samples_in_flight);
  result_.samples_lost = result_.samples_generated - accounted;
  if (result_.samples_lost != 0) {
    Log(absl::StrCat("SAMPLES LOST: ", result_.samples_generated, " generated but only ", accounted,
                     " used, dropped as stale, buffered, filtered, discarded with a dead replay "
                     "buffer",
                     outcome.ok() ? "" : " or being scored"));
  }
  // How the loop ended: `troupe dashboard RUN_DIR` shows a stopped run as STOPPED.
  const bool cancelled_by_stop = absl::IsCancelled(outcome) && stop_requested();
  const char* ended = !outcome.ok() && !cancelled_by_stop     ? "failed"
                      : step_ >= spec_.trainer.total_steps    ? "completed"
                      : accuracy_reached_                     ? "reached stop_at_accuracy"
                      : stop_requested() || cancelled_by_stop ? "stopped"
                                                              : "reached stop_after_steps";
  const std::string ended_str = ended;
  const char* status = ended_str == "failed" ? "failed"
                       : ended_str == "completed" || ended_str == "reached stop_at_accuracy"
                           ? "succeeded"
                           : "stopped";
  nlohmann::json s = {
      {"name", spec_.name},
      {"recipe", spec_.recipe},
      {"steps", step_},
      {"total_steps", spec_.trainer.total_steps},
      {"status", status},
      {"ended", ended},
      {"max_staleness", spec_.async.max_staleness},
      {"sft_accuracy", result_.sft_accuracy},
      {"initial_accuracy", result_.initial_accuracy},
      {"final_accuracy", result_.final_accuracy},
      {"seconds", result_.seconds},
      {"samples_generated", result_.samples_generated},
      {"samples_lost", result_.samples_lost},
      {"samples_filtered", result_.samples_filtered},
      {"groups_filtered", result_.groups_filtered},
      {"prompts_drawn", result_.prompts_drawn},
      {"prompts_regenerated", result_.prompts_regenerated},
      {"prompts_filtered", result_.prompts_filtered},
      {"call_retries", result_.call_retries},
      {"samples_discarded", result_.samples_discarded},
      {"replay_buffer_restarts", result_.replay_buffer_restarts},
      {"critic",
       {{"restarts", result_.critic_restarts}, {"updates_lost", result_.critic_updates_lost}}},
      {"checkpoints",
       {{"written", result_.checkpoints_written},
        {"retries", result_.checkpoint_retries},
        {"failures", result_.checkpoint_failures}}},
      {"accounting",
       {{"added", a.added()},
        {"used", a.used()},
        {"dropped_stale", a.dropped_stale()},
        {"buffered", a.buffered()},
        {"duplicates", a.duplicates()}}},
      {"curve", CurveJson(result_.curve)}};
  if (!outcome.ok()) {
    s["error"] = outcome.ToString();
    s["samples_in_flight"] = result_.samples_in_flight;
    // The accounting is the replay buffer's as of its last reading (the failure may have been
    // the buffer's own).
    s["accounting_step"] = accounting_step_;
  }
  return WriteFileAtomically(spec_.logging.dir + "/summary.json", s.dump(2) + "\n");
}

}  // namespace troupe::recipes
