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

TEST(TokenChecker, LocksOutAHostAfterMaxFailuresWithoutComparingAnyMore) {
  TokenChecker checker(kToken, Limits());
  const std::string bad = "guess";
  EXPECT_EQ(checker.Check("ipv4:10.0.0.9", bad, kT0).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(checker.Check("ipv4:10.0.0.9", bad, kT0 + absl::Seconds(1)).code(),
            absl::StatusCode::kUnauthenticated);
  absl::Status third = checker.Check("ipv4:10.0.0.9", bad, kT0 + absl::Seconds(2));
  EXPECT_EQ(third.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(third.message(), HasSubstr("refused for 30s"));
  // Locked out: even the right token is refused, quickly, as RESOURCE_EXHAUSTED.
  absl::Status locked = checker.Check("ipv4:10.0.0.9", kToken, kT0 + absl::Seconds(3));
  EXPECT_EQ(locked.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(locked.message(), HasSubstr("10.0.0.9"));
  EXPECT_THAT(locked.message(), HasSubstr("29s"));
  EXPECT_EQ(checker.Check("ipv4:10.0.0.9", std::nullopt, kT0 + absl::Seconds(3)).code(),
            absl::StatusCode::kResourceExhausted);
  // Another host is not affected.
  EXPECT_TRUE(checker.Check("ipv4:10.0.0.10", kToken, kT0 + absl::Seconds(3)).ok());
  // After the lockout, the right token works again.
  EXPECT_EQ(checker.Check("ipv4:10.0.0.9", kToken, kT0 + absl::Seconds(31)).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(checker.Check("ipv4:10.0.0.9", kToken, kT0 + absl::Seconds(32)).ok());
  const TokenCheckStats s = checker.stats();
  EXPECT_EQ(s.wrong, 3);
  EXPECT_EQ(s.lockouts, 1);
  EXPECT_EQ(s.locked_out, 3);
  EXPECT_EQ(s.accepted, 2);
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

TEST(TokenChecker, TheRightTokenClearsAHostsFailures) {
  TokenChecker checker(kToken, Limits());
  EXPECT_FALSE(checker.Check("ipv4:10.0.0.3", "x", kT0).ok());
  EXPECT_FALSE(checker.Check("ipv4:10.0.0.3", "x", kT0).ok());
  EXPECT_TRUE(checker.Check("ipv4:10.0.0.3", kToken, kT0).ok());
  EXPECT_FALSE(checker.Check("ipv4:10.0.0.3", "x", kT0).ok());
  EXPECT_FALSE(checker.Check("ipv4:10.0.0.3", "x", kT0).ok());
  EXPECT_EQ(checker.stats().lockouts, 0);
  EXPECT_TRUE(checker.Check("ipv4:10.0.0.3", kToken, kT0).ok());
}

TEST(TokenChecker, RemembersAtMostMaxTrackedPeers) {
  TokenCheckOptions limits = Limits();
  limits.max_tracked_peers = 4;
  limits.max_failures = 2;
  TokenChecker checker(kToken, limits);
  // Host 0 is locked out; then 10 more hosts fail once each: the oldest entries are forgotten,
  // so the table never grows past 4 (host 0's lockout is forgotten with it).
  EXPECT_FALSE(checker.Check("ipv4:10.1.0.0", "x", kT0).ok());
  EXPECT_FALSE(checker.Check("ipv4:10.1.0.0", "x", kT0).ok());
  EXPECT_EQ(checker.Check("ipv4:10.1.0.0", kToken, kT0).code(),
            absl::StatusCode::kResourceExhausted);
  for (int i = 1; i <= 10; ++i) {
    EXPECT_FALSE(checker.Check(absl::StrCat("ipv4:10.1.0.", i), "x", kT0 + absl::Seconds(i)).ok());
  }
  EXPECT_TRUE(checker.Check("ipv4:10.1.0.0", kToken, kT0 + absl::Seconds(11)).ok());
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
