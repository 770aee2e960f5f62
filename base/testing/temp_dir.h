// Test-only helpers for files: a temporary directory that removes itself, and whole-file writes
// and reads that fail the running test (rather than return "") when the file system says no.
//
//   test::TempDir dir("checkpoints");              // $TEST_TMPDIR/checkpoints.Ab12Cd, empty
//   test::WriteFile(dir.Path("run/config.json"), "{}");  // creates run/ too
//   EXPECT_EQ(test::ReadFile(dir.Path("run/config.json")), "{}");
//   // ~TempDir removes the directory and everything in it.
//
// Every directory is new (mkdtemp), so two tests, or two processes of one test, never share one.
// The root is $TEST_TMPDIR (Bazel gives each test run its own), else $TMPDIR, else /tmp.
//
// Thread-safety: a TempDir is used from one thread; the free functions are thread-safe.
#ifndef TROUPE_BASE_TESTING_TEMP_DIR_H_
#define TROUPE_BASE_TESTING_TEMP_DIR_H_

#include <string>

#include "absl/strings/string_view.h"

namespace troupe::test {

class TempDir {
 public:
  // Creates "<root>/<name>.XXXXXX" (mode 0700). If it cannot, the test fails (ADD_FAILURE) and
  // path() is empty.
  explicit TempDir(absl::string_view name = "tmp");
  // Removes the directory with its contents (what cannot be removed is left, silently).
  ~TempDir();

  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  // The moved-from TempDir owns nothing (path() empty) and removes nothing.
  TempDir(TempDir&& other) noexcept;
  TempDir& operator=(TempDir&& other) noexcept;

  // The directory's absolute path, without a trailing '/'.
  const std::string& path() const { return path_; }
  // path() + "/" + relative.
  std::string Path(absl::string_view relative) const;

 private:
  std::string path_;
};

// Writes `contents` (bytes, as they are) to `path`, replacing the file, creating its missing parent
// directories. Fails the test (ADD_FAILURE, naming the path) and returns false if it cannot.
bool WriteFile(const std::string& path, absl::string_view contents);

// The bytes of `path`. Fails the test (ADD_FAILURE, naming the path) and returns "" if it cannot
// be read; to ask whether a file exists, use std::filesystem::exists.
std::string ReadFile(const std::string& path);

}  // namespace troupe::test

#endif  // TROUPE_BASE_TESTING_TEMP_DIR_H_
