// Files that hold secrets (the cluster token) and the private directories they live in.
//
// A secret file is 0600 from the moment it exists (written through WriteFileAtomically with that
// mode, never written and then chmod-ed) and is read only if no one but its owner may read or
// write it, as ssh treats private keys. The directory that holds it (troupe's state directory,
// /tmp/troupe by default, with the logs) is 0700 and must belong to the user running troupe: a
// directory someone else created there first is refused rather than used.
//
// Example:
//   TROUPE_RETURN_IF_ERROR(CreatePrivateDirectory(state_dir));
//   TROUPE_RETURN_IF_ERROR(WriteSecretFile(state_dir + "/token", token));
//   absl::StatusOr<std::string> again = ReadSecretFile(state_dir + "/token");
//
// Thread-safety: the functions are thread-safe (each works on the file system only).
#ifndef TROUPE_BASE_SECRET_FILE_H_
#define TROUPE_BASE_SECRET_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace troupe {

// Creates directory `path` and its missing parents, each new one with mode 0700. If `path`
// exists it must be a directory owned by this process's effective user; any group or other
// permission bits on it are removed. FAILED_PRECONDITION naming the path (and its owner) if it is
// not a directory or belongs to another user; INTERNAL naming the path and the error if a
// directory cannot be created or changed.
absl::Status CreatePrivateDirectory(const std::string& path);

// Replaces `path` with `secret` and a newline, mode 0600 from creation on (atomic, see
// base/atomic_file.h). INVALID_ARGUMENT if `secret` is not a valid secret (see ReadSecretFile).
absl::Status WriteSecretFile(const std::string& path, absl::string_view secret);

// The secret in `path`: its first line without surrounding whitespace. NOT_FOUND if there is no
// such file; PERMISSION_DENIED naming the path and its mode if group or others may access it
// (the fix, `chmod 600 PATH`, is in the message), or if it cannot be read; INVALID_ARGUMENT if the
// line is empty or holds anything but printable ASCII (a token travels as gRPC metadata).
absl::StatusOr<std::string> ReadSecretFile(const std::string& path);

}  // namespace troupe

#endif  // TROUPE_BASE_SECRET_FILE_H_
