// The resolved spec (ToYaml, ToJson) of every job spec in examples/, of the YAML jobs of tests/ and
// of testdata/specs/ (specs that reach the writer's conditional keys, never run) is byte for byte
// the one recorded in testdata/resolved/: a change to the reader, the writer or a
// recipe's rules that changes what a run records shows here as a diff. After an intended change,
// regenerate the files with
//
//   TROUPE_UPDATE_GOLDENS=1 bazel run //recipes/job_spec:resolved_spec_test
//
// and review the diff. The specs are read from the source tree (found through the runfiles link of
// examples/grpo_arith.yaml), so a spec added anywhere under examples/ needs its golden files.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "recipes/job_spec/job_recipes.h"
#include "recipes/job_spec/job_spec.h"

namespace troupe::recipes {
namespace {

namespace fs = std::filesystem;

// The YAML jobs of tests/ whose resolved form is recorded too (paths from the workspace root).
constexpr const char* kTestSpecs[] = {"tests/dashboard/grpo_short.yaml"};

// The source tree's root: the runfiles entry of a file in it is a link into it.
fs::path SourceRoot() {
  std::error_code ec;
  const fs::path real = fs::canonical("examples/grpo_arith.yaml", ec);
  return ec ? fs::current_path() : real.parent_path().parent_path();
}

// The YAML files under `dir` (sub-directories too), workspace-relative and sorted.
std::vector<std::string> YamlFiles(const fs::path& root, const std::string& dir) {
  std::vector<std::string> specs;
  for (const auto& entry : fs::recursive_directory_iterator(root / dir)) {
    const std::string ext = entry.path().extension().string();
    if (entry.is_regular_file() && (ext == ".yaml" || ext == ".yml")) {
      specs.push_back(fs::relative(entry.path(), root).string());
    }
  }
  std::sort(specs.begin(), specs.end());
  return specs;
}

// Every job spec with a golden: examples/**/*.yaml, kTestSpecs, testdata/specs/*.yaml.
std::vector<std::string> Specs(const fs::path& root) {
  std::vector<std::string> specs = YamlFiles(root, "examples");
  for (const char* spec : kTestSpecs) specs.emplace_back(spec);
  for (const std::string& spec : YamlFiles(root, "recipes/job_spec/testdata/specs")) {
    specs.push_back(spec);
  }
  return specs;
}

// testdata/resolved/<name>.yaml and .json, <name> the spec's file name without extension.
fs::path GoldenDir(const fs::path& root) { return root / "recipes/job_spec/testdata/resolved"; }

// The resolved spec is written by the walk that describes the keys (DescribeSpecKeys): every key
// it writes is a described key, a free-form map (actors.<kind>.config, resources) as one.
void ExpectDescribed(const nlohmann::json& j, const std::string& path,
                     const std::set<std::string>& described) {
  if (described.count(path) > 0) return;
  if (!j.is_object() || j.empty()) {
    ADD_FAILURE() << "the resolved spec writes " << path << ", which no reader describes";
    return;
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    ExpectDescribed(it.value(), path.empty() ? it.key() : path + "." + it.key(), described);
  }
}

TEST(ResolvedSpec, EveryWrittenKeyIsADescribedKey) {
  const fs::path root = SourceRoot();
  int specs = 0;
  for (const std::string& path : Specs(root)) {
    SCOPED_TRACE(path);
    absl::StatusOr<std::string> text = ReadJobSpecFile((root / path).string());
    ASSERT_TRUE(text.ok()) << text.status();
    absl::StatusOr<JobSpec> spec = ParseJobSpec(*text, path);
    ASSERT_TRUE(spec.ok()) << spec.status();
    std::set<std::string> described;
    for (const SpecKeyInfo& k :
         DescribeSpecKeys(spec->data.task.empty() ? "arithmetic" : spec->data.task)) {
      described.insert(k.path);
    }
    const nlohmann::json written = nlohmann::json::parse(ToJson(*spec));
    ASSERT_TRUE(written.is_object());
    EXPECT_TRUE(written.contains("model") && written.contains("logging"));
    ExpectDescribed(written, "", described);
    ++specs;
  }
  EXPECT_GT(specs, 10);
}

// What a run records is a spec of its own: read back, it is the same spec (its resolved form
// unchanged), and its recipe reads every key it lists, so `troupe run` accepts it as it is.
TEST(ResolvedSpec, AResolvedSpecReadsBackAsTheSameRunAndItsRecipeReadsEveryKey) {
  const fs::path root = SourceRoot();
  for (const std::string& path : Specs(root)) {
    SCOPED_TRACE(path);
    absl::StatusOr<std::string> text = ReadJobSpecFile((root / path).string());
    ASSERT_TRUE(text.ok()) << text.status();
    absl::StatusOr<JobSpec> spec = ParseJobSpec(*text, path);
    ASSERT_TRUE(spec.ok()) << spec.status();
    const std::string yaml = ToYaml(*spec);
    absl::StatusOr<JobSpec> again = ParseJobSpec(yaml, path);
    ASSERT_TRUE(again.ok()) << again.status() << "\n" << yaml;
    EXPECT_EQ(ToYaml(*again), yaml);
    EXPECT_TRUE(CheckKeysRead(*again).ok()) << CheckKeysRead(*again);
  }
}

TEST(ResolvedSpec, EveryExampleResolvesToItsRecordedYamlAndJson) {
  const fs::path root = SourceRoot();
  const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  const bool update = std::getenv("TROUPE_UPDATE_GOLDENS") != nullptr && workspace != nullptr;
  const fs::path golden_dir = GoldenDir(update ? fs::path(workspace) : root);
  std::vector<std::string> names;
  for (const std::string& path : Specs(root)) {
    SCOPED_TRACE(path);
    absl::StatusOr<std::string> text = ReadJobSpecFile((root / path).string());
    ASSERT_TRUE(text.ok()) << text.status();
    // Parsed under its workspace-relative name, which the YAML's first line records.
    absl::StatusOr<JobSpec> spec = ParseJobSpec(*text, path);
    ASSERT_TRUE(spec.ok()) << spec.status();
    const std::string name = fs::path(path).stem().string();
    ASSERT_TRUE(std::find(names.begin(), names.end(), name) == names.end())
        << "two specs named " << name;
    names.push_back(name);
    const std::string yaml = ToYaml(*spec);
    const std::string json = ToJson(*spec);
    if (update) {
      fs::create_directories(golden_dir);
      test::WriteFile((golden_dir / (name + ".yaml")).string(), yaml);
      test::WriteFile((golden_dir / (name + ".json")).string(), json);
      continue;
    }
    EXPECT_EQ(yaml, test::ReadFile((golden_dir / (name + ".yaml")).string()))
        << "regenerate with TROUPE_UPDATE_GOLDENS=1 bazel run "
           "//recipes/job_spec:resolved_spec_test";
    EXPECT_EQ(json, test::ReadFile((golden_dir / (name + ".json")).string()));
  }
  // No golden is left without its spec.
  for (const auto& entry : fs::directory_iterator(golden_dir)) {
    const std::string stem = entry.path().stem().string();
    EXPECT_TRUE(std::find(names.begin(), names.end(), stem) != names.end())
        << entry.path() << " has no spec (examples/, kTestSpecs, testdata/specs/)";
  }
}

}  // namespace
}  // namespace troupe::recipes
