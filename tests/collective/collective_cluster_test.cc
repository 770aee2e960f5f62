// Weight sync between processes with a real cluster head as the rendezvous KV: this test starts
// an EmbeddedCluster, is itself the publisher (rank 0), and fork+execs subscriber processes
// (collective_member) that find the group through the head's KV.
//
// Usage (Bazel passes it): collective_cluster_test <path to collective_member>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/subprocess.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"
#include "runtime/cluster/embedded/embedded_cluster.h"
#include "runtime/collective/cluster_kv_store.h"
#include "runtime/collective/weight_sync.h"
#include "tests/collective/fixture.h"

namespace troupe::collective {
namespace {

const char* member_path = nullptr;

// This binary's temporary directory (removed when it exits): the cluster's state and the logs.
std::string TmpDir() {
  static test::TempDir dir("collective_cluster");
  return dir.path();
}

// A child process (fork+exec) with stdout/stderr in a log file; SIGKILLed and reaped on
// destruction, and SIGKILLed if this process dies.
class Child {
 public:
  Child(std::vector<std::string> args, std::string log) : log_(std::move(log)) {
    SubprocessOptions o;
    o.argv = std::move(args);
    for (char** e = environ; *e != nullptr; ++e) o.env.emplace_back(*e);
    o.stdout_path = log_;
    o.stderr_path = log_;
    o.file_mode = 0644;
    o.new_process_group = false;
    absl::StatusOr<pid_t> pid = SpawnSubprocess(o);
    if (pid.ok()) {
      pid_ = *pid;
    } else {
      ADD_FAILURE() << "cannot start " << o.argv[0] << ": " << pid.status();
    }
  }
  ~Child() {
    if (!exit_code_.has_value() && pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  void Kill() {
    if (pid_ > 0) kill(pid_, SIGKILL);
  }
  // The exit code (128+signal if killed) if it ended within `timeout`.
  std::optional<int> Wait(absl::Duration timeout) {
    if (pid_ <= 0) return std::nullopt;
    const absl::Time end = absl::Now() + timeout;
    while (!exit_code_.has_value()) {
      int status = 0;
      pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      } else if (absl::Now() >= end) {
        break;
      } else {
        absl::SleepFor(absl::Milliseconds(20));
      }
    }
    return exit_code_;
  }
  // The log so far ("" before the child wrote it).
  std::string Output() const { return std::filesystem::exists(log_) ? test::ReadFile(log_) : ""; }
  // Waits (bounded) until the output contains `text`.
  bool WaitForOutput(const std::string& text, absl::Duration timeout) {
    const absl::Time end = absl::Now() + timeout;
    while (absl::Now() < end) {
      if (absl::StrContains(Output(), text)) return true;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return absl::StrContains(Output(), text);
  }

 private:
  std::string log_;
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
};

class CollectiveClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ec = EmbeddedCluster::Start({.state_dir = TmpDir()});
    ASSERT_TRUE(ec.ok()) << ec.status();
    cluster_ = std::move(*ec);
    kv_ = std::make_unique<ClusterKvStore>(&cluster_->cluster());
  }
  void TearDown() override {
    kv_.reset();
    if (cluster_ != nullptr) cluster_->Shutdown();
  }

  std::unique_ptr<Child> StartMember(const std::string& group, int rank, int world,
                                     const std::string& mode, int versions,
                                     absl::Duration timeout) {
    return std::make_unique<Child>(
        std::vector<std::string>{member_path, cluster_->head().address(), cluster_->head().token(),
                                 group, absl::StrCat(rank), absl::StrCat(world), mode,
                                 absl::StrCat(versions),
                                 absl::StrCat(absl::ToInt64Milliseconds(timeout))},
        absl::StrCat(TmpDir(), "/", group, ".rank", rank, ".log"));
  }

  GroupOptions PublisherOptions(const std::string& group, int world, absl::Duration timeout) {
    GroupOptions o;
    o.name = group;
    o.world_size = world;
    o.rank = 0;
    o.timeout = timeout;
    o.gloo_host = "127.0.0.1";
    o.chunk_bytes = 256 << 10;
    return o;
  }

  std::unique_ptr<EmbeddedCluster> cluster_;
  std::unique_ptr<ClusterKvStore> kv_;
};

TEST_F(CollectiveClusterTest, PublisherAndTwoMemberProcessesRendezvousThroughTheHeadKv) {
  const absl::Duration timeout = absl::Seconds(60);
  std::vector<std::unique_ptr<Child>> members;
  for (int rank : {1, 2}) members.push_back(StartMember("policy", rank, 3, "receive", 3, timeout));

  auto pub = WeightPublisher::Create(kv_.get(), PublisherOptions("policy", 3, timeout),
                                     testing::StateDict(0));
  ASSERT_TRUE(pub.ok()) << pub.status();
  for (int64_t v : {1, 2, 3}) ASSERT_TRUE((*pub)->Publish(v, testing::StateDict(v)).ok());
  std::vector<at::Tensor> x = {at::full({4}, 1, at::kLong)};
  ASSERT_TRUE((*pub)->group().AllReduce(x, ReduceOp::kSum).ok());
  EXPECT_EQ(x[0][0].item<int64_t>(), 1 + 2 + 3);

  for (auto& m : members) {
    std::optional<int> code = m->Wait(absl::Seconds(60));
    ASSERT_TRUE(code.has_value()) << "member still running:\n" << m->Output();
    EXPECT_EQ(*code, 0) << m->Output();
    EXPECT_TRUE(absl::StrContains(m->Output(), "received 1,2,3 allreduce 6")) << m->Output();
  }
  // While the group lives its claim is in the head's KV; a clean close removes every key.
  EXPECT_FALSE(cluster_->cluster().KvList(CollectiveGroup::KeyPrefix("policy"))->empty());
  ASSERT_TRUE((*pub)->Close().ok());
  EXPECT_TRUE(cluster_->cluster().KvList(CollectiveGroup::KeyPrefix("policy"))->empty());
}

TEST_F(CollectiveClusterTest, KilledMemberFailsThePublishEverywhereAndANewGroupRecovers) {
  // Bounds both the group's formation (member processes load LibTorch first: seconds on a busy
  // machine) and how long the failure takes to surface.
  const absl::Duration timeout = absl::Seconds(15);
  auto survivor = StartMember("policy.0", 1, 3, "receive", 1, timeout);
  auto victim = StartMember("policy.0", 2, 3, "hang", 0, timeout);
  auto pub = WeightPublisher::Create(kv_.get(), PublisherOptions("policy.0", 3, timeout),
                                     testing::StateDict(0));
  ASSERT_TRUE(pub.ok()) << pub.status();
  ASSERT_TRUE(victim->WaitForOutput("joined", absl::Seconds(30))) << victim->Output();
  victim->Kill();  // kill -9 after the group formed
  ASSERT_EQ(victim->Wait(absl::Seconds(10)), 128 + SIGKILL);

  const absl::Time start = absl::Now();
  absl::Status s = (*pub)->Publish(1, testing::StateDict(1));
  EXPECT_TRUE(absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) << s;
  EXPECT_LT(absl::Now() - start, timeout + absl::Seconds(5)) << "the failure must be bounded";
  EXPECT_TRUE(absl::IsFailedPrecondition((*pub)->Publish(2, testing::StateDict(2))))
      << "a broken group refuses further work";
  std::optional<int> code = survivor->Wait(timeout + absl::Seconds(20));
  ASSERT_TRUE(code.has_value()) << survivor->Output();
  EXPECT_EQ(*code, 2) << survivor->Output();
  EXPECT_TRUE(absl::StrContains(survivor->Output(), "receive failed")) << survivor->Output();

  // Recovery: everyone leaves the broken group; the trainer re-creates it under a new epoch.
  ASSERT_TRUE((*pub)->Close().ok());
  std::vector<std::unique_ptr<Child>> members;
  for (int rank : {1, 2}) {
    members.push_back(StartMember("policy.1", rank, 3, "receive", 1, absl::Seconds(60)));
  }
  auto pub2 = WeightPublisher::Create(kv_.get(), PublisherOptions("policy.1", 3, absl::Seconds(60)),
                                      testing::StateDict(0));
  ASSERT_TRUE(pub2.ok()) << pub2.status();
  ASSERT_TRUE((*pub2)->Publish(2, testing::StateDict(2)).ok());
  std::vector<at::Tensor> x = {at::full({4}, 1, at::kLong)};
  ASSERT_TRUE((*pub2)->group().AllReduce(x, ReduceOp::kSum).ok());
  for (auto& m : members) {
    std::optional<int> c = m->Wait(absl::Seconds(60));
    ASSERT_TRUE(c.has_value()) << m->Output();
    EXPECT_EQ(*c, 0) << m->Output();
    EXPECT_TRUE(absl::StrContains(m->Output(), "received 2 allreduce 6")) << m->Output();
  }
}

TEST_F(CollectiveClusterTest, AMemberThatNeverStartsIsNamedInABoundedError) {
  auto member = StartMember("lonely", 1, 3, "receive", 1, absl::Seconds(2));
  absl::Status s =
      WeightPublisher::Create(kv_.get(), PublisherOptions("lonely", 3, absl::Seconds(2)),
                              testing::StateDict(0))
          .status();
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "2 did not join")) << s;
  std::optional<int> code = member->Wait(absl::Seconds(30));
  ASSERT_TRUE(code.has_value()) << member->Output();
  EXPECT_EQ(*code, 1) << member->Output();
  EXPECT_TRUE(absl::StrContains(member->Output(), "did not")) << member->Output();
}

}  // namespace
}  // namespace troupe::collective

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <path to collective_member>\n", argv[0]);
    return 2;
  }
  troupe::collective::member_path = argv[1];
  return RUN_ALL_TESTS();
}
