#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recipes/job_spec/job_spec.h"

namespace troupe::recipes {
namespace {

using ::testing::HasSubstr;

TEST(JobSpecDocs, TheCheckedInReferenceIsCurrent) {
  ASSERT_TRUE(std::filesystem::exists("docs/job_spec.md"))
      << "docs/job_spec.md is not in the runfiles";
  EXPECT_TRUE(test::ReadFile("docs/job_spec.md") == SpecKeysMarkdown())
      << "docs/job_spec.md is stale: regenerate it with\n"
         "  bazel run //recipes/job_spec:job_spec_docs > docs/job_spec.md";
}

TEST(JobSpecDocs, EveryKeyTheParserReadsHasADocTypeAndDefault) {
  const std::vector<SpecKeyInfo> keys = DescribeSpecKeys("arithmetic");
  ASSERT_GT(keys.size(), 60u);
  for (const SpecKeyInfo& k : keys) {
    EXPECT_FALSE(k.doc.empty()) << k.path << " has no doc (add .doc at its reader call)";
    EXPECT_FALSE(k.type.empty()) << k.path;
    EXPECT_FALSE(k.default_value.empty()) << k.path;
  }
}

// Each key is described once, by its reader: no key is listed twice.
TEST(JobSpecDocs, EveryKeyIsDescribedOnce) {
  std::set<std::string> paths;
  for (const SpecKeyInfo& k : DescribeSpecKeys("arithmetic")) {
    EXPECT_TRUE(paths.insert(k.path).second) << k.path << " is described twice";
  }
  EXPECT_EQ(paths.count("actors.checkpointer.every_steps"), 1u);
  EXPECT_EQ(paths.count("data.digits"), 1u);  // a task parameter
}

TEST(JobSpecDocs, TypesRangesAndDefaultsComeFromTheParser) {
  std::map<std::string, SpecKeyInfo> by_path;
  for (const SpecKeyInfo& k : DescribeSpecKeys("arithmetic")) by_path[k.path] = k;
  EXPECT_EQ(by_path["algorithm.n"].type, "a positive integer");
  EXPECT_EQ(by_path["algorithm.n"].default_value, "8");
  EXPECT_EQ(by_path["algorithm.kl.type"].type, "one of k1, k2, k3");
  EXPECT_EQ(by_path["algorithm.kl.type"].default_value, "k3");
  EXPECT_EQ(by_path["trainer.total_steps"].default_value, "required");
  EXPECT_EQ(by_path["actors.rollout.type"].default_value, "RolloutWorker");
  EXPECT_EQ(by_path["actors.rollout.resources"].default_value, "{CPU: 1}");
  EXPECT_EQ(by_path["actors.checkpointer.dir"].default_value, "<logging.dir>/ckpt");
  EXPECT_FALSE(by_path["data.digits"].doc.empty());  // the task's own doc
  EXPECT_THAT(SpecKeysMarkdown(), HasSubstr("| `algorithm.kl.coef` | a non-negative number | "));
}

// The reference says what the recipes accept: trainer ranks, critic ranks (not restarted).
TEST(JobSpecDocs, TheReplicasOfTheTrainerAndTheCriticAreWhatTheRecipesRun) {
  std::map<std::string, SpecKeyInfo> by_path;
  for (const SpecKeyInfo& k : DescribeSpecKeys("arithmetic")) by_path[k.path] = k;
  EXPECT_EQ(by_path["actors.trainer.replicas"].type, "a positive integer");
  EXPECT_EQ(by_path["actors.critic.replicas"].type, "a non-negative integer");
  EXPECT_EQ(by_path["actors.critic.replicas"].default_value, "0; 1 with adv_estimator gae");
  EXPECT_EQ(by_path["actors.critic.max_restarts"].default_value, "3; 0 with replicas > 1");
  EXPECT_EQ(by_path["actors.trainer.max_restarts"].default_value, "0");
  EXPECT_THAT(by_path["actors.trainer.replicas"].doc, HasSubstr("data-parallel group"));
  EXPECT_THAT(by_path["actors.critic.replicas"].doc, HasSubstr("critic's data-parallel group"));
  EXPECT_THAT(by_path["actors.critic.replicas"].doc, HasSubstr("is not restarted"));
  EXPECT_EQ(by_path["actors.rollout.replicas"].type, "a positive integer");
  EXPECT_THAT(SpecKeysMarkdown(),
              HasSubstr("| `actors.trainer.replicas` | a positive integer | 1 | "));
}

}  // namespace
}  // namespace troupe::recipes
