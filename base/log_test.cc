#include "base/log.h"

#include <unistd.h>

#include <cstdio>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

// What TROUPE_LOG wrote to stderr while `body` ran.
template <typename F>
std::string Captured(F body) {
  std::fflush(stderr);
  char path[] = "/tmp/troupe-log-test-XXXXXX";
  const int fd = ::mkstemp(path);
  const int saved = ::dup(STDERR_FILENO);
  ::dup2(fd, STDERR_FILENO);
  body();
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  std::string out;
  ::lseek(fd, 0, SEEK_SET);
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;) out.append(buf, n);
  ::close(fd);
  ::unlink(path);
  return out;
}

const char* speaker = nullptr;
const char* Speaker() { return speaker; }

TEST(Log, OneLineWithLevelTimeAndSpeaker) {
  SetLogLevel(LogLevel::kInfo);
  SetLogTag("head");
  std::string out = Captured([] { TROUPE_LOG(INFO) << "node " << 7 << " registered"; });
  EXPECT_THAT(out, MatchesRegex(R"(I[0-9]{4} [0-9:.]{12} \[head\] node 7 registered[[:space:]])"))
      << out;
  // The actor running on this thread, when the runtime says there is one.
  SetLogContextProvider(&Speaker);
  speaker = "job-1/trainer";
  out = Captured([] { TROUPE_LOG(WARNING) << "publish failed"; });
  EXPECT_THAT(out, HasSubstr("] publish failed\n"));
  EXPECT_EQ(out[0], 'W');
  EXPECT_THAT(out, HasSubstr(" [job-1/trainer] "));
  speaker = nullptr;
  out = Captured([] { TROUPE_LOG(ERROR) << "x"; });
  EXPECT_THAT(out, HasSubstr(" [head] x"));
  SetLogContextProvider(nullptr);
}

TEST(Log, BelowTheLevelNothingIsWrittenNorEvaluated) {
  SetLogLevel(LogLevel::kWarning);
  int evaluated = 0;
  auto count = [&evaluated] { return ++evaluated; };
  const std::string out = Captured([&] {
    TROUPE_LOG(INFO) << "hidden " << count();
    TROUPE_LOG(DEBUG) << "hidden " << count();
    TROUPE_LOG(ERROR) << "shown " << count();
  });
  EXPECT_EQ(evaluated, 1);
  EXPECT_THAT(out, HasSubstr("shown 1"));
  EXPECT_EQ(out.find("hidden"), std::string::npos) << out;
  SetLogLevel(LogLevel::kInfo);
}

TEST(Log, ParsesLevelNames) {
  EXPECT_EQ(*ParseLogLevel("debug"), LogLevel::kDebug);
  EXPECT_EQ(*ParseLogLevel("INFO"), LogLevel::kInfo);
  EXPECT_EQ(*ParseLogLevel("warn"), LogLevel::kWarning);
  EXPECT_EQ(*ParseLogLevel("error"), LogLevel::kError);
  EXPECT_THAT(std::string(ParseLogLevel("loud").status().message()),
              HasSubstr("expected debug, info, warning or error, got 'loud'"));
  EXPECT_EQ(LogLevelName(LogLevel::kWarning), "warning");
}

}  // namespace
}  // namespace troupe
