#include "runtime/cluster/log_range.h"

#include <fstream>
#include <string>

#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"

namespace troupe {
namespace {

// Writes `text` to the file `name` in `dir`; returns its path.
std::string LogFile(const test::TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.Path(name);
  test::WriteFile(path, text);
  return path;
}

TEST(ReadLogRange, ReadsFromTheOffsetUpToMaxBytesAndReportsTheSize) {
  test::TempDir tmp("log_range");
  const std::string path = LogFile(tmp, "range.log", "0123456789");
  absl::StatusOr<LogRange> r = ReadLogRange(path, 3, 4);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->bytes, "3456");
  EXPECT_EQ(r->size, 10);
  r = ReadLogRange(path, 7, 100);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bytes, "789");
  r = ReadLogRange(path, 0, 1 << 20);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bytes, "0123456789");
}

TEST(ReadLogRange, AnOffsetAtOrPastTheEndReadsNothingAndStillReportsTheSize) {
  test::TempDir tmp("log_range");
  const std::string path = LogFile(tmp, "end.log", "abc");
  for (int64_t offset : {3, 4, 1000}) {
    absl::StatusOr<LogRange> r = ReadLogRange(path, offset, 10);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->bytes, "");
    EXPECT_EQ(r->size, 3);
  }
}

TEST(ReadLogRange, NegativeOffsetsAndEmptyReadsAreRefused) {
  test::TempDir tmp("log_range");
  const std::string path = LogFile(tmp, "neg.log", "abc");
  EXPECT_EQ(ReadLogRange(path, -1, 10).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadLogRange(path, 0, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ReadLogRange, AMissingFileReadsAsEmpty) {
  absl::StatusOr<LogRange> r = ReadLogRange("/nonexistent/dir/worker.out", 0, 10);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bytes, "");
  EXPECT_EQ(r->size, 0);
}

TEST(ReadLogRange, FollowingByOffsetSeesAppendedBytesOnce) {
  test::TempDir tmp("log_range");
  const std::string path = LogFile(tmp, "follow.log", "line 1\n");
  absl::StatusOr<LogRange> r = ReadLogRange(path, 0, 64);
  ASSERT_TRUE(r.ok());
  int64_t offset = static_cast<int64_t>(r->bytes.size());
  std::ofstream(path, std::ios::binary | std::ios::app) << "line 2\n";
  r = ReadLogRange(path, offset, 64);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bytes, "line 2\n");
  EXPECT_EQ(r->size, 14);
}

}  // namespace
}  // namespace troupe
