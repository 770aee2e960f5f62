#include "tests/grpo/recipe_cluster_test.h"

#include <cstdio>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tests/grpo/resume_harness.h"

namespace troupe::tests {

void LogLine(const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); }

recipes::RunOptions Recording(StepMetrics* out, const std::string& job_id) {
  return {
      .log = LogLine,
      .job_id = job_id,
      .on_step = [out](int64_t step, const std::map<std::string, double>& m) { (*out)[step] = m; }};
}

void RecipeClusterTest::SetUp() {
  std::error_code ec;
  const std::filesystem::path troupe = std::filesystem::canonical(kTroupe, ec);
  ASSERT_FALSE(ec) << kTroupe << " (the worker binary) is not in the runfiles";
  auto c = EmbeddedCluster::Start(
      {.state_dir = FreshTestDir(absl::StrCat(
           ::testing::UnitTest::GetInstance()->current_test_info()->name(), "-cluster")),
       .resources_json = R"({"CPU": 2})",
       .worker_binary = troupe.string()});
  ASSERT_TRUE(c.ok()) << c.status();
  cluster_ = std::move(*c);
}

}  // namespace troupe::tests
