#include "base/log.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace troupe {
namespace internal {
namespace {

int LevelFromEnvironment() {
  const char* env = std::getenv("TROUPE_LOG_LEVEL");
  if (env == nullptr || *env == '\0') return static_cast<int>(LogLevel::kInfo);
  absl::StatusOr<LogLevel> level = ParseLogLevel(env);
  if (!level.ok()) {
    // Said, not ignored (the logger is not up yet: written directly).
    std::fprintf(stderr, "W TROUPE_LOG_LEVEL: %s; logging at info\n",
                 std::string(level.status().message()).c_str());
    return static_cast<int>(LogLevel::kInfo);
  }
  return static_cast<int>(*level);
}

}  // namespace

std::atomic<int> log_level{LevelFromEnvironment()};

}  // namespace internal

namespace {

absl::Mutex tag_mu;
std::string* const tag = new std::string();
std::atomic<LogContextProvider> context_provider{nullptr};

char Letter(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return 'D';
    case LogLevel::kInfo:
      return 'I';
    case LogLevel::kWarning:
      return 'W';
    case LogLevel::kError:
      return 'E';
  }
  return '?';
}

}  // namespace

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view text) {
  const std::string t = absl::AsciiStrToLower(text);
  if (t == "debug") return LogLevel::kDebug;
  if (t == "info") return LogLevel::kInfo;
  if (t == "warning" || t == "warn") return LogLevel::kWarning;
  if (t == "error") return LogLevel::kError;
  return absl::InvalidArgumentError(
      absl::StrCat("expected debug, info, warning or error, got '", text, "'"));
}

absl::string_view LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "?";
}

void SetLogLevel(LogLevel level) {
  internal::log_level.store(static_cast<int>(level), std::memory_order_relaxed);
}

LogLevel GetLogLevel() {
  return static_cast<LogLevel>(internal::log_level.load(std::memory_order_relaxed));
}

void SetLogTag(std::string t) {
  absl::MutexLock lock(&tag_mu);
  *tag = std::move(t);
}

void SetLogContextProvider(LogContextProvider provider) { context_provider.store(provider); }

namespace internal {

LogLine::~LogLine() {
  const LogContextProvider provider = context_provider.load();
  const char* who = provider != nullptr ? provider() : nullptr;
  std::string speaker;
  if (who != nullptr) {
    speaker = who;
  } else {
    absl::MutexLock lock(&tag_mu);
    speaker = *tag;
  }
  const absl::Time now = absl::Now();
  std::string line = absl::StrCat(
      std::string(1, Letter(level_)), absl::FormatTime("%m%d %H:%M:%E3S", now, absl::UTCTimeZone()),
      speaker.empty() ? " " : absl::StrCat(" [", speaker, "] "), out_.str());
  if (line.empty() || line.back() != '\n') line.push_back('\n');
  // One write: lines of concurrent threads (and processes sharing the file) never interleave.
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(STDERR_FILENO, line.data() + done, line.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
}

}  // namespace internal
}  // namespace troupe
