#include "base/secure_random.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace troupe {
namespace {

TEST(SecureRandom, HexHasTwoLowercaseDigitsPerByte) {
  absl::StatusOr<std::string> hex = RandomHex(16);
  ASSERT_TRUE(hex.ok()) << hex.status();
  ASSERT_EQ(hex->size(), 32u);
  for (char c : *hex) EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << *hex;
  EXPECT_EQ(RandomHexOrDie(8).size(), 16u);
  EXPECT_EQ(RandomHexOrDie(1).size(), 2u);
}

TEST(SecureRandom, OutOfRangeSizesAreRefused) {
  EXPECT_EQ(RandomHex(0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RandomHex(-3).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RandomHex(1025).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(RandomBytes({}).ok());
}

TEST(SecureRandom, TokensNeverRepeat) {
  std::set<std::string> seen;
  for (int i = 0; i < 20000; ++i) ASSERT_TRUE(seen.insert(*RandomHex(16)).second);
  // 4-byte ids (job ids) collide only by the birthday bound: 20000 of them rarely (p ~ 5%)
  // share one value, never hundreds (a 2^16-state generator would repeat ~3000 times).
  std::set<std::string> short_ids;
  for (int i = 0; i < 20000; ++i) short_ids.insert(RandomHexOrDie(4));
  EXPECT_GE(short_ids.size(), 19995u);
}

// Every byte value is about equally frequent and every bit is set about half the time: a rough
// check that the bytes are not biased (e.g. by a modulo or a fixed byte).
TEST(SecureRandom, BytesAreUniform) {
  std::vector<uint8_t> buf(1 << 20);
  ASSERT_TRUE(RandomBytes(absl::MakeSpan(buf)).ok());
  std::array<int64_t, 256> counts{};
  std::array<int64_t, 8> bits{};
  for (uint8_t b : buf) {
    ++counts[b];
    for (int k = 0; k < 8; ++k) bits[k] += (b >> k) & 1;
  }
  // Chi-square with 255 degrees of freedom: mean 255, sd ~22.6; 400 is > 6 sd.
  const double expected = buf.size() / 256.0;
  double chi2 = 0;
  for (int64_t c : counts) chi2 += (c - expected) * (c - expected) / expected;
  EXPECT_LT(chi2, 400.0);
  // Each bit: mean 2^19, sd 362; allow 6 sd.
  for (int64_t ones : bits) EXPECT_NEAR(static_cast<double>(ones), buf.size() / 2.0, 6 * 362.0);
}

// A generator seeded once per process would give a forked child its parent's next values.
TEST(SecureRandom, ForkedChildrenDrawFreshValues) {
  const std::string before = RandomHexOrDie(16);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string child = RandomHexOrDie(16);
    (void)!::write(fds[1], child.data(), child.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  const std::string parent = RandomHexOrDie(16);
  char buf[32];
  ssize_t got = 0;
  while (got < 32) {
    const ssize_t n = ::read(fds[0], buf + got, sizeof(buf) - got);
    if (n <= 0) break;
    got += n;
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_EQ(got, 32);
  const std::string child(buf, 32);
  EXPECT_NE(child, parent);
  EXPECT_NE(child, before);
}

TEST(SecureRandom, ThreadsDrawDistinctValues) {
  std::vector<std::string> out(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) threads.emplace_back([&out, i] { out[i] = RandomHexOrDie(8); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(std::set<std::string>(out.begin(), out.end()).size(), out.size());
}

}  // namespace
}  // namespace troupe
