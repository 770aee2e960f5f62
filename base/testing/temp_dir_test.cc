#include "base/testing/temp_dir.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"

namespace troupe::test {
namespace {

namespace fs = std::filesystem;

TEST(TempDir, IsANewPrivateEmptyDirectoryUnderTheTestsTmpdir) {
  TempDir a("same-name");
  TempDir b("same-name");
  ASSERT_FALSE(a.path().empty());
  EXPECT_NE(a.path(), b.path());
  EXPECT_TRUE(fs::is_directory(a.path()));
  EXPECT_TRUE(fs::is_empty(a.path()));
  EXPECT_TRUE(absl::StartsWith(a.path(), std::string(std::getenv("TEST_TMPDIR")) + "/same-name."))
      << a.path();
  struct stat info = {};
  ASSERT_EQ(::stat(a.path().c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0700);
  EXPECT_EQ(a.Path("x/y.txt"), a.path() + "/x/y.txt");
}

TEST(TempDir, RemovesItselfWithEverythingInIt) {
  std::string path;
  {
    TempDir dir("removed");
    path = dir.path();
    ASSERT_TRUE(WriteFile(dir.Path("a/b/c.txt"), "deep"));
    ASSERT_TRUE(WriteFile(dir.Path("top.txt"), "top"));
  }
  EXPECT_FALSE(fs::exists(path)) << path;
}

TEST(TempDir, AMovedDirectoryIsRemovedOnceByItsLastOwner) {
  std::string path;
  {
    TempDir outer("moved");
    path = outer.path();
    {
      TempDir inner = std::move(outer);
      EXPECT_EQ(inner.path(), path);
      EXPECT_TRUE(outer.path().empty());  // NOLINT(bugprone-use-after-move): the contract
      TempDir other("other");
      const std::string other_path = other.path();
      other = std::move(inner);  // the directory `other` held goes now
      EXPECT_FALSE(fs::exists(other_path));
      EXPECT_EQ(other.path(), path);
      EXPECT_TRUE(fs::exists(path));
    }
    EXPECT_FALSE(fs::exists(path));
  }
  EXPECT_FALSE(fs::exists(path));
}

TEST(WriteFileAndReadFile, RoundTripBytesAndReplaceWhatWasThere) {
  TempDir dir("files");
  const std::string bytes("a\0b\r\n\xff", 6);
  ASSERT_TRUE(WriteFile(dir.Path("sub/dir/f.bin"), bytes));
  EXPECT_EQ(ReadFile(dir.Path("sub/dir/f.bin")), bytes);
  ASSERT_TRUE(WriteFile(dir.Path("sub/dir/f.bin"), "shorter"));
  EXPECT_EQ(ReadFile(dir.Path("sub/dir/f.bin")), "shorter");
  ASSERT_TRUE(WriteFile(dir.Path("empty"), ""));
  EXPECT_EQ(ReadFile(dir.Path("empty")), "");
}

TEST(WriteFileAndReadFile, FailTheTestNamingThePathWhenTheyCannot) {
  TempDir dir("failing");
  const std::string missing = dir.Path("missing.txt");
  EXPECT_NONFATAL_FAILURE(EXPECT_EQ(ReadFile(missing), ""), "missing.txt");
  EXPECT_NONFATAL_FAILURE(EXPECT_EQ(ReadFile(dir.path()), ""), "is a directory");
  ASSERT_TRUE(WriteFile(dir.Path("file"), "x"));
  // A path through a regular file cannot be created.
  EXPECT_NONFATAL_FAILURE(EXPECT_FALSE(WriteFile(dir.Path("file/below"), "y")), "file");
}

}  // namespace
}  // namespace troupe::test
