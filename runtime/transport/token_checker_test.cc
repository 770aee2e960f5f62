#include "runtime/transport/token_checker.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::transport {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kToken[] = "0123456789abcdef0123456789abcdef";
const absl::Time kT0 = absl::FromUnixSeconds(1700000000);

TokenCheckOptions Limits() {
  return {.max_failures = 3,
          .failure_window = absl::Seconds(10),
          .lockout = absl::Seconds(30),
          .max_tracked_peers = 100};
}

TEST(TokenChecker, AdmitsTheRightTokenAndRefusesMissingOrWrongOnes) {
  TokenChecker checker(kToken, Limits());
  EXPECT_TRUE(checker.Check("ipv4:10.0.0.1", kToken, kT0).ok());
  absl::Status missing = checker.Check("ipv4:10.0.0.1", std::nullopt, kT0);
  EXPECT_EQ(missing.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(missing.message(), HasSubstr("missing"));
  EXPECT_THAT(missing.message(), HasSubstr("--token-file"));
  absl::Status wrong = checker.Check("ipv4:10.0.0.1", "0123456789abcdef0123456789abcdee", kT0);
  EXPECT_EQ(wrong.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(wrong.message(), HasSubstr("wrong"));
  EXPECT_THAT(wrong.message(), Not(HasSubstr(kToken)));
  EXPECT_EQ(checker.Check("ipv4:10.0.0.1", "", kT0).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(checker.Check("ipv4:10.0.0.1", std::string(kToken) + "x", kT0).code(),
            absl::StatusCode::kUnauthenticated);
}

// The issue-30 probe: wrong tokens from 127.0.0.1 must not cut off the node agent, the driver
// and the dashboard, which call from that same host with the right token.
TEST(TokenChecker, ThrottlesAHostsWrongTokensButAlwaysAdmitsTheRightOne) {
  TokenChecker checker(kToken, Limits());
  const std::string bad = "guess";
  EXPECT_EQ(checker.Check("ipv4:127.0.0.1", bad, kT0).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(checker.Check("ipv4:127.0.0.1", bad, kT0 + absl::Seconds(1)).code(),
            absl::StatusCode::kUnauthenticated);
  absl::Status third = checker.Check("ipv4:127.0.0.1", bad, kT0 + absl::Seconds(2));
  EXPECT_EQ(third.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(third.message(), HasSubstr("refused for 30s"));
  // Throttled: the right token from the same host still gets in, at once and throughout.
  EXPECT_TRUE(checker.Check("ipv4:127.0.0.1", kToken, kT0 + absl::Seconds(3)).ok());
  // Wrong ones are answered RESOURCE_EXHAUSTED, naming the host and the time left.
  absl::Status throttled = checker.Check("ipv4:127.0.0.1", bad, kT0 + absl::Seconds(3));
  EXPECT_EQ(throttled.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(throttled.message(), HasSubstr("127.0.0.1"));
  EXPECT_THAT(throttled.message(), HasSubstr("29s"));
  EXPECT_THAT(throttled.message(), Not(HasSubstr(kToken)));
  EXPECT_THAT(throttled.message(), Not(HasSubstr(bad)));
  // A missing token is still just "missing".
  EXPECT_EQ(checker.Check("ipv4:127.0.0.1", std::nullopt, kT0 + absl::Seconds(3)).code(),
            absl::StatusCode::kUnauthenticated);
  for (int i = 0; i < 100; ++i) {
    EXPECT_TRUE(checker.Check("ipv4:127.0.0.1", kToken, kT0 + absl::Seconds(4)).ok());
    EXPECT_EQ(checker.Check("ipv4:127.0.0.1", bad, kT0 + absl::Seconds(4)).code(),
              absl::StatusCode::kResourceExhausted);
  }
  // Another host is not affected.
  EXPECT_EQ(checker.Check("ipv4:10.0.0.10", bad, kT0 + absl::Seconds(4)).code(),
            absl::StatusCode::kUnauthenticated);
  // After the throttle, wrong tokens count from zero again.
  EXPECT_EQ(checker.Check("ipv4:127.0.0.1", bad, kT0 + absl::Seconds(32)).code(),
            absl::StatusCode::kUnauthenticated);
  const TokenCheckStats s = checker.stats();
  EXPECT_EQ(s.wrong, 5);
  EXPECT_EQ(s.lockouts, 1);
  EXPECT_EQ(s.locked_out, 101);
  EXPECT_EQ(s.accepted, 101);
  EXPECT_EQ(s.missing, 1);
}

TEST(TokenChecker, FailuresOutsideTheWindowAndMissingTokensDoNotCount) {
  TokenChecker checker(kToken, Limits());
  for (int i = 0; i < 10; ++i) {
    // Two wrong tokens per 10 s window never reach 3.
    EXPECT_EQ(checker.Check("ipv4:10.0.0.2", "x", kT0 + absl::Seconds(10 * i)).code(),
              absl::StatusCode::kUnauthenticated);
    EXPECT_EQ(checker.Check("ipv4:10.0.0.2", "y", kT0 + absl::Seconds(10 * i + 1)).code(),
              absl::StatusCode::kUnauthenticated);
    EXPECT_EQ(checker.Check("ipv4:10.0.0.2", std::nullopt, kT0 + absl::Seconds(10 * i + 2)).code(),
              absl::StatusCode::kUnauthenticated);
  }
  EXPECT_EQ(checker.stats().lockouts, 0);
  EXPECT_TRUE(checker.Check("ipv4:10.0.0.2", kToken, kT0 + absl::Seconds(200)).ok());
}

// The node agent's correct heartbeats from 127.0.0.1 must not keep resetting the count of a
// guesser on the same host.
TEST(TokenChecker, RightTokensDoNotClearAHostsFailures) {
  TokenChecker checker(kToken, Limits());
  EXPECT_FALSE(checker.Check("ipv4:10.0.0.3", "x", kT0).ok());
  EXPECT_FALSE(checker.Check("ipv4:10.0.0.3", "x", kT0).ok());
  EXPECT_TRUE(checker.Check("ipv4:10.0.0.3", kToken, kT0).ok());
  EXPECT_EQ(checker.Check("ipv4:10.0.0.3", "x", kT0).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(checker.stats().lockouts, 1);
  EXPECT_EQ(checker.Check("ipv4:10.0.0.3", "x", kT0).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(checker.Check("ipv4:10.0.0.3", kToken, kT0).ok());
}

TEST(TokenChecker, RemembersAtMostMaxTrackedPeers) {
  TokenCheckOptions limits = Limits();
  limits.max_tracked_peers = 4;
  limits.max_failures = 2;
  TokenChecker checker(kToken, limits);
  // Host 0 is throttled; then 10 more hosts fail once each: the oldest entries are forgotten,
  // so the table never grows past 4 (host 0's throttle is forgotten with it).
  EXPECT_FALSE(checker.Check("ipv4:10.1.0.0", "x", kT0).ok());
  EXPECT_FALSE(checker.Check("ipv4:10.1.0.0", "x", kT0).ok());
  EXPECT_EQ(checker.Check("ipv4:10.1.0.0", "x", kT0).code(), absl::StatusCode::kResourceExhausted);
  for (int i = 1; i <= 10; ++i) {
    EXPECT_FALSE(checker.Check(absl::StrCat("ipv4:10.1.0.", i), "x", kT0 + absl::Seconds(i)).ok());
  }
  EXPECT_EQ(checker.Check("ipv4:10.1.0.0", "x", kT0 + absl::Seconds(11)).code(),
            absl::StatusCode::kUnauthenticated);
}

TEST(TokenCheckOptions, OutOfRangeFieldsAreNamed) {
  EXPECT_TRUE(ValidateTokenCheckOptions({}).ok());
  TokenCheckOptions o;
  o.max_failures = 0;
  EXPECT_THAT(ValidateTokenCheckOptions(o).message(), HasSubstr("max_failures"));
  o = {};
  o.failure_window = absl::ZeroDuration();
  EXPECT_THAT(ValidateTokenCheckOptions(o).message(), HasSubstr("failure_window"));
  o = {};
  o.lockout = -absl::Seconds(1);
  EXPECT_THAT(ValidateTokenCheckOptions(o).message(), HasSubstr("lockout"));
  o = {};
  o.max_tracked_peers = 0;
  EXPECT_THAT(ValidateTokenCheckOptions(o).message(), HasSubstr("max_tracked_peers"));
}

TEST(PeerHost, DropsThePortSoReconnectingDoesNotStartOver) {
  EXPECT_EQ(PeerHost("ipv4:127.0.0.1:41234"), "ipv4:127.0.0.1");
  EXPECT_EQ(PeerHost("ipv4:127.0.0.1:5"), PeerHost("ipv4:127.0.0.1:6"));
  EXPECT_EQ(PeerHost("ipv6:[::1]:41234"), "ipv6:[::1]");
  EXPECT_EQ(PeerHost("ipv6:[fe80::1%eth0]:80"), "ipv6:[fe80::1%eth0]");
  EXPECT_EQ(PeerHost("unix:/tmp/sock"), "unix:/tmp/sock");
  EXPECT_EQ(PeerHost("ipv4:10.0.0.1"), "ipv4:10.0.0.1");
  EXPECT_EQ(PeerHost(""), "");
}

}  // namespace
}  // namespace troupe::transport
