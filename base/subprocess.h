// SpawnSubprocess: how troupe starts a child program (node agents start workers, the head's job
// manager starts drivers), and ResetSignalsInChild, which every forked child runs first.
//
// Why a helper: a process that waits for SIGINT/SIGTERM with sigwait blocks them in every thread,
// and gRPC ignores SIGPIPE. A blocked mask and ignored dispositions survive fork and exec, so a
// child started plainly could never be stopped by SIGTERM (it would only ever die by SIGKILL).
// Every child started here begins with every signal at its default disposition and none blocked.
//
//   SubprocessOptions o;
//   o.argv = {"/usr/bin/troupe", "worker", "--head", head};
//   o.env = {"TROUPE_TOKEN=...", "PATH=/usr/bin"};   // the child's whole environment
//   o.stdout_path = log;
//   o.stderr_path = log;                             // same file: one descriptor, appended
//   o.append = true;
//   absl::StatusOr<pid_t> pid = SpawnSubprocess(o);  // the caller reaps it (waitpid)
//
// Thread-safety: SpawnSubprocess may be called from any thread, but with die_with_parent the child
// is killed when the *thread* that spawned it exits (PR_SET_PDEATHSIG is tied to the forking
// thread): spawn from a thread that lives as long as the process (a spawner thread).
#ifndef TROUPE_BASE_SUBPROCESS_H_
#define TROUPE_BASE_SUBPROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace troupe {

struct SubprocessOptions {
  // argv[0] is the path of the program (execve: no PATH search). Required.
  std::vector<std::string> argv;
  // The child's whole environment, "NAME=value" each.
  std::vector<std::string> env;
  // Files for the child's stdout and stderr, created (file_mode) if missing; "" = /dev/null. The
  // same path for both shares one descriptor (lines interleave in order). stdin is /dev/null.
  std::string stdout_path;
  std::string stderr_path;
  // Append to the files instead of truncating them.
  bool append = false;
  // Permissions of files created for stdout/stderr: owner-only unless asked (logs may hold
  // what a program should not show other local users).
  int file_mode = 0600;
  // The child leads a new process group (pgid = its pid), so kill(-pid, sig) reaches it and its
  // own children, and a terminal's Ctrl-C aimed at the parent's group does not.
  bool new_process_group = true;
  // The child gets SIGKILL when the spawning thread (in practice: the parent) dies.
  bool die_with_parent = true;
  // The child's working directory; "" = the parent's. Relative argv[0] and log paths are not
  // affected (they are resolved before the child changes directory).
  std::string cwd;
};

// Forks and executes options.argv. In the child, before exec: ResetSignalsInChild, then
// die_with_parent, the process group, the descriptors. Returns the child's pid once exec has
// succeeded (the process group exists by then). InvalidArgument for an empty argv; Internal
// naming the file for a log that cannot be opened, or fork's error; and for a program that
// cannot be executed, InvalidArgument "cannot execute PATH: <strerror>"; for a cwd the child
// cannot enter, InvalidArgument "cannot enter working directory DIR: <strerror>" (that child was
// reaped).
absl::StatusOr<pid_t> SpawnSubprocess(const SubprocessOptions& options);

// Sets every signal's disposition to SIG_DFL (but glibc's own two, 32 and 33, which it does not
// let be changed) and unblocks all signals in the calling thread.
// Async-signal-safe: for a child between fork and exec, or a forked process that goes on without
// exec (`troupe start`'s background process).
void ResetSignalsInChild();

}  // namespace troupe

#endif  // TROUPE_BASE_SUBPROCESS_H_
