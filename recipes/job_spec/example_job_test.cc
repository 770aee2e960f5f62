// examples/grpo_arith.yaml (what `make demo` runs) parses, its files exist and are consistent, and
// it fits a 2-core machine.
#include <fstream>
#include <string>

#include <cstdlib>
#include <filesystem>
#include <string>
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

}  // namespace
}  // namespace troupe::recipes
