// The recipes a job spec's `recipe:` may name, each with the rules of its spec: the sections it
// runs, the keys it does not read (and why), the defaults that depend on it, and the traits the
// generic section readers and checks ask about instead of its name. A recipe declares its rules
// in its own folder and registers them with itself (recipes/recipe.h's TROUPE_REGISTER_RECIPE);
// nothing in the job spec compares a recipe's name.
//
//   JobRecipeRules SftRules() {
//     JobRecipeRules r;
//     r.name = "sft";
//     r.sections = {"model", "data", "trainer", "sft", "logging"};
//     r.no_section_why = "recipe sft trains a model on sft.train_files in the driver";
//     r.keys = {ReadsKey("trainer.seed"),
//               NotReadKey("trainer.*", "is not read by recipe sft (of trainer it reads seed)")};
//     r.defaults = [](JobSpec& s, const WrittenFn& written) {
//       if (!written("model.init")) s.model.init = ModelInit::kRandom;
//     };
//     return r;
//   }
//
// What the rules do, for the recipe the spec names:
//   the resolved spec (ToYaml / ToJson)  lists only the keys the recipe reads (so it reads back
//                                        as the same run, and its recipe accepts it);
//   a required key                       is required only if the recipe reads it;
//   Resolve                              runs `defaults` before the defaults that follow from
//                                        other keys (so a recipe's default estimator brings its
//                                        critic);
//   CheckKeysRead                        refuses every written key the recipe does not read, one
//                                        located line each ("job.yaml:12:1: algorithm: recipe rm
//                                        trains a reward model in the driver: it runs no
//                                        algorithm keys; remove the section").
// The default recipe (JobSpec{}.recipe) is known with no rules until its recipe registers them, so
// a program that links no recipe still reads a spec of the default recipe.
//
// Thread-safety: all functions may be called concurrently; rules are immutable once registered.
#ifndef TROUPE_RECIPES_JOB_SPEC_JOB_RECIPES_H_
#define TROUPE_RECIPES_JOB_SPEC_JOB_RECIPES_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "recipes/job_spec/job_spec.h"

namespace troupe::recipes {

// Whether a key path was written in the spec (file or override).
using WrittenFn = std::function<bool(absl::string_view path)>;

// One rule about the keys of a section the recipe runs. The first rule whose path matches a key
// decides; a key no rule matches is read.
struct KeyRule {
  // A key or section path ("data.task"; "algorithm.dpo": the key and every key under it), or
  // "section.*": every key under the section that no earlier rule matched. Each written key it
  // matches is refused on its own line.
  std::string path;
  bool read = false;
  // Not read: the message after "WHERE: KEY: " ("is not read by recipe rm (...)").
  std::string why;
  // Not read: refused only when this holds of the spec (null: whenever written).
  std::function<bool(const JobSpec&)> refused_if;
};
KeyRule ReadsKey(std::string path);
KeyRule NotReadKey(std::string path, std::string why,
                   std::function<bool(const JobSpec&)> refused_if = nullptr);

struct JobRecipeRules {
  std::string name;
  // The top-level sections the recipe runs (name, recipe and x-... keys are always accepted);
  // empty = every section. A written key of another section is refused with
  // "<no_section_why>: it runs no <section> keys; remove the section".
  std::vector<std::string> sections;
  std::string no_section_why;
  // The keys within those sections it does not read (KeyRule).
  std::vector<KeyRule> keys;
  // Defaults that depend on the recipe (null = none).
  std::function<void(JobSpec& spec, const WrittenFn& written)> defaults;

  // Traits the generic readers and checks need.
  // model.init: sft runs the SFT warm start (the sft section) before the recipe's own training.
  bool sft_warm_start = true;
  // The run trains on sft.train_files' records: its data needs no data.task or data.train_files,
  // reads the record keys, and lists data.max_response_length only when written.
  bool trains_on_sft_files = false;
  // data.train_files hold preference records (data.chosen_key / rejected_key are read).
  bool reads_preference_records = false;
  // data.preference_files: recorded pairs trained on instead of the policy's own.
  bool reads_offline_pairs = false;
  // model.init may be a value model (a backbone with a score head) as well as a policy.
  bool init_may_be_value_model = false;
  // Responses per prompt the recipe itself needs (algorithm.n), and what for ("to form a pair").
  int64_t min_group_size = 1;
  std::string group_purpose;
  // Why the recipe needs a reference model whatever its KL terms ("" = only for them).
  std::string needs_reference_why;
};

// Registers `rules` (replacing an earlier registration of the name: registering the same rules
// twice is harmless). INVALID_ARGUMENT for an empty name.
absl::Status RegisterJobRecipe(JobRecipeRules rules);
// The rules registered as `name`, or null.
std::shared_ptr<const JobRecipeRules> FindJobRecipe(absl::string_view name);
// Every recipe name, sorted.
std::vector<std::string> JobRecipeNames();

// Whether `rules`' recipe reads the key or section at `path` (null rules: every key).
bool RecipeReadsKey(const JobRecipeRules* rules, absl::string_view path);
// The rules of spec.recipe; never null (an unregistered name: no rules, every key read).
std::shared_ptr<const JobRecipeRules> RulesOf(const JobSpec& spec);

// The written keys of `spec` its recipe does not read, refused: INVALID_ARGUMENT with one located
// line per key (sorted by key path; a section the recipe does not run is refused once, where it
// is written), or OK.
absl::Status CheckKeysRead(const JobSpec& spec);

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_JOB_SPEC_JOB_RECIPES_H_
