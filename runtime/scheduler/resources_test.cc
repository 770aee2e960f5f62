#include "runtime/scheduler/resources.h"

#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe {
namespace scheduler {
namespace {

using ::testing::HasSubstr;

TEST(ResourceNames, PreassignsCpuGpuMemoryAndInternsCustomNamesDensely) {
  ResourceNames names;
  EXPECT_EQ(*names.Find("CPU"), kCpu);
  EXPECT_EQ(*names.Find("GPU"), kGpu);
  EXPECT_EQ(*names.Find("memory"), kMemory);
  EXPECT_FALSE(names.Find("accel").has_value());
  EXPECT_EQ(names.Intern("accel"), 3);
  EXPECT_EQ(names.Intern("ssd"), 4);
  EXPECT_EQ(names.Intern("accel"), 3);
  EXPECT_EQ(names.Name(4), "ssd");
  EXPECT_EQ(names.size(), 5);
}

TEST(ToUnits, StoresAmountsAsTenThousandthsRoundedToNearest) {
  EXPECT_EQ(*ToUnits("CPU", 0.5), 5000);
  EXPECT_EQ(*ToUnits("CPU", 0.1), 1000);
  EXPECT_EQ(*ToUnits("CPU", 0.00004), 0);
  EXPECT_EQ(*ToUnits("memory", 17179869184.0), 171798691840000);
  EXPECT_EQ(ToAmount(5000), 0.5);
}

TEST(ToUnits, RefusesFractionalGpusNegativeAndNonFiniteAmounts) {
  absl::StatusOr<int64_t> gpu = ToUnits("GPU", 0.5);
  ASSERT_EQ(gpu.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(gpu.status().message(), HasSubstr("GPU"));
  EXPECT_THAT(gpu.status().message(), HasSubstr("fractional"));
  EXPECT_TRUE(ToUnits("GPU", 2).ok());
  EXPECT_FALSE(ToUnits("CPU", -1).ok());
  EXPECT_FALSE(ToUnits("CPU", std::nan("")).ok());
  EXPECT_FALSE(ToUnits("CPU", std::numeric_limits<double>::infinity()).ok());
  EXPECT_FALSE(ToUnits("memory", 2 * kMaxResourceAmount).ok());
  EXPECT_FALSE(ToUnits("", 1).ok());
}

TEST(FormatUnits, PrintsIntegersWithoutDecimalsAndFractionsWithoutTrailingZeros) {
  EXPECT_EQ(FormatUnits(80000), "8");
  EXPECT_EQ(FormatUnits(5000), "0.5");
  EXPECT_EQ(FormatUnits(12345), "1.2345");
  EXPECT_EQ(FormatUnits(171798691840000), "17179869184");
  EXPECT_EQ(FormatUnits(0), "0");
}

TEST(ResourceRequest, DropsZeroAmountsSortsByIdAndMergesAdds) {
  ResourceNames names;
  absl::StatusOr<ResourceRequest> r =
      ResourceRequest::FromMap({{"accel", 1}, {"GPU", 2}, {"CPU", 0.5}, {"memory", 0}}, &names);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->entries().size(), 3u);
  EXPECT_EQ(r->entries()[0].id, kCpu);
  EXPECT_EQ(r->entries()[1].id, kGpu);
  EXPECT_EQ(r->entries()[2].id, *names.Find("accel"));
  EXPECT_EQ(r->gpus(), 2);
  EXPECT_EQ(r->DebugString(names), "{CPU: 0.5, GPU: 2, accel: 1}");
  r->Add(kCpu, 5000);
  r->Add(kMemory, 10000);
  EXPECT_EQ(r->Get(kCpu), 10000);
  EXPECT_EQ(r->Get(kMemory), 10000);
  EXPECT_EQ(r->ToMap(names), (ResourceMap{{"CPU", 1}, {"GPU", 2}, {"accel", 1}, {"memory", 1}}));
}

TEST(ResourceRequest, FitsWithinComparesEveryAmount) {
  ResourceNames names;
  auto small = *ResourceRequest::FromMap({{"CPU", 1}, {"GPU", 1}}, &names);
  auto big = *ResourceRequest::FromMap({{"CPU", 2}, {"GPU", 1}}, &names);
  auto other = *ResourceRequest::FromMap({{"CPU", 4}}, &names);
  EXPECT_TRUE(small.FitsWithin(big));
  EXPECT_FALSE(big.FitsWithin(small));
  EXPECT_FALSE(small.FitsWithin(other));
}

TEST(ResourceVector, TenTenthsOfACpuFillOneCpuExactlyWithoutDrift) {
  ResourceNames names;
  ResourceVector avail =
      ResourceVector::FromRequest(*ResourceRequest::FromMap({{"CPU", 1}}, &names));
  auto tenth = *ResourceRequest::FromMap({{"CPU", 0.1}}, &names);
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(avail.Covers(tenth)) << "after " << i;
    avail.Subtract(tenth);
  }
  EXPECT_EQ(avail.Get(kCpu), 0);
  EXPECT_FALSE(avail.Covers(tenth));
  avail.Add(tenth);
  EXPECT_TRUE(avail.Covers(tenth));
}

TEST(ResourceVector, ReadsUnsetSlotsAsZeroSoUnknownResourcesNeverFit) {
  ResourceNames names;
  ResourceVector avail =
      ResourceVector::FromRequest(*ResourceRequest::FromMap({{"CPU", 8}}, &names));
  auto accel = *ResourceRequest::FromMap({{"accel", 1}}, &names);
  EXPECT_EQ(avail.Get(*names.Find("accel")), 0);
  EXPECT_FALSE(avail.Covers(accel));
  EXPECT_TRUE(avail.Covers(ResourceRequest()));
}

TEST(ResourceVector, CoversAfterAccountsForATentativeReservation) {
  ResourceNames names;
  ResourceVector avail =
      ResourceVector::FromRequest(*ResourceRequest::FromMap({{"CPU", 4}}, &names));
  auto three = *ResourceRequest::FromMap({{"CPU", 3}}, &names);
  auto two = *ResourceRequest::FromMap({{"CPU", 2}}, &names);
  EXPECT_TRUE(avail.CoversAfter(ResourceRequest(), three));
  EXPECT_FALSE(avail.CoversAfter(two, three));
  EXPECT_TRUE(avail.CoversAfter(two, two));
}

TEST(ResourceMapFromProto, CopiesEveryAmount) {
  proto::Resources r;
  (*r.mutable_amounts())["CPU"] = 2;
  (*r.mutable_amounts())["GPU"] = 1;
  EXPECT_EQ(ResourceMapFromProto(r), (ResourceMap{{"CPU", 2}, {"GPU", 1}}));
}

}  // namespace
}  // namespace scheduler
}  // namespace troupe
