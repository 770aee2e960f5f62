#include "tests/online/recipe_cluster_test.h"

#include <signal.h>
#include <sys/types.h>

#include <cstdio>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tests/online/resume_harness.h"

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

void RecipeClusterTest::FreezeThenKill(const std::string& name, std::chrono::milliseconds after) {
  absl::StatusOr<UntypedActorHandle> h = cluster().GetActorByName(name);
  ASSERT_TRUE(h.ok()) << name << ": " << h.status();
  absl::StatusOr<proto::ActorInfo> info = cluster().GetActorInfo(h->id());
  ASSERT_TRUE(info.ok() && info->pid() > 0) << name;
  const pid_t pid = static_cast<pid_t>(info->pid());
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  killers_.emplace_back([pid, after] {
    std::this_thread::sleep_for(after);
    ::kill(pid, SIGKILL);
  });
}

void RecipeClusterTest::FreezeFor(const std::string& name, std::chrono::milliseconds how_long) {
  absl::StatusOr<UntypedActorHandle> h = cluster().GetActorByName(name);
  ASSERT_TRUE(h.ok()) << name << ": " << h.status();
  absl::StatusOr<proto::ActorInfo> info = cluster().GetActorInfo(h->id());
  ASSERT_TRUE(info.ok() && info->pid() > 0) << name;
  const pid_t pid = static_cast<pid_t>(info->pid());
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  killers_.emplace_back([pid, how_long] {
    std::this_thread::sleep_for(how_long);
    ::kill(pid, SIGCONT);
  });
}

void RecipeClusterTest::TearDown() {
  for (std::thread& t : killers_) t.join();
}

}  // namespace troupe::tests
