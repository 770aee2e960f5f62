// Logging: one line per message on stderr, with a level, the time, and who is speaking.
//
//   TROUPE_LOG(INFO) << "node " << id << " registered from " << peer;
//   TROUPE_LOG(WARNING) << "heartbeat failed (" << status << "); retrying";
//
// writes, as one write(2) so that lines of several threads never interleave,
//
//   I1203 20:03:01.123 [job-1/trainer] node 3f2a registered from 127.0.0.1
//
// The bracket names the actor whose handler is running on this thread (the runtime registers
// that lookup with SetLogContextProvider), else the process's tag (SetLogTag: "head", "node",
// "worker job-1/trainer"), else nothing. Levels, lowest first: DEBUG, INFO, WARNING, ERROR. A
// message below the process's level costs one comparison and its operands are not evaluated.
// The level is TROUPE_LOG_LEVEL (debug | info | warning | error; default info) when the process
// starts, or what SetLogLevel sets (the troupe command's --log-level, which also passes it to
// the processes it starts through the environment).
//
// Thread-safety: everything here is thread-safe.
#ifndef TROUPE_BASE_LOG_H_
#define TROUPE_BASE_LOG_H_

#include <atomic>
#include <sstream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace troupe {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// "debug", "info", "warning" (or "warn"), "error", any case; INVALID_ARGUMENT naming the choices.
// (An unknown TROUPE_LOG_LEVEL is reported on stderr and the level stays info.)
absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view text);
absl::string_view LogLevelName(LogLevel level);

// The process's level (see the file comment).
void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();

// The process's tag, shown when no actor handler runs on the calling thread.
void SetLogTag(std::string tag);

// Who is speaking on the calling thread: a name, or nullptr for the process's tag.
using LogContextProvider = const char* (*)();
void SetLogContextProvider(LogContextProvider provider);

namespace internal {

extern std::atomic<int> log_level;

inline bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) >= log_level.load(std::memory_order_relaxed);
}

// Collects one message and writes it when destroyed.
class LogLine {
 public:
  explicit LogLine(LogLevel level) : level_(level) {}
  ~LogLine();
  LogLine(const LogLine&) = delete;
  LogLine& operator=(const LogLine&) = delete;
  std::ostream& stream() { return out_; }

 private:
  LogLevel level_;
  std::ostringstream out_;
};

// Turns the streamed expression into void, to match the other branch of TROUPE_LOG's `?:`.
struct LogVoidify {
  void operator&(std::ostream&) {}
};

inline constexpr LogLevel kLog_DEBUG = LogLevel::kDebug;
inline constexpr LogLevel kLog_INFO = LogLevel::kInfo;
inline constexpr LogLevel kLog_WARNING = LogLevel::kWarning;
inline constexpr LogLevel kLog_ERROR = LogLevel::kError;

}  // namespace internal
}  // namespace troupe

// An expression, so `if (bad) TROUPE_LOG(WARNING) << ...; else ...` means what it says.
#define TROUPE_LOG(severity)                                           \
  !::troupe::internal::LogEnabled(::troupe::internal::kLog_##severity) \
      ? (void)0                                                        \
      : ::troupe::internal::LogVoidify() &                             \
            ::troupe::internal::LogLine(::troupe::internal::kLog_##severity).stream()

#endif  // TROUPE_BASE_LOG_H_
