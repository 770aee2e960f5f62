#include "recipes/grpo/grpo_config.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "recipes/rl/actor_group.h"
#include "runtime/actor_registry.h"

namespace troupe::recipes {
namespace {

// SplitMix64.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

absl::Status CheckGrpoSpec(const JobSpec& spec) {
  std::vector<std::string> problems;
  auto refuse = [&](absl::string_view key, absl::string_view why) {
    problems.push_back(std::string(spec.ErrorAt(key, why).message()));
  };
  if (spec.algorithm.adv_estimator != AdvEstimator::kGrpo) {
    refuse("algorithm.adv_estimator",
           absl::StrCat(AdvEstimatorName(spec.algorithm.adv_estimator),
                        " is not supported by recipe grpo (supported: grpo)"));
  }
  for (const char* key : {"algorithm.gamma", "algorithm.lam"}) {
    if (spec.locations.contains(key))
      refuse(key, "recipe grpo has no GAE: gamma and lam are unused");
  }
  if (spec.actors.critic.replicas > 0)
    refuse("actors.critic.replicas", "recipe grpo has no critic");
  if (spec.actors.trainer.replicas > 1) {
    refuse("actors.trainer.replicas",
           "recipe grpo trains on one trainer (data-parallel training does not exist yet)");
  }
  // (A KL term without a reference is refused by the parser.)
  if (spec.algorithm.kl.coef == 0 && spec.locations.contains("actors.reference.replicas") &&
      spec.actors.reference.replicas > 0) {
    refuse("actors.reference.replicas",
           "algorithm.kl.coef is 0, so recipe grpo runs no reference: set it to 0 or remove it");
  }
  // Each role's type: registered (from a library, maybe) and serving the built-in type's methods.
  const JobSpec defaults;
  const auto default_kinds = ActorGroups(defaults);
  for (const auto& [kind, group] : default_kinds) {
    if (kind == "critic") continue;
    const ActorTypeInfo* role = ActorRegistry::Global().Find(group->type);
    if (role == nullptr) {
      return absl::InternalError(absl::StrCat("actor type ", group->type, " (", kind,
                                              ") is not linked into this program"));
    }
    if (absl::Status s = CheckRoleType(spec, kind, *role); !s.ok()) {
      problems.push_back(std::string(s.message()));
      if (absl::StrContains(s.message(), ".library: ")) break;  // said once for all kinds
    }
  }
  if (!spec.model.tokenizer.empty()) {
    refuse("model.tokenizer",
           "recipe grpo uses the initial policy's tokenizer (the SFT checkpoint's or the model "
           "directory's); another one is not supported");
  }
  if (spec.data.task != "arithmetic") {
    refuse("data.task", absl::StrCat("recipe grpo runs the arithmetic task, not ", spec.data.task));
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(problems, "\n"));
}

nlohmann::json GrpoTrainerConfig(const JobSpec& spec, const std::string& model_dir,
                                 const std::string& resume_dir, const std::string& checkpointer) {
  const TrainerSpec& t = spec.trainer;
  const AlgorithmSpec& a = spec.algorithm;
  return {{"model_dir", model_dir},
          {"resume_dir", resume_dir},
          {"lr", t.lr},
          {"warmup_steps", t.warmup_steps},
          {"total_steps", t.total_steps},
          {"min_lr_ratio", t.lr_schedule == LrSchedule::kConstant ? 1.0 : t.min_lr_ratio},
          {"weight_decay", t.weight_decay},
          {"grad_clip", t.grad_clip},
          {"seed", t.seed},
          {"threads", 1},
          {"micro_batch_size", t.micro_batch_size},
          {"clip_eps_low", a.clip_eps_low},
          {"clip_eps_high", a.clip_eps_high},
          {"kl_coef", a.kl.coef},
          {"kl_type", KlTypeName(a.kl.type)},
          {"entropy_coeff", a.entropy_coeff},
          {"loss_agg_mode", LossAggModeName(a.loss_agg_mode)},
          {"norm_adv_by_std", a.norm_adv_by_std},
          {"off_policy", OffPolicyModeName(a.off_policy.correction)},
          {"importance_cap", a.off_policy.cap},
          {"max_response_length", spec.data.max_response_length},
          {"checkpointer", checkpointer}};
}

nlohmann::json GrpoRolloutConfig(const JobSpec& spec, const std::string& model_dir) {
  return {{"model_dir", model_dir},
          {"threads", 1},
          {"num_slots", std::max<int64_t>(8, spec.data.train_batch_size * spec.algorithm.n /
                                                 spec.actors.rollout.replicas)},
          {"max_seq_len", spec.data.max_prompt_length + spec.data.max_response_length + 2}};
}

proto::GenerateRequest GrpoGenerateRequest(const JobSpec& spec, std::vector<proto::Prompt> prompts,
                                           int64_t min_version) {
  proto::GenerateRequest req;
  const uint64_t first = prompts.empty() ? 0 : static_cast<uint64_t>(prompts[0].prompt_id());
  for (auto& p : prompts) *req.add_prompts() = std::move(p);
  req.set_n(static_cast<int>(spec.algorithm.n));
  req.set_temperature(static_cast<float>(spec.rollout.temperature));
  req.set_top_p(static_cast<float>(spec.rollout.top_p));
  req.set_top_k(static_cast<int>(spec.rollout.top_k));
  req.set_max_new_tokens(static_cast<int>(spec.rollout.max_new_tokens));
  req.set_seed(Mix(static_cast<uint64_t>(spec.trainer.seed) * 1000003 + first));
  req.set_min_weight_version(min_version);
  return req;
}

}  // namespace troupe::recipes
