// Remote calls between processes: this test starts a worker process (transport_worker), calls
// the actor it hosts, kills it with SIGKILL while calls are in flight, starts a replacement on a
// new port and checks that the same handle reaches it once the resolver knows the new address.
//
// Usage (Bazel passes it): multiprocess_test <path to transport_worker>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "runtime/transport/transport_client.h"
#include "tests/transport/test_actors.h"

namespace troupe {
namespace {

using transport_test::ProcessCounter;

const char* worker_path = nullptr;
constexpr char kToken[] = "multiprocess-token";

testing::Num MakeNum(int64_t v) {
  testing::Num n;
  n.set_value(v);
  return n;
}

// A worker process started with fork+exec; killed (SIGKILL) and reaped on destruction.
class Worker {
 public:
  static absl::StatusOr<std::unique_ptr<Worker>> Start(const std::string& actor_id) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
      return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
    }
    // Everything the child needs is prepared before fork (only async-signal-safe calls after).
    std::vector<std::string> args = {worker_path, kToken, actor_id};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t pid = fork();
    if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
    if (pid == 0) {
      dup2(in[0], STDIN_FILENO);
      dup2(out[1], STDOUT_FILENO);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    auto w = std::unique_ptr<Worker>(new Worker(pid, in[1], out[0]));
    absl::Status s = w->ReadPort();
    if (!s.ok()) return s;
    return w;
  }

  ~Worker() {
    Kill(SIGKILL);
    close(stdin_fd_);
    close(stdout_fd_);
  }

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

  // Sends `sig` and reaps the process (once).
  void Kill(int sig) {
    if (reaped_) return;
    kill(pid_, sig);
    int status;
    waitpid(pid_, &status, 0);
    reaped_ = true;
  }

 private:
  Worker(pid_t pid, int stdin_fd, int stdout_fd)
      : pid_(pid), stdin_fd_(stdin_fd), stdout_fd_(stdout_fd) {}

  // Reads "PORT <n>\n" from the worker's stdout, for at most 30 s.
  absl::Status ReadPort() {
    std::string line;
    const absl::Time end = absl::Now() + absl::Seconds(30);
    while (line.find('\n') == std::string::npos) {
      const int wait_ms = static_cast<int>(absl::ToInt64Milliseconds(end - absl::Now()));
      if (wait_ms <= 0) return absl::DeadlineExceededError("worker printed no port in 30 s");
      pollfd p{stdout_fd_, POLLIN, 0};
      if (poll(&p, 1, wait_ms) <= 0) continue;
      char buf[64];
      const ssize_t n = read(stdout_fd_, buf, sizeof(buf));
      if (n <= 0) return absl::InternalError("worker exited before printing its port");
      line.append(buf, static_cast<size_t>(n));
    }
    absl::string_view v(line.data(), line.find('\n'));
    if (!absl::ConsumePrefix(&v, "PORT ") || !absl::SimpleAtoi(v, &port_) || port_ <= 0) {
      return absl::InternalError(absl::StrCat("unexpected worker output: ", line));
    }
    return absl::OkStatus();
  }

  const pid_t pid_;
  const int stdin_fd_;
  const int stdout_fd_;
  int port_ = 0;
  bool reaped_ = false;
};

TEST(MultiProcessTransport, CallsSurviveAWorkerKilledMidCallsThroughTheSameHandle) {
  ASSERT_NE(worker_path, nullptr);
  auto first = Worker::Start("counter-1");
  ASSERT_TRUE(first.ok()) << first.status();
  auto resolver = std::make_shared<transport::StaticResolver>();
  resolver->Set("counter-1", (*first)->address());
  transport::TransportClient client(resolver, {.token = kToken});
  resolver->Set("counter-1-sleeper", (*first)->address());
  auto h = client.Connect<ProcessCounter>("counter-1");
  ASSERT_TRUE(h.ok()) << h.status();
  auto sleeper = client.Connect<ProcessCounter>("counter-1-sleeper");
  ASSERT_TRUE(sleeper.ok()) << sleeper.status();

  absl::StatusOr<testing::Num> pid =
      h->Call(&ProcessCounter::Pid, testing::Empty()).Get(absl::Seconds(10));
  ASSERT_TRUE(pid.ok()) << pid.status();
  EXPECT_EQ(pid->value(), (*first)->pid()) << "the call did not reach the worker process";
  EXPECT_EQ(h->Call(&ProcessCounter::Add, MakeNum(5)).Get(absl::Seconds(10))->value(), 5);

  // A caller keeps calls flowing (pipelined, 8 at a time) while the worker is killed.
  std::atomic<int> ok_calls{0}, unavailable{0}, other{0};
  std::atomic<bool> stop{false};
  std::string other_error;
  std::thread caller([&] {
    for (int round = 0; round < 5000 && !stop.load(); ++round) {
      std::vector<Future<testing::Num>> batch;
      for (int i = 0; i < 8; ++i) batch.push_back(h->Call(&ProcessCounter::Add, MakeNum(1)));
      for (auto& f : batch) {
        absl::StatusOr<testing::Num> r = f.Get(absl::Seconds(30));
        if (r.ok()) {
          ++ok_calls;
        } else if (r.status().code() == absl::StatusCode::kUnavailable) {
          ++unavailable;
        } else if (other++ == 0) {
          other_error = r.status().ToString();
        }
      }
      if (unavailable.load() >= 50) break;
    }
  });
  // On the other actor of the worker (actors run one call at a time).
  Future<testing::Empty> long_call = sleeper->Call(&ProcessCounter::Nap,
                                                   [] {
                                                     testing::Sleep s;
                                                     s.set_millis(20000);
                                                     return s;
                                                   }(),
                                                   {.timeout = absl::Seconds(60)});
  const absl::Time wait_end = absl::Now() + absl::Seconds(30);
  while (ok_calls.load() < 200 && absl::Now() < wait_end) absl::SleepFor(absl::Milliseconds(1));
  ASSERT_GE(ok_calls.load(), 200) << "calls did not flow before the kill";
  (*first)->Kill(SIGKILL);

  absl::StatusOr<testing::Empty> lost = long_call.Get(absl::Seconds(30));
  EXPECT_EQ(lost.status().code(), absl::StatusCode::kUnavailable) << lost.status();
  EXPECT_NE(lost.status().message().find("Nap"), std::string::npos) << lost.status();
  EXPECT_NE(lost.status().message().find("ProcessCounter"), std::string::npos) << lost.status();
  stop.store(true);
  caller.join();
  EXPECT_EQ(other.load(), 0) << "calls failed with something else than UNAVAILABLE: "
                             << other_error;
  EXPECT_GE(unavailable.load(), 1);

  // The actor is restarting: calls fail fast with UNAVAILABLE, never hang.
  resolver->MarkRestarting("counter-1");
  EXPECT_EQ(h->Call(&ProcessCounter::Add, MakeNum(1)).Get(absl::Seconds(10)).status().code(),
            absl::StatusCode::kUnavailable);

  // Restarted elsewhere (a new process on a new port): the same handle reaches it.
  auto second = Worker::Start("counter-1");
  ASSERT_TRUE(second.ok()) << second.status();
  resolver->Set("counter-1", (*second)->address());
  absl::StatusOr<testing::Num> again =
      h->Call(&ProcessCounter::Add, MakeNum(1)).Get(absl::Seconds(10));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->value(), 1) << "a fresh instance starts from zero";
  pid = h->Call(&ProcessCounter::Pid, testing::Empty()).Get(absl::Seconds(10));
  ASSERT_TRUE(pid.ok());
  EXPECT_EQ(pid->value(), (*second)->pid());
  EXPECT_EQ(h->state(), ActorState::kAlive);
  EXPECT_GE(client.stats().connections_opened, 2);
  client.Shutdown();
  (*second)->Kill(SIGTERM);
}

}  // namespace
}  // namespace troupe

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <path to transport_worker>\n", argv[0]);
    return 2;
  }
  troupe::worker_path = argv[1];
  return RUN_ALL_TESTS();
}
