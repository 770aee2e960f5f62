#include "runtime/collective/shm_segment.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "gtest/gtest.h"

namespace troupe::collective {
namespace {

TEST(SharedSegmentTest, AnotherProcessSeesAndChangesTheSameBytes) {
  auto seg = SharedSegment::Create(1 << 20, "test");
  ASSERT_TRUE(seg.ok()) << seg.status();
  ASSERT_EQ((*seg)->size(), size_t{1} << 20);
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*seg)->data()) % 4096, 0u);
  EXPECT_EQ((*seg)->data()[12345], 0);  // zeroed
  std::memcpy((*seg)->data(), "parent", 7);
  const std::string description = (*seg)->description();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // A fresh mapping through /proc/<pid>/fd, as another process of the group would make it.
    auto other = SharedSegment::Open(description, "test");
    if (!other.ok() || std::strcmp(reinterpret_cast<char*>((*other)->data()), "parent") != 0) {
      _exit(1);
    }
    std::memcpy((*other)->data() + (1 << 19), "child", 6);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_STREQ(reinterpret_cast<char*>((*seg)->data() + (1 << 19)), "child");
}

TEST(SharedSegmentTest, WrongOrMalformedDescriptionsAreRefused) {
  EXPECT_EQ(SharedSegment::Create(0, "test").status().code(), absl::StatusCode::kInvalidArgument);
  auto seg = SharedSegment::Create(8192, "test");
  ASSERT_TRUE(seg.ok()) << seg.status();
  EXPECT_EQ(SharedSegment::Open("nonsense", "test").status().code(),
            absl::StatusCode::kInvalidArgument);
  // Right process and fd, wrong nonce: what a member on another machine would see.
  std::string d = (*seg)->description();
  const size_t a = d.find(':', d.find(':') + 1) + 1;
  d.replace(a, d.find(':', a) - a, "12345");
  absl::Status s = SharedSegment::Open(d, "weights").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("weights"), std::string::npos) << s;
  // A process that does not exist.
  EXPECT_EQ(SharedSegment::Open("999999999:3:1:8192", "test").status().code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace troupe::collective
