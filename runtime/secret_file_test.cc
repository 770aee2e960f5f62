#include "runtime/secret_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe {
namespace {

using ::testing::HasSubstr;

std::string TestDir(const std::string& name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

mode_t ModeOf(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? st.st_mode & 07777 : 0;
}

void WritePlain(const std::string& path, const std::string& contents, mode_t mode) {
  std::ofstream(path) << contents;
  ::chmod(path.c_str(), mode);
}

TEST(CreatePrivateDirectory, CreatesTheDirectoryAndItsParentsOwnerOnly) {
  const std::string dir = TestDir("fresh") + "/a/b";
  const mode_t old_umask = ::umask(0);  // a permissive umask must not widen them
  ASSERT_TRUE(CreatePrivateDirectory(dir).ok());
  ::umask(old_umask);
  EXPECT_EQ(ModeOf(dir), 0700u);
  EXPECT_EQ(ModeOf(TestDir("fresh") + "/a"), 0700u);
  EXPECT_EQ(ModeOf(TestDir("fresh")), 0700u);
  ASSERT_TRUE(CreatePrivateDirectory(dir).ok());  // idempotent
}

TEST(CreatePrivateDirectory, TightensAnExistingDirectoryOfOurs) {
  const std::string dir = TestDir("loose");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  ::chmod(dir.c_str(), 0777);
  ASSERT_TRUE(CreatePrivateDirectory(dir).ok());
  EXPECT_EQ(ModeOf(dir), 0700u);
}

TEST(CreatePrivateDirectory, RefusesAFileOrASymlinkInItsPlace) {
  const std::string file = TestDir("a_file");
  WritePlain(file, "x", 0600);
  absl::Status s = CreatePrivateDirectory(file);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr(file));
  const std::string target = TestDir("target");
  ASSERT_EQ(::mkdir(target.c_str(), 0755), 0);
  const std::string link = TestDir("link");
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  s = CreatePrivateDirectory(link);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(ModeOf(target), 0755u);  // untouched
}

TEST(CreatePrivateDirectory, RefusesADirectoryOfAnotherUser) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory away";
  const std::string dir = TestDir("someone_elses");
  ASSERT_EQ(::mkdir(dir.c_str(), 0777), 0);
  if (::chown(dir.c_str(), 65534, 65534) != 0) {  // nobody; a sandbox may not map that user
    GTEST_SKIP() << "cannot give a directory to user 65534 here: " << std::strerror(errno);
  }
  absl::Status s = CreatePrivateDirectory(dir);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("65534"));
  EXPECT_THAT(s.message(), HasSubstr("--state-dir"));
}

TEST(SecretFile, IsWrittenOwnerOnlyAndReadBack) {
  const std::string path = TestDir("token");
  ASSERT_TRUE(WriteSecretFile(path, "0123abcd").ok());
  EXPECT_EQ(ModeOf(path), 0600u);
  absl::StatusOr<std::string> back = ReadSecretFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, "0123abcd");
}

TEST(SecretFile, ReadTakesTheFirstLineWithoutSurroundingSpace) {
  const std::string path = TestDir("spaced");
  WritePlain(path, "  s3cret-token \r\nsecond line\n", 0600);
  absl::StatusOr<std::string> got = ReadSecretFile(path);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "s3cret-token");
}

TEST(SecretFile, AFileOthersMayReadIsRefusedWithTheFix) {
  const std::string path = TestDir("world_readable");
  WritePlain(path, "token\n", 0644);
  absl::StatusOr<std::string> got = ReadSecretFile(path);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(got.status().message(), HasSubstr("0644"));
  EXPECT_THAT(got.status().message(), HasSubstr("chmod 600 " + path));
  ::chmod(path.c_str(), 0640);
  EXPECT_EQ(ReadSecretFile(path).status().code(), absl::StatusCode::kPermissionDenied);
  ::chmod(path.c_str(), 0400);
  EXPECT_TRUE(ReadSecretFile(path).ok());
}

TEST(SecretFile, BadContentsAndMissingFilesAreNamed) {
  EXPECT_EQ(ReadSecretFile(TestDir("missing")).status().code(), absl::StatusCode::kNotFound);
  const std::string empty = TestDir("empty");
  WritePlain(empty, "\n\n", 0600);
  absl::Status s = ReadSecretFile(empty).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("empty"));
  const std::string binary = TestDir("binary");
  WritePlain(binary, std::string("tok\x01en"), 0600);
  s = ReadSecretFile(binary).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(binary));
  const std::string big = TestDir("big");
  WritePlain(big, std::string(10000, 'a'), 0600);
  EXPECT_EQ(ReadSecretFile(big).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteSecretFile(TestDir("w"), "two words").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteSecretFile(TestDir("w"), "").code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace troupe
