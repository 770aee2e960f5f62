// The cluster commands as a user runs them: `troupe start` in the background (head, then a
// node), `troupe status`, `troupe stop`, and how the cluster token is handed around.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/testing/temp_dir.h"
#include "cli/version.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tests/cluster/process.h"

namespace troupe::tests {
namespace {

constexpr char kTroupe[] = "tests/cluster/troupe_test";

mode_t ModeOf(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? st.st_mode & 07777 : 0;
}

// A command's output file, in this binary's own temporary directory (concurrent runs of this
// test, e.g. --runs_per_test, must not share one), removed when it exits.
std::string OutPath(const std::string& name) {
  static test::TempDir dir("cli");
  return dir.Path(name);
}

// The file's bytes, or "" while it does not exist (what a poll for a file a process writes reads).
std::string ReadIfExists(const std::string& path) {
  return std::filesystem::exists(path) ? test::ReadFile(path) : "";
}

TEST(TroupeCli, StartInTheBackgroundThenStatusThenStop) {
  test::TempDir tmp("cli");
  const std::string dir = tmp.Path("cli");

  auto [rc, out] = RunCommand({kTroupe, "start", "--head", "--port", "0", "--dashboard-port", "0",
                               "--state-dir", dir, "--resources", R"({"CPU": 3, "GPU": 2})"},
                              dir + ".start.out");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_TRUE(absl::StrContains(out, "troupe head serving at 127.0.0.1:")) << out;
  // How to join: with the token's file, never the token itself.
  EXPECT_TRUE(absl::StrContains(out, "troupe start --address")) << out;
  EXPECT_TRUE(absl::StrContains(out, "--token-file")) << out;
  EXPECT_TRUE(absl::StrContains(out, dir + "/token")) << out;
  // The hints are the commands to type for this state dir.
  EXPECT_TRUE(absl::StrContains(out, "troupe status --state-dir " + dir + "\n")) << out;
  EXPECT_TRUE(absl::StrContains(out, "troupe stop --state-dir " + dir + "\n")) << out;
  const std::string token = test::ReadFile(dir + "/token");
  ASSERT_GE(token.size(), 32u);
  EXPECT_FALSE(absl::StrContains(out, token.substr(0, 32))) << out;
  // Owner only: the state dir and its logs 0700, the token and the log 0600; the log (which
  // holds the same instructions and the node agent's messages) has no token either.
  EXPECT_EQ(ModeOf(dir), 0700u);
  EXPECT_EQ(ModeOf(dir + "/logs"), 0700u);
  EXPECT_EQ(ModeOf(dir + "/token"), 0600u);
  EXPECT_EQ(ModeOf(dir + "/logs/head.log"), 0600u);
  const std::string log = test::ReadFile(dir + "/logs/head.log");
  EXPECT_TRUE(absl::StrContains(log, "--token-file")) << log;
  EXPECT_FALSE(absl::StrContains(log, token.substr(0, 32))) << log;
  EXPECT_TRUE(absl::StrContains(out, "CPU 3")) << out;
  EXPECT_TRUE(absl::StrContains(out, "dashboard and jobs:    http://127.0.0.1:")) << out;

  // `troupe job` finds the head's dashboard through the state dir.
  auto [rcj, jobs] = RunCommand({kTroupe, "job", "list", "--state-dir", dir}, dir + ".jobs.out");
  EXPECT_EQ(rcj, 0) << jobs;
  EXPECT_TRUE(absl::StrContains(jobs, "no jobs")) << jobs;
  auto [rcs, unknown] =
      RunCommand({kTroupe, "job", "status", "nope-1", "--state-dir", dir}, dir + ".jobstatus.out");
  EXPECT_EQ(rcs, 1) << unknown;
  EXPECT_TRUE(absl::StrContains(unknown, "nope-1")) << unknown;

  auto [rc2, status] = RunCommand({kTroupe, "status", "--state-dir", dir}, dir + ".status.out");
  ASSERT_EQ(rc2, 0) << status;
  EXPECT_TRUE(absl::StrContains(status, "Nodes: 1 alive, 0 dead")) << status;
  EXPECT_TRUE(absl::StrContains(status, "CPU 0/3")) << status;
  EXPECT_TRUE(absl::StrContains(status, "GPU 0/2")) << status;

  // On the head's machine, its address alone is enough: the token is found in the state dir
  // the head was started with (not the default one), whatever the address is spelled as.
  const std::string address = test::ReadFile(dir + "/head.address");
  const std::string port = address.substr(address.rfind(':') + 1, std::string::npos);
  for (const std::string& a : {address.substr(0, address.size() - 1), "localhost:" + port}) {
    auto [rc, by_address] = RunCommand({kTroupe, "status", "--address", a}, dir + ".byaddr.out");
    EXPECT_EQ(rc, 0) << a << ": " << by_address;
    EXPECT_TRUE(absl::StrContains(by_address, "Nodes: 1 alive")) << by_address;
  }
  const std::string url = test::ReadFile(dir + "/dashboard.address");
  auto [rcl, listed] =
      RunCommand({kTroupe, "job", "list", "--address", url.substr(0, url.size() - 1)},
                 dir + ".listbyaddr.out");
  EXPECT_EQ(rcl, 0) << listed;
  EXPECT_TRUE(absl::StrContains(listed, "no jobs")) << listed;

  auto [rc3, stopped] = RunCommand({kTroupe, "stop", "--state-dir", dir}, dir + ".stop.out");
  ASSERT_EQ(rc3, 0) << stopped;
  EXPECT_TRUE(absl::StrContains(stopped, "stopped head")) << stopped;
  // Nothing left to stop, and status now fails with a clear message.
  auto [rc4, again] = RunCommand({kTroupe, "stop", "--state-dir", dir}, dir + ".stop2.out");
  EXPECT_EQ(rc4, 0);
  EXPECT_TRUE(absl::StrContains(again, "nothing running")) << again;
  auto [rc5, down] = RunCommand({kTroupe, "status", "--state-dir", dir}, dir + ".status2.out");
  EXPECT_NE(rc5, 0);
  EXPECT_TRUE(absl::StrContains(down, "head at")) << down;
}

// The issue-30 probe: `troupe stop` had to SIGKILL the head. The head's shutdown takes well under
// a second, but a head that had exited stayed a zombie until its parent reaped it, and `troupe
// stop` (kill(pid, 0)) took the zombie for a running head, waited its 10 s and "killed" it. Here
// this test is the parent and reaps only after `troupe stop` returned: stop must see the head
// gone at once, and the head must have ended on SIGTERM by itself (exit 0).
TEST(TroupeCli, StopEndsAHeadWithSigtermPromptlyEvenBeforeItIsReaped) {
  test::TempDir tmp("stop_prompt");
  const std::string dir = tmp.Path("stop_prompt");
  Process head =
      Process::Start({kTroupe, "start", "--head", "--block", "--port", "0", "--dashboard-port", "0",
                      "--state-dir", dir, "--resources", R"({"CPU": 1})"},
                     dir + ".head.out");
  ASSERT_TRUE(WaitUntil(
      [&] {
        return !ReadIfExists(dir + "/dashboard.address").empty() &&
               std::filesystem::exists(absl::StrCat(dir, "/pids/head-", head.pid(), ".pid"));
      },
      absl::Seconds(60)))
      << head.Output();
  const absl::Time start = absl::Now();
  auto [rc, stopped] = RunCommand({kTroupe, "stop", "--state-dir", dir}, dir + ".stop.out");
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(rc, 0) << stopped;
  EXPECT_TRUE(absl::StrContains(stopped, "stopped head")) << stopped;
  EXPECT_FALSE(absl::StrContains(stopped, "killed")) << stopped;
  EXPECT_LT(took, absl::Seconds(5)) << stopped;
  std::optional<int> status = head.Wait(absl::Seconds(10));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status)) << "the head died of signal " << WTERMSIG(*status);
  EXPECT_EQ(WEXITSTATUS(*status), 0) << head.Output();
  EXPECT_FALSE(std::filesystem::exists(absl::StrCat(dir, "/pids/head-", head.pid(), ".pid")));
}

// `troupe dashboard RUN_DIR`: a finished run's files served without a cluster, until Ctrl-C.
TEST(TroupeCli, DashboardServesARunDirectoryWithoutACluster) {
  test::TempDir tmp("run_dashboard");
  const std::string dir = tmp.Path("run_dashboard");
  std::filesystem::create_directories(dir + "/run");
  test::WriteFile(dir + "/run/metrics.jsonl",
                  "{\"step\":1,\"time\":1796225343.5,\"critic/score/mean\":0.25}\n");
  test::WriteFile(dir + "/run/summary.json", "{\"name\": \"demo\", \"steps\": 1}\n");
  Process viewer =
      Process::Start({kTroupe, "dashboard", dir + "/run", "--port", "0"}, dir + ".out");
  std::string url;
  for (int i = 0; i < 200 && url.empty(); ++i) {
    const std::string out = viewer.Output();
    const size_t at = out.find("http://127.0.0.1:");
    if (at != std::string::npos && out.find(' ', at) != std::string::npos) {
      url = out.substr(at, out.find(' ', at) - at);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(url.empty()) << viewer.Output();
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(url.substr(url.rfind(':') + 1), &port)) << url;
  // The runs are served to whoever has the token of the sign-in link it printed, no one else.
  const std::string out = viewer.Output();
  const size_t token_at = out.find("?token=");
  ASSERT_NE(token_at, std::string::npos) << out;
  const std::string token = out.substr(token_at + 7, out.find(' ', token_at) - token_at - 7);
  httplib::Client anonymous("127.0.0.1", port);
  httplib::Result refused = anonymous.Get("/api/jobs/run");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);
  httplib::Client c("127.0.0.1", port);
  c.set_default_headers({{"Authorization", "Bearer " + token}});
  httplib::Result jobs = c.Get("/api/jobs/run");
  ASSERT_TRUE(jobs);
  EXPECT_TRUE(absl::StrContains(jobs->body, "\"status\":\"SUCCEEDED\"")) << jobs->body;
  httplib::Result metrics = c.Get("/api/jobs/run/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_TRUE(absl::StrContains(metrics->body, "critic/score/mean")) << metrics->body;
  viewer.Signal(SIGINT);
  EXPECT_EQ(viewer.Wait(absl::Seconds(10)), 0) << viewer.Output();

  auto [rc, bad] = RunCommand({kTroupe, "dashboard", dir + "/missing"}, dir + ".bad.out");
  EXPECT_EQ(rc, 2);
  EXPECT_TRUE(absl::StrContains(bad, dir + "/missing: not a directory")) << bad;
}

TEST(TroupeCli, TheDashboardAnswersTheAllowedHostsAndRefusesOthers) {
  test::TempDir tmp("cli-hosts");
  const std::string dir = tmp.Path("cli-hosts");
  auto [rc, out] = RunCommand(
      {kTroupe, "start", "--head", "--head-only", "--port", "0", "--dashboard-port", "0",
       "--state-dir", dir, "--dashboard-allowed-hosts", "dash.example.com,proxy.internal:8443"},
      dir + ".start.out");
  ASSERT_EQ(rc, 0) << out;
  const std::string address_file = test::ReadFile(dir + "/dashboard.address");
  const std::string url = address_file.substr(0, address_file.find('\n'));
  ASSERT_TRUE(absl::StartsWith(url, "http://127.0.0.1:")) << url;
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(url.substr(url.rfind(':') + 1), &port)) << url;
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(5, 0);
  auto status_for = [&](const std::string& host) {
    httplib::Result r = c.Get("/api/nodes", {{"Host", host}});
    return r ? r->status : -1;
  };
  EXPECT_EQ(status_for("dash.example.com"), 200);
  EXPECT_EQ(status_for("proxy.internal:8443"), 200);
  EXPECT_EQ(status_for(absl::StrCat("127.0.0.1:", port)), 200);
  EXPECT_EQ(status_for("proxy.internal:9999"), 403);
  EXPECT_EQ(status_for("evil.example"), 403);
  auto [rc2, stopped] = RunCommand({kTroupe, "stop", "--state-dir", dir}, dir + ".stop.out");
  EXPECT_EQ(rc2, 0) << stopped;

  // A value that is not a host name is refused before anything starts, naming the flag.
  auto [rc3, bad] = RunCommand({kTroupe, "start", "--head", "--state-dir", dir + "-bad",
                                "--dashboard-allowed-hosts", "ok.example,not a host"},
                               dir + ".bad.out");
  EXPECT_NE(rc3, 0) << bad;
  EXPECT_TRUE(absl::StrContains(bad, "--dashboard-allowed-hosts")) << bad;
  EXPECT_TRUE(absl::StrContains(bad, "'not a host'")) << bad;
  EXPECT_FALSE(std::filesystem::exists(dir + "-bad/dashboard.address"));
}

// The token never goes on a command line: --token is refused with the reason and the way to do
// it instead, and a token file others may read is refused with the fix.
TEST(TroupeCli, TheTokenFlagIsRefusedAndTokenFilesMustBeOwnerOnly) {
  test::TempDir tmp("cli-token");
  const std::string dir = tmp.Path("cli-token");
  std::filesystem::create_directories(dir);
  auto [rc, out] = RunCommand({kTroupe, "start", "--address", "127.0.0.1:1", "--token",
                               "s3cret-on-the-command-line", "--state-dir", dir + "/state"},
                              dir + "/flag.out");
  EXPECT_EQ(rc, 2) << out;
  EXPECT_TRUE(absl::StrContains(out, "--token is refused")) << out;
  EXPECT_TRUE(absl::StrContains(out, "ps")) << out;
  EXPECT_TRUE(absl::StrContains(out, "--token-file PATH")) << out;
  EXPECT_TRUE(absl::StrContains(out, "TROUPE_TOKEN")) << out;
  EXPECT_FALSE(absl::StrContains(out, "s3cret-on-the-command-line")) << out;
  // ... and so it is by every command that talks to a head (`troupe run`, not in this test's
  // binary: //tests/ux:newcomer_walkthrough_test).
  for (const std::vector<std::string>& command : std::vector<std::vector<std::string>>{
           {"status", "--address", "127.0.0.1:1"}, {"job", "list", "--address", "127.0.0.1:1"}}) {
    std::vector<std::string> argv = {kTroupe};
    argv.insert(argv.end(), command.begin(), command.end());
    argv.insert(argv.end(), {"--token", "s3cret-on-the-command-line"});
    auto [rc, refused] = RunCommand(argv, dir + "/flag-" + command[0] + ".out");
    EXPECT_EQ(rc, 2) << command[0] << ": " << refused;
    EXPECT_TRUE(absl::StrContains(refused, "--token is refused")) << refused;
    EXPECT_TRUE(absl::StrContains(refused, "--token-file PATH")) << refused;
    EXPECT_FALSE(absl::StrContains(refused, "s3cret-on-the-command-line")) << refused;
  }

  const std::string loose = dir + "/loose-token";
  test::WriteFile(loose, "0123456789abcdef0123456789abcdef\n");
  ::chmod(loose.c_str(), 0644);
  auto [rc2, out2] = RunCommand({kTroupe, "start", "--address", "127.0.0.1:1", "--token-file",
                                 loose, "--state-dir", dir + "/state"},
                                dir + "/loose.out");
  EXPECT_EQ(rc2, 2) << out2;
  EXPECT_TRUE(absl::StrContains(out2, "--token-file")) << out2;
  EXPECT_TRUE(absl::StrContains(out2, "chmod 600 " + loose)) << out2;
  EXPECT_FALSE(absl::StrContains(out2, "0123456789abcdef")) << out2;

  auto [rc3, out3] = RunCommand({kTroupe, "start", "--address", "127.0.0.1:1", "--token-file",
                                 dir + "/no-such-file", "--state-dir", dir + "/state"},
                                dir + "/missing.out");
  EXPECT_EQ(rc3, 2) << out3;
  EXPECT_TRUE(absl::StrContains(out3, dir + "/no-such-file")) << out3;

  // No file, no environment, no token in the state dir: says where a token can come from.
  auto [rc4, out4] = RunCommand(
      {kTroupe, "start", "--address", "127.0.0.1:1", "--state-dir", dir + "/empty-state"},
      dir + "/none.out");
  EXPECT_EQ(rc4, 2) << out4;
  EXPECT_TRUE(absl::StrContains(out4, "--token-file")) << out4;
  EXPECT_TRUE(absl::StrContains(out4, "TROUPE_TOKEN")) << out4;
}

// A head given --token-file serves with that token: a node agent joins with a copy of the file,
// and `troupe status` (same state dir) finds it.
TEST(TroupeCli, AHeadAndANodeShareATokenFile) {
  test::TempDir tmp("cli-token-file");
  const std::string dir = tmp.Path("cli-token-file");
  std::filesystem::create_directories(dir);
  const std::string token_file = dir + "/cluster.token";
  test::WriteFile(token_file, "chosen-token-0123456789abcdef\n");
  ::chmod(token_file.c_str(), 0600);
  auto [rc, out] =
      RunCommand({kTroupe, "start", "--head", "--head-only", "--port", "0", "--dashboard-port", "0",
                  "--token-file", token_file, "--state-dir", dir + "/head"},
                 dir + "/head.out");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_FALSE(absl::StrContains(out, "chosen-token")) << out;
  EXPECT_EQ(test::ReadFile(dir + "/head/token"), "chosen-token-0123456789abcdef\n");
  std::string address = test::ReadFile(dir + "/head/head.address");
  address = address.substr(0, address.find('\n'));
  auto [rcn, node] = RunCommand({kTroupe, "start", "--address", address, "--token-file", token_file,
                                 "--state-dir", dir + "/node"},
                                dir + "/node.out");
  EXPECT_EQ(rcn, 0) << node;
  EXPECT_FALSE(absl::StrContains(node, "chosen-token")) << node;
  auto [rcs, status] =
      RunCommand({kTroupe, "status", "--state-dir", dir + "/head"}, dir + "/status.out");
  EXPECT_EQ(rcs, 0) << status;
  EXPECT_TRUE(absl::StrContains(status, "Nodes: 1 alive")) << status;
  EXPECT_FALSE(absl::StrContains(test::ReadFile(dir + "/node/logs/node.log"), "chosen-token"));
  RunCommand({kTroupe, "stop", "--state-dir", dir + "/node"}, dir + "/stop-node.out");
  RunCommand({kTroupe, "stop", "--state-dir", dir + "/head"}, dir + "/stop-head.out");
}

// A head.log from an older troupe, which printed the token there, gets the token redacted (and
// the user is told how to make a new one) when a head starts again with that state dir.
TEST(TroupeCli, ATokenAnOlderTroupeLoggedIsRedacted) {
  test::TempDir tmp("cli-old-log");
  const std::string dir = tmp.Path("cli-old-log");
  std::filesystem::create_directories(dir + "/logs");
  const std::string token = "feedfacefeedfacefeedfacefeedface";
  test::WriteFile(dir + "/token", token + "\n");
  ::chmod((dir + "/token").c_str(), 0600);
  test::WriteFile(
      dir + "/logs/head.log",
      "  join another machine:  troupe start --address 127.0.0.1:1 --token " + token + "\n");
  ::chmod((dir + "/logs/head.log").c_str(), 0644);
  auto [rc, out] = RunCommand({kTroupe, "start", "--head", "--head-only", "--port", "0",
                               "--dashboard-port", "0", "--state-dir", dir},
                              dir + ".start.out");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_TRUE(absl::StrContains(out, "held the cluster token")) << out;
  EXPECT_TRUE(absl::StrContains(out, "delete " + dir + "/token")) << out;
  const std::string log = test::ReadFile(dir + "/logs/head.log");
  EXPECT_FALSE(absl::StrContains(log, token)) << log;
  EXPECT_TRUE(absl::StrContains(log, "<token redacted>")) << log;
  EXPECT_EQ(ModeOf(dir + "/logs/head.log"), 0600u);
  RunCommand({kTroupe, "stop", "--state-dir", dir}, dir + ".stop.out");
}

// `troupe job submit` against a head started with --job-path-roots: the spec is checked locally
// (directory, size), paths outside the job's directory and the roots are refused by the head, and
// --resume / --overwrite reach it.
TEST(TroupeCli, JobSubmitIsBoundedAndConfinedToTheJobPathRoots) {
  test::TempDir tmp("cli-jobs");
  const std::string dir = tmp.Path("cli-jobs");
  const std::string models = dir + "/models";
  std::filesystem::create_directories(models);
  test::WriteFile(
      models + "/tiny.json",
      R"({"model_type": "llama", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 64,
             "num_hidden_layers": 1, "num_attention_heads": 2, "max_position_embeddings": 64})");
  const std::string spec = dir + "/job.yaml";
  test::WriteFile(spec, absl::StrCat("name: tiny\nmodel: {config: ", models,
                                     "/tiny.json, init: random}\n"
                                     "data: {task: arithmetic, train_batch_size: 4, "
                                     "max_prompt_length: 8,\n"
                                     "       max_response_length: 4, heldout_size: 20}\n"
                                     "trainer: {total_steps: 3}\n"
                                     "actors: {rollout: {replicas: 1, resources: {CPU: 0.5}}}\n"));
  const std::string state = dir + "/state";
  auto [rc, out] = RunCommand(
      {kTroupe, "start", "--head", "--port", "0", "--dashboard-port", "0", "--state-dir", state,
       "--resources", R"({"CPU": 4})", "--job-path-roots", models + "," + dir + "/ckpt"},
      dir + ".start.out");
  ASSERT_EQ(rc, 0) << out;
  auto submit = [&](std::vector<std::string> args, const std::string& name) {
    std::vector<std::string> argv = {kTroupe, "job", "submit", "--no-wait", "--state-dir", state};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, absl::StrCat(dir, ".", name, ".out"));
  };

  auto [rc1, accepted] = submit({spec, "actors.checkpointer.dir=" + dir + "/ckpt/a"}, "ok");
  EXPECT_EQ(rc1, 0) << accepted;
  const std::string first = accepted.substr(0, accepted.find('\n'));
  EXPECT_TRUE(absl::StartsWith(first, "tiny-")) << accepted;

  auto [rc2, outside] = submit({spec, "actors.checkpointer.dir=" + dir + "/elsewhere"}, "outside");
  EXPECT_EQ(rc2, 1) << outside;
  EXPECT_TRUE(
      absl::StrContains(outside, "override actors.checkpointer.dir=" + dir +
                                     "/elsewhere: actors.checkpointer.dir: \"" + dir +
                                     "/elsewhere\" outside the directories this job may use"))
      << outside;

  auto [rc3, directory] = submit({dir}, "dir");
  EXPECT_EQ(rc3, 1) << directory;
  EXPECT_TRUE(absl::StrContains(directory, dir + ": is a directory; expected a job YAML file"))
      << directory;

  test::WriteFile(dir + "/big.yaml", std::string(50 << 20, '#'));
  const auto start = std::chrono::steady_clock::now();
  auto [rc4, huge] = submit({dir + "/big.yaml"}, "big");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5);
  EXPECT_EQ(rc4, 1) << huge;
  EXPECT_TRUE(absl::StrContains(huge, "52428800 bytes, more than the 1 MiB a job spec may have"))
      << huge;

  auto [rc5, both] = submit({"--resume", first, "--overwrite", spec}, "both");
  EXPECT_EQ(rc5, 2) << both;
  EXPECT_TRUE(absl::StrContains(both, "--resume and --overwrite exclude each other")) << both;
  auto [rc6, unknown] = submit({"--resume", "nope-1", spec}, "nope");
  EXPECT_EQ(rc6, 1) << unknown;
  EXPECT_TRUE(absl::StrContains(unknown, "resume: no job with id nope-1")) << unknown;
  auto [rc7, overwrite] = submit({"--overwrite", spec}, "overwrite");
  EXPECT_EQ(rc7, 0) << overwrite;
  const std::string id = overwrite.substr(0, overwrite.find('\n'));
  auto [rc8, status] =
      RunCommand({kTroupe, "job", "status", id, "--state-dir", state}, dir + ".status.out");
  EXPECT_EQ(rc8, 0) << status;
  EXPECT_TRUE(absl::StrContains(status, "overwrite:   yes")) << status;
  // Once the first job has ended (this test binary has no `run`: its driver fails), it can be
  // resumed: a new job in its run directory.
  EXPECT_TRUE(WaitUntil(
      [&] {
        return absl::StrContains(RunCommand({kTroupe, "job", "status", first, "--state-dir", state},
                                            dir + ".status1.out")
                                     .second,
                                 "FAILED");
      },
      absl::Seconds(20)));
  auto [rc9, resumed] =
      submit({"--resume", first, spec, "actors.checkpointer.dir=" + dir + "/ckpt/a"}, "resume");
  EXPECT_EQ(rc9, 0) << resumed;
  const std::string again = resumed.substr(0, resumed.find('\n'));
  auto [rc10, status2] =
      RunCommand({kTroupe, "job", "status", again, "--state-dir", state}, dir + ".status2.out");
  EXPECT_TRUE(absl::StrContains(status2, "resumes:     " + first)) << status2;
  EXPECT_TRUE(absl::StrContains(status2, absl::StrCat(state, "/jobs/", first, "/run"))) << status2;

  RunCommand({kTroupe, "stop", "--state-dir", state}, dir + ".stop.out");
}

// `troupe start --head --no-job-libraries`: a submitted job that brings native code (an actor
// library) is refused at submission, naming the key; a job without one is taken.
TEST(TroupeCli, AHeadStartedWithNoJobLibrariesRefusesJobsThatBringOne) {
  test::TempDir tmp("cli-nolibs");
  const std::string dir = tmp.Path("cli-nolibs");
  std::filesystem::create_directories(dir + "/lib");
  test::WriteFile(
      dir + "/lib/tiny.json",
      R"({"model_type": "llama", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 64,
             "num_hidden_layers": 1, "num_attention_heads": 2, "max_position_embeddings": 64})");
  test::WriteFile(dir + "/lib/libmine.so", "native code\n");
  const std::string spec = dir + "/job.yaml";
  test::WriteFile(spec, absl::StrCat("name: tiny\nmodel: {config: ", dir,
                                     "/lib/tiny.json, init: random}\n"
                                     "data: {task: arithmetic, train_batch_size: 4, "
                                     "max_prompt_length: 8,\n"
                                     "       max_response_length: 4, heldout_size: 20}\n"
                                     "trainer: {total_steps: 3}\n"
                                     "actors: {rollout: {replicas: 1, resources: {CPU: 0.5}}}\n"));
  const std::string state = dir + "/state";
  auto [rc, out] = RunCommand(
      {kTroupe, "start", "--head", "--port", "0", "--dashboard-port", "0", "--state-dir", state,
       "--resources", R"({"CPU": 4})", "--job-path-roots", dir + "/lib", "--no-job-libraries"},
      dir + ".start.out");
  ASSERT_EQ(rc, 0) << out;
  auto [rc1, refused] = RunCommand(
      {kTroupe, "job", "submit", "--no-wait", "--state-dir", state, spec,
       "actors.reward.type=MyReward", "actors.reward.library=" + dir + "/lib/libmine.so"},
      dir + ".refused.out");
  EXPECT_EQ(rc1, 1) << refused;
  EXPECT_TRUE(absl::StrContains(refused, "actors.reward.library: " + dir + "/lib/libmine.so"))
      << refused;
  EXPECT_TRUE(absl::StrContains(refused, "started with --no-job-libraries")) << refused;
  auto [rc2, taken] = RunCommand(
      {kTroupe, "job", "submit", "--no-wait", "--state-dir", state, spec}, dir + ".taken.out");
  EXPECT_EQ(rc2, 0) << taken;
  RunCommand({kTroupe, "stop", "--state-dir", state}, dir + ".stop.out");
}

TEST(TroupeCli, StartWithoutHeadOrAddressSaysWhatIsMissing) {
  auto [rc, out] = RunCommand({kTroupe, "start"}, OutPath("troupe-cli-test-missing.out"));
  EXPECT_EQ(rc, 2);
  EXPECT_TRUE(absl::StrContains(out, "--head")) << out;
}

// --log-level is taken before or after the subcommand; a bad level is refused, naming the flag;
// a bad TROUPE_LOG_LEVEL is said, not ignored.
TEST(TroupeCli, LogLevelIsCheckedAndTakenAnywhere) {
  auto [rc, out] =
      RunCommand({kTroupe, "--log-level", "loud", "version"}, OutPath("troupe-cli-test-level.out"));
  EXPECT_NE(rc, 0);
  EXPECT_TRUE(absl::StrContains(out,
                                "--log-level: expected debug, info, warning or error, "
                                "got 'loud'"))
      << out;
  auto [rc2, out2] = RunCommand({kTroupe, "version", "--log-level", "warning"},
                                OutPath("troupe-cli-test-level2.out"));
  EXPECT_EQ(rc2, 0) << out2;
  auto [rc3, out3] = RunCommand({"/usr/bin/env", "TROUPE_LOG_LEVEL=shouty", kTroupe, "version"},
                                OutPath("troupe-cli-test-level3.out"));
  EXPECT_EQ(rc3, 0) << out3;
  EXPECT_TRUE(absl::StrContains(out3,
                                "TROUPE_LOG_LEVEL: expected debug, info, warning or error, "
                                "got 'shouty'; logging at info"))
      << out3;
}

TEST(TroupeCli, VersionIsPrintedByTheFlagAndTheCommand) {
  auto [rc, out] = RunCommand({kTroupe, "--version"}, OutPath("troupe-cli-test-version.out"));
  EXPECT_EQ(rc, 0) << out;
  EXPECT_TRUE(absl::StrContains(out, absl::StrCat("troupe ", kTroupeVersion))) << out;
  EXPECT_FALSE(absl::StrContains(out, "subcommand")) << out;
  auto [rc2, out2] = RunCommand({kTroupe, "version"}, OutPath("troupe-cli-test-version2.out"));
  EXPECT_EQ(rc2, 0) << out2;
  EXPECT_EQ(out2, out);
}

// A mistyped command or flag is named, with the closest known one, and the exit code is 2.
TEST(TroupeCli, AnUnknownCommandIsNamedWithTheClosestOne) {
  auto [rc, out] = RunCommand({kTroupe, "statsu"}, OutPath("troupe-cli-test-statsu.out"));
  EXPECT_EQ(rc, 2) << out;
  EXPECT_TRUE(absl::StrContains(out,
                                "troupe: unknown command \"statsu\" (did you mean "
                                "\"status\"?); commands: "))
      << out;
  EXPECT_TRUE(absl::StrContains(out, "start")) << out;
  EXPECT_FALSE(absl::StrContains(out, "worker")) << out;  // hidden from --help, and here
  // Below a command too, and with nothing close only the list.
  auto [rc2, out2] = RunCommand({kTroupe, "job", "sumbit"}, OutPath("troupe-cli-test-sumbit.out"));
  EXPECT_EQ(rc2, 2) << out2;
  EXPECT_TRUE(absl::StrContains(out2,
                                "troupe job: unknown command \"sumbit\" (did you mean "
                                "\"submit\"?)"))
      << out2;
  auto [rc3, out3] = RunCommand({kTroupe, "frobnicate"}, OutPath("troupe-cli-test-frob.out"));
  EXPECT_EQ(rc3, 2) << out3;
  EXPECT_TRUE(absl::StrContains(out3, "troupe: unknown command \"frobnicate\"; commands: "))
      << out3;
}

TEST(TroupeCli, AnUnknownFlagIsNamedWithTheClosestOne) {
  // `run` is linked into //cli:troupe only; `job submit` has the same --resume.
  auto [rc, out] = RunCommand({kTroupe, "job", "submit", "--resme", "x.yaml"},
                              OutPath("troupe-cli-test-resme.out"));
  EXPECT_EQ(rc, 2) << out;
  EXPECT_TRUE(
      absl::StrContains(out, "troupe job submit: unknown option --resme (did you mean --resume?)"))
      << out;
  auto [rc2, out2] = RunCommand({kTroupe, "status", "--adress=127.0.0.1:1"},
                                OutPath("troupe-cli-test-adress.out"));
  EXPECT_EQ(rc2, 2) << out2;
  EXPECT_TRUE(absl::StrContains(out2,
                                "troupe status: unknown option --adress (did you mean "
                                "--address?)"))
      << out2;
  auto [rc3, out3] =
      RunCommand({kTroupe, "stop", "--loglevel", "info"}, OutPath("troupe-cli-test-loglevel.out"));
  EXPECT_EQ(rc3, 2) << out3;
  EXPECT_TRUE(absl::StrContains(out3, "(did you mean --log-level?)")) << out3;
  auto [rc4, out4] = RunCommand({kTroupe, "stop", "--zzz"}, OutPath("troupe-cli-test-zzz.out"));
  EXPECT_EQ(rc4, 2) << out4;
  EXPECT_TRUE(absl::StrContains(out4, "troupe stop: unknown option --zzz; see troupe stop --help"))
      << out4;
  // Other usage errors (a value of the wrong type, a missing argument) exit 2 as well.
  auto [rc6, out6] = RunCommand({kTroupe, "dashboard", "x", "--port", "eighty"},
                                OutPath("troupe-cli-test-port.out"));
  EXPECT_EQ(rc6, 2) << out6;
  EXPECT_TRUE(absl::StrContains(out6, "--port")) << out6;
  auto [rc7, out7] = RunCommand({kTroupe, "dashboard"}, OutPath("troupe-cli-test-norun.out"));
  EXPECT_EQ(rc7, 2) << out7;
  EXPECT_TRUE(absl::StrContains(out7, "run_dirs")) << out7;
  // --help still prints the commands.
  auto [rc5, out5] = RunCommand({kTroupe, "--help"}, OutPath("troupe-cli-test-help.out"));
  EXPECT_EQ(rc5, 0) << out5;
  EXPECT_TRUE(absl::StrContains(out5, "--version")) << out5;
  EXPECT_TRUE(absl::StrContains(out5, "status")) << out5;
}

// Help asked of a command that does not exist names the command (as without --help), instead of
// printing the help of the command above it and exiting 0.
TEST(TroupeCli, HelpAfterAnUnknownCommandNamesTheUnknownCommand) {
  auto [rc, out] = RunCommand({kTroupe, "eval", "--help"}, OutPath("troupe-cli-test-eval.out"));
  EXPECT_EQ(rc, 2) << out;
  EXPECT_TRUE(absl::StrContains(out, "troupe: unknown command \"eval\"; commands: ")) << out;
  EXPECT_FALSE(absl::StrContains(out, "Usage")) << out;
  auto [rc2, out2] =
      RunCommand({kTroupe, "statsu", "-h"}, OutPath("troupe-cli-test-statsu-help.out"));
  EXPECT_EQ(rc2, 2) << out2;
  EXPECT_TRUE(absl::StrContains(out2,
                                "troupe: unknown command \"statsu\" (did you mean "
                                "\"status\"?); commands: "))
      << out2;
  auto [rc3, out3] = RunCommand({kTroupe, "--log-level", "info", "job", "sumbit", "--help"},
                                OutPath("troupe-cli-test-sumbit-help.out"));
  EXPECT_EQ(rc3, 2) << out3;
  EXPECT_TRUE(absl::StrContains(out3,
                                "troupe job: unknown command \"sumbit\" (did you mean "
                                "\"submit\"?)"))
      << out3;
  // A command that exists still shows its help.
  auto [rc4, out4] =
      RunCommand({kTroupe, "status", "--help"}, OutPath("troupe-cli-test-status-help.out"));
  EXPECT_EQ(rc4, 0) << out4;
  EXPECT_TRUE(absl::StrContains(out4, "--token-file")) << out4;
  auto [rc5, out5] =
      RunCommand({kTroupe, "job", "--help"}, OutPath("troupe-cli-test-job-help.out"));
  EXPECT_EQ(rc5, 0) << out5;
  EXPECT_TRUE(absl::StrContains(out5, "submit")) << out5;
}

// Whether `text` recommends the --token flag (which every command refuses), rather than
// --token-file.
bool MentionsTheTokenFlag(const std::string& text) {
  for (size_t p = text.find("--token"); p != std::string::npos; p = text.find("--token", p + 1)) {
    if (text.compare(p, 12, "--token-file") != 0) return true;
  }
  return false;
}

// With no token anywhere, the client commands say where one comes from: what they accept
// (--token-file, TROUPE_TOKEN, the head's state directory), never the --token they refuse.
TEST(TroupeCli, WithoutATokenTheCommandsRecommendOnlyWhatTheyAccept) {
  test::TempDir tmp("cli-no-token");
  const std::string dir = tmp.Path("cli-no-token");
  std::filesystem::create_directories(dir + "/state");
  // `troupe status` connects over gRPC (Cluster::Connect) with the token it found: none.
  auto [rc, out] = RunCommand({"/usr/bin/env", "-u", "TROUPE_TOKEN", kTroupe, "status", "--address",
                               "127.0.0.1:1", "--state-dir", dir + "/state"},
                              dir + "/status.out");
  EXPECT_EQ(rc, 1) << out;
  EXPECT_TRUE(absl::StrContains(out, "no cluster token")) << out;
  EXPECT_TRUE(absl::StrContains(out, "--token-file PATH")) << out;
  EXPECT_TRUE(absl::StrContains(out, "TROUPE_TOKEN")) << out;
  EXPECT_TRUE(absl::StrContains(out, "<state-dir>/token")) << out;
  EXPECT_FALSE(MentionsTheTokenFlag(out)) << out;

  // `troupe job stop` posts to the dashboard, which refuses a request without the token.
  httplib::Server dashboard;
  dashboard.Post(".*", [](const httplib::Request&, httplib::Response& res) {
    res.status = 401;
    res.set_content(R"({"error": "missing or wrong cluster token"})", "application/json");
  });
  const int port = dashboard.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread serving([&dashboard] { dashboard.listen_after_bind(); });
  auto [rc2, out2] = RunCommand(
      {"/usr/bin/env", "-u", "TROUPE_TOKEN", kTroupe, "job", "stop", "job-1", "--address",
       absl::StrCat("http://127.0.0.1:", port), "--state-dir", dir + "/state"},
      dir + "/job-stop.out");
  dashboard.stop();
  serving.join();
  EXPECT_EQ(rc2, 1) << out2;
  EXPECT_TRUE(absl::StrContains(out2,
                                "troupe job stop: missing or wrong cluster token (no cluster token "
                                "found: pass --token-file PATH"))
      << out2;
  EXPECT_TRUE(absl::StrContains(out2, "TROUPE_TOKEN")) << out2;
  EXPECT_FALSE(MentionsTheTokenFlag(out2)) << out2;
}

}  // namespace
}  // namespace troupe::tests
