// The algorithm section: the advantage estimator and the policy loss (clipping, KL, entropy,
// off-policy correction), dynamic sampling, the KL in the reward, and recipe dpo's preference
// loss.
#include "recipes/job_spec/sections.h"

namespace troupe::recipes::job_spec_internal {
namespace {

constexpr char kKlCtrlOnly[] =
    "the KL controller sets the KL in the reward: it needs algorithm.use_kl_in_reward: true";

void WalkDpo(Section& a, JobSpec& spec) {
  DpoSpec& d = spec.algorithm.dpo;
  Section dpo = a.Sub("dpo");
  dpo.Enum("loss", &d.loss, PreferenceLosses(),
           {.doc = "recipe dpo: dpo or ipo (on each group's best- against worst-rewarded sample), "
                   "or kto (each sample, desirable when above its group's mean reward)"});
  dpo.Double("beta", &d.beta, Positive(),
             {.doc = "recipe dpo: strength of the pull to the reference (DPO's beta)"});
  dpo.Double("label_smoothing", &d.label_smoothing, Range{0, 0.5, false, true},
             {.doc = "recipe dpo, loss dpo: cDPO's probability that a label is wrong",
              .write_if = d.loss == proto::PREFERENCE_LOSS_DPO});
  dpo.Double(
      "desirable_weight", &d.desirable_weight, Positive(),
      {.doc = "recipe dpo, loss kto: lambda_D", .write_if = d.loss == proto::PREFERENCE_LOSS_KTO});
  dpo.Double(
      "undesirable_weight", &d.undesirable_weight, Positive(),
      {.doc = "recipe dpo, loss kto: lambda_U", .write_if = d.loss == proto::PREFERENCE_LOSS_KTO});
  dpo.Finish();
}

}  // namespace

void WalkAlgorithm(Section& top, JobSpec& spec) {
  AlgorithmSpec& alg = spec.algorithm;
  // (A recipe that runs no algorithm section, or does not read some of its keys, says so in its
  // rules: the resolved spec then lists none of them.)
  Section a = top.Sub("algorithm");
  a.Enum("adv_estimator", &alg.adv_estimator, AdvEstimators(),
         {.doc = "advantage estimator: grpo, rloo, reinforce_plus_plus, "
                 "reinforce_plus_plus_baseline (trainers/advantage_estimators.h), or gae (PPO "
                 "with a critic; recipe ppo's default)"},
         {{"ppo", "PPO's estimator is called gae, as in verl"}});
  a.Int("n", &alg.n, Positive(),
        {.doc = "responses per prompt (verl: rollout.n); grpo and rloo need >= 2"});
  a.Bool("norm_adv_by_std", &alg.norm_adv_by_std,
         {.doc = "GRPO: divide by the group's std; false = Dr. GRPO"});
  a.Double("clip_eps", &alg.clip_eps, Open(0, 1), {.doc = "PPO clip (verl: clip_ratio)"});
  a.Double("clip_eps_low", &alg.clip_eps_low, Open(0, 1),
           {.doc = "ratio floor 1 - eps_low", .default_text = "algorithm.clip_eps"});
  a.Double("clip_eps_high", &alg.clip_eps_high, Open(0, 1),
           {.doc = "ratio cap 1 + eps_high (DAPO's clip-higher: 0.28)",
            .default_text = "algorithm.clip_eps"});
  Section kl = a.Sub("kl");
  kl.Double("coef", &alg.kl.coef, NonNegative(),
            {.doc = "KL-to-reference loss weight (verl: kl_loss_coef); 0 = off, and no reference "
                    "model"});
  kl.Enum("type", &alg.kl.type, KlTypes(),
          {.doc = "KL estimator (verl's low_var_kl is k3, kl is k1, mse is k2)"},
          {{"low_var_kl", "verl's low_var_kl is k3"},
           {"kl", "verl's kl is k1"},
           {"mse", "verl's mse is k2"}});
  kl.Finish();
  a.Double("entropy_coeff", &alg.entropy_coeff, NonNegative(), {.doc = "entropy bonus weight"});
  a.Enum("loss_agg_mode", &alg.loss_agg_mode, LossAggModes(),
         {.doc = "how token losses are averaged into the step's loss (verl's)"});
  a.Enum("policy_loss", &alg.policy_loss, PolicyLosses(),
         {.doc = "importance ratio of the clipped loss: vanilla (per token) or gspo (per "
                 "sequence, GSPO; use clip_eps_low/high around 3e-4/4e-4) (verl: "
                 "actor.policy_loss.loss_mode)"});
  Section filter = a.Sub("filter_groups");
  filter.Bool("enable", &alg.filter_groups.enable,
              {.doc = "DAPO's dynamic sampling: drop groups whose rewards are all equal and "
                      "generate more (counted as samples/filtered); on by default for recipe dpo",
               .default_text = "false (recipe dpo: true)"});
  filter.Int("max_num_gen_batches", &alg.filter_groups.max_num_gen_batches, NonNegative(),
             {.doc = "fail after this many batches' worth of dropped groups in a row; 0 = no "
                     "limit"});
  filter.Finish();
  a.Bool("use_kl_in_reward", &alg.use_kl_in_reward,
         {.doc = "subtract coef x KL(behaviour || reference) per token from the reward (verl's "
                 "use_kl_in_reward); needs a reference"});
  const bool adaptive = alg.kl_ctrl.type == KlCtrlType::kAdaptive;
  Section ctrl = a.Sub("kl_ctrl", {.read_if = alg.use_kl_in_reward, .unread_why = kKlCtrlOnly});
  ctrl.Enum("type", &alg.kl_ctrl.type, KlCtrlTypes(),
            {.doc = "the KL-in-reward coefficient: fixed, or adaptive towards target_kl (Ziegler "
                    "et al. 2019)"});
  ctrl.Double("kl_coef", &alg.kl_ctrl.kl_coef, NonNegative(), {.doc = "its (initial) coefficient"});
  ctrl.Double("target_kl", &alg.kl_ctrl.target_kl, Positive(),
              {.doc = "adaptive: the per-token KL it steers towards",
               .read_if = adaptive,
               .unread_why = "only the adaptive controller has a target"});
  ctrl.Int("horizon", &alg.kl_ctrl.horizon, Positive(),
           {.doc = "adaptive: samples over which the coefficient moves by at most 20%",
            .read_if = adaptive,
            .unread_why = "only the adaptive controller has a horizon"});
  ctrl.Finish();
  // gamma: GAE's and REINFORCE++'s discount; lam: GAE's. Listed for them, and whenever written:
  // another estimator that reads one says so in its registered traits, and the recipe's check
  // refuses the option for an estimator that does not (trainers/algorithm_check.h).
  const bool gae = alg.adv_estimator == proto::ADV_ESTIMATOR_GAE;
  const bool reinforce = alg.adv_estimator == proto::ADV_ESTIMATOR_REINFORCE_PLUS_PLUS;
  a.Double("gamma", &alg.gamma, Closed(0, 1),
           {.doc = "discount of gae and reinforce_plus_plus",
            .write_if = gae || reinforce || a.ctx()->Written("algorithm.gamma")});
  a.Double("lam", &alg.lam, Closed(0, 1),
           {.doc = "GAE lambda (gae only)", .write_if = gae || a.ctx()->Written("algorithm.lam")});
  Section off_policy = a.Sub("off_policy");
  off_policy.Enum("correction", &alg.off_policy.correction, OffPolicyModes(),
                  {.doc = "the pi_prox / pi_behav weight of stale samples (AReaL's decoupled "
                          "objective; trainers/losses.h)"});
  off_policy.Double("cap", &alg.off_policy.cap, Positive(),
                    {.doc = "its truncation (truncate) or mask (mask) bound"});
  off_policy.Finish();
  WalkDpo(a, spec);
  a.Finish();
}

// What the estimator and the KL terms need: samples per group, a critic, a reference.
void CheckAlgorithmRules(const JobSpec& s, Context& ctx) {
  const AlgorithmSpec& a = s.algorithm;
  const std::shared_ptr<const JobRecipeRules> recipe = RulesOf(s);
  if (a.n < recipe->min_group_size) {
    ctx.Add("algorithm.n",
            absl::StrCat("recipe ", recipe->name, " needs at least ", recipe->min_group_size,
                         " responses per prompt ", recipe->group_purpose, ", got ", a.n));
  } else if ((a.adv_estimator == proto::ADV_ESTIMATOR_GRPO ||
              a.adv_estimator == proto::ADV_ESTIMATOR_RLOO) &&
             a.n < 2) {
    ctx.Add("algorithm.n", absl::StrCat("adv_estimator ", AdvEstimatorName(a.adv_estimator),
                                        " needs at least 2 responses per prompt to form a group, "
                                        "got ",
                                        a.n));
  }
  if (a.adv_estimator == proto::ADV_ESTIMATOR_GAE && s.actors.critic.replicas == 0) {
    ctx.Add("actors.critic.replicas",
            "adv_estimator gae needs a critic: set actors.critic.replicas >= 1");
  }
  if (a.adv_estimator != proto::ADV_ESTIMATOR_GAE && s.actors.critic.replicas > 0) {
    ctx.Add("actors.critic.replicas", absl::StrCat("a critic is only used with adv_estimator gae, "
                                                   "not ",
                                                   AdvEstimatorName(a.adv_estimator)));
  }
  if (!recipe->needs_reference_why.empty() && s.actors.reference.replicas == 0) {
    ctx.Add("actors.reference.replicas",
            absl::StrCat(recipe->needs_reference_why, ": replicas must be >= 1"));
  } else if (a.kl.coef > 0 && s.actors.reference.replicas == 0) {
    ctx.Add("actors.reference.replicas",
            "algorithm.kl.coef > 0 needs a reference model (replicas >= 1); set kl.coef: 0 to run "
            "without one");
  }
  if (a.use_kl_in_reward && s.actors.reference.replicas == 0) {
    ctx.Add("actors.reference.replicas",
            "algorithm.use_kl_in_reward needs a reference model (replicas >= 1)");
  }
}

}  // namespace troupe::recipes::job_spec_internal
