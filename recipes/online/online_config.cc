#include "recipes/online/online_config.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "actors/judge.h"
#include "actors/roles.h"
#include "base/splitmix64.h"
#include "google/protobuf/util/json_util.h"
#include "models/safetensors.h"
#include "models/tokenizers/tokenizer.h"
#include "recipes/rl/actor_group.h"
#include "recipes/rl/chat_prompts.h"
#include "recipes/rl/job_data.h"
#include "recipes/sft/initial_policy.h"
#include "reward/reward_function.h"
#include "runtime/actor.h"
#include "runtime/actor_registry.h"
#include "tasks/task.h"
#include "trainers/algorithm_check.h"
#include "trainers/torch_op_spans.h"

namespace troupe::recipes {
namespace {

// `json`, an object, as a Struct (a reward's own config in a typed actor config).
absl::Status JsonToStruct(const nlohmann::json& json, google::protobuf::Struct* out) {
  if (auto s = google::protobuf::util::JsonStringToMessage(json.dump(), out); !s.ok()) {
    return absl::InvalidArgumentError(s.message().as_string());
  }
  return absl::OkStatus();
}

// A dataset job's records, read before any actor starts (CheckDatasetRecords), and the rewards
// their data sources name when reward.name does not choose one.
template <typename Refuse>
void CheckDataset(const JobSpec& spec, Refuse& refuse) {
  absl::StatusOr<JobChatTemplate> chat = LoadJobChatTemplate(spec);
  if (!chat.ok()) {
    // LoadJobChatTemplate's message already names the key and its location.
    refuse("", chat.status().message());
    return;
  }
  // The tokenizer the prompts will be encoded with, for their lengths (one that does not load is
  // CheckInitialPolicy's to report).
  std::unique_ptr<models::Tokenizer> tokenizer;
  if (const std::string path = JobTokenizerPath(spec); !path.empty()) {
    absl::StatusOr<std::unique_ptr<models::Tokenizer>> loaded = models::LoadTokenizer(path);
    if (loaded.ok()) tokenizer = *std::move(loaded);
  }
  absl::StatusOr<std::set<std::string>> sources =
      CheckDatasetRecords(spec, chat->renderer, tokenizer.get());
  if (!sources.ok()) {
    refuse("data.train_files", sources.status().message());
    return;
  }
  if (spec.data.val_files.empty() && spec.trainer.eval_every > 0) {
    refuse("trainer.eval_every", "a dataset job evaluates on data.val_files, which is not set");
  }
  if (!spec.reward.names.empty()) return;
  const std::vector<std::string> registered = reward::RewardNames();
  for (const std::string& source : *sources) {
    if (std::find(registered.begin(), registered.end(), source) != registered.end()) continue;
    refuse(spec.locations.contains("data.default_data_source") ? "data.default_data_source"
                                                               : "data.train_files",
           absl::StrCat("records of data source \"", source,
                        "\" have no reward of that name, and reward.name is not set (registered "
                        "rewards: ",
                        absl::StrJoin(registered, ", "), ")"));
  }
}

}  // namespace

proto::RewardServerConfig OnlineRewardConfig(const JobSpec& spec) {
  const RewardSpec& r = spec.reward;
  proto::RewardServerConfig config;
  const bool plain_weights = r.weights.empty() || (r.weights.size() == 1 && r.weights[0] == 1);
  if (r.names.empty() && !spec.data.task.empty()) {
    config.set_task(spec.data.task);
  } else if (r.names.size() == 1 && plain_weights && !r.config.contains(r.names[0])) {
    config.set_task(r.names[0]);
  } else {
    proto::RewardSetConfig& set = *config.mutable_reward();
    for (const std::string& name : r.names) set.add_name(name);
    for (const double w : r.weights) set.add_weights(w);
    if (r.weights.empty()) {
      for (size_t i = 0; i < r.names.size(); ++i) set.add_weights(1.0);
    }
    for (auto it = r.config.begin(); it != r.config.end(); ++it) {
      // The parser made each a map (job_spec.h); a reward refuses what it does not read.
      (void)JsonToStruct(it.value(), &(*set.mutable_config())[it.key()]);
    }
  }
  return config;
}

proto::JudgeConfig OnlineJudgeConfig(const JobSpec& spec) {
  const JudgeSpec& j = spec.reward.judge;
  proto::JudgeConfig config;
  config.set_model_dir(j.model);
  config.set_template_(j.template_text);
  if (j.score) {
    config.mutable_score()->set_min(j.score_min);
    config.mutable_score()->set_max(j.score_max);
  } else {
    for (auto it = j.verdicts.begin(); it != j.verdicts.end(); ++it) {
      // The parser checked each is a number.
      (*config.mutable_verdicts())[it.key()] = it.value().get<double>();
    }
  }
  config.set_marker(j.marker);
  config.set_max_new_tokens(j.max_new_tokens);
  config.set_slots(j.slots);
  config.set_add_bos(j.add_bos);
  config.set_weight(j.weight);
  *config.mutable_verifiers() = OnlineRewardConfig(spec);
  return config;
}

proto::RewardModelConfig OnlineRewardModelConfig(const JobSpec& spec) {
  proto::RewardModelConfig config;
  config.set_model_dir(spec.reward.model);
  config.set_weight(spec.reward.model_weight);
  *config.mutable_verifiers() = OnlineRewardConfig(spec);
  return config;
}

nlohmann::json RewardRoleConfig(const JobSpec& spec) {
  const ActorGroupSpec& group = spec.actors.reward;
  nlohmann::json config;
  if (!spec.reward.judge.model.empty()) {
    config = ConfigJson(OnlineJudgeConfig(spec));
  } else if (!spec.reward.model.empty()) {
    config = ConfigJson(OnlineRewardModelConfig(spec));
  } else {
    proto::RewardServerConfig rewards = OnlineRewardConfig(spec);
    if (group.type == JobSpec().actors.reward.type && !rewards.has_reward() &&
        !group.config.empty()) {
      // The built-in reward server's actors.reward.config is its task reward's own config.
      if (JsonToStruct(group.config, rewards.mutable_task_config()).ok()) {
        return ConfigJson(rewards);
      }
    }
    config = ConfigJson(rewards);
  }
  for (auto it = group.config.begin(); it != group.config.end(); ++it) {
    config[it.key()] = it.value();
  }
  return config;
}

ActorGroupOptions RewardRoleOptions(const std::string& job_id, const JobSpec& spec) {
  ActorGroupSpec group = spec.actors.reward;
  group.config = nlohmann::json::object();  // already in RewardRoleConfig
  return RoleOptions(job_id, actors::roles::kReward, group, group.replicas, RewardRoleConfig(spec),
                     /*indexed=*/true);
}

namespace {

// The update's choices against the traits of the registered estimators and policy losses
// (trainers/algorithm_check.h), each problem at its spec key: the group size, the critic, the
// estimator's options (gamma, lam) and, for recipe dpo, the preference loss's.
template <typename Refuse>
void CheckAlgorithm(const JobSpec& spec, absl::string_view recipe, bool trains_critic,
                    bool preference, Refuse& refuse) {
  const AlgorithmSpec& a = spec.algorithm;
  trainers::AlgorithmChoice choice;
  choice.recipe = std::string(recipe);
  choice.group_size = a.n;
  choice.trains_critic = trains_critic;
  // Where a choice refused for the critic runs instead.
  choice.needs_critic_hint = "recipe ppo runs gae";
  choice.needs_no_critic_hint = "run it with recipe grpo";
  // Each option the traits name, by its spec key.
  std::vector<std::pair<std::string, std::string>> options;
  if (preference) {
    choice.policy_loss = std::string(PreferenceLossName(a.dpo.loss));
    choice.recorded_pairs = !spec.data.preference_files.empty();
    for (const char* option : {"label_smoothing", "desirable_weight", "undesirable_weight"}) {
      options.push_back({option, absl::StrCat("algorithm.dpo.", option)});
    }
  } else {
    choice.adv_estimator = std::string(AdvEstimatorName(a.adv_estimator));
    choice.policy_loss = std::string(PolicyLossName(a.policy_loss));
    options = {{"gamma", "algorithm.gamma"}, {"lambda", "algorithm.lam"}};
  }
  for (const auto& [option, key] : options) {
    if (spec.locations.contains(key)) choice.options_written.push_back(option);
  }
  absl::StatusOr<std::vector<trainers::AlgorithmProblem>> problems =
      trainers::CheckAlgorithmTraits(choice);
  if (!problems.ok()) {
    refuse(preference ? "algorithm.dpo.loss" : "algorithm.adv_estimator",
           problems.status().message());
    return;
  }
  for (const trainers::AlgorithmProblem& p : *problems) {
    std::string key;
    switch (p.field) {
      case trainers::AlgorithmField::kAdvEstimator:
        key = "algorithm.adv_estimator";
        break;
      case trainers::AlgorithmField::kPolicyLoss:
        key = preference ? "algorithm.dpo.loss" : "algorithm.policy_loss";
        break;
      case trainers::AlgorithmField::kGroupSize:
        key = "algorithm.n";
        break;
      case trainers::AlgorithmField::kOption:
        for (const auto& [option, option_key] : options) {
          if (option == p.option) key = option_key;
        }
        break;
    }
    refuse(key, p.message);
  }
}

}  // namespace

absl::Status CheckGrpoSpec(const JobSpec& spec) { return CheckOnlineRlSpec(spec, "grpo"); }
absl::Status CheckPpoSpec(const JobSpec& spec) { return CheckOnlineRlSpec(spec, "ppo"); }
absl::Status CheckDpoSpec(const JobSpec& spec) { return CheckOnlineRlSpec(spec, "dpo"); }

// The trainer group's gradient buckets (DDP's default size): large enough that a bucket's sum is
// bandwidth-bound, small enough that the first ones overlap most of the backward pass.
constexpr double kGradBucketMb = 25;

absl::Status CheckOnlineRlSpec(const JobSpec& spec, absl::string_view recipe) {
  // (The keys a recipe does not read are its rules', online_rules.h: CheckRecipe refuses them.)
  const bool ppo = recipe == "ppo", dpo = recipe == "dpo";
  std::vector<std::string> problems;
  // An empty key: `why` is a message that already names its key and location.
  auto refuse = [&](absl::string_view key, absl::string_view why) {
    problems.push_back(key.empty() ? std::string(why)
                                   : std::string(spec.ErrorAt(key, why).message()));
  };
  CheckAlgorithm(spec, recipe, /*trains_critic=*/ppo, /*preference=*/dpo, refuse);
  if (dpo && spec.trainer.critic_warmup > 0) {
    refuse("trainer.critic_warmup", "recipe dpo has no critic to warm up");
  }
  if (dpo && !spec.data.preference_files.empty() && spec.locations.contains("algorithm.n")) {
    refuse("algorithm.n",
           "is not read with data.preference_files: each record is one pair (the policy samples "
           "only for the held-out evaluation)");
  }
  if (!ppo && spec.actors.critic.replicas > 0) {
    refuse("actors.critic.replicas", absl::StrCat("recipe ", recipe, " has no critic"));
  }
  if (spec.trainer.sharding != proto::SHARDING_NONE && spec.actors.trainer.replicas < 2) {
    refuse("trainer.sharding",
           "shards the trainer's state over its ranks, and actors.trainer.replicas is 1: there "
           "is nothing to shard over (set replicas >= 2, or sharding: none)");
  }
  // Every trainer (and critic) rank needs rows of every mini-batch: a mini-batch of
  // mini_batch_size groups (the batch with 0) of algorithm.n samples (dpo: one pair per group).
  const int64_t mini_batch_groups =
      spec.trainer.mini_batch_size > 0
          ? std::min(spec.trainer.mini_batch_size, spec.data.train_batch_size)
          : spec.data.train_batch_size;
  if (const int64_t ranks = spec.actors.trainer.replicas; ranks > 1) {
    const int64_t groups = mini_batch_groups;
    const int64_t units = dpo ? groups : groups * spec.algorithm.n;
    if (units < ranks) {
      refuse("actors.trainer.replicas",
             absl::StrCat(ranks, " trainer ranks, but a mini-batch has only ", units,
                          dpo ? " preference pairs" : " sequences",
                          " (data.train_batch_size, trainer.mini_batch_size",
                          dpo ? "" : ", algorithm.n", "): every rank needs a share"));
    }
  }
  if (const int64_t ranks = spec.actors.critic.replicas; ppo && ranks > 1) {
    // The critic's mini-batches are the trainer's (trainer.mini_batch_size).
    const int64_t sequences = mini_batch_groups * spec.algorithm.n;
    if (sequences < ranks) {
      refuse("actors.critic.replicas",
             absl::StrCat(ranks, " critic ranks, but a mini-batch has only ", sequences,
                          " sequences (data.train_batch_size, trainer.mini_batch_size, "
                          "algorithm.n): every rank needs a share"));
    }
    // A restarted rank would hold its initial weights beside ranks that trained: the group is
    // not re-formed, so a rank that dies ends the run (resume it from its checkpoint).
    if (spec.actors.critic.max_restarts != 0) {
      refuse("actors.critic.max_restarts",
             absl::StrCat("a critic of ", ranks,
                          " data-parallel ranks is not restarted (a restarted rank would leave "
                          "its group and the state the group trained; a run whose critic rank "
                          "dies ends, and --resume continues it from its checkpoint): set it to 0 "
                          "(the default with replicas > 1)"));
    }
  }
  if (!spec.reward.model.empty()) {
    // A directory that is not a reward model would only fail once the actors start.
    absl::StatusOr<models::SafetensorsReader> weights =
        models::SafetensorsReader::Open(spec.reward.model);
    if (!weights.ok()) {
      refuse("reward.model", absl::StrCat("cannot read its weights: ", weights.status().message()));
    } else if (!weights->Contains("score.weight")) {
      refuse("reward.model", absl::StrCat(spec.reward.model,
                                          " is not a reward model: its weights have no value head "
                                          "(score.weight); train one with recipe rm"));
    }
    if (spec.actors.reward.type != "RewardModel") {
      refuse("actors.reward.type",
             absl::StrCat("reward.model is served by the RewardModel actor, not ",
                          spec.actors.reward.type));
    }
  }
  if (const JudgeSpec& j = spec.reward.judge; !j.model.empty()) {
    // What the Judge actor would refuse only once the actors start.
    if (absl::StatusOr<actors::JudgeTemplate> t = actors::ParseJudgeTemplate(j.template_text);
        !t.ok() && !j.template_text.empty()) {
      refuse("reward.judge.template", t.status().message());
    }
    std::error_code ec;
    for (const char* file : {"config.json", "tokenizer.json"}) {
      if (!std::filesystem::exists(std::filesystem::path(j.model) / file, ec)) {
        refuse("reward.judge.model",
               absl::StrCat(j.model, " is not a model directory the judge can load: it has no ",
                            file, " (recipe sft writes one)"));
        break;
      }
    }
    if (spec.actors.reward.type != "Judge") {
      refuse("actors.reward.type", absl::StrCat("reward.judge is served by the Judge actor, not ",
                                                spec.actors.reward.type));
    }
  }
  if (!ppo && !dpo && spec.trainer.critic_warmup > 0) {
    refuse("trainer.critic_warmup", "recipe grpo has no critic to warm up");
  }
  if (spec.trainer.profile_from > 0) {
    if (absl::Status s = trainers::CanRecordOps(); !s.ok()) {
      refuse("trainer.profile_steps", absl::StrCat("cannot be honoured: ", s.message()));
    }
  }
  // (A KL term without a reference is refused by the parser.)
  if (!NeedsReference(spec) && spec.locations.contains("actors.reference.replicas") &&
      spec.actors.reference.replicas > 0) {
    refuse("actors.reference.replicas",
           absl::StrCat("algorithm.kl.coef is 0 and use_kl_in_reward is off, so recipe ", recipe,
                        " runs no reference: set it to 0 or remove it"));
  }
  // Each role's type: registered (from a library, maybe) and serving the built-in type's methods.
  const JobSpec defaults;
  const auto default_kinds = ActorGroups(defaults);
  for (const auto& [kind, group] : default_kinds) {
    if (kind == "critic" && !ppo) continue;
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
  // A built-in actor's free-form config overrides (actors.<kind>.config) are fields of its config
  // message, or the actor would refuse them once started.
  const std::vector<std::pair<std::string, const google::protobuf::Message*>> typed = {
      {"trainer", &proto::TrainerConfig::default_instance()},
      {"rollout", &proto::RolloutWorkerConfig::default_instance()},
      {"reference", &proto::ReferenceConfig::default_instance()},
      {"checkpointer", &proto::CheckpointerConfig::default_instance()},
      {"replay_buffer", &proto::ReplayBufferConfig::default_instance()},
      {"critic", &proto::CriticConfig::default_instance()}};
  const auto kinds = ActorGroups(spec);
  for (const auto& [kind, prototype] : typed) {
    for (size_t i = 0; i < kinds.size(); ++i) {
      const ActorGroupSpec& group = *kinds[i].second;
      if (kinds[i].first != kind || group.config.empty() ||
          group.type != default_kinds[i].second->type) {
        continue;
      }
      std::unique_ptr<google::protobuf::Message> m(prototype->New());
      google::protobuf::util::JsonParseOptions opts;
      opts.ignore_unknown_fields = false;
      if (auto s = google::protobuf::util::JsonStringToMessage(group.config.dump(), m.get(), opts);
          !s.ok()) {
        refuse(absl::StrCat("actors.", kind, ".config"),
               absl::StrCat("not a valid ", prototype->GetDescriptor()->name(),
                            " (proto/actor_config.proto): ", s.message().as_string()));
      }
    }
  }
  // The reward role's config with actors.reward.config in it, as troupe's own reward types will
  // read it (RewardRoleConfig).
  if (const ActorGroupSpec& group = spec.actors.reward; !group.config.empty()) {
    const std::vector<std::pair<std::string, const google::protobuf::Message*>> reward_types = {
        {"RewardServer", &proto::RewardServerConfig::default_instance()},
        {"RewardModel", &proto::RewardModelConfig::default_instance()},
        {"Judge", &proto::JudgeConfig::default_instance()}};
    for (const auto& [type, prototype] : reward_types) {
      // (A dataset job's actors.reward.config is refused below.)
      if (group.type != type || (type == "RewardServer" && spec.data.task.empty())) continue;
      std::unique_ptr<google::protobuf::Message> m(prototype->New());
      if (auto s =
              google::protobuf::util::JsonStringToMessage(RewardRoleConfig(spec).dump(), m.get());
          !s.ok()) {
        refuse("actors.reward.config",
               absl::StrCat("not a valid ", prototype->GetDescriptor()->name(),
                            " (proto/actor_config.proto): ", s.message().as_string()));
      }
    }
  }
  // The built-in reward server's config is its task's reward function's.
  for (size_t i = 0; i < kinds.size() && spec.data.task.empty(); ++i) {
    const ActorGroupSpec& group = *kinds[i].second;
    if (kinds[i].first == "reward" && !group.config.empty()) {
      refuse("actors.reward.config", "a dataset job configures its rewards in reward.config");
    }
  }
  for (size_t i = 0; i < kinds.size() && !spec.data.task.empty(); ++i) {
    const ActorGroupSpec& group = *kinds[i].second;
    if (kinds[i].first != "reward" || group.type != default_kinds[i].second->type) continue;
    absl::StatusOr<std::unique_ptr<reward::RewardFunction>> fn =
        reward::MakeRewardFunction(spec.data.task, group.config);
    if (!fn.ok() && fn.status().code() == absl::StatusCode::kInvalidArgument) {
      refuse("actors.reward.config", fn.status().message());
    } else if (!fn.ok() && fn.status().code() == absl::StatusCode::kNotFound &&
               tasks::FindTask(spec.data.task) != nullptr) {
      refuse("data.task", absl::StrCat("task ", spec.data.task,
                                       " has no verifier for the built-in reward server (",
                                       fn.status().message(), ")"));
    }
  }
  if (absl::Status s = CheckInitialPolicy(spec); !s.ok()) {
    problems.push_back(std::string(s.message()));
  }
  for (const std::string& name : spec.reward.names) {
    const nlohmann::json config = spec.reward.config.value(name, nlohmann::json::object());
    absl::StatusOr<std::unique_ptr<reward::RewardFunction>> fn =
        reward::MakeRewardFunction(name, config);
    if (!fn.ok()) refuse("reward.config", absl::StrCat(name, ": ", fn.status().message()));
  }
  if (!spec.data.train_files.empty()) {
    CheckDataset(spec, refuse);
  } else if (const tasks::TaskDefinition* task = tasks::FindTask(spec.data.task);
             task == nullptr || task->make_problems == nullptr) {
    refuse("data.task", absl::StrCat("recipe ", recipe, " needs a task with prompts of its own; ",
                                     spec.data.task, " has none"));
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(problems, "\n"));
}

proto::TrainerConfig OnlineTrainerConfig(const JobSpec& spec, const std::string& model_dir,
                                         const std::string& resume_dir,
                                         const std::string& checkpointer) {
  const TrainerSpec& t = spec.trainer;
  const AlgorithmSpec& a = spec.algorithm;
  proto::TrainerConfig c;
  c.set_model_dir(model_dir);
  c.set_resume_dir(resume_dir);
  c.set_checkpointer(checkpointer);
  c.set_lr(t.lr);
  c.set_lr_schedule(t.lr_schedule);
  c.set_warmup_steps(t.warmup_steps);
  c.set_total_steps(t.total_steps);
  c.set_min_lr_ratio(t.min_lr_ratio);
  c.set_weight_decay(t.weight_decay);
  c.set_grad_clip(t.grad_clip);
  c.set_seed(t.seed);
  c.set_micro_batch_size(t.micro_batch_size);
  c.set_clip_eps_low(a.clip_eps_low);
  c.set_clip_eps_high(a.clip_eps_high);
  c.set_kl_coef(a.kl.coef);
  c.set_kl_type(a.kl.type);
  c.set_entropy_coeff(a.entropy_coeff);
  c.set_loss_agg_mode(a.loss_agg_mode);
  c.set_norm_adv_by_std(a.norm_adv_by_std);
  c.set_adv_estimator(a.adv_estimator);
  c.set_gamma(a.gamma);
  c.set_lam(a.lam);
  c.set_ppo_epochs(t.ppo_epochs);
  c.set_mini_batch_size(t.mini_batch_size);
  c.set_train_batch_size(spec.data.train_batch_size);
  c.set_policy_loss(a.policy_loss);
  c.set_off_policy(a.off_policy.correction);
  c.set_importance_cap(a.off_policy.cap);
  c.set_max_response_length(spec.data.max_response_length);
  c.set_profile_from(t.profile_from);
  c.set_profile_to(t.profile_to);
  c.set_activation_checkpointing(t.activation_checkpointing);
  // Recipe dpo's preference loss (none for the policy-gradient recipes).
  const bool dpo = spec.recipe == "dpo";
  const DpoSpec& d = a.dpo;
  c.set_preference_loss(dpo ? d.loss : proto::PREFERENCE_LOSS_NONE);
  c.set_preference_beta(d.beta);
  c.set_label_smoothing(d.label_smoothing);
  c.set_kto_desirable_weight(d.desirable_weight);
  c.set_kto_undesirable_weight(d.undesirable_weight);
  if (dpo) c.set_kl_coef(0);  // the losses are against the reference already (beta)
  c.set_data_parallel_size(static_cast<int32_t>(spec.actors.trainer.replicas));
  c.set_grad_bucket_mb(kGradBucketMb);
  c.set_sharding(spec.trainer.sharding);
  return c;
}

bool NeedsReference(const JobSpec& spec) {
  return spec.recipe == "dpo" || spec.algorithm.kl.coef != 0 || spec.algorithm.use_kl_in_reward;
}

proto::CriticConfig PpoCriticConfig(const JobSpec& spec, const std::string& model_dir,
                                    const std::string& resume_dir) {
  const TrainerSpec& t = spec.trainer;
  const AlgorithmSpec& a = spec.algorithm;
  proto::CriticConfig c;
  c.set_model_dir(model_dir);
  c.set_resume_dir(resume_dir);
  c.set_weight_decay(t.weight_decay);
  c.set_grad_clip(t.grad_clip);
  c.set_seed(t.seed);
  c.set_micro_batch_size(t.micro_batch_size);
  c.set_ppo_epochs(t.ppo_epochs);
  c.set_mini_batch_size(t.mini_batch_size);
  c.set_loss_agg_mode(a.loss_agg_mode);
  c.set_gamma(a.gamma);
  c.set_lam(a.lam);
  c.set_kl_type(a.kl.type);
  c.set_data_parallel_size(static_cast<int32_t>(std::max<int64_t>(1, spec.actors.critic.replicas)));
  c.set_grad_bucket_mb(kGradBucketMb);
  c.set_activation_checkpointing(t.activation_checkpointing);
  return c;
}

proto::RolloutWorkerConfig OnlineRolloutConfig(const JobSpec& spec, const std::string& model_dir) {
  proto::RolloutWorkerConfig c;
  c.set_model_dir(model_dir);
  c.set_num_slots(static_cast<int32_t>(
      std::max<int64_t>(8, std::max(spec.data.train_batch_size, spec.data.gen_batch_size) *
                               spec.algorithm.n / spec.actors.rollout.replicas)));
  c.set_max_seq_len(
      static_cast<int32_t>(spec.data.max_prompt_length + spec.data.max_response_length + 2));
  // Asynchronous: a call pinned to version V holds prompts trained at step V + max_staleness at
  // the latest, and the trainer cannot publish past V + max_staleness before they are scored; an
  // evaluation pins the newest version. So the newest max_staleness + 1 versions cover every pin
  // (grpo_recipe.cc, "Reproducible asynchronous runs"). Synchronous: nothing arrives while a
  // call runs.
  c.set_weight_versions_kept(
      spec.async.max_staleness > 0 ? static_cast<int32_t>(spec.async.max_staleness + 1) : 0);
  return c;
}

proto::ReferenceConfig OnlineReferenceConfig(const std::string& model_dir) {
  proto::ReferenceConfig c;
  c.set_model_dir(model_dir);
  return c;
}

proto::CheckpointerConfig OnlineCheckpointerConfig(const JobSpec& spec) {
  proto::CheckpointerConfig c;
  c.set_dir(spec.actors.checkpointer.dir);
  c.set_keep(static_cast<int32_t>(spec.actors.checkpointer.keep));
  return c;
}

proto::GenerateRequest OnlineGenerateRequest(const JobSpec& spec,
                                             std::vector<proto::Prompt> prompts, int64_t version) {
  proto::GenerateRequest req;
  const uint64_t first = prompts.empty() ? 0 : static_cast<uint64_t>(prompts[0].prompt_id());
  for (auto& p : prompts) *req.add_prompts() = std::move(p);
  req.set_n(static_cast<int>(spec.algorithm.n));
  req.set_temperature(static_cast<float>(spec.rollout.temperature));
  req.set_top_p(static_cast<float>(spec.rollout.top_p));
  req.set_top_k(static_cast<int>(spec.rollout.top_k));
  req.set_max_new_tokens(static_cast<int>(spec.rollout.max_new_tokens));
  req.set_seed(SplitMix64(static_cast<uint64_t>(spec.trainer.seed) * 1000003 + first));
  req.set_min_weight_version(version);
  req.set_pin_weight_version(true);
  return req;
}

}  // namespace troupe::recipes
