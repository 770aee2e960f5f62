#include "trainers/torch_op_spans.h"

#include <ATen/ATen.h>

#include "base/trace/span_recorder.h"
#include "gtest/gtest.h"

namespace troupe::trainers {
namespace {

TEST(TorchOpSpans, RecordsLibTorchOperatorsAsSpansWhileAlive) {
  ASSERT_TRUE(ProfilerAvailable().ok()) << ProfilerAvailable();
  ASSERT_TRUE(InitGlobalSpans({.capacity = 4096}).ok());
  at::Tensor a = at::ones({8, 8});
  {
    absl::StatusOr<std::unique_ptr<TorchOpSpans>> ops = TorchOpSpans::Start("trainer");
    ASSERT_TRUE(ops.ok()) << ops.status();
    // One at a time.
    EXPECT_TRUE(absl::IsFailedPrecondition(TorchOpSpans::Start("other").status()));
    at::Tensor b = at::mm(a, a);
    EXPECT_GT((*ops)->recorded(), 0);
  }
  const size_t during = GlobalSpans()->Snapshot().spans.size();
  at::Tensor c = at::mm(a, a);  // after: not recorded
  ProcessSpans s = GlobalSpans()->Snapshot();
  EXPECT_EQ(s.spans.size(), during);
  bool mm = false;
  for (const Span& span : s.spans) {
    EXPECT_EQ(span.category, "torch");
    EXPECT_EQ(span.track, "trainer");
    mm = mm || span.name == "aten::mm";
  }
  EXPECT_TRUE(mm);
  // Usable again once the first one ended.
  EXPECT_TRUE(TorchOpSpans::Start("trainer").ok());
}

TEST(TorchOpSpans, RefusesWhenSpanRecordingIsOff) {
  ASSERT_TRUE(InitGlobalSpans({.capacity = 0}).ok());
  absl::StatusOr<std::unique_ptr<TorchOpSpans>> ops = TorchOpSpans::Start("trainer");
  EXPECT_TRUE(absl::IsFailedPrecondition(ops.status()));
  EXPECT_NE(ops.status().message().find("TROUPE_TIMELINE_SPANS=0"), std::string::npos);
}

}  // namespace
}  // namespace troupe::trainers
