#include "base/secret_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe {
namespace {

using ::testing::HasSubstr;

mode_t ModeOf(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? st.st_mode & 07777 : 0;
}

void WritePlain(const std::string& path, const std::string& contents, mode_t mode) {
  std::ofstream(path) << contents;
  ::chmod(path.c_str(), mode);
}

TEST(CreatePrivateDirectory, CreatesTheDirectoryAndItsParentsOwnerOnly) {
  test::TempDir tmp("secret_file");
  const std::string dir = tmp.Path("fresh") + "/a/b";
  const mode_t old_umask = ::umask(0);  // a permissive umask must not widen them
  ASSERT_TRUE(CreatePrivateDirectory(dir).ok());
  ::umask(old_umask);
  EXPECT_EQ(ModeOf(dir), 0700u);
  EXPECT_EQ(ModeOf(tmp.Path("fresh") + "/a"), 0700u);
  EXPECT_EQ(ModeOf(tmp.Path("fresh")), 0700u);
  ASSERT_TRUE(CreatePrivateDirectory(dir).ok());  // idempotent
}

TEST(CreatePrivateDirectory, TightensAnExistingDirectoryOfOurs) {
  test::TempDir tmp("secret_file");
  const std::string dir = tmp.Path("loose");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  ::chmod(dir.c_str(), 0777);
  ASSERT_TRUE(CreatePrivateDirectory(dir).ok());
  EXPECT_EQ(ModeOf(dir), 0700u);
}

TEST(CreatePrivateDirectory, RefusesAFileOrASymlinkInItsPlace) {
  test::TempDir tmp("secret_file");
  const std::string file = tmp.Path("a_file");
  WritePlain(file, "x", 0600);
  absl::Status s = CreatePrivateDirectory(file);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr(file));
  const std::string target = tmp.Path("target");
  ASSERT_EQ(::mkdir(target.c_str(), 0755), 0);
  const std::string link = tmp.Path("link");
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  s = CreatePrivateDirectory(link);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(ModeOf(target), 0755u);  // untouched
}

TEST(CreatePrivateDirectory, RefusesADirectoryOfAnotherUser) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory away";
  test::TempDir tmp("secret_file");
  const std::string dir = tmp.Path("someone_elses");
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
  test::TempDir tmp("secret_file");
  const std::string path = tmp.Path("token");
  ASSERT_TRUE(WriteSecretFile(path, "0123abcd").ok());
  EXPECT_EQ(ModeOf(path), 0600u);
  absl::StatusOr<std::string> back = ReadSecretFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, "0123abcd");
}

TEST(SecretFile, ReadTakesTheFirstLineWithoutSurroundingSpace) {
  test::TempDir tmp("secret_file");
  const std::string path = tmp.Path("spaced");
  WritePlain(path, "  s3cret-token \r\nsecond line\n", 0600);
  absl::StatusOr<std::string> got = ReadSecretFile(path);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "s3cret-token");
}

TEST(SecretFile, AFileOthersMayReadIsRefusedWithTheFix) {
  test::TempDir tmp("secret_file");
  const std::string path = tmp.Path("world_readable");
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
  test::TempDir tmp("secret_file");
  EXPECT_EQ(ReadSecretFile(tmp.Path("missing")).status().code(), absl::StatusCode::kNotFound);
  const std::string empty = tmp.Path("empty");
  WritePlain(empty, "\n\n", 0600);
  absl::Status s = ReadSecretFile(empty).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("empty"));
  const std::string binary = tmp.Path("binary");
  WritePlain(binary, std::string("tok\x01en"), 0600);
  s = ReadSecretFile(binary).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(binary));
  const std::string big = tmp.Path("big");
  WritePlain(big, std::string(10000, 'a'), 0600);
  EXPECT_EQ(ReadSecretFile(big).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteSecretFile(tmp.Path("w"), "two words").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteSecretFile(tmp.Path("w"), "").code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace troupe
