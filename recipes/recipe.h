// Recipes: how a job spec becomes a run. A recipe (grpo, ppo and dpo in recipes/online/; rm; sft)
// is registered by name with the rules of its spec, its check and its summary, and found through
// the spec's `recipe:` key; `troupe run` and the head's jobs call RunRecipe.
//
// A recipe is a few hundred lines of named stages over the building blocks in recipes/rl/:
//
//   ActorGroup     the replicas of a role, spawned by registered type name, waited for, torn down
//   RolloutPool    rollout workers with generation in flight; a failed call's prompts go back to
//                  the PromptSource and its worker rejoins the weight group when it is back;
//                  held-out evaluation spread over whoever is up
//   WeightGroup    the trainer (rank 0) and the rollout workers: formed, re-formed after a failure
//   PromptSource   prompts in order, given-back prompts first; its state is checkpointed
//   RetriedCall /  calls to restartable actors (reward, reference) made again when the actor
//   CallWithRetry  dies under them, asynchronously or blocking
//   Wakeup         the driver loop blocks until one of its calls completes (no polling)
//   RunState       step and weight version, the earlier-run check, resume, checkpoints (written
//                  asynchronously, flushed at the end), metrics, progress line, summary,
//                  sample accounting
//
// A recipe's Run reads as its stages, e.g. GRPO: prepare the policy (SFT warm start) → spawn the
// roles → form the weight group → loop { generate → score → buffer → reference → train →
// publish } → drain → final evaluation and checkpoint → summary. Everything a stage waits for
// is bounded by a field of RunOptions (or of the block's own options struct); nothing sleeps to
// poll.
//
// Adding a recipe: a class implementing Recipe in recipes/<name>/ with a constructor
// (const JobSpec&, Cluster&, const RunOptions&), and beside it, in its folder:
//   its rules (recipes/job_spec/job_recipes.h): the sections it runs, the keys it does not read
//     and why, its defaults and the traits the job spec's generic readers ask about;
//   absl::Status CheckMySpec(const JobSpec& spec);  refusing every key value the recipe cannot
//     honour beyond what its rules refuse, one line per problem, located with spec.ErrorAt
//     ("job.yaml:12:3: algorithm.adv_estimator: gae is not supported by recipe grpo ...");
//   void PrintMySummary(const JobSpec&, const RunResult&, const RunSummaryContext&, FILE*);  what
//     `troupe run` prints after the run (or nullptr);
// registered with one line in its .cc (alwayslink), the pattern of every registry
// (base/registry.h; TROUPE_REGISTER_TASK, TROUPE_REGISTER_REWARD read alike):
//   TROUPE_REGISTER_RECIPE(MyRules(), MyRecipe, CheckMySpec, PrintMySummary);
// and its BUILD target linked into //cli:troupe. Nothing outside its folder names it. The recipe
// finds its task's prompts and verifier by the spec's data.task (tasks/task.h,
// reward/reward_function.h), never by a task's own name. `troupe run` calls CheckRecipe before any
// cluster or actor starts, so a spec never promises what its recipe does not run.
#ifndef TROUPE_RECIPES_RECIPE_H_
#define TROUPE_RECIPES_RECIPE_H_

#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/registry.h"
#include "proto/rl.pb.h"
#include "recipes/job_spec/job_recipes.h"
#include "recipes/job_spec/job_spec.h"
#include "recipes/rl/actor_retry.h"
#include "runtime/cluster/cluster_client.h"

namespace troupe::recipes {

struct RunOptions {
  // Continue from the newest complete checkpoint in actors.checkpointer.dir.
  bool resume = false;
  // Replace an earlier run's outputs (metrics.jsonl / summary.json in logging.dir, step_*
  // checkpoints); without it (or resume) a run that finds them fails with FAILED_PRECONDITION
  // before anything is changed.
  bool overwrite = false;
  // Human-readable progress (one line per call); the progress bar itself goes to stderr.
  std::function<void(const std::string&)> log;
  // Tag of the actors' names and job id (several jobs may share a cluster).
  std::string job_id;
  // Stop after this many steps of this run even if total_steps is further (tests: interrupt a
  // run to resume it); 0 = no limit.
  int64_t stop_after_steps = 0;
  // Stop once an evaluation reaches this held-out accuracy (benchmarks: time to accuracy); 0 = no.
  double stop_at_accuracy = 0;
  // Asked between steps (and SFT steps); true ends the run early: the loop finishes with its
  // final evaluation and checkpoint, an SFT warm start in progress is abandoned (CANCELLED).
  // Null = never.
  std::function<bool()> should_stop;
  // Called after each step with the step's metrics (tests, benchmarks).
  std::function<void(int64_t step, const std::map<std::string, double>&)> on_step;
  // Retries of calls to restartable actors (reward servers, the reference, evaluations, forming
  // the weight group) when they die under a call.
  RetryOptions retry;
  // How long the end of a run waits for its checkpoint writes (retries included) to finish.
  absl::Duration checkpoint_flush_timeout = absl::Minutes(3);
  // Deadlines of the recipe's calls.
  absl::Duration generate_timeout = absl::Minutes(10);
  absl::Duration eval_timeout = absl::Minutes(5);
  absl::Duration train_timeout = absl::Minutes(10);
  absl::Duration checkpoint_timeout = absl::Minutes(5);
  // How long forming the weight group waits for every member (the trainer's side).
  absl::Duration weight_group_timeout = absl::Minutes(3);
  // How long the run waits, with every rollout worker down, for one to come back.
  absl::Duration no_worker_patience = absl::Minutes(5);
  // CPU niceness (0..19) of the roles off a step's critical path — the rollout workers and the
  // reference, whose work overlaps the trainer's step in an asynchronous run: where they compete
  // for the same cores they yield them to the trainer, so overlap does not slow the step it
  // overlaps. 0 = equal shares. (No effect on GPU work, nor when cores are spare.)
  int off_critical_path_nice = 10;
};

struct RlEvalPoint {
  int64_t step = 0;
  double accuracy = 0;
  double seconds = 0;  // since the RL loop started
};

struct RunResult {
  int64_t steps = 0;  // steps taken in total (including before a resume)
  double initial_accuracy = -1;
  double final_accuracy = -1;
  std::vector<RlEvalPoint> curve;
  double seconds = 0;  // RL loop wall time of this run
  proto::ReplayStats accounting;
  // Counted from the generator's side: every sample a rollout worker returned (over the run's
  // lineage: a resumed run starts from its checkpoint's count).
  int64_t samples_generated = 0;
  // samples_generated - (used + dropped_stale + buffered + filtered + discarded + in flight):
  // samples that reached no one. 0 unless something is wrong; shown in the accounting line and
  // summary.json so it cannot go unseen.
  int64_t samples_lost = 0;
  // Samples a replay buffer held when it died (their prompts were generated again), over the run's
  // lineage; and the buffer's restarts.
  int64_t samples_discarded = 0;
  int64_t replay_buffer_restarts = 0;
  // A failed run only: samples generated and still being scored when it ended.
  int64_t samples_in_flight = 0;
  // Recipe ppo: restarts of the critic (each restored from its newest checkpoint) and the critic
  // updates lost with them (those since that checkpoint), over the run's lineage.
  int64_t critic_restarts = 0;
  int64_t critic_updates_lost = 0;
  // Dropped by dynamic sampling (algorithm.filter_groups: groups whose rewards were all equal;
  // trainers/group_filter.h), and how many groups; over the run's lineage.
  int64_t samples_filtered = 0;
  int64_t groups_filtered = 0;
  // Prompts drawn from the data (the cursor minus the prompts given back and not yet drawn
  // again), and how many groups of them reached the replay buffer (added); equal at the end of
  // a run unless a prompt was lost.
  int64_t prompts_drawn = 0;
  // Drawn again: after a rollout worker failure, or held by a replay buffer that died.
  int64_t prompts_regenerated = 0;
  // Training prompts dropped as overlong before the run (data.filter_overlong_prompts).
  int64_t prompts_filtered = 0;
  // Calls to reward servers, the reference and rollout workers (evaluation) made again after the
  // actor died under them.
  int64_t call_retries = 0;
  // Checkpoints confirmed on disk in this run, writes the trainer made again after a failure,
  // and writes given up on ("step N: error"; the run fails if its last checkpoint is among them).
  int64_t checkpoints_written = 0;
  int64_t checkpoint_retries = 0;
  std::vector<std::string> checkpoint_failures;
  int64_t weight_group_epochs = 0;
  double max_staleness_seen = 0;
  // Per rollout worker: the weight versions of its samples, in the order the driver received
  // them (tests check they never go down).
  std::map<std::string, std::vector<int64_t>> worker_versions;
  std::string sft_dir;
  double sft_accuracy = -1;
};

// A registered recipe. One instance runs one job.
class Recipe {
 public:
  virtual ~Recipe() = default;
  // Runs the job to its end (or a stop); errors in the spec or files come back before any actor
  // starts.
  virtual absl::StatusOr<RunResult> Run() = 0;
};

// What `troupe run` knows of a finished run besides its result, for the recipe's summary.
struct RunSummaryContext {
  double wall_seconds = 0;  // since the command started
  std::string timeline;     // the run's timeline file ("" = none)
};

using RecipeFactory = std::function<std::unique_ptr<Recipe>(const JobSpec& spec, Cluster& cluster,
                                                            const RunOptions& options)>;
using RecipeSpecCheck = std::function<absl::Status(const JobSpec& spec)>;
using RecipeSummary = std::function<void(const JobSpec& spec, const RunResult& result,
                                         const RunSummaryContext& context, std::FILE* out)>;

// What the recipe registry holds per name.
struct RecipeEntry {
  RecipeFactory factory;
  RecipeSpecCheck check;  // null = nothing beyond its rules
  RecipeSummary summary;  // null = nothing beyond `troupe run`'s line of steps and seconds
  std::shared_ptr<const JobRecipeRules> rules;
};

// The process-wide recipe registry (kind "recipe") TROUPE_REGISTER_RECIPE fills.
Registry<RecipeEntry>& RecipeRegistry();

// Registers `factory`, `check` and `summary` under rules.name, and the rules with the job spec (so
// a spec naming it is accepted and read by them). ALREADY_EXISTS (and nothing changes) if the name
// is taken.
absl::Status RegisterRecipe(JobRecipeRules rules, RecipeFactory factory, RecipeSpecCheck check,
                            RecipeSummary summary);

// Whether spec.recipe is registered and honours every key of `spec`: NOT_FOUND listing the recipes
// for an unknown name; INVALID_ARGUMENT with the written keys its rules do not read
// (CheckKeysRead) and its check's problems, one line each.
absl::Status CheckRecipe(const JobSpec& spec);
// The registered recipe names, sorted.
std::vector<std::string> RecipeNames();

// Runs `spec` with the recipe it names (spec.recipe), after CheckRecipe.
absl::StatusOr<RunResult> RunRecipe(const JobSpec& spec, Cluster& cluster,
                                    const RunOptions& options);

// Prints spec.recipe's summary of `result` to `out` (nothing for a recipe without one).
void PrintRunSummary(const JobSpec& spec, const RunResult& result, const RunSummaryContext& context,
                     std::FILE* out);

}  // namespace troupe::recipes

// Registers recipe `Class` (constructor (const JobSpec&, Cluster&, const RunOptions&)) with its
// rules `rules` (a JobRecipeRules, whose name it is registered under), its spec check `check` and
// its summary `summary` (either may be nullptr); at namespace scope in a .cc file of an
// alwayslink library. Aborts at start-up if the name is taken.
#define TROUPE_REGISTER_RECIPE(rules, Class, check, summary)                                    \
  static const bool TROUPE_REGISTRY_CAT(troupe_recipe_registered_, __LINE__) [[maybe_unused]] = \
      ::troupe::internal::CheckRegistration(::troupe::recipes::RegisterRecipe(                  \
          rules,                                                                                \
          [](const ::troupe::recipes::JobSpec& spec, ::troupe::Cluster& cluster,                \
             const ::troupe::recipes::RunOptions& options)                                      \
              -> std::unique_ptr<::troupe::recipes::Recipe> {                                   \
            return std::make_unique<Class>(spec, cluster, options);                             \
          },                                                                                    \
          check, summary))

#endif  // TROUPE_RECIPES_RECIPE_H_
