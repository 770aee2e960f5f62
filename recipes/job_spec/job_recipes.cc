#include "recipes/job_spec/job_recipes.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"

namespace troupe::recipes {
namespace {

struct Recipes {
  absl::Mutex mu;
  std::map<std::string, std::shared_ptr<const JobRecipeRules>> rules ABSL_GUARDED_BY(mu);
};

Recipes& GetRecipes() {
  static Recipes* recipes = [] {
    auto* r = new Recipes;
    // The default recipe, known before (and without) its recipe's rules.
    auto rules = std::make_shared<JobRecipeRules>();
    rules->name = JobSpec{}.recipe;
    absl::MutexLock lock(&r->mu);
    r->rules[rules->name] = std::move(rules);
    return r;
  }();
  return *recipes;
}

// "a.b" is `key` itself or under it ("a.b.c", "a.b[0]").
bool IsOrUnder(absl::string_view key, absl::string_view path) {
  if (!absl::StartsWith(key, path)) return false;
  return key.size() == path.size() || key[path.size()] == '.' || key[path.size()] == '[';
}

// The top-level section of a key path.
absl::string_view TopOf(absl::string_view key) { return key.substr(0, key.find_first_of(".[")); }

bool IsAlwaysAccepted(absl::string_view top) {
  return top == "name" || top == "recipe" || absl::StartsWith(top, "x-");
}

bool RunsSection(const JobRecipeRules& rules, absl::string_view top) {
  return rules.sections.empty() || IsAlwaysAccepted(top) ||
         std::find(rules.sections.begin(), rules.sections.end(), top) != rules.sections.end();
}

// The first rule matching `key` (a "x.*" rule: strictly under x), or null.
const KeyRule* RuleFor(const JobRecipeRules& rules, absl::string_view key) {
  for (const KeyRule& rule : rules.keys) {
    if (absl::EndsWith(rule.path, ".*")) {
      if (absl::StartsWith(key, absl::string_view(rule.path).substr(0, rule.path.size() - 1))) {
        return &rule;
      }
    } else if (IsOrUnder(key, rule.path)) {
      return &rule;
    }
  }
  return nullptr;
}

}  // namespace

KeyRule ReadsKey(std::string path) {
  KeyRule rule;
  rule.path = std::move(path);
  rule.read = true;
  return rule;
}

KeyRule NotReadKey(std::string path, std::string why,
                   std::function<bool(const JobSpec&)> refused_if) {
  KeyRule rule;
  rule.path = std::move(path);
  rule.why = std::move(why);
  rule.refused_if = std::move(refused_if);
  return rule;
}

absl::Status RegisterJobRecipe(JobRecipeRules rules) {
  if (rules.name.empty()) return absl::InvalidArgumentError("a recipe's rules need its name");
  Recipes& r = GetRecipes();
  absl::MutexLock lock(&r.mu);
  std::string name = rules.name;
  r.rules[name] = std::make_shared<const JobRecipeRules>(std::move(rules));
  return absl::OkStatus();
}

std::shared_ptr<const JobRecipeRules> FindJobRecipe(absl::string_view name) {
  Recipes& r = GetRecipes();
  absl::MutexLock lock(&r.mu);
  auto it = r.rules.find(std::string(name));
  return it == r.rules.end() ? nullptr : it->second;
}

std::vector<std::string> JobRecipeNames() {
  Recipes& r = GetRecipes();
  absl::MutexLock lock(&r.mu);
  std::vector<std::string> names;
  for (const auto& [name, rules] : r.rules) names.push_back(name);
  return names;
}

bool RecipeReadsKey(const JobRecipeRules* rules, absl::string_view path) {
  if (rules == nullptr) return true;
  if (!RunsSection(*rules, TopOf(path))) return false;
  const KeyRule* rule = RuleFor(*rules, path);
  return rule == nullptr || rule->read;
}

std::shared_ptr<const JobRecipeRules> RulesOf(const JobSpec& spec) {
  std::shared_ptr<const JobRecipeRules> rules = FindJobRecipe(spec.recipe);
  if (rules != nullptr) return rules;
  static const auto* none =
      new std::shared_ptr<const JobRecipeRules>(std::make_shared<const JobRecipeRules>());
  return *none;
}

absl::Status CheckKeysRead(const JobSpec& spec) {
  const std::shared_ptr<const JobRecipeRules> rules = RulesOf(spec);
  std::vector<std::string> problems;
  // Sorted, so the lines read in a stable order.
  std::vector<std::string> written;
  for (const auto& [key, where] : spec.locations) written.push_back(key);
  std::sort(written.begin(), written.end());
  auto written_at = [&spec](absl::string_view path) {
    return spec.locations.count(std::string(path)) > 0;
  };
  for (const std::string& key : written) {
    const absl::string_view top = TopOf(key);
    if (!RunsSection(*rules, top)) {
      // The section once, where it is written (an override names only its key).
      if (key == top || !written_at(top)) {
        problems.push_back(
            std::string(spec.ErrorAt(key, absl::StrCat(rules->no_section_why, ": it runs no ", top,
                                                       " keys; remove the section"))
                            .message()));
      }
      continue;
    }
    const KeyRule* rule = RuleFor(*rules, key);
    if (rule == nullptr || rule->read) continue;
    if (rule->refused_if && !rule->refused_if(spec)) continue;
    problems.push_back(std::string(spec.ErrorAt(key, rule->why).message()));
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(problems, "\n"));
}

}  // namespace troupe::recipes
