// DirArchive: packs a directory into one compressed byte string and unpacks it elsewhere — how
// `troupe job submit --working-dir DIR` carries a job's files to the head (like Ray's
// runtime_env.working_dir).
//
// Format (all integers little-endian):
//   "TRPWD1\n" | u64 uncompressed size | zlib(entries)
//   entry := u8 type ('D' directory, 'F' regular file, 'L' symlink) | u32 name length | name
//            | u32 mode (permission bits) | u64 data length | data (file bytes, or link target)
// Names are relative, '/'-separated, and never hold "", ".", ".." components, a leading '/',
// or NUL; a directory precedes the entries inside it.
//
// Safety: Pack stores regular files, directories and symlinks whose target stays inside DIR;
// it skips special files (sockets, FIFOs, devices; listed in PackResult.skipped) and refuses a
// symlink that leads outside DIR (InvalidArgument naming it: exclude it or copy its target in).
// Unpack validates every name before it touches the disk, creates files with O_EXCL|O_NOFOLLOW
// (never through a symlink), makes symlinks last and then refuses (and removes) any whose
// resolution leaves the destination, so no entry can write or point outside `dest`.
//
// Usage:
//   absl::StatusOr<PackResult> packed = PackDirectory("exp/", {.excludes = {"*.ckpt"}});
//   absl::Status s = UnpackDirectory(packed->archive, "/state/jobs/x/wd", {});
//
// Thread-safety: plain functions, no shared state.
#ifndef TROUPE_BASE_DIR_ARCHIVE_H_
#define TROUPE_BASE_DIR_ARCHIVE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace troupe {

// The most entries (files, directories, symlinks) a working directory may hold, by default.
inline constexpr int64_t kMaxArchiveEntries = 10000;

// Left out of every pack unless PackOptions.use_default_excludes is false.
const std::vector<std::string>& DefaultPackExcludes();  // .git, bazel-*, __pycache__

struct PackOptions {
  // fnmatch(3) globs; an entry is left out (with everything under it) when a glob matches its
  // base name or its path relative to DIR ("data/*.tmp").
  std::vector<std::string> excludes;
  bool use_default_excludes = true;
  // Bounds: the sum of the file sizes (before compression), the compressed archive, and the
  // entries (files, directories and symlinks) packed.
  int64_t max_uncompressed_bytes = int64_t{256} << 20;
  int64_t max_archive_bytes = int64_t{7} << 20;
  int64_t max_entries = kMaxArchiveEntries;
};

struct PackResult {
  std::string archive;
  int64_t files = 0;
  int64_t uncompressed_bytes = 0;
  std::vector<std::string> skipped;  // special files left out, relative paths
};

// Packs the tree under `dir`. NotFound / InvalidArgument for a missing or non-directory `dir`;
// ResourceExhausted naming the size (or count) and the limit when a bound is passed;
// InvalidArgument for a symlink leading outside `dir`; Internal naming the file for a read error.
absl::StatusOr<PackResult> PackDirectory(const std::string& dir, const PackOptions& options = {});

struct UnpackOptions {
  // Refuse archives that would unpack to more than this many bytes of file data, or more than
  // this many entries.
  int64_t max_uncompressed_bytes = int64_t{256} << 20;
  int64_t max_entries = kMaxArchiveEntries;
};

// Unpacks `archive` into `dest` (created if missing; must be empty if it exists).
// InvalidArgument naming the entry for a malformed archive or an unsafe name or symlink;
// ResourceExhausted for a declared size or an entry count over its bound (found before anything
// is written); Internal naming the path for I/O errors.
absl::Status UnpackDirectory(absl::string_view archive, const std::string& dest,
                             const UnpackOptions& options = {});

// Whether `name` is a safe relative entry name (see Format); used by UnpackDirectory.
bool IsSafeEntryName(absl::string_view name);

}  // namespace troupe

#endif  // TROUPE_BASE_DIR_ARCHIVE_H_
