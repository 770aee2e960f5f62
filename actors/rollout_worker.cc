#include "actors/rollout_worker.h"

#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "models/catch_torch.h"
#include "runtime/actor_registry.h"

namespace troupe::actors {

absl::StatusOr<std::unique_ptr<RolloutWorkerCore>> RolloutWorkerCore::Create(
    const proto::RolloutWorkerConfig& config, std::string worker) {
  std::unique_ptr<RolloutWorkerCore> core(new RolloutWorkerCore());
  core->worker_ = std::move(worker);
  TROUPE_ASSIGN_OR_RETURN(core->policy_, LoadPolicy(config.model_dir()));
  TROUPE_RETURN_IF_ERROR(models::CatchTorch("RolloutWorkerCore::Create", [&] {
    core->policy_.model->eval();
    return absl::OkStatus();
  }));
  TROUPE_ASSIGN_OR_RETURN(
      core->engine_,
      rollout::GenerationEngine::Create(core->policy_.model.ptr(),
                                        {.num_slots = config.num_slots(),
                                         .max_seq_len = config.max_seq_len(),
                                         .weight_versions_kept = config.weight_versions_kept()}));
  return core;
}

absl::Status RolloutWorkerCore::QueueWeights(const std::vector<collective::NamedTensor>& tensors,
                                             int64_t version) {
  rollout::WeightUpdate update;
  update.version = version;
  for (const collective::NamedTensor& t : tensors) update.tensors.emplace_back(t.name, t.tensor);
  return engine_->UpdateWeights(std::move(update));
}

absl::StatusOr<std::unique_ptr<RolloutWorker>> RolloutWorker::Create(const ActorContext& ctx) {
  TROUPE_ASSIGN_OR_RETURN(proto::RolloutWorkerConfig config,
                          ctx.ConfigAs<proto::RolloutWorkerConfig>());
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<RolloutWorkerCore> core,
                          RolloutWorkerCore::Create(config, ctx.name()));
  return std::unique_ptr<RolloutWorker>(new RolloutWorker(ctx, std::move(core)));
}

RolloutWorker::RolloutWorker(const ActorContext& ctx, std::unique_ptr<RolloutWorkerCore> core)
    : ctx_(ctx), core_(std::move(core)), name_(ctx.name()) {}

RolloutWorker::~RolloutWorker() { StopReceiver(); }

void RolloutWorker::StopReceiver() {
  if (receiver_ != nullptr) receiver_->Stop();
  receiver_.reset();
}

absl::StatusOr<proto::GenerateReply> RolloutWorkerCore::Generate(
    const proto::GenerateRequest& req) {
  if (req.prompts().empty()) return absl::InvalidArgumentError("Generate: no prompts");
  std::vector<std::vector<int32_t>> prompts;
  for (const proto::Prompt& p : req.prompts())
    prompts.emplace_back(p.tokens().begin(), p.tokens().end());
  rollout::SamplingParams params;
  params.temperature = req.greedy() ? 0.0 : req.temperature();
  params.top_p = req.top_p() > 0 ? req.top_p() : 1.0;
  params.top_k = req.top_k();
  params.max_new_tokens = req.max_new_tokens();
  params.n = std::max(1, req.n());
  params.seed = req.seed();
  // Every EOS id of the model (generation_config.json, config.json, tokenizer) ends a response.
  params.stop_token_ids = policy_.stop_token_ids;
  if (req.pin_weight_version()) {
    params.max_weight_version = req.min_weight_version();
    params.min_weight_version = req.min_weight_version();
  }
  // The engine runs one Generate at a time; two calls (a rollout and an evaluation, say) may
  // arrive together, and the second waits here.
  absl::ReleasableMutexLock generating(&generate_mu_);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::vector<rollout::GeneratedSample>> generated =
      engine_->Generate(prompts, params);
  generating.Release();
  if (!generated.ok()) return generated.status();
  std::vector<rollout::GeneratedSample> samples = *std::move(generated);
  proto::GenerateReply reply;
  reply.set_seconds(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  for (const proto::Prompt& p : req.prompts()) {
    proto::SampleGroup* g = reply.add_groups();
    g->set_prompt_id(p.prompt_id());
  }
  int64_t tokens = 0;
  for (rollout::GeneratedSample& gs : samples) {
    const proto::Prompt& prompt = req.prompts(static_cast<int>(gs.prompt_index));
    proto::Sample* s = reply.mutable_groups(static_cast<int>(gs.prompt_index))->add_samples();
    s->set_prompt_id(prompt.prompt_id());
    s->set_sample_index(static_cast<int32_t>(gs.sample_index));
    *s->mutable_prompt_tokens() = prompt.tokens();
    *s->mutable_response_tokens() = {gs.tokens.begin(), gs.tokens.end()};
    *s->mutable_behaviour_logprobs() = {gs.logprobs.begin(), gs.logprobs.end()};
    *s->mutable_token_versions() = {gs.weight_versions.begin(), gs.weight_versions.end()};
    int64_t oldest = gs.weight_versions.empty() ? engine_->weight_version() : gs.weight_versions[0];
    for (int64_t v : gs.weight_versions) oldest = std::min(oldest, v);
    s->set_policy_version(oldest);
    s->set_finish_reason(rollout::FinishReasonName(gs.finish_reason));
    std::vector<int32_t> text_tokens = gs.tokens;
    if (gs.finish_reason == rollout::FinishReason::kStop && !text_tokens.empty()) {
      text_tokens.pop_back();  // the stop id
    }
    absl::StatusOr<std::string> text = policy_.tokenizer->Decode(
        text_tokens, {.skip_special_tokens = true, .replace_invalid_utf8 = true});
    s->set_response_text(text.ok() ? *text : "");
    s->set_prompt_text(prompt.text());
    s->set_reference_answer(prompt.reference_answer());
    s->set_data_source(prompt.data_source());
    s->set_extra_info_json(prompt.extra_info_json());
    s->set_worker(worker_);
    tokens += static_cast<int64_t>(gs.tokens.size());
  }
  reply.set_tokens_generated(tokens);
  reply.set_weight_version(engine_->weight_version());
  return reply;
}

absl::StatusOr<proto::GenerateReply> RolloutWorker::Generate(const proto::GenerateRequest& req) {
  // Wait until the weights the driver asked for have arrived; a worker outside any weight group
  // (just restarted) never gets them: say so at once, so the driver brings it into the group.
  if (req.min_weight_version() > 0) {
    absl::MutexLock lock(&mu_);
    if (session_ == 0 && received_version_ < req.min_weight_version()) {
      return absl::FailedPreconditionError(
          absl::StrCat(name_, " is not in the weight group (restarted?) and has weights v",
                       received_version_, ", not v", req.min_weight_version()));
    }
    auto arrived = [this, &req]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return received_version_ >= req.min_weight_version() || group_broken_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&arrived), absl::Minutes(5));
    if (received_version_ < req.min_weight_version()) {
      // Alive, but cut off from the weights: FAILED_PRECONDITION tells the driver to (re)join
      // this worker to the weight group rather than treat it as dead.
      return absl::FailedPreconditionError(absl::StrCat(
          name_, ": weights of version ", req.min_weight_version(), " did not arrive (have ",
          received_version_, group_broken_ ? "; weight group broken: " + group_error_ : "", ")"));
    }
  }
  return core_->Generate(req);
}

absl::StatusOr<proto::JoinWeightGroupReply> RolloutWorker::JoinWeightGroup(
    const proto::JoinWeightGroupRequest& req) {
  if (req.rank() < 1 || req.rank() >= req.world_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "JoinWeightGroup: rank ", req.rank(), " is not a subscriber rank of ", req.world_size()));
  }
  if (ctx_.services() == nullptr) {
    return absl::FailedPreconditionError("JoinWeightGroup: this worker is not part of a cluster");
  }
  StopReceiver();
  uint64_t session;
  proto::JoinWeightGroupReply reply;
  {
    absl::MutexLock lock(&mu_);
    session = ++session_;
    group_broken_ = false;
    group_error_.clear();
    reply.set_weight_version(received_version_);
  }
  receiver_ = BackgroundTask::Start(ctx_, "weight receiver",
                                    [this, req, session](const BackgroundTask::StopToken& stop) {
                                      ReceiveLoop(req, session, stop);
                                    });
  return reply;
}

void RolloutWorker::ReceiveLoop(const proto::JoinWeightGroupRequest& req, uint64_t session,
                                const BackgroundTask::StopToken& stop) {
  auto fail = [&](const absl::Status& s) {
    absl::MutexLock lock(&mu_);
    if (session_ != session) return;
    group_broken_ = true;
    group_error_ = s.ToString();
    TROUPE_LOG(WARNING) << absl::StrFormat("%s: weight group %s: %s", name_.c_str(),
                                           req.group_name().c_str(), group_error_.c_str());
  };
  // Staging tensors the subscriber writes into (copy path) or checks the manifest against
  // (in place: it reads the trainer's shared buffers); the engine copies at UpdateWeights.
  std::vector<collective::NamedTensor> staging = core_->CopyWeights();
  absl::StatusOr<std::unique_ptr<collective::WeightSubscriber>> sub =
      collective::WeightSubscriber::Create(
          &ctx_.services()->kv(),
          {.name = absl::StrCat(req.group_name(), ".", req.epoch()),
           .world_size = req.world_size(),
           .rank = req.rank(),
           .timeout = absl::Seconds(120),
           .gloo_host = context().node_address()},
          staging, {.in_place = true});
  if (!sub.ok()) {
    fail(sub.status());
    return;
  }
  TROUPE_LOG(INFO) << absl::StrFormat(
      "%s: joined weight group %s.%lld as rank %d (%s)", name_.c_str(), req.group_name().c_str(),
      static_cast<long long>(req.epoch()), req.rank(),
      (*sub)->in_place()                     ? "in place, shared buffers"
      : (*sub)->group().uses_shared_memory() ? "copies through shared memory"
                                             : "copies through sockets");
  while (!stop.stop_requested()) {
    // Returns at once when the trainer announces a version (in place: woken through the shared
    // segment), else after the timeout, to look at the stop token again.
    absl::StatusOr<int64_t> announced = (*sub)->AwaitAnnouncedVersion(absl::Milliseconds(100));
    if (!announced.ok()) {
      fail(announced.status());
      break;
    }
    if (*announced <= (*sub)->version()) continue;
    absl::StatusOr<int64_t> v = (*sub)->Receive();
    if (!v.ok()) {
      fail(v.status());
      break;
    }
    if (*v <= queued_version_) {
      // Already running these weights (e.g. the initial publish of version 0 to a fresh worker).
      absl::MutexLock lock(&mu_);
      received_version_ = std::max(received_version_, *v);
      continue;
    }
    absl::Status queued = core_->QueueWeights((*sub)->weights(), *v);
    if (!queued.ok()) {
      fail(queued);
      break;
    }
    queued_version_ = *v;
    absl::MutexLock lock(&mu_);
    received_version_ = std::max(received_version_, *v);
  }
  (void)(*sub)->Close();
}

absl::Status RolloutWorker::LoadWeights(const std::vector<collective::NamedTensor>& tensors,
                                        int64_t version) {
  TROUPE_RETURN_IF_ERROR(core_->QueueWeights(tensors, version));
  absl::MutexLock lock(&mu_);
  received_version_ = std::max(received_version_, version);
  return absl::OkStatus();
}

absl::StatusOr<proto::WorkerStatus> RolloutWorker::Status(const proto::Empty&) {
  proto::WorkerStatus s;
  absl::MutexLock lock(&mu_);
  s.set_weight_version(received_version_);
  s.set_weight_group_broken(group_broken_);
  s.set_weight_group_error(group_error_);
  s.set_pid(::getpid());
  return s;
}

TROUPE_REGISTER_ACTOR(RolloutWorker, Generate, JoinWeightGroup, Status);

}  // namespace troupe::actors
