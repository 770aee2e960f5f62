// Local heads: where the heads this user started on this machine keep their state, so that a
// command given only a head's address (`troupe status --address 127.0.0.1:6379`, `troupe job list
// --address http://127.0.0.1:8265`) finds the token in that head's state directory, whatever
// --state-dir the head was started with (as `ray status` finds the cluster this machine runs).
//
// The registry is a directory of small files, one per state directory, each holding that state
// directory's absolute path: $XDG_RUNTIME_DIR/troupe-heads when XDG_RUNTIME_DIR is set, else
// /tmp/troupe-heads-<euid>. It is created 0700 and must belong to the user (see
// CreatePrivateDirectory); it holds no secret, only paths: the token stays in the state directory,
// 0600, where only its owner can read it. An entry is only believed while the state directory it
// names holds a head.address (or dashboard.address) equal to the address asked for, so entries of
// heads that have stopped, or whose state directory was deleted, are skipped and pruned.
//
// Addresses are compared as host and port: the port must be equal, and the hosts equal or both of
// this machine (localhost, 127.0.0.0/8, ::1, 0.0.0.0, this host's name, or an address of one of
// its interfaces). A scheme (http://) and a trailing slash are ignored.
//
// Example:
//   RegisterLocalHead("/data/troupe");                     // by HeadServer::Start
//   std::optional<std::string> dir = FindLocalHeadStateDir("127.0.0.1:6379");
//   if (dir) token = ReadSecretFile(*dir + "/token");
//
// Thread-safety: thread-safe (each call works on the file system only).
#ifndef TROUPE_RUNTIME_CLUSTER_LOCAL_HEADS_H_
#define TROUPE_RUNTIME_CLUSTER_LOCAL_HEADS_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace troupe {

// The registry directory (see the file comment); not created.
std::string LocalHeadsDirectory();

// Records `state_dir` (made absolute) in the registry. Errors name the registry path; callers
// treat them as a warning (a head runs without being findable by address).
absl::Status RegisterLocalHead(const std::string& state_dir);

// Removes `state_dir`'s entry, if any.
void UnregisterLocalHead(const std::string& state_dir);

// The state directory of a registered head whose head.address or dashboard.address matches
// `address` (see the file comment), or nullopt. Stale entries met on the way are removed.
std::optional<std::string> FindLocalHeadStateDir(absl::string_view address);

// Whether `a` and `b` ("host:port", "[v6]:port", optionally "http://...") name the same endpoint
// of this machine or are equal. Exposed for tests.
bool SameLocalEndpoint(absl::string_view a, absl::string_view b);

}  // namespace troupe

#endif  // TROUPE_RUNTIME_CLUSTER_LOCAL_HEADS_H_
