#include "actors/reference.h"

#include <torch/torch.h>

#include <stdexcept>

#include "base/status_macros.h"
#include "models/compute_threads.h"
#include "runtime/actor_registry.h"

namespace troupe::actors {

Reference::Reference(const ActorContext& ctx) {
  const auto config = ctx.ConfigAsOrThrow<proto::ReferenceConfig>();
  models::SetComputeThreads(config.threads());
  absl::StatusOr<PolicyModel> p = LoadPolicy(config.model_dir());
  if (!p.ok()) throw std::runtime_error(std::string(p.status().message()));
  policy_ = std::move(*p);
  policy_.model->eval();
  for (auto& param : policy_.model->parameters()) param.set_requires_grad(false);
  pad_id_ = policy_.tokenizer->pad_id().value_or(0);
}

absl::StatusOr<proto::LogprobReply> Reference::Logprobs(const proto::LogprobRequest& req) {
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
}

TROUPE_REGISTER_ACTOR(Reference, Logprobs);

}  // namespace troupe::actors
