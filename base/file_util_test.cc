#include "base/file_util.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// This binary's temporary directory (removed when it exits).
const std::string& TestDir() {
  static test::TempDir dir("file_util");
  return dir.path();
}

std::string WriteTestFile(const std::string& name, const std::string& contents) {
  const std::string path = TestDir() + "/" + name;
  test::WriteFile(path, contents);
  return path;
}

TEST(ReadFileToString, ReturnsTheWholeFileIncludingNulBytes) {
  const std::string contents = std::string("a\0b\n", 4) + std::string(200000, 'x');
  const std::string path = WriteTestFile("whole.bin", contents);
  absl::StatusOr<std::string> read = ReadFileToString(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, contents);
}

TEST(ReadFileToString, ReadsAnEmptyFile) {
  absl::StatusOr<std::string> read = ReadFileToString(WriteTestFile("empty", ""));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "");
}

TEST(ReadFileToString, MissingFileIsNotFoundNamingThePathAndTheReason) {
  const std::string path = TestDir() + "/no-such-file";
  absl::StatusOr<std::string> read = ReadFileToString(path);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(read.status().message()), StartsWith(path + ": cannot open: "));
  EXPECT_THAT(std::string(read.status().message()), HasSubstr("No such file or directory"));
}

TEST(ReadFileToString, DirectoryIsInvalidArgument) {
  const std::string dir = TestDir() + "/a-directory";
  ::mkdir(dir.c_str(), 0755);
  absl::StatusOr<std::string> read = ReadFileToString(dir);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(read.status().message()), HasSubstr(dir + ": is a directory"));
}

TEST(ReadFileToString, UnreadableFileIsInternalWithTheErrnoText) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads files whatever their mode";
  const std::string path = WriteTestFile("unreadable", "secret");
  ::chmod(path.c_str(), 0);
  absl::StatusOr<std::string> read = ReadFileToString(path);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(read.status().message()),
              HasSubstr(path + ": cannot open: Permission denied"));
}

TEST(ReadFileToString, ReadErrorIsInternalWithTheErrnoText) {
  // Offset 0 of a process's memory is unmapped: open succeeds, read fails with EIO.
  absl::StatusOr<std::string> read = ReadFileToString("/proc/self/mem");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(read.status().message()),
              StartsWith("/proc/self/mem: cannot read: Input/output error"));
}

TEST(ReadFileToString, FileAtTheBoundIsRead) {
  absl::StatusOr<std::string> read = ReadFileToString(WriteTestFile("at-bound", "12345"), 5);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "12345");
}

TEST(ReadFileToString, FileOverTheBoundIsOutOfRange) {
  const std::string path = WriteTestFile("over-bound", "123456");
  absl::StatusOr<std::string> read = ReadFileToString(path, 5);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(read.status().message()), HasSubstr(path + ": larger than 5 bytes"));
}

TEST(ReadFileToString, EndlessInputStopsJustPastTheBound) {
  absl::StatusOr<std::string> read = ReadFileToString("/dev/zero", 1 << 20);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kOutOfRange);
}

// A FIFO with no writer: opening it for reading the usual way would wait for one forever.
TEST(ReadRegularFile, RefusesAFifoWithoutWaitingForAWriter) {
  const std::string path = TestDir() + "/fifo";
  ::unlink(path.c_str());
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  EXPECT_EQ(FileTypeName(path), "a FIFO");
  absl::StatusOr<std::string> read = ReadRegularFile(path, 1 << 20);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(read.status().message(), path + ": is a FIFO, expected a regular file");
  EXPECT_EQ(ReadRegularFilePrefix(path, 8).status().message(),
            path + ": is a FIFO, expected a regular file");
}

TEST(ReadRegularFile, RefusesDevicesAndDirectoriesAndReadsRegularFiles) {
  EXPECT_EQ(ReadRegularFile("/dev/zero", 16).status().message(),
            "/dev/zero: is a character device, expected a regular file");
  EXPECT_EQ(ReadRegularFile(TestDir(), 16).status().message(),
            TestDir() + ": is a directory, expected a regular file");
  EXPECT_EQ(FileTypeName(TestDir() + "/no-such-file"), "nothing");
  const std::string path = WriteTestFile("regular", "0123456789");
  EXPECT_EQ(FileTypeName(path), "a regular file");
  EXPECT_EQ(ReadRegularFile(path, 10).value(), "0123456789");
  EXPECT_EQ(ReadRegularFile(path, 9).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(ReadRegularFilePrefix(path, 4).value(), "0123");
  EXPECT_EQ(ReadRegularFilePrefix(path, 64).value(), "0123456789");
  EXPECT_EQ(ReadRegularFile(TestDir() + "/no-such-file").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace troupe
