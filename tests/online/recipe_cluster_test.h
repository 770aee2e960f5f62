// A gtest fixture for end-to-end recipe tests (tests/online's ppo_e2e_test, dpo_e2e_test): each
// test gets its own embedded cluster (head + node, 2 CPUs) whose workers run the `cli/troupe`
// binary of the test's runfiles, and the recipe runs in the test's process (RunRecipe) with its
// per-step metrics recorded.
//
// Example:
//   class MyEndToEnd : public troupe::tests::RecipeClusterTest {};
//   TEST_F(MyEndToEnd, Runs) {
//     StepMetrics steps;
//     auto r = RunRecipe(spec, cluster(), Recording(&steps, "job-a"));
//   }
//
// Test-only; a fixture is used by its test's thread.
#ifndef TROUPE_TESTS_ONLINE_RECIPE_CLUSTER_TEST_H_
#define TROUPE_TESTS_ONLINE_RECIPE_CLUSTER_TEST_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "recipes/recipe.h"
#include "runtime/cluster/embedded/embedded_cluster.h"

namespace troupe::tests {

// step -> that step's metrics.
using StepMetrics = std::map<int64_t, std::map<std::string, double>>;

// Writes a driver log line to stderr (the test's log).
void LogLine(const std::string& line);

// RunOptions that log to stderr, name the job `job_id` and record every step's metrics in *out.
recipes::RunOptions Recording(StepMetrics* out, const std::string& job_id);

class RecipeClusterTest : public ::testing::Test {
 protected:
  // Starts the cluster in $TEST_TMPDIR/<test name>-cluster (fails the test if it cannot).
  void SetUp() override;
  void TearDown() override;
  Cluster& cluster() { return cluster_->cluster(); }

  // Freezes the process of the actor called `name` now (SIGSTOP), so the driver's next call to it
  // stays in flight, and kills it (SIGKILL) `after` later, on a thread the fixture joins.
  void FreezeThenKill(const std::string& name, std::chrono::milliseconds after);
  // Freezes the process of the actor called `name` now (SIGSTOP) and lets it go on (SIGCONT)
  // `how_long` later, on a thread the fixture joins: its calls stall meanwhile, the others go on.
  void FreezeFor(const std::string& name, std::chrono::milliseconds how_long);

 private:
  std::unique_ptr<EmbeddedCluster> cluster_;
  std::vector<std::thread> killers_;
};

}  // namespace troupe::tests

#endif  // TROUPE_TESTS_ONLINE_RECIPE_CLUSTER_TEST_H_
