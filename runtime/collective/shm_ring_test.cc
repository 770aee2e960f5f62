#include "runtime/collective/shm_ring.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace troupe::collective {
namespace {

constexpr int64_t kSlotBytes = 64 * 1024;

// The byte at offset i of piece g.
uint8_t Pattern(uint64_t g, int64_t i) { return static_cast<uint8_t>((g * 131 + i * 7) & 0xff); }

// Reads `pieces` pieces as `rank`, checking every byte; returns the number of bad pieces.
int ReadPieces(const ShmRing& ring, int rank, uint64_t first, uint64_t pieces) {
  int bad = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  for (uint64_t g = first; g < first + pieces; ++g) {
    if (!ring.AwaitFilled(g, deadline).ok()) return -1;
    const uint8_t* s = ring.slot(static_cast<int>(g % ring.slots()));
    for (int64_t i = 0; i < kSlotBytes; i += 97) {
      if (s[i] != Pattern(g, i)) {
        ++bad;
        break;
      }
    }
    ring.Consumed(rank, g);
  }
  return bad;
}

absl::Status WritePieces(const ShmRing& ring, int rank, uint64_t first, uint64_t pieces) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  for (uint64_t g = first; g < first + pieces; ++g) {
    absl::Status s = ring.AwaitFree(g, rank, deadline);
    if (!s.ok()) return s;
    uint8_t* d = ring.slot(static_cast<int>(g % ring.slots()));
    for (int64_t i = 0; i < kSlotBytes; ++i) d[i] = Pattern(g, i);
    ring.Publish(g);
  }
  ring.Consumed(rank, first + pieces - 1);
  return absl::OkStatus();
}

TEST(ShmRingTest, ProcessesReceiveEveryPieceIntact) {
  auto ring = ShmRing::Create(/*world_size=*/3, /*slots=*/4, kSlotBytes);
  ASSERT_TRUE(ring.ok()) << ring.status();
  constexpr uint64_t kPieces = 200;  // 50 times round the ring: slots are reused under load
  std::vector<pid_t> children;
  for (int rank = 1; rank <= 2; ++rank) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto mine = ShmRing::Open((*ring)->description(), rank);
      if (!mine.ok()) _exit(10);
      _exit(ReadPieces(**mine, rank, 0, kPieces) == 0 ? 0 : 11);
    }
    children.push_back(pid);
  }
  EXPECT_TRUE(WritePieces(**ring, 0, 0, kPieces).ok());
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "10: could not open the ring, 11: corrupt piece";
  }
}

TEST(ShmRingTest, AnotherMemberCanBeTheWriterLater) {
  auto ring = ShmRing::Create(/*world_size=*/2, /*slots=*/2, kSlotBytes);
  ASSERT_TRUE(ring.ok()) << ring.status();
  auto other = ShmRing::Open((*ring)->description(), 1);
  ASSERT_TRUE(other.ok()) << other.status();
  int bad = -2;
  // Rank 0 writes pieces 0..9 to rank 1, then rank 1 writes 10..19 to rank 0.
  std::thread reader([&] { bad = ReadPieces(**other, 1, 0, 10); });
  ASSERT_TRUE(WritePieces(**ring, 0, 0, 10).ok());
  reader.join();
  EXPECT_EQ(bad, 0);
  std::thread reader0([&] { bad = ReadPieces(**ring, 0, 10, 10); });
  ASSERT_TRUE(WritePieces(**other, 1, 10, 10).ok());
  reader0.join();
  EXPECT_EQ(bad, 0);
}

TEST(ShmRingTest, WaitsEndAtTheDeadlineNamingWhat) {
  auto ring = ShmRing::Create(2, 2, kSlotBytes);
  ASSERT_TRUE(ring.ok());
  const absl::Time start = absl::Now();
  absl::Status s = (*ring)->AwaitFilled(0, start + absl::Milliseconds(50));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("root to publish"), std::string::npos) << s;
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(50));
  // Slots 0 and 1 are free at first; piece 2 needs rank 1 to release piece 0.
  EXPECT_TRUE((*ring)->AwaitFree(1, 0, absl::Now()).ok());
  s = (*ring)->AwaitFree(2, 0, absl::Now() + absl::Milliseconds(20));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("release the slot"), std::string::npos) << s;
}

TEST(ShmRingTest, BadDescriptionsAndSizesAreRefused) {
  EXPECT_EQ(ShmRing::Create(1, 4, kSlotBytes).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ShmRing::Create(2, 0, kSlotBytes).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ShmRing::Create(2, 4, 100).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ShmRing::Open("not a ring", 1).status().code(), absl::StatusCode::kInvalidArgument);
  auto ring = ShmRing::Create(2, 2, kSlotBytes);
  ASSERT_TRUE(ring.ok());
  // Right fd, wrong nonce: what a member on another machine would see.
  std::string d = (*ring)->description();
  const size_t a = d.find(':', d.find(':') + 1) + 1;
  const size_t b = d.find(':', a);
  d.replace(a, b - a, "12345");
  EXPECT_EQ(ShmRing::Open(d, 1).status().code(), absl::StatusCode::kUnavailable);
  // A process that does not exist.
  EXPECT_EQ(ShmRing::Open("999999999:3:1:8192", 1).status().code(), absl::StatusCode::kUnavailable);
  // A rank outside the group.
  EXPECT_EQ(ShmRing::Open((*ring)->description(), 2).status().code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace troupe::collective
