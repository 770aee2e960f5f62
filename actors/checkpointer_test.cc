#include "actors/checkpointer.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace troupe::actors {
namespace {

namespace fs = std::filesystem;

std::string TestDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

proto::CheckpointRequest Request(int64_t step, const std::string& driver_state) {
  proto::CheckpointRequest req;
  req.set_step(step);
  req.set_weight_version(step);
  req.set_driver_state_json(driver_state);
  req.set_trainer_state("state");
  return req;
}

// The pid of a process that has exited and been reaped.
pid_t DeadPid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

TEST(Checkpointer, WritesCompleteCheckpointsAndKeepsTheNewest) {
  const std::string dir = TestDir("keep");
  for (int64_t step : {2, 4, 6}) {
    absl::StatusOr<std::string> path = WriteCheckpoint(dir, /*keep=*/2, Request(step, "{}"));
    ASSERT_TRUE(path.ok()) << path.status();
  }
  EXPECT_FALSE(fs::exists(dir + "/step_00000002"));
  EXPECT_TRUE(fs::exists(dir + "/step_00000004/meta.json"));
  absl::StatusOr<std::string> latest = LatestCheckpoint(dir);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, dir + "/step_00000006");
  EXPECT_EQ(Read(*latest + "/trainer_state.pt"), "state");
}

TEST(Checkpointer, RewritingAStepReplacesItAndLeavesNoScratch) {
  const std::string dir = TestDir("rewrite");
  ASSERT_TRUE(WriteCheckpoint(dir, 3, Request(4, "first")).ok());
  ASSERT_TRUE(WriteCheckpoint(dir, 3, Request(4, "second")).ok());
  EXPECT_EQ(Read(dir + "/step_00000004/driver_state.json"), "second");
  for (const auto& e : fs::directory_iterator(dir)) {
    EXPECT_EQ(e.path().filename().string().rfind('.', 0), std::string::npos)
        << "scratch left behind: " << e.path();
  }
}

TEST(Checkpointer, RemovesTheScratchOfDeadWritersOnly) {
  const std::string dir = TestDir("scratch");
  const pid_t dead = DeadPid();
  const std::string abandoned = absl::StrCat(dir, "/.tmp-step_00000004-", dead);
  const std::string aside = absl::StrCat(dir, "/.old-step_00000002-", dead);
  const std::string live = absl::StrCat(dir, "/.tmp-step_00000006-", ::getpid());
  const std::string users = dir + "/.tmp-notes";
  for (const std::string& d : {abandoned, aside, live, users}) fs::create_directories(d);
  ASSERT_TRUE(WriteCheckpoint(dir, 3, Request(2, "{}")).ok());

  EXPECT_EQ(RemoveAbandonedScratch(dir), 2);
  EXPECT_FALSE(fs::exists(abandoned));
  EXPECT_FALSE(fs::exists(aside));
  EXPECT_TRUE(fs::exists(live)) << "a live writer's scratch was removed";
  EXPECT_TRUE(fs::exists(users)) << "a directory troupe did not make was removed";
  EXPECT_TRUE(fs::exists(dir + "/step_00000002/meta.json"));
  EXPECT_EQ(RemoveAbandonedScratch(dir), 0);
}

TEST(Checkpointer, LatestCheckpointSaysWhichDirectoryHasNone) {
  const std::string dir = TestDir("empty");
  fs::create_directories(dir + "/.tmp-step_00000002-1");
  absl::StatusOr<std::string> latest = LatestCheckpoint(dir);
  EXPECT_EQ(latest.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(latest.status().message().find(dir), std::string::npos) << latest.status();
}

}  // namespace
}  // namespace troupe::actors
