// The one-line doc of every job spec key, and docs/job_spec.md made from them with what the
// parser itself says of each key (type, range, default: DescribeSpecKeys).
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "recipes/job_spec/job_spec.h"
#include "recipes/job_spec/job_tasks.h"
#include "recipes/job_spec/key_docs.h"

namespace troupe::recipes {
namespace job_spec_internal {

const std::vector<KeyDoc>& KeyDocs() {
  static const std::vector<KeyDoc> docs = {
      {"name", "run name, [A-Za-z0-9._-]+: names the run's directories"},
      {"recipe",
       "the registered recipe that runs the job (recipes/recipe.h): grpo (default), ppo, dpo; rm "
       "(a reward model on preference pairs) and sft (supervised fine-tuning on sft.train_files "
       "from random weights, in the driver: recipes/sft/sft_job_recipe.h)"},
      {"model.init",
       "sft: SFT warm start (sft.*); random: seeded random weights (recipe sft's default and only "
       "choice); else a model directory or .safetensors file",
       "sft | random | a path"},
      {"model.config",
       "HF config.json of the architecture; optional when model.init is a path (its config.json; "
       "\"\" = not set)"},
      {"model.tokenizer",
       "tokenizer.json replacing the initial policy's (init: random or a path; must fit the "
       "model's vocab_size and write the task's text); \"\" = the init directory's, else the "
       "task's own"},
      {"data.task",
       "a registered task (recipes/job_spec/job_tasks.h); exactly one of data.task and "
       "data.train_files (neither for recipe sft)"},
      {"data.train_files",
       "JSONL dataset files (.jsonl.gz too) in verl's record shape (data/jsonl_dataset.h); "
       "indexed, never loaded whole"},
      {"data.val_files",
       "JSONL held-out records: evaluations score the first data.heldout_size of them, in file "
       "order; none = no evaluation (recipe sft: read at sft.prompt_key / sft.response_key, the "
       "response the reference; none = the last data.heldout_size training records)"},
      {"data.prompt_key",
       "the record's prompt: a string, or a list of chat messages (OpenRLHF: "
       "prompt_key)"},
      {"data.answer_key",
       "dotted path of the ground truth the reward checks (a non-string is passed as JSON text)"},
      {"data.data_source_key",
       "the record's data source: the reward that scores it unless "
       "reward.name is set"},
      {"data.default_data_source", "data source of records without one; \"\" = they are refused"},
      {"data.preference_files",
       "recipe dpo: offline pairs, JSONL preference records (prompt, chosen, rejected, as recipe "
       "rm reads them) trained on instead of pairs sampled from the policy; data.task gives the "
       "held-out evaluation and is required (a dataset job's data.train_files / val_files cannot "
       "be combined with it yet)"},
      {"data.chosen_key",
       "recipe rm and dpo's preference_files: dotted path of a preference record's preferred "
       "response (a string, or chat "
       "messages rendered like the prompt)"},
      {"data.rejected_key",
       "recipe rm and dpo's preference_files: dotted path of a preference record's dispreferred "
       "response (as chosen_key)"},
      {"data.shuffle",
       "draw records in a per-epoch permutation of (data.seed, epoch) instead of file order"},
      {"data.sampler.type",
       "RL recipes: sequential draws the training prompts in order (epochs); prioritized draws "
       "them at random, those whose last group's rewards were all equal (all solved or all "
       "failed) uniform_weight times as often (recipes/rl/prompt_source.h)"},
      {"data.sampler.uniform_weight",
       "prioritized: the relative chance of drawing a prompt whose last group's rewards were all "
       "equal (a prompt never drawn or whose last group was mixed: 1)"},
      {"data.gen_batch_size",
       "asynchronous RL runs: prompts a generation round draws, split over the rollout workers "
       "(gen_batch_size / replicas per Generate call); larger rounds batch generation better "
       "when dynamic sampling drops most groups (verl's DAPO recipe: 3 x train_batch_size)",
       nullptr, "train_batch_size"},
      {"data.filter_overlong_prompts",
       "drop prompts longer than data.max_prompt_length tokens (a full scan before the run; the "
       "count is logged and in summary.json)"},
      {"data.truncation",
       "a prompt longer than data.max_prompt_length: error refuses the run naming FILE:LINE; "
       "left / right cut tokens from that side"},
      {"data.chat_template",
       "chat template file rendering messages prompts; \"\" = a messages prompt is refused"},
      {"reward.name",
       "registered reward(s) scoring every sample, summed with reward.weights; [] = the task's "
       "own, or per record by data_source"},
      {"reward.weights", "one weight per reward.name"},
      {"reward.config", "reward name -> that reward's config map"},
      {"reward.model",
       "a trained reward model's directory (recipe rm's output) scoring every sample, served by "
       "the RewardModel actor; added to the rewards above (weight them 0 to use it alone)"},
      {"reward.model_weight", "the reward model score's weight"},
      {"reward.judge.model",
       "a generative judge's model directory (a causal LM with tokenizer.json, e.g. recipe sft's "
       "output) that reads every sample and replies with a verdict, served by the Judge actor "
       "with continuous batching; added to the rewards above (weight them 0 to use it alone)"},
      {"reward.judge.template",
       "the judge's prompt: {prompt} (the policy's prompt text), {response}, {reference} (the "
       "reference answer) filled in per sample; {{ and }} for braces"},
      {"reward.judge.verdicts",
       "label: reward, e.g. {Y: 1, N: 0}; the reply (trimmed, any case) must start with a label; "
       "a reply that does not is a counted failure (reward 0, Sample.reward_error)"},
      {"reward.judge.marker",
       "read the verdict (or score) after the last occurrence of this text in the reply, so the "
       "judge may reason first (\"Verdict:\"); a reply without it is a counted failure; \"\" = "
       "the reply's start"},
      {"reward.judge.score.min",
       "score mode: the lowest score accepted (the reply's first number)"},
      {"reward.judge.score.max", "score mode: the highest score accepted"},
      {"reward.judge.max_new_tokens", "the most tokens of a judge's reply (greedy)"},
      {"reward.judge.slots", "samples the judge decodes together (KV-cache slots)"},
      {"reward.judge.add_bos", "put the judge tokenizer's bos before every judge prompt"},
      {"reward.judge.weight", "the judge value's weight in the reward"},
      {"reward.overlong_buffer.enable",
       "DAPO's overlong reward shaping: responses longer than data.max_response_length - len "
       "lose up to penalty_factor, linearly (reward/overlong)"},
      {"reward.overlong_buffer.len", "the shaped tail of the response length, in tokens"},
      {"reward.overlong_buffer.penalty_factor", "the penalty at the maximum length"},
      {"data.train_batch_size", "prompts per step"},
      {"data.max_prompt_length", "prompt tokens"},
      {"data.max_response_length",
       "response tokens (recipe sft: new tokens of a held-out answer when written)"},
      {"data.heldout_size", "held-out problems for evaluations (of a task, or of data.val_files)"},
      {"data.seed",
       "chooses the task's splits, or seeds a dataset's shuffle (as verl's data.seed)"},
      {"algorithm.adv_estimator",
       "advantage estimator: grpo, rloo, reinforce_plus_plus, reinforce_plus_plus_baseline "
       "(trainers/advantage_estimators.h), or gae (PPO with a critic; recipe ppo's default)"},
      {"algorithm.n", "responses per prompt (verl: rollout.n); grpo and rloo need >= 2"},
      {"algorithm.norm_adv_by_std", "GRPO: divide by the group's std; false = Dr. GRPO"},
      {"algorithm.clip_eps", "PPO clip (verl: clip_ratio)"},
      {"algorithm.clip_eps_low", "ratio floor 1 - eps_low", nullptr, "algorithm.clip_eps"},
      {"algorithm.clip_eps_high", "ratio cap 1 + eps_high (DAPO's clip-higher: 0.28)", nullptr,
       "algorithm.clip_eps"},
      {"algorithm.kl.coef",
       "KL-to-reference loss weight (verl: kl_loss_coef); 0 = off, and no reference model"},
      {"algorithm.kl.type", "KL estimator (verl's low_var_kl is k3, kl is k1, mse is k2)"},
      {"algorithm.entropy_coeff", "entropy bonus weight"},
      {"algorithm.loss_agg_mode", "how token losses are averaged into the step's loss (verl's)"},
      {"algorithm.policy_loss",
       "importance ratio of the clipped loss: vanilla (per token) or gspo (per sequence, GSPO; "
       "use clip_eps_low/high around 3e-4/4e-4) (verl: actor.policy_loss.loss_mode)"},
      {"algorithm.filter_groups.enable",
       "DAPO's dynamic sampling: drop groups whose rewards are all equal and generate more "
       "(counted as samples/filtered); on by default for recipe dpo",
       nullptr, "false (recipe dpo: true)"},
      {"algorithm.filter_groups.max_num_gen_batches",
       "fail after this many batches' worth of dropped groups in a row; 0 = no limit"},
      {"algorithm.use_kl_in_reward",
       "subtract coef x KL(behaviour || reference) per token from the reward (verl's "
       "use_kl_in_reward); needs a reference"},
      {"algorithm.kl_ctrl.type",
       "the KL-in-reward coefficient: fixed, or adaptive towards target_kl (Ziegler et al. "
       "2019)"},
      {"algorithm.kl_ctrl.kl_coef", "its (initial) coefficient"},
      {"algorithm.kl_ctrl.target_kl", "adaptive: the per-token KL it steers towards"},
      {"algorithm.kl_ctrl.horizon",
       "adaptive: samples over which the coefficient moves by at most 20%"},
      {"algorithm.gamma", "discount of gae and reinforce_plus_plus"},
      {"algorithm.lam", "GAE lambda (gae only)"},
      {"algorithm.off_policy.correction",
       "the pi_prox / pi_behav weight of stale samples (AReaL's decoupled objective; "
       "trainers/losses.h)"},
      {"algorithm.off_policy.cap", "its truncation (truncate) or mask (mask) bound"},
      {"algorithm.dpo.loss",
       "recipe dpo: dpo or ipo (on each group's best- against worst-rewarded sample), or kto "
       "(each sample, desirable when above its group's mean reward)"},
      {"algorithm.dpo.beta", "recipe dpo: strength of the pull to the reference (DPO's beta)"},
      {"algorithm.dpo.label_smoothing",
       "recipe dpo, loss dpo: cDPO's probability that a label is wrong"},
      {"algorithm.dpo.desirable_weight", "recipe dpo, loss kto: lambda_D"},
      {"algorithm.dpo.undesirable_weight", "recipe dpo, loss kto: lambda_U"},
      {"async.max_staleness", "weight versions a sample may lag; 0 = synchronous, on-policy"},
      {"rollout.temperature", "sampling temperature; 0 = greedy"},
      {"rollout.top_p", "nucleus filter; 1 = none"},
      {"rollout.top_k", "top-k filter; 0 = none (verl: -1)"},
      {"rollout.max_new_tokens", "generated tokens per response, <= data.max_response_length",
       nullptr, "data.max_response_length"},
      {"trainer.total_steps", "optimizer steps of the run"},
      {"trainer.seed",
       "seeds initialisation, sampling and batches (also of the SFT warm start and recipe sft)"},
      {"trainer.lr", "peak learning rate"},
      {"trainer.lr_schedule", "learning-rate schedule after warm-up (verl: warmup_style)"},
      {"trainer.warmup_steps", "linear warm-up steps, < trainer.total_steps"},
      {"trainer.min_lr_ratio", "cosine floor, times lr"},
      {"trainer.weight_decay", "AdamW decoupled weight decay"},
      {"trainer.grad_clip", "max global gradient norm"},
      {"trainer.micro_batch_size",
       "sequences per forward and backward (gradient accumulation); 0 = the whole step"},
      {"trainer.ppo_epochs", "passes over each batch (optimizer steps per mini-batch pass)"},
      {"trainer.mini_batch_size",
       "prompts per optimizer step (verl: ppo_mini_batch_size); 0 = the whole batch"},
      {"trainer.critic_warmup",
       "recipe ppo: steps that train the critic only, before the policy is updated"},
      {"trainer.eval_every",
       "held-out evaluation every K steps (verl: test_freq); 0 = before and after only"},
      {"trainer.profile_steps",
       "[from, to]: LibTorch operators of these training steps (1 = the first) become spans of "
       "the run's timeline (troupe timeline); needs span recording on (TROUPE_TIMELINE_SPANS)"},
      {"sft.steps", "SFT steps (of the warm start, model.init: sft, or of recipe sft)"},
      {"sft.batch_size", "sequences per SFT step"},
      {"sft.lr", "SFT peak learning rate (cosine)"},
      {"sft.warmup_steps", "SFT warm-up steps, < sft.steps"},
      {"sft.min_lr_ratio", "SFT cosine floor, times lr"},
      {"sft.weight_decay", "SFT AdamW weight decay"},
      {"sft.grad_clip", "SFT max global gradient norm"},
      {"sft.eval_every", "SFT held-out evaluation every K steps"},
      {"sft.target_accuracy", "SFT stops at this held-out accuracy (the reward's correct)"},
      {"sft.train_files",
       "a dataset job's SFT records (JSONL, .gz too): prompt (string or chat messages, rendered "
       "like data's) and response; held out: data.val_files judged by the job's reward (recipe "
       "sft: by exact match with their response); required by recipe sft"},
      {"sft.prompt_key", "dotted path of an SFT record's prompt"},
      {"sft.response_key", "dotted path of an SFT record's response (EOS appended)"},
      {"sft.dir",
       "SFT checkpoint directory (the warm start reuses one it holds; recipe sft replaces it only "
       "with --overwrite)",
       nullptr, "<logging.dir>/sft"},
      {"actors.<kind>.type",
       "registered actor type of the role; the recipe checks it serves the role's methods"},
      {"actors.<kind>.library",
       "shared library of actor types (runtime/actor_library.h) that the job's driver and every "
       "actor of the job load (native code: docs/security.md; a head started with "
       "--no-job-libraries refuses it); \"\" = none"},
      {"actors.<kind>.replicas", "instances of the role"},
      {"actors.trainer.replicas",
       "instances of the role: one (the policy trains on one actor; data-parallel training across "
       "replicas does not exist yet)"},
      {"actors.critic.replicas",
       "instances of the role: 1 for recipe ppo (adv_estimator gae, the default there), else 0 "
       "(the critic trains on one actor; data-parallel training across replicas does not exist "
       "yet)",
       nullptr, "0; 1 with adv_estimator gae"},
      {"actors.<kind>.resources",
       "what each instance reserves; when written it is the whole request (CPU fractions "
       "allowed, whole GPUs, memory in bytes or \"512MiB\"). GPU only for a user's actor type: "
       "troupe's own actors compute on the CPU, so a GPU for one is refused"},
      {"actors.<kind>.max_restarts", "restarts after a crash; -1 = unlimited (Ray)"},
      {"actors.<kind>.config",
       "merged over the config the recipe derives from the typed sections (its keys win); for "
       "troupe's own actor types, fields of that type's message in proto/actor_config.proto "
       "(checked before any actor starts), for a user's type whatever it reads"},
      {"actors.checkpointer.dir", "checkpoint root", nullptr, "<logging.dir>/ckpt"},
      {"actors.checkpointer.every_steps",
       "checkpoint every K steps (and at the last step); 0 = never (the run writes no checkpoint, "
       "so it cannot be resumed)"},
      {"actors.checkpointer.keep", "newest K checkpoints kept; 0 = all"},
      {"logging.dir", "the run's directory: metrics.jsonl, TensorBoard events, job.yaml", nullptr,
       "runs/<name>"},
      {"logging.tensorboard", "write TensorBoard event files"},
      {"logging.log_every",
       "metrics records and the progress line every K steps (and the last step, and "
       "evaluations)"},
  };
  return docs;
}

}  // namespace job_spec_internal

namespace {

std::string Cell(const std::string& text) {
  return absl::StrReplaceAll(text, {{"|", "\\|"}, {"\n", " "}});
}

void AppendTable(const std::vector<SpecKeyInfo>& keys, std::string* out) {
  absl::StrAppend(out, "| key | type | default | meaning |\n|---|---|---|---|\n");
  for (const SpecKeyInfo& k : keys) {
    absl::StrAppend(out, "| `", k.path, "` | ", Cell(k.type), " | ", Cell(k.default_value), " | ",
                    Cell(k.doc), " |\n");
  }
}

}  // namespace

std::string SpecKeysMarkdown() {
  const std::vector<std::string> tasks = JobTaskNames();
  const std::string first = tasks.empty() ? "arithmetic" : tasks.front();
  std::string out = absl::StrCat(
      "# Job spec keys\n\n"
      "Every key `troupe run` and `troupe job submit` accept, as the parser reads it: the type "
      "and range it checks and its default come from the parser "
      "(`recipes/job_spec/job_spec.cc`), the meaning from its key table "
      "(`recipes/job_spec/job_spec_docs.cc`). Generated by\n\n"
      "    bazel run //recipes/job_spec:job_spec_docs > docs/job_spec.md\n\n"
      "and checked by `//recipes/job_spec:job_spec_docs_test`, which fails when this file is "
      "stale. The rules (locations in errors, YAML typing, anchors, limits) and the "
      "command-line overrides are in the header comment of `recipes/job_spec/job_spec.h`. A "
      "recipe refuses keys it does not run before any actor starts (`recipes/grpo/grpo_config.h` "
      "for grpo). Task parameters (`data.<param>`) below are those of the `",
      first, "` task.\n\n");
  AppendTable(DescribeSpecKeys(first), &out);
  for (size_t i = 1; i < tasks.size(); ++i) {
    std::vector<SpecKeyInfo> params;
    for (const SpecKeyInfo& k : DescribeSpecKeys(tasks[i])) {
      if (std::optional<TaskDefinition> task = FindJobTask(tasks[i])) {
        for (const TaskParam& p : task->params) {
          if (k.path == "data." + p.name) params.push_back(k);
        }
      }
    }
    absl::StrAppend(&out, "\n## Parameters of task `", tasks[i], "`\n\n");
    AppendTable(params, &out);
  }
  return out;
}

}  // namespace troupe::recipes
