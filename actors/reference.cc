#include "actors/reference.h"

#include <torch/torch.h>

#include <utility>

#include "base/status_macros.h"
#include "models/catch_torch.h"
#include "runtime/actor_registry.h"

namespace troupe::actors {

absl::StatusOr<std::unique_ptr<ReferenceCore>> ReferenceCore::Create(
    const proto::ReferenceConfig& config) {
  std::unique_ptr<ReferenceCore> core(new ReferenceCore());
  TROUPE_ASSIGN_OR_RETURN(core->policy_, LoadPolicy(config.model_dir()));
  TROUPE_RETURN_IF_ERROR(models::CatchTorch("ReferenceCore::Create", [&] {
    core->policy_.model->eval();
    for (auto& param : core->policy_.model->parameters()) param.set_requires_grad(false);
    return absl::OkStatus();
  }));
  core->pad_id_ = core->policy_.tokenizer->pad_id().value_or(0);
  return core;
}

absl::StatusOr<proto::LogprobReply> ReferenceCore::Logprobs(const proto::LogprobRequest& req) {
  return models::CatchTorch("Reference::Logprobs", [&]() -> absl::StatusOr<proto::LogprobReply> {
    torch::NoGradGuard no_grad;
    proto::LogprobReply reply;
    if (req.samples().empty()) return reply;
    std::vector<const proto::Sample*> samples;
    for (const proto::Sample& s : req.samples()) samples.push_back(&s);
    TROUPE_ASSIGN_OR_RETURN(SequenceBatch batch, BuildBatch(samples, pad_id_));
    TROUPE_ASSIGN_OR_RETURN(at::Tensor logp, ResponseLogprobs(*policy_.model, batch));
    for (const std::vector<float>& values : GatherResponseValues(batch, logp)) {
      *reply.add_logprobs()->mutable_values() = {values.begin(), values.end()};
    }
    return reply;
  });
}

absl::StatusOr<std::unique_ptr<Reference>> Reference::Create(const ActorContext& ctx) {
  TROUPE_ASSIGN_OR_RETURN(proto::ReferenceConfig config, ctx.ConfigAs<proto::ReferenceConfig>());
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<ReferenceCore> core, ReferenceCore::Create(config));
  return std::unique_ptr<Reference>(new Reference(std::move(core)));
}

TROUPE_REGISTER_ACTOR(Reference, Logprobs);

}  // namespace troupe::actors
