#include "recipes/online/online_rules.h"

#include "absl/strings/str_cat.h"

namespace troupe::recipes {
namespace {

bool WarmsACritic(const JobSpec& spec) { return spec.trainer.critic_warmup > 0; }

// algorithm.dpo, read by recipe dpo only.
KeyRule DpoKeys(absl::string_view recipe) {
  return NotReadKey("algorithm.dpo",
                    absl::StrCat("is recipe dpo's; recipe ", recipe, " does not read it"));
}

}  // namespace

JobRecipeRules GrpoRules() {
  JobRecipeRules r;
  r.name = "grpo";
  r.keys = {DpoKeys(r.name), NotReadKey("trainer.critic_warmup",
                                        "recipe grpo has no critic to warm up", WarmsACritic)};
  return r;
}

JobRecipeRules PpoRules() {
  JobRecipeRules r;
  r.name = "ppo";
  r.keys = {DpoKeys(r.name)};
  // GAE with a critic unless told otherwise (gae brings its critic).
  r.defaults = [](JobSpec& spec, const WrittenFn& written) {
    if (!written("algorithm.adv_estimator")) {
      spec.algorithm.adv_estimator = proto::ADV_ESTIMATOR_GAE;
    }
  };
  return r;
}

JobRecipeRules DpoRules() {
  JobRecipeRules r;
  r.name = "dpo";
  KeyRule policy_gradient = NotReadKey(
      "algorithm.*",
      "is not read by recipe dpo, whose update is algorithm.dpo's preference loss against the "
      "reference (no advantages, clipping or KL term: algorithm.dpo.beta is the pull to the "
      "reference)");
  r.keys = {
      ReadsKey("algorithm.n"), ReadsKey("algorithm.dpo"), ReadsKey("algorithm.filter_groups"),
      policy_gradient,
      NotReadKey("trainer.critic_warmup", "recipe dpo has no critic to warm up", WarmsACritic)};
  // A group whose rewards are all equal gives no pair: dynamic sampling replaces it.
  r.defaults = [](JobSpec& spec, const WrittenFn& written) {
    if (!written("algorithm.filter_groups.enable")) spec.algorithm.filter_groups.enable = true;
  };
  r.reads_offline_pairs = true;
  r.min_group_size = 2;
  r.group_purpose = "to form a pair";
  r.needs_reference_why = "recipe dpo's losses are against a reference model";
  return r;
}

}  // namespace troupe::recipes
