// JobSpec: an RL job as written in a job YAML (`troupe run job.yaml`, `troupe job submit`),
// parsed, checked and resolved (defaults filled in) before any actor starts.
//
//   absl::StatusOr<JobSpec> spec = LoadJobSpec("job.yaml", {"algorithm.n=4"});
//   if (!spec.ok()) return spec.status();  // "job.yaml:7:6: algorithm.n: expected a positive
//                                          //  integer, got "eight""
//   TROUPE_RETURN_IF_ERROR(ValidateFiles(*spec));        // model.config exists and parses, ...
//   TROUPE_RETURN_IF_ERROR(CheckDevices(*spec, {.libtorch_cuda = false}));
//   TROUPE_RETURN_IF_ERROR(CheckResourcesFit(*spec, cluster_nodes));
//   std::string resolved = ToYaml(*spec);   // record as <logging.dir>/job.yaml
//
//   name: grpo-arith
//   model: {config: examples/models/tiny.json, init: sft}
//   data: {task: arithmetic, train_batch_size: 32, max_response_length: 16}
//   algorithm: {adv_estimator: grpo, n: 8, clip_eps: 0.2, kl: {coef: 0.01, type: k3}}
//   async: {max_staleness: 2}
//   actors:
//     rollout: {replicas: 2, resources: {CPU: 1}}
//     checkpointer: {dir: runs/grpo-arith/ckpt, every_steps: 20, keep: 3}
//   trainer: {total_steps: 200, seed: 1}
//
// Rules. Unknown keys are errors (with a did-you-mean); every error names the location, the key
// path and what was expected: "FILE:LINE:COL: key.path: message", or "override TEXT: key.path:
// message" for a command-line override. The errors of all keys are reported at once, one per
// line in file order (then overrides); malformed YAML, a duplicate key or a malformed override
// stops at the first, and the rules between keys are checked once every key is valid on its own.
// Scalars are typed by the YAML 1.2 core schema: `8` is an integer, `"8"`
// a string, `1e-4` a number, `yes` a string. An empty section (`reference:`) means "all
// defaults". Anchors, aliases and merge keys (`<<: *cpu_actor`) work; top-level keys starting
// with "x-" are ignored, as in Docker Compose, to hold anchors. Relative paths are relative to the
// working directory (like verl), not to the YAML file.
//
// Limits, checked before the YAML is parsed, so refusing a huge or hostile spec costs little: at
// most kMaxJobSpecBytes (1 MiB) of UTF-8 text without NUL bytes ("not a text file"), at most
// kMaxJobSpecNodes YAML nodes as written and kMaxJobSpecDepth levels of nesting (counted from
// yaml-cpp's events, before any tree is built), and 100000 nodes once aliases are expanded. Each
// override is bounded the same way. Values echoed in messages are cut to 80 bytes: "abc…" (N
// bytes). A directory given as a spec is refused as such.
//
// Overrides ("key.path=VALUE", applied in order before validation) replace the value at the path;
// VALUE is YAML, so `actors.rollout.resources={CPU: 2}` replaces the whole resources map and
// `actors.trainer.config.lr=3e-4` sets one key of a free-form config.
//
// Keys: docs/job_spec.md lists every key with the type and range the parser checks, its default
// and what it means. It is generated from the parser itself (DescribeSpecKeys: each key's type,
// range, default and doc are written at its reader call, one file per section, *_section.cc) and a
// test fails when it is stale. Names follow verl where it has
// one, and so do the defaults, except troupe's own: adv_estimator grpo and n = 8 (verl: gae,
// n = 1; troupe's first recipe is GRPO, which needs a group per prompt), the off-policy and
// staleness keys (AReaL's), rollout.top_k 0 (verl: -1) and the sft section (the SFT recipe's,
// recipes/sft/sft_recipe.h).
//
// Rules between keys (checked once every key is valid on its own): algorithm.n >= 2 for grpo; a
// critic (actors.critic.replicas >= 1: the ranks of its data-parallel group, as the trainer's
// replicas are; a critic of several ranks is not restarted, max_restarts 0 by default) exactly
// when adv_estimator is gae; a reference
// (actors.reference.replicas >= 1) when algorithm.kl.coef > 0; rollout.max_new_tokens <=
// data.max_response_length; warmup steps < total steps (trainer and sft);
// trainer.micro_batch_size <= data.train_batch_size x algorithm.n; model.init: sft only for a
// task with supervised data; exactly one of data.task and data.train_files; data.val_files,
// the key mappings, shuffle, filter_overlong_prompts, truncation and chat_template only with
// train_files; data.chosen_key and data.rejected_key only for recipe rm (whose own check,
// recipes/rm/rm_recipe.h, refuses the keys it does not read; model.init: sft is not checked here
// for it); reward.name registered rewards (reward/reward_function.h), reward.weights as many
// as names, reward.config keyed by those names. Which keys a recipe runs is the recipe's own check
// (recipes/recipe.h; recipes/online/online_config.h).
//
// Thread-safety: JobSpec is a plain value; all functions are thread-safe (the task registry they
// consult has its own lock).
#ifndef TROUPE_RECIPES_JOB_SPEC_JOB_SPEC_H_
#define TROUPE_RECIPES_JOB_SPEC_JOB_SPEC_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "nlohmann/json.hpp"
#include "proto/actor_config.pb.h"
#include "proto/core.pb.h"

namespace troupe::recipes {

// The limits in the file comment.
inline constexpr int64_t kMaxJobSpecBytes = int64_t{1} << 20;
inline constexpr int64_t kMaxJobSpecNodes = 10000;
inline constexpr int kMaxJobSpecDepth = 64;

enum class ModelInit { kSft, kRandom, kPath };
// The RL enums are proto/actor_config.proto's: the spec hands them to the actors as they are, and
// their YAML spellings are the values' (spelling) options there.
using AdvEstimator = proto::AdvEstimator;
using KlType = proto::KlEstimator;
using LossAggMode = proto::LossAggregation;
using PolicyLoss = proto::PolicyLossMode;
using OffPolicyMode = proto::OffPolicyCorrection;
using LrSchedule = proto::LrSchedule;
using Sharding = proto::Sharding;
using PreferenceLoss = proto::PreferenceLoss;

// The defaults a spec key shares with an actor's config are the actor's (proto/actor_config.proto
// [default = ...]): one place, so a job and a bare actor agree.
inline const proto::TrainerConfig& TrainerDefaults() {
  return proto::TrainerConfig::default_instance();
}
inline const proto::JudgeConfig& JudgeDefaults() { return proto::JudgeConfig::default_instance(); }

// The spellings used in the YAML ("sft", "grpo", "k3", "token-mean", "truncate", "cosine").
absl::string_view ModelInitName(ModelInit init);
absl::string_view AdvEstimatorName(AdvEstimator estimator);
absl::string_view KlTypeName(KlType type);
absl::string_view LossAggModeName(LossAggMode mode);
absl::string_view PolicyLossName(PolicyLoss mode);
absl::string_view OffPolicyModeName(OffPolicyMode mode);
absl::string_view LrScheduleName(LrSchedule schedule);
absl::string_view PreferenceLossName(PreferenceLoss loss);

struct ModelSpec {
  std::string config;  // May be empty only when init == kPath.
  ModelInit init = ModelInit::kSft;
  std::string init_path;  // kPath only.
  std::string tokenizer;
};

// What data.truncation does with a prompt longer than data.max_prompt_length tokens.
enum class Truncation { kError, kLeft, kRight };
absl::string_view TruncationName(Truncation truncation);

// data.sampler: how the RL recipes pick the training prompt of each draw
// (recipes/rl/prompt_source.h): in order (sequential), or at random with the prompts whose last
// group's rewards were all equal drawn uniform_weight times as often (prioritized).
struct SamplerSpec {
  bool prioritized = false;
  double uniform_weight = 0.1;  // in (0, 1]
};

// Exactly one of `task` (a registered task's generated problems) and `train_files` (JSONL
// datasets, data/jsonl_dataset.h) is set.
struct DataSpec {
  std::string task;
  std::vector<std::string> train_files;
  std::vector<std::string> val_files;
  // Where a record's fields are (dotted paths; verl's names by default, OpenRLHF's by mapping).
  std::string prompt_key = "prompt";
  std::string answer_key = "reward_model.ground_truth";
  std::string data_source_key = "data_source";
  std::string default_data_source;  // "" = every record names its own
  // Recipe dpo only: offline training pairs, preference records as recipe rm reads them
  // (data/preference_pairs.h) instead of pairs sampled from the policy; the task (data.task)
  // still gives the held-out evaluation.
  std::vector<std::string> preference_files;
  // Recipe rm, and recipe dpo's preference_files: a preference record's preferred and
  // dispreferred responses.
  std::string chosen_key = "chosen";
  std::string rejected_key = "rejected";
  bool shuffle = true;
  bool filter_overlong_prompts = false;
  Truncation truncation = Truncation::kError;
  std::string chat_template;  // "" = none (a messages prompt is then refused)
  SamplerSpec sampler;
  int64_t train_batch_size = 1024;
  // Prompts an asynchronous run's generation round draws, split over the rollout workers (each
  // Generate call gets gen_batch_size / replicas prompts); 0 = train_batch_size. Larger rounds
  // (verl's DAPO recipe uses 3x) batch the generation better when dynamic sampling drops most
  // groups.
  int64_t gen_batch_size = 0;
  int64_t max_prompt_length = 512;
  int64_t max_response_length = TrainerDefaults().max_response_length();
  int64_t heldout_size = 500;
  int64_t seed = 0;
  // The task's own keys (job_tasks.h), every one present, defaults filled in.
  nlohmann::json task_params = nlohmann::json::object();
};

// The rewards that score the job's samples. Empty `names` = the task's own verifier (data.task),
// or for a dataset the reward named by each record's data_source.
// reward.overlong_buffer: DAPO's overlong reward shaping (recipes/rl/group_filter.h).
struct OverlongBufferSpec {
  bool enable = false;
  int64_t len = 0;  // > 0 and < data.max_response_length when enabled.
  double penalty_factor = 1.0;
};

// reward.judge: a generative model that reads each sample through `template` and replies with a
// verdict (or a score), served by the Judge actor (actors/judge.h); added with `weight` to the
// rewards above. model "" = none.
// The defaults are the Judge's (proto::JudgeConfig).
struct JudgeSpec {
  std::string model;
  std::string template_text;
  nlohmann::json verdicts = nlohmann::json::object();  // label -> value; {} = score mode
  bool score = false;                                  // reward.judge.score given
  double score_min = JudgeDefaults().score().min();
  double score_max = JudgeDefaults().score().max();
  // The verdict is read after its last occurrence; "" = the reply's start.
  std::string marker = JudgeDefaults().marker();
  int64_t max_new_tokens = JudgeDefaults().max_new_tokens();
  int64_t slots = JudgeDefaults().slots();
  bool add_bos = JudgeDefaults().add_bos();
  double weight = JudgeDefaults().weight();
};

struct RewardSpec {
  std::vector<std::string> names;
  std::vector<double> weights;                       // Empty = 1 each; else one per name.
  nlohmann::json config = nlohmann::json::object();  // name -> that reward's config object
  OverlongBufferSpec overlong_buffer;
  // A trained reward model (recipe rm's output) scoring every sample, added with model_weight to
  // the rewards above (give those weight 0 to reward by the model alone); "" = none. The reward
  // role then runs the RewardModel actor (actors/reward_model.h).
  std::string model;
  double model_weight = proto::RewardModelConfig::default_instance().weight();
  JudgeSpec judge;
};

struct KlSpec {
  double coef = TrainerDefaults().kl_coef();
  KlType type = TrainerDefaults().kl_type();
};

struct OffPolicySpec {
  OffPolicyMode correction = TrainerDefaults().off_policy();
  double cap = TrainerDefaults().importance_cap();
};

// algorithm.filter_groups: DAPO's dynamic sampling (recipes/rl/group_filter.h).
struct FilterGroupsSpec {
  bool enable = false;
  int64_t max_num_gen_batches = 10;  // 0 = no limit.
};

// algorithm.kl_ctrl: the coefficient of the KL in the reward (algorithm.use_kl_in_reward), fixed
// or adapted towards target_kl (Ziegler et al. 2019; verl's kl_ctrl; recipes/rl/kl_controller.h).
enum class KlCtrlType { kFixed, kAdaptive };
absl::string_view KlCtrlTypeName(KlCtrlType type);

struct KlCtrlSpec {
  KlCtrlType type = KlCtrlType::kFixed;
  double kl_coef = 0.001;
  double target_kl = 0.1;
  int64_t horizon = 10000;
};

// algorithm.dpo: recipe dpo's preference loss on pairs the verifier (or reward model) labels
// (trainers/losses.h; proto TrainerConfig's preference_* fields, which hold the defaults).
struct DpoSpec {
  PreferenceLoss loss = proto::PREFERENCE_LOSS_DPO;  // dpo, ipo or kto (none is not a choice)
  double beta = TrainerDefaults().preference_beta();
  double label_smoothing = TrainerDefaults().label_smoothing();        // cDPO's epsilon; dpo only
  double desirable_weight = TrainerDefaults().kto_desirable_weight();  // kto only
  double undesirable_weight = TrainerDefaults().kto_undesirable_weight();  // kto only
};

struct AlgorithmSpec {
  AdvEstimator adv_estimator = proto::ADV_ESTIMATOR_GRPO;
  int64_t n = 8;
  bool norm_adv_by_std = TrainerDefaults().norm_adv_by_std();
  double clip_eps = TrainerDefaults().clip_eps_low();
  double clip_eps_low = clip_eps;  // Resolved: clip_eps unless given.
  double clip_eps_high = TrainerDefaults().clip_eps_high();
  KlSpec kl;
  double entropy_coeff = TrainerDefaults().entropy_coeff();
  LossAggMode loss_agg_mode = TrainerDefaults().loss_agg_mode();
  PolicyLoss policy_loss = TrainerDefaults().policy_loss();
  FilterGroupsSpec filter_groups;
  bool use_kl_in_reward = false;
  KlCtrlSpec kl_ctrl;
  double gamma = 1.0;
  double lam = 1.0;
  OffPolicySpec off_policy;
  DpoSpec dpo;  // recipe dpo only
};

struct AsyncSpec {
  int64_t max_staleness = 0;  // 0 = synchronous, on-policy.
};

struct RolloutSpec {
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t top_k = 0;
  int64_t max_new_tokens = 0;  // Resolved: data.max_response_length unless given.
};

struct TrainerSpec {
  int64_t total_steps = 0;  // Required.
  int64_t seed = TrainerDefaults().seed();
  double lr = TrainerDefaults().lr();
  LrSchedule lr_schedule = TrainerDefaults().lr_schedule();
  Sharding sharding = TrainerDefaults().sharding();
  int64_t warmup_steps = TrainerDefaults().warmup_steps();
  double min_lr_ratio = TrainerDefaults().min_lr_ratio();
  double weight_decay = TrainerDefaults().weight_decay();
  double grad_clip = TrainerDefaults().grad_clip();
  int64_t micro_batch_size = TrainerDefaults().micro_batch_size();
  // PPO's optimizer steps per batch: ppo_epochs passes over mini-batches of mini_batch_size
  // prompts (0 = the whole batch); the critic's too.
  int64_t ppo_epochs = TrainerDefaults().ppo_epochs();
  int64_t mini_batch_size = TrainerDefaults().mini_batch_size();
  // Recipe ppo: the first critic_warmup steps train the critic only (the policy is not updated).
  int64_t critic_warmup = 0;
  int64_t eval_every = 0;
  // trainer.profile_steps [from, to]: the trainer records LibTorch operators as timeline spans
  // during these steps (1 = the first); 0, 0 = none.
  int64_t profile_from = 0;
  int64_t profile_to = 0;
  // Every model the run trains (policy, critic, reward model, SFT) recomputes each decoder layer
  // in the backward pass instead of keeping its activations.
  bool activation_checkpointing = TrainerDefaults().activation_checkpointing();
};

struct SftSpec {
  int64_t steps = 1000;
  int64_t batch_size = 64;
  double lr = 3e-3;
  int64_t warmup_steps = 50;
  double min_lr_ratio = 0.1;
  double weight_decay = 0.01;
  double grad_clip = 1.0;
  int64_t eval_every = 100;
  double target_accuracy = 1.0;
  std::string dir;  // Resolved: <logging.dir>/sft unless given.
  // A dataset job's supervised records (JSONL: prompt + response); a task's are its own.
  std::vector<std::string> train_files;
  std::string prompt_key = "prompt";
  std::string response_key = "response";
};

struct ActorResources {
  double cpu = 0;
  double gpu = 0;     // A whole number.
  double memory = 0;  // Bytes.
  std::map<std::string, double> custom;

  // {"CPU": .., "GPU": .., "memory": .., custom...} with the non-zero amounts only (the form
  // proto::Resources and the scheduler take).
  std::map<std::string, double> AsMap() const;
};

// actors.<kind>.placement: the strategy of a placement group reserving one bundle of the role's
// resources per replica (replica i runs in bundle i; runtime/scheduler/cluster_scheduler.h),
// spelled as proto/core.proto's PlacementStrategy (and Ray's): PACK, SPREAD, STRICT_PACK,
// STRICT_SPREAD.
using PlacementStrategy = proto::PlacementStrategy;
absl::string_view PlacementStrategyName(PlacementStrategy strategy);

// One kind of actor of the job: `replicas` instances of a registered actor type.
struct ActorGroupSpec {
  std::string type;
  std::string library;  // "" = none
  int64_t replicas = 1;
  ActorResources resources;
  // nullopt = no placement group: each replica is placed on its own (the head's default policy).
  std::optional<PlacementStrategy> placement;
  int64_t max_restarts = 0;
  nlohmann::json config = nlohmann::json::object();
};

// The per-kind defaults of the table in the file comment.
ActorGroupSpec DefaultActorGroup(absl::string_view type, int64_t replicas, double cpu,
                                 int64_t max_restarts);

struct CheckpointerSpec : ActorGroupSpec {
  CheckpointerSpec() : ActorGroupSpec(DefaultActorGroup("Checkpointer", 1, 0, 3)) {}

  std::string dir;  // Resolved: <logging.dir>/ckpt unless given.
  int64_t every_steps = 0;
  int64_t keep = proto::CheckpointerConfig::default_instance().keep();
};

struct ActorsSpec {
  ActorGroupSpec rollout = DefaultActorGroup("RolloutWorker", 1, 1, 3);
  ActorGroupSpec reward = DefaultActorGroup("RewardServer", 1, 0, 3);
  ActorGroupSpec reference = DefaultActorGroup("Reference", 1, 1, 3);
  // The trainer is not restarted: its weights and optimizer are the run's (a failed run resumes
  // from its checkpoint with --resume). A restarted critic of one rank resumes from its newest
  // checkpoint (one of several ranks is not restarted: max_restarts resolves to 0 with
  // replicas > 1) and a restarted replay buffer from the driver's record
  // (recipes/online/online_recipe.cc).
  ActorGroupSpec trainer = DefaultActorGroup("Trainer", 1, 1, 0);
  ActorGroupSpec critic = DefaultActorGroup("Critic", 0, 1, 3);
  ActorGroupSpec replay_buffer = DefaultActorGroup("ReplayBuffer", 1, 0, 3);
  CheckpointerSpec checkpointer;
};

struct LoggingSpec {
  std::string dir;  // Resolved: runs/<name> unless given.
  bool tensorboard = true;
  int64_t log_every = 1;
};

struct JobSpec {
  std::string name;
  // The registered recipe that runs the job (recipes/recipe.h).
  std::string recipe = "grpo";
  ModelSpec model;
  DataSpec data;
  RewardSpec reward;
  AlgorithmSpec algorithm;
  AsyncSpec async;
  RolloutSpec rollout;
  TrainerSpec trainer;
  SftSpec sft;
  ActorsSpec actors;
  LoggingSpec logging;

  // Provenance: the file (or source name) and the overrides it was parsed with, and where each
  // key that was written came from ("algorithm.n" -> "job.yaml:7:6" or "override algorithm.n=4").
  std::string source_name;
  std::vector<std::string> overrides;
  absl::flat_hash_map<std::string, std::string> locations;

  // The location of `key_path`, else of its nearest written ancestor, else source_name.
  std::string Where(absl::string_view key_path) const;
  // InvalidArgument "WHERE: key_path: message", for checks made after parsing (drivers, CLI).
  absl::Status ErrorAt(absl::string_view key_path, absl::string_view message) const;
};

// The actor kinds in a fixed order (rollout, reward, reference, trainer, critic, replay_buffer,
// checkpointer) with their specs; pointers into `spec`.
std::vector<std::pair<std::string, const ActorGroupSpec*>> ActorGroups(const JobSpec& spec);

// Parses `yaml_text` (errors are located at `source_name`, e.g. the file path), applies
// `overrides` in order, validates and resolves. InvalidArgument listing every problem.
absl::StatusOr<JobSpec> ParseJobSpec(absl::string_view yaml_text, absl::string_view source_name,
                                     absl::Span<const std::string> overrides = {});

// The text of the job spec file at `path`, read only once it is known to be a regular file of at
// most kMaxJobSpecBytes (never more than that plus one byte is read, whatever the file is).
// NotFound if it cannot be read; InvalidArgument "PATH: is a directory ...", "PATH: N bytes, more
// than the 1 MiB a job spec may have", "PATH: not a text file (...)".
absl::StatusOr<std::string> ReadJobSpecFile(const std::string& path);

// ReadJobSpecFile(path), then ParseJobSpec with source_name = path.
absl::StatusOr<JobSpec> LoadJobSpec(const std::string& path,
                                    absl::Span<const std::string> overrides = {});

// The checks that need the filesystem: model.config exists and is a valid model config whose
// max_position_embeddings holds max_prompt_length + max_response_length; an init path exists and
// is a .safetensors file or a directory holding one (or an index) and, when model.config is empty,
// a config.json, and its weights have the shapes of the config the run builds the model from
// (model.config, else the directory's config.json; read from the safetensors headers only),
// else "model.config: model.config (c.json) does not fit the weights in DIR: TENSOR is [a, b] in
// the checkpoint, [c, d] for the config; ..."; model.tokenizer exists; every data.train_files /
// data.val_files / data.preference_files / sft.train_files entry and data.chat_template is a
// readable regular file (their records are checked by the recipe); reward.model and
// reward.judge.model are model directories whose weights fit their config.json; every
// actors.<kind>.library is a regular file.
// Nothing that is not a regular file (or a directory where one is expected) is opened: a FIFO, a
// socket or a device is refused as such ("expected a file, got a FIFO: PATH"), so no check and no
// later reader waits on one. InvalidArgument listing every problem, located. Messages never echo
// a file's contents: a model config that is binary, over 1 MiB or not JSON is refused as such.
absl::Status ValidateFiles(const JobSpec& spec);

// The spec's path-valued keys with their values (empty ones left out): logging.dir,
// actors.checkpointer.dir, sft.dir, model.config, model.init (when a path), model.tokenizer,
// data.train_files[i], data.val_files[i], sft.train_files[i], data.preference_files[i],
// data.chat_template, reward.model, reward.judge.model, actors.<kind>.library, and every string
// under data.<param>, reward.config and actors.<kind>.config (nested too) whose key is dir, path or
// file or ends in _dir, _path or _file (the actors read "dir", "model_dir", "resume_dir" as
// paths), and every string in a list under such a key in the plural (files, *_files, ...). Key
// paths as in messages: "actors.trainer.config.model_dir".
std::vector<std::pair<std::string, std::string>> PathKeys(const JobSpec& spec);

// Where a job whose spec came from someone else (a submitted job) may read and write: OK if every
// path of PathKeys, made absolute against `base_dir` (the directory the driver runs in) and with
// symlinks and ".." resolved as far as the path exists, is one of `roots` or below one (roots are
// resolved the same way). Reads no file. PermissionDenied otherwise, one line per path outside:
// "WHERE: key: "PATH" resolves to "REAL", outside the directories this job may use (ROOTS)". A
// symlink created after the check is not seen: roots should not be writable by those it guards.
absl::Status CheckPathsWithin(const JobSpec& spec, const std::string& base_dir,
                              absl::Span<const std::string> roots);

// A cluster's nodes, each as its total resources ({"CPU": 2, "memory": 8e9, ...}).
using NodeResources = std::map<std::string, double>;

// Whether the cluster can ever run the job: every actor's request fits on some node, every
// resource's sum over all replicas fits in the cluster's total (all actors live for the whole
// job), and a role placed STRICT_PACK fits on one node with all its replicas, one placed
// STRICT_SPREAD on as many nodes as it has replicas. FailedPrecondition naming
// actors.<kind>.resources (or .placement) and its location otherwise.
absl::Status CheckResourcesFit(const JobSpec& spec, absl::Span<const NodeResources> nodes);

// What the program that runs a job can compute on (CheckDevices). The caller says (the troupe
// binary from models/torch_build.h), so that this library needs no LibTorch.
struct DeviceSupport {
  bool libtorch_cuda = false;  // the linked LibTorch was built with CUDA
};

// Refuses a GPU reservation (actors.<kind>.resources.GPU > 0 with replicas > 0) that the job would
// never use: troupe's own actor types that hold a model (Trainer, RolloutWorker, Reference,
// Critic, and RewardModel / Judge, which the reward role runs for reward.model /
// reward.judge.model) compute on the CPU (without a CUDA LibTorch they cannot do otherwise; with
// one, placing them on the GPU they reserve is not implemented yet), and those that hold none
// (RewardServer, ReplayBuffer, Checkpointer) compute on no device. A user's type (from
// actors.<kind>.library) keeps its reservation: its own code may use the GPU, which
// CUDA_VISIBLE_DEVICES names. Recipes rm and sft start no actors: OK. InvalidArgument, one line
// per key: "job.yaml:9:33: actors.trainer.resources.GPU: this troupe's LibTorch was built
// without CUDA, so Trainer computes on the CPU; the GPU would be reserved and never used ...".
absl::Status CheckDevices(const JobSpec& spec, const DeviceSupport& support);

// One key of the spec as the parser reads it: its path (actor kinds and task parameters spelled
// out: "actors.rollout.replicas", "data.digits"), the type and range the parser checks, its
// default as YAML ("required" for a required key; for a default derived from another key, that
// key), and a one-line doc.
struct SpecKeyInfo {
  std::string path;
  std::string type;
  std::string default_value;
  std::string doc;
};

// Every key the parser reads, in reading order, with data.task = `task` (its parameters
// included). Type, range, default and doc come from the key's reader call (the task's
// TaskParam::doc for its parameters); "" where there is none, which job_spec_docs_test refuses.
std::vector<SpecKeyInfo> DescribeSpecKeys(const std::string& task = "arithmetic");

// docs/job_spec.md: the reference of every key, from DescribeSpecKeys (a test checks the file is
// current: `bazel run //recipes/job_spec:job_spec_docs > docs/job_spec.md` regenerates it).
std::string SpecKeysMarkdown();

// The resolved spec, as YAML (with a comment naming the source and overrides) or as pretty-printed
// JSON: every key the job reads, written by the same walk that reads it (spec_walker.h), in that
// walk's order; a key is left out when its reader call says so (write_if: e.g. algorithm.gamma /
// lam only for the estimators that read them, recipes rm and sft without the algorithm, async,
// rollout, reward and actors sections they do not read). ParseJobSpec(ToYaml(spec)) gives the
// same spec.
std::string ToYaml(const JobSpec& spec);
std::string ToJson(const JobSpec& spec);

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_JOB_SPEC_JOB_SPEC_H_
