// examples/grpo_arith.yaml (what `make demo` runs) parses, its files exist and are consistent, and
// it fits a 2-core machine; every job spec under examples/ parses and round-trips.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "recipes/job_spec/job_spec.h"

namespace troupe::recipes {
namespace {

TEST(ExampleJob, GrpoArithValidatesAndFitsTwoCpus) {
  // The files are data dependencies: the test runs in the runfiles tree, beside examples/.
  absl::StatusOr<JobSpec> spec = LoadJobSpec("examples/grpo_arith.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(ValidateFiles(*spec).ok()) << ValidateFiles(*spec);
  EXPECT_TRUE(CheckResourcesFit(*spec, {{{"CPU", 2}}}).ok())
      << CheckResourcesFit(*spec, {{{"CPU", 2}}});
  EXPECT_EQ(spec->name, "grpo-arith");
  EXPECT_EQ(spec->model.init, ModelInit::kSft);
  EXPECT_EQ(spec->data.task, "arithmetic");
  EXPECT_GT(spec->async.max_staleness, 0);  // The demo is the asynchronous run.
  // Locations point into the file: the line of "algorithm:"'s "n:" key, column of its value.
  std::ifstream in("examples/grpo_arith.yaml");
  std::string line;
  int number = 0, n_line = 0;
  bool in_algorithm = false;
  while (std::getline(in, line)) {
    ++number;
    if (line.rfind("algorithm:", 0) == 0) in_algorithm = true;
    if (in_algorithm && line.rfind("  n:", 0) == 0) {
      n_line = number;
      break;
    }
  }
  ASSERT_GT(n_line, 0);
  EXPECT_EQ(spec->Where("algorithm.n"), absl::StrCat("examples/grpo_arith.yaml:", n_line, ":6"));

  // The resolved spec a run records parses back to the same spec.
  absl::StatusOr<JobSpec> again = ParseJobSpec(ToYaml(*spec), "resolved.yaml");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(ToJson(*again), ToJson(*spec));

  EXPECT_EQ(LoadJobSpec("examples/no_such_job.yaml").status().code(), absl::StatusCode::kNotFound);
}

// The source tree's examples/ directory: the runfiles entry of a file in it is a link into it.
std::filesystem::path SourceExamplesDir() {
  std::error_code ec;
  const std::filesystem::path real =
      std::filesystem::canonical("examples/grpo_arith.yaml", ec).parent_path();
  return ec ? std::filesystem::path("examples") : real;
}

TEST(ExampleJob, EveryExampleSpecParsesAndItsResolvedYamlParsesBackToTheSameSpec) {
  const std::filesystem::path dir = SourceExamplesDir();
  std::vector<std::string> specs;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    const std::string ext = entry.path().extension().string();
    if (entry.is_regular_file() && (ext == ".yaml" || ext == ".yml")) {
      specs.push_back(entry.path().string());
    }
  }
  std::sort(specs.begin(), specs.end());
  ASSERT_FALSE(specs.empty()) << "no *.yaml under " << dir;
  for (const std::string& path : specs) {
    SCOPED_TRACE(path);
    absl::StatusOr<JobSpec> spec = LoadJobSpec(path);
    ASSERT_TRUE(spec.ok()) << spec.status();
    const std::string yaml = ToYaml(*spec);
    absl::StatusOr<JobSpec> again = ParseJobSpec(yaml, "resolved.yaml");
    ASSERT_TRUE(again.ok()) << again.status() << "\n" << yaml;
    EXPECT_EQ(ToJson(*again), ToJson(*spec));
    // And once more: a resolved spec is a fixed point of ToYaml.
    EXPECT_EQ(ToYaml(*again).substr(ToYaml(*again).find('\n')), yaml.substr(yaml.find('\n')));
  }
}

}  // namespace
}  // namespace troupe::recipes
