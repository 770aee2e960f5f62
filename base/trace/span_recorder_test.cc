#include "base/trace/span_recorder.h"

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"

namespace troupe {
namespace {

std::unique_ptr<SpanRecorder> Make(uint32_t capacity, std::string file = "") {
  absl::StatusOr<std::unique_ptr<SpanRecorder>> r =
      SpanRecorder::Create({.capacity = capacity, .file = std::move(file), .label = "test"});
  EXPECT_TRUE(r.ok()) << r.status();
  return *std::move(r);
}

TEST(SpanRecorder, KeepsSpansOldestFirstWithTheirFields) {
  auto r = Make(8);
  r->Record("call", "Generate", "rollout-0", 100, 5);
  r->Record("train", "Step", "trainer", 200, 7);
  ProcessSpans s = r->Snapshot();
  EXPECT_EQ(s.pid, ::getpid());
  EXPECT_EQ(s.label, "test");
  EXPECT_EQ(s.lost, 0u);
  ASSERT_EQ(s.spans.size(), 2u);
  EXPECT_EQ(s.spans[0].category, "call");
  EXPECT_EQ(s.spans[0].name, "Generate");
  EXPECT_EQ(s.spans[0].track, "rollout-0");
  EXPECT_EQ(s.spans[0].start_us, 100);
  EXPECT_EQ(s.spans[0].dur_us, 5);
  EXPECT_EQ(s.spans[1].name, "Step");
}

TEST(SpanRecorder, StaysBoundedAndKeepsTheNewestWhenFull) {
  auto r = Make(4);
  for (int i = 0; i < 10; ++i) r->Record("c", absl::StrCat("s", i), "t", i, 1);
  ProcessSpans s = r->Snapshot();
  EXPECT_EQ(r->recorded(), 10u);
  EXPECT_EQ(s.lost, 6u);
  ASSERT_EQ(s.spans.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(s.spans[i].name, absl::StrCat("s", i + 6));
}

TEST(SpanRecorder, CutsLongStringsAndClampsNegativeDurations) {
  auto r = Make(2);
  r->Record(std::string(100, 'c'), std::string(100, 'n'), std::string(100, 't'), 1, -5);
  ProcessSpans s = r->Snapshot();
  ASSERT_EQ(s.spans.size(), 1u);
  EXPECT_EQ(s.spans[0].category.size(), 15u);
  EXPECT_EQ(s.spans[0].name.size(), 47u);
  EXPECT_EQ(s.spans[0].track.size(), 39u);
  EXPECT_EQ(s.spans[0].dur_us, 0);
}

TEST(SpanRecorder, RefusesCapacitiesOutOfRange) {
  EXPECT_FALSE(SpanRecorder::Create({.capacity = 0}).ok());
  EXPECT_FALSE(SpanRecorder::Create({.capacity = SpanRecorder::kMaxCapacity + 1}).ok());
}

TEST(SpanRecorder, ConcurrentWritersLoseNothingWithinCapacity) {
  auto r = Make(4096);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&r, t] {
      for (int i = 0; i < 1000; ++i) r->Record("c", "n", absl::StrCat("t", t), i, 1);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(r->Snapshot().spans.size(), 4000u);
}

TEST(SpanRecorder, AFileBackedRecorderIsReadableFromTheFileWhileItRuns) {
  test::TempDir tmp("span_recorder");
  const std::string path = tmp.Path("rec.spans");
  auto r = Make(3, path);
  for (int i = 0; i < 5; ++i) r->Record("call", absl::StrCat("m", i), "a", 10 * i, 2);
  const std::string bytes = test::ReadFile(path);
  EXPECT_EQ(bytes.size(), SpanRecorder::kHeaderBytes + 3 * SpanRecorder::kSlotBytes);
  absl::StatusOr<ProcessSpans> s = ParseSpanFile(bytes);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->label, "test");
  EXPECT_EQ(s->pid, ::getpid());
  EXPECT_EQ(s->lost, 2u);
  ASSERT_EQ(s->spans.size(), 3u);
  EXPECT_EQ(s->spans[0].name, "m2");
  EXPECT_EQ(s->spans[2].name, "m4");
  EXPECT_EQ(s->spans[2].start_us, 40);
}

TEST(ParseSpanFile, RefusesWhatIsNotASpanFile) {
  EXPECT_FALSE(ParseSpanFile("").ok());
  EXPECT_FALSE(ParseSpanFile(std::string(5000, 'x')).ok());
  test::TempDir tmp("span_recorder");
  const std::string path = tmp.Path("cut.spans");
  auto r = Make(4, path);
  r->Record("c", "n", "t", 1, 1);
  std::string bytes = test::ReadFile(path);
  absl::StatusOr<ProcessSpans> cut = ParseSpanFile(bytes.substr(0, bytes.size() - 1));
  EXPECT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("does not hold"), std::string::npos) << cut.status();
  bytes[12] = '\xff';  // capacity over the limit
  bytes[13] = '\xff';
  bytes[14] = '\xff';
  EXPECT_FALSE(ParseSpanFile(bytes).ok());
}

TEST(SpanCapacityFromEnv, ReadsTheVariableAndRefusesGarbage) {
  ::unsetenv("TROUPE_TIMELINE_SPANS");
  EXPECT_EQ(*SpanCapacityFromEnv(), 16384u);
  ::setenv("TROUPE_TIMELINE_SPANS", "0", 1);
  EXPECT_EQ(*SpanCapacityFromEnv(), 0u);
  ::setenv("TROUPE_TIMELINE_SPANS", "lots", 1);
  EXPECT_FALSE(SpanCapacityFromEnv().ok());
  ::unsetenv("TROUPE_TIMELINE_SPANS");
}

TEST(GlobalSpans, ScopedSpanRecordsIntoTheGlobalRecorderAndNothingWhenOff) {
  ASSERT_TRUE(InitGlobalSpans({.capacity = 16, .label = "g"}).ok());
  { ScopedSpan s("checkpoint", "Save", "driver"); }
  ASSERT_NE(GlobalSpans(), nullptr);
  ProcessSpans s = GlobalSpans()->Snapshot();
  ASSERT_EQ(s.spans.size(), 1u);
  EXPECT_EQ(s.spans[0].category, "checkpoint");
  EXPECT_GT(s.spans[0].start_us, 1'600'000'000'000'000);  // wall clock, µs
  ASSERT_TRUE(InitGlobalSpans({.capacity = 0}).ok());
  EXPECT_EQ(GlobalSpans(), nullptr);
  { ScopedSpan off("checkpoint", "Save", "driver"); }  // no recorder: nothing happens
}

}  // namespace
}  // namespace troupe
