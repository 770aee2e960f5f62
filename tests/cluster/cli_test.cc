// The cluster commands as a user runs them: `troupe start` in the background (head, then a
// node), `troupe status`, `troupe stop`.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tests/cluster/process.h"

namespace troupe::tests {
namespace {

constexpr char kTroupe[] = "tests/cluster/troupe_test";

TEST(TroupeCli, StartInTheBackgroundThenStatusThenStop) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/cli");
  std::filesystem::remove_all(dir);

  auto [rc, out] = RunCommand({kTroupe, "start", "--head", "--port", "0", "--dashboard-port", "0",
                               "--state-dir", dir, "--resources", R"({"CPU": 3, "GPU": 2})"},
                              dir + ".start.out");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_TRUE(absl::StrContains(out, "troupe head serving at 127.0.0.1:")) << out;
  EXPECT_TRUE(absl::StrContains(out, "troupe start --address")) << out;  // how to join
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

TEST(TroupeCli, TheDashboardAnswersTheAllowedHostsAndRefusesOthers) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/cli-hosts");
  std::filesystem::remove_all(dir);
  auto [rc, out] = RunCommand(
      {kTroupe, "start", "--head", "--head-only", "--port", "0", "--dashboard-port", "0",
       "--state-dir", dir, "--dashboard-allowed-hosts", "dash.example.com,proxy.internal:8443"},
      dir + ".start.out");
  ASSERT_EQ(rc, 0) << out;
  std::ifstream address_file(dir + "/dashboard.address");
  std::string url;
  std::getline(address_file, url);
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

TEST(TroupeCli, StartWithoutHeadOrAddressSaysWhatIsMissing) {
  auto [rc, out] = RunCommand({kTroupe, "start"}, "/tmp/troupe-cli-test-missing.out");
  EXPECT_EQ(rc, 2);
  EXPECT_TRUE(absl::StrContains(out, "--head")) << out;
}

}  // namespace
}  // namespace troupe::tests
