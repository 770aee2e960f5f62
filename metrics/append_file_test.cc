#include "metrics/append_file.h"

#include <signal.h>
#include <sys/resource.h>

#include <string>

#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::metrics {
namespace {

using ::testing::HasSubstr;

// A path in this binary's temporary directory (removed when it exits).
std::string TempPath(const std::string& name) {
  static test::TempDir dir("append_file");
  return dir.Path(name);
}

TEST(AppendFile, AppendsAfterWhatTheFileAlreadyHolds) {
  const std::string path = TempPath("appends");
  test::WriteFile(path, "old\n");
  {
    absl::StatusOr<std::unique_ptr<AppendFile>> file = AppendFile::Open(path, false);
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_EQ((*file)->size(), 4);
    ASSERT_TRUE((*file)->Append("one\n").ok());
    // Visible to another reader before the file is closed.
    EXPECT_EQ(test::ReadFile(path), "old\none\n");
    ASSERT_TRUE((*file)->Append("two\n").ok());
    EXPECT_EQ((*file)->size(), 12);
  }
  EXPECT_EQ(test::ReadFile(path), "old\none\ntwo\n");
}

TEST(AppendFile, ExclusiveOpenRefusesAnExistingFile) {
  const std::string path = TempPath("exclusive");
  test::WriteFile(path, "x");
  EXPECT_EQ(AppendFile::Open(path, true).status().code(), absl::StatusCode::kAlreadyExists);
}

TEST(AppendFile, OpeningInAMissingDirectoryNamesThePath) {
  const std::string path = TempPath("no/such/dir/file");
  absl::StatusOr<std::unique_ptr<AppendFile>> file = AppendFile::Open(path, false);
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(file.status().message(), HasSubstr(path));
}

TEST(AppendFile, AFailedAppendLeavesTheFileAsItWas) {
  const std::string path = TempPath("rollback");
  std::remove(path.c_str());
  absl::StatusOr<std::unique_ptr<AppendFile>> file = AppendFile::Open(path, false);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE((*file)->Append("line one\n").ok());

  // A file size limit of 16 bytes makes the next 20-byte append stop part-way with EFBIG.
  struct sigaction ignore = {}, previous = {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGXFSZ, &ignore, &previous), 0);
  struct rlimit old_limit;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  struct rlimit small = old_limit;
  small.rlim_cur = 16;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  absl::Status status = (*file)->Append("a twenty byte line\n\n");
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  ::sigaction(SIGXFSZ, &previous, nullptr);

  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr(path));
  EXPECT_EQ(test::ReadFile(path), "line one\n");
  ASSERT_TRUE((*file)->Append("line two\n").ok());
  EXPECT_EQ(test::ReadFile(path), "line one\nline two\n");
}

}  // namespace
}  // namespace troupe::metrics
