#include "actors/reward_model.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "actors/policy_util.h"
#include "actors/reward_server.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "models/catch_torch.h"
#include "models/safetensors.h"
#include "models/transformer.h"
#include "runtime/actor_registry.h"

namespace troupe::actors {
namespace {

absl::Status ConfigError(const std::string& what) {
  return absl::InvalidArgumentError("reward model config: " + what);
}

// Scores of `samples` (each with a non-empty prompt and response and in-vocabulary ids): the
// model's value at each sequence's last token.
absl::StatusOr<std::vector<float>> ModelScores(models::ValueModelImpl& model,
                                               const std::vector<const proto::Sample*>& samples) {
  TROUPE_ASSIGN_OR_RETURN(SequenceBatch batch, BuildBatch(samples, /*pad_id=*/0));
  return models::CatchTorch("RewardModel::Score", [&]() -> absl::StatusOr<std::vector<float>> {
    torch::NoGradGuard no_grad;
    TROUPE_ASSIGN_OR_RETURN(at::Tensor values,
                            model.Forward(batch.input_ids, batch.attention_mask));
    std::vector<int64_t> last;
    for (size_t i = 0; i < samples.size(); ++i) {
      last.push_back(batch.prompt_lengths[i] + batch.response_lengths[i] - 1);
    }
    const at::Tensor picked = values.to(torch::kFloat)
                                  .gather(1, torch::tensor(last, torch::kLong).unsqueeze(1))
                                  .squeeze(1)
                                  .contiguous();
    return std::vector<float>(picked.data_ptr<float>(), picked.data_ptr<float>() + picked.numel());
  });
}

}  // namespace

RewardModelCore::~RewardModelCore() = default;

absl::StatusOr<std::unique_ptr<RewardModelCore>> RewardModelCore::Create(
    const proto::RewardModelConfig& config) {
  std::unique_ptr<RewardModelCore> core(new RewardModelCore());
  if (config.model_dir().empty()) {
    return ConfigError("model_dir: expected the reward model's directory");
  }
  const std::string& dir = config.model_dir();
  if (!std::isfinite(config.weight())) {
    return ConfigError(absl::StrCat("weight: expected a finite number, got ", config.weight()));
  }
  core->weight_ = config.weight();
  if (config.batch_size() < 1) {
    return ConfigError(
        absl::StrCat("batch_size: expected an integer >= 1, got ", config.batch_size()));
  }
  core->batch_size_ = config.batch_size();
  if (config.has_verifiers()) {
    absl::StatusOr<std::unique_ptr<reward::RewardSet>> verifiers =
        MakeRewardSet(config.verifiers());
    if (!verifiers.ok()) {
      return absl::Status(
          verifiers.status().code(),
          absl::StrCat("reward model config: verifiers: ", verifiers.status().message()));
    }
    core->verifiers_ = *std::move(verifiers);
  }
  // A policy or base model would load with a freshly drawn head: refuse it.
  TROUPE_ASSIGN_OR_RETURN(models::SafetensorsReader reader, models::SafetensorsReader::Open(dir));
  if (!reader.Contains("score.weight")) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir,
        ": not a reward model: its weights have no value head (score.weight); train one with "
        "recipe rm"));
  }
  TROUPE_ASSIGN_OR_RETURN(models::ValueModel model, models::LoadValueModel(dir));
  model->eval();
  core->vocab_size_ = model->config().vocab_size;
  core->model_ = model.ptr();
  return core;
}

absl::StatusOr<proto::ScoreReply> RewardModelCore::Score(const proto::ScoreRequest& req) {
  proto::ScoreReply reply;
  *reply.mutable_groups() = req.groups();
  TROUPE_RETURN_IF_ERROR(ScoreAll({&reply}));
  return reply;
}

absl::Status RewardModelCore::ScoreAll(const std::vector<proto::ScoreReply*>& replies) {
  std::vector<proto::Sample*> all;
  std::vector<proto::ScoreReply*> owner;  // the reply of each sample
  for (proto::ScoreReply* reply : replies) {
    for (proto::SampleGroup& g : *reply->mutable_groups()) {
      for (proto::Sample& s : *g.mutable_samples()) {
        all.push_back(&s);
        owner.push_back(reply);
      }
    }
  }
  std::vector<std::string> errors(all.size());
  // The verifiers' part, per sample.
  for (size_t i = 0; i < all.size(); ++i) {
    proto::Sample& s = *all[i];
    s.set_reward(0);
    s.mutable_reward_components()->clear();
    if (verifiers_ != nullptr) {
      absl::StatusOr<reward::RewardInput> in = RewardInputOf(s);
      if (!in.ok()) {
        errors[i] = std::string(in.status().message());
        continue;
      }
      try {
        reward::RewardOutput out = verifiers_->Score(*in);
        s.set_reward(static_cast<float>(out.reward));
        for (const auto& [k, v] : out.components) {
          (*s.mutable_reward_components())[k] = static_cast<float>(v);
        }
      } catch (const std::exception& e) {
        errors[i] = e.what();
        continue;
      }
    }
    if (s.prompt_tokens().empty() || s.response_tokens().empty()) {
      errors[i] = "the reward model cannot score an empty prompt or response";
      continue;
    }
    for (int32_t id : s.prompt_tokens()) {
      if (id < 0 || id >= vocab_size_)
        errors[i] = absl::StrCat("token id ", id,
                                 " is not in the "
                                 "reward model's vocabulary (",
                                 vocab_size_, ")");
    }
    for (int32_t id : s.response_tokens()) {
      if (id < 0 || id >= vocab_size_)
        errors[i] = absl::StrCat("token id ", id,
                                 " is not in the "
                                 "reward model's vocabulary (",
                                 vocab_size_, ")");
    }
  }
  // The model's part, batch_size samples at a time.
  std::vector<size_t> scorable;
  for (size_t i = 0; i < all.size(); ++i) {
    if (errors[i].empty()) scorable.push_back(i);
  }
  for (size_t begin = 0; begin < scorable.size(); begin += batch_size_) {
    const size_t end = std::min(scorable.size(), begin + static_cast<size_t>(batch_size_));
    std::vector<const proto::Sample*> batch;
    for (size_t k = begin; k < end; ++k) batch.push_back(all[scorable[k]]);
    TROUPE_ASSIGN_OR_RETURN(std::vector<float> scores, ModelScores(*model_, batch));
    for (size_t k = begin; k < end; ++k) {
      proto::Sample& s = *all[scorable[k]];
      const float score = scores[k - begin];
      s.set_reward(static_cast<float>(s.reward() + weight_ * score));
      (*s.mutable_reward_components())["rm/score"] = score;
    }
  }
  for (size_t i = 0; i < all.size(); ++i) {
    if (errors[i].empty()) continue;
    proto::Sample& s = *all[i];
    s.set_reward(0);
    s.mutable_reward_components()->clear();
    s.set_reward_error(errors[i]);
    owner[i]->set_failures(owner[i]->failures() + 1);
    TROUPE_LOG(WARNING) << absl::StrFormat(
        "reward model: prompt %lld sample %d scored as failed: %s",
        static_cast<long long>(s.prompt_id()), s.sample_index(), errors[i].c_str());
  }
  return absl::OkStatus();
}

void RewardModelCore::Serve(const std::function<bool()>& stop) {
  while (true) {
    const std::vector<ScoreQueue::Taken> round = queue_.Take(/*wait=*/true, stop);
    if (stop()) break;
    if (round.empty()) continue;
    {
      absl::MutexLock lock(&mutex_);
      ++stats_.rounds;
      stats_.requests += static_cast<int64_t>(round.size());
      stats_.most_requests = std::max<int64_t>(stats_.most_requests, round.size());
    }
    std::vector<proto::ScoreReply*> replies;
    for (const ScoreQueue::Taken& r : round) replies.push_back(&r->reply());
    const absl::Status status = ScoreAll(replies);
    for (const ScoreQueue::Taken& r : round) queue_.Complete(r, status);
  }
  queue_.Close();
  const ServeStats st = serve_stats();
  TROUPE_LOG(INFO) << absl::StrFormat(
      "reward model: served %d requests in %d passes (at most %d requests in one)", st.requests,
      st.rounds, st.most_requests);
}

RewardModelCore::ServeStats RewardModelCore::serve_stats() const {
  absl::MutexLock lock(&mutex_);
  return stats_;
}

absl::StatusOr<std::unique_ptr<RewardModel>> RewardModel::Create(const ActorContext& ctx) {
  TROUPE_ASSIGN_OR_RETURN(const proto::RewardModelConfig config,
                          ctx.ConfigAs<proto::RewardModelConfig>());
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<RewardModelCore> core, RewardModelCore::Create(config));
  std::unique_ptr<RewardModel> rm(new RewardModel(std::move(core)));
  RewardModelCore* serving = rm->core_.get();
  rm->server_ = BackgroundTask::Start(ctx, "reward model server",
                                      [serving](const BackgroundTask::StopToken& stop) {
                                        serving->Serve([&stop] { return stop.stop_requested(); });
                                      });
  return rm;
}

RewardModel::~RewardModel() {
  if (server_ != nullptr) server_->Stop();
}

TROUPE_REGISTER_ACTOR(RewardModel, Score);

}  // namespace troupe::actors
