#include "actors/trainer.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "actors/checkpointer.h"
#include "actors/group_collective.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "metrics/metric_catalog.h"
#include "runtime/actor_registry.h"
#include "trainers/torch_op_spans.h"

namespace troupe::actors {

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(const ActorContext& ctx) {
  TROUPE_ASSIGN_OR_RETURN(proto::TrainerConfig config, ctx.ConfigAs<proto::TrainerConfig>());
  if (config.profile_from() > 0) TROUPE_RETURN_IF_ERROR(trainers::CanRecordOps());
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<TrainerCore> core, TrainerCore::Create(config));
  return std::unique_ptr<Trainer>(new Trainer(ctx.services(), std::move(core)));
}

Trainer::Trainer(ActorServices* services, std::unique_ptr<TrainerCore> core)
    : services_(services),
      core_(std::move(core)),
      checkpointer_(core_->config().checkpointer()),
      checkpoint_attempts_(core_->config().checkpoint_attempts()) {}

Trainer::~Trainer() {
  if (publisher_ != nullptr) (void)publisher_->Close();
}

absl::StatusOr<proto::TrainStepReply> Trainer::Step(const proto::TrainStepRequest& req) {
  ResendFailedWrites();
  std::unique_ptr<trainers::TorchOpSpans> ops;  // trainer.profile_steps
  if (req.step() + 1 >= core_->config().profile_from() &&
      req.step() + 1 <= core_->config().profile_to()) {
    TROUPE_ASSIGN_OR_RETURN(ops, trainers::TorchOpSpans::Start(context().name()));
  }
  bool skipped = false;
  TROUPE_ASSIGN_OR_RETURN(proto::TrainStepReply reply, core_->Update(req, &skipped));
  auto& m = *reply.mutable_metrics();
  if (publisher_ != nullptr && !skipped) {
    const absl::Time publish_start = absl::Now();
    absl::Status s = publisher_->Publish(weight_version(), core_->CurrentWeights());
    m[metrics::metric_names::kTimingUpdateWeights] =
        absl::ToDoubleSeconds(absl::Now() - publish_start);
    if (!s.ok()) {
      TROUPE_LOG(WARNING) << absl::StrFormat("trainer: publishing weights v%lld failed: %s",
                                             static_cast<long long>(weight_version()),
                                             s.ToString().c_str());
      (void)publisher_->Close();
      publisher_.reset();
      reply.set_publish_failed(true);
      reply.set_publish_error(s.ToString());
    }
  } else if (publisher_ == nullptr && rank_ == 0) {
    reply.set_publish_failed(true);
    reply.set_publish_error("no weight group");
  }
  *reply.mutable_checkpoints() = TakeWriteReport();
  return reply;
}

absl::StatusOr<proto::JoinWeightGroupReply> Trainer::JoinWeightGroup(
    const proto::JoinWeightGroupRequest& req) {
  if (req.rank() != 0) return absl::InvalidArgumentError("the trainer publishes: rank must be 0");
  if (services_ == nullptr) {
    return absl::FailedPreconditionError("JoinWeightGroup: the trainer is not part of a cluster");
  }
  if (publisher_ != nullptr) {
    (void)publisher_->Close();
    publisher_.reset();
  }
  TROUPE_ASSIGN_OR_RETURN(publisher_, collective::WeightPublisher::Create(
                                          &services_->kv(),
                                          {.name = absl::StrCat(req.group_name(), ".", req.epoch()),
                                           .world_size = req.world_size(),
                                           .rank = 0,
                                           .timeout = absl::Seconds(120),
                                           .gloo_host = context().node_address()},
                                          core_->CurrentWeights(), {.in_place = true}));
  if (absl::Status s = publisher_->Publish(weight_version(), core_->CurrentWeights()); !s.ok()) {
    (void)publisher_->Close();
    publisher_.reset();
    return s;
  }
  proto::JoinWeightGroupReply reply;
  reply.set_weight_version(weight_version());
  return reply;
}

absl::StatusOr<proto::JoinWeightGroupReply> Trainer::JoinTrainGroup(
    const proto::JoinWeightGroupRequest& req) {
  if (train_group_ != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("JoinTrainGroup: already rank ", rank_, " of group ", train_group_->name()));
  }
  TROUPE_ASSIGN_OR_RETURN(
      train_group_, CreateTrainingGroup(services_ != nullptr ? &services_->kv() : nullptr, req,
                                        core_->config().data_parallel_size(),
                                        context().node_address(), "JoinTrainGroup"));
  train_collective_ = std::make_unique<GroupCollective>(train_group_.get());
  if (absl::Status s = core_->EnableDataParallel(train_collective_.get()); !s.ok()) {
    train_collective_.reset();
    (void)train_group_->Destroy();
    train_group_.reset();
    return s;
  }
  rank_ = req.rank();
  proto::JoinWeightGroupReply reply;
  reply.set_weight_version(weight_version());
  return reply;
}

Future<proto::CheckpointReply> Trainer::Checkpoint(const proto::CheckpointRequest& req) {
  auto fail = [](absl::Status s) { return MakeReadyFuture<proto::CheckpointReply>(std::move(s)); };
  if (services_ == nullptr) {
    return fail(absl::FailedPreconditionError("Checkpoint: the trainer is not part of a cluster"));
  }
  if (rank_ != 0) {
    // A rank of the group other than 0: its part of a sharded snapshot; rank 0 writes.
    if (absl::Status s = core_->JoinSnapshot(); !s.ok()) return fail(s);
    proto::CheckpointReply reply;
    reply.set_path(absl::StrFormat("step_%08d", req.step()));
    return MakeReadyFuture<proto::CheckpointReply>(reply);
  }
  ResendFailedWrites();
  absl::StatusOr<proto::CheckpointRequest> snapshot = core_->Snapshot(req);
  if (!snapshot.ok()) return fail(snapshot.status());
  const int64_t step = req.step();
  PendingWrite& w = writes_[step];  // a second snapshot of one step replaces the first
  w.snapshot = std::make_shared<const proto::CheckpointRequest>(*std::move(snapshot));
  w.attempts = 0;
  w.last_error.clear();
  SendWrite(step);
  proto::CheckpointReply reply;
  reply.set_path(absl::StrFormat("step_%08d", step));
  if (!req.wait()) return MakeReadyFuture<proto::CheckpointReply>(reply);
  return AttemptDone(step).Then(
      [this, step, reply](absl::Status) -> absl::StatusOr<proto::CheckpointReply> {
        auto it = writes_.find(step);
        if (it != writes_.end()) {
          return absl::UnavailableError(absl::StrCat("checkpoint of step ", step,
                                                     " not written yet: ", it->second.last_error));
        }
        for (const std::string& f : write_failures_) {
          if (absl::StartsWith(f, absl::StrCat("step ", step, ":"))) return absl::DataLossError(f);
        }
        return reply;
      });
}

void Trainer::SendWrite(int64_t step) {
  PendingWrite& w = writes_.at(step);
  ++w.attempts;
  if (w.attempts > 1) ++write_retries_;
  w.sending = true;
  Future<proto::CheckpointReply> written;
  // The handle is looked up once: calls through it reach a restarted checkpointer once the head
  // reports it ALIVE (they wait while it restarts), where a lookup by name would fail.
  if (!checkpointer_handle_.has_value() && services_ != nullptr) {
    absl::StatusOr<UntypedActorHandle> found = services_->GetActorByName(checkpointer_);
    absl::StatusOr<ActorHandle<Checkpointer>> h =
        found.ok() ? found->As<Checkpointer>() : found.status();
    if (h.ok()) checkpointer_handle_ = *h;
  }
  if (checkpointer_handle_.has_value()) {
    written = checkpointer_handle_->Call(&Checkpointer::Save, *w.snapshot,
                                         {.timeout = absl::Minutes(10)});
  } else {
    written = MakeReadyFuture<proto::CheckpointReply>(absl::UnavailableError(
        absl::StrCat("the checkpointer '", checkpointer_, "' is not found")));
  }
  // Registered inside a handler, so the continuation runs on this actor's executor.
  std::move(written).OnComplete(
      [this, step, snapshot = w.snapshot](absl::StatusOr<proto::CheckpointReply> r) {
        auto it = writes_.find(step);
        // Superseded by a newer snapshot of the same step: that one's outcome counts.
        if (it == writes_.end() || it->second.snapshot != snapshot) return;
        RecordWrite(step, r.status());
      });
}

void Trainer::RecordWrite(int64_t step, const absl::Status& outcome) {
  auto it = writes_.find(step);
  if (it == writes_.end()) return;
  it->second.sending = false;
  if (outcome.ok()) {
    written_.push_back(step);
    writes_.erase(it);
  } else if (it->second.attempts >= checkpoint_attempts_) {
    std::string failure = absl::StrCat("step ", step, ": ", outcome.ToString(), " (after ",
                                       it->second.attempts, " attempts)");
    TROUPE_LOG(WARNING) << absl::StrFormat("trainer: giving up on the checkpoint of %s",
                                           failure.c_str());
    write_failures_.push_back(std::move(failure));
    writes_.erase(it);
  } else {
    it->second.last_error = outcome.ToString();
    TROUPE_LOG(WARNING) << absl::StrFormat(
        "trainer: writing the checkpoint of step %lld failed (%s); will retry",
        static_cast<long long>(step), outcome.ToString().c_str());
  }
  auto [first, last] = attempt_waiters_.equal_range(step);
  for (auto w = first; w != last; ++w) w->second.Set(absl::OkStatus());
  attempt_waiters_.erase(first, last);
}

Future<void> Trainer::AttemptDone(int64_t step) {
  auto it = writes_.find(step);
  if (it == writes_.end() || !it->second.sending) return MakeReadyFuture<void>(absl::OkStatus());
  Promise<void> p;
  Future<void> f = p.GetFuture();
  attempt_waiters_.emplace(step, std::move(p));
  return f;
}

void Trainer::ResendFailedWrites() {
  std::vector<int64_t> again;
  for (const auto& [step, w] : writes_) {
    if (!w.sending && !w.last_error.empty()) again.push_back(step);
  }
  for (int64_t step : again) SendWrite(step);
}

proto::CheckpointWrites Trainer::TakeWriteReport() {
  proto::CheckpointWrites report;
  for (const auto& [step, w] : writes_) report.add_pending_steps(step);
  for (int64_t step : written_) report.add_written_steps(step);
  for (std::string& f : write_failures_) report.add_failures(std::move(f));
  report.set_retries(write_retries_);
  written_.clear();
  write_failures_.clear();
  return report;
}

Future<proto::CheckpointWrites> Trainer::FlushCheckpoints(const proto::Empty&) {
  ResendFailedWrites();
  std::vector<Future<void>> attempts;
  for (const auto& [step, w] : writes_) {
    if (w.sending) attempts.push_back(AttemptDone(step));
  }
  if (attempts.empty()) return MakeReadyFuture<proto::CheckpointWrites>(TakeWriteReport());
  return WhenAll(std::move(attempts)).Then([this](absl::StatusOr<std::vector<absl::Status>>) {
    return TakeWriteReport();
  });
}

absl::StatusOr<proto::WeightsReply> Trainer::Weights(const proto::Empty&) {
  proto::WeightsReply reply;
  TROUPE_ASSIGN_OR_RETURN(*reply.mutable_weights(), core_->WeightsProto());
  return reply;
}

TROUPE_REGISTER_ACTOR(Trainer, Step, JoinWeightGroup, Checkpoint, FlushCheckpoints, Weights,
                      JoinTrainGroup);

}  // namespace troupe::actors
