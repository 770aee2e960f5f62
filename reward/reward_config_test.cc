#include "reward/reward_config.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::reward {
namespace {

using ::testing::HasSubstr;

TEST(RewardConfigReader, RefusesKeysOutsideTheAcceptedListNamingThem) {
  auto r = RewardConfigReader::Create("gsm8k", {{"methd", "strict"}}, {"method", "format_score"});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "reward gsm8k: unknown config key 'methd' (accepted: format_score, method)");
  EXPECT_THAT(std::string(RewardConfigReader::Create("x", {{"a", 1}}, {}).status().message()),
              HasSubstr("accepted: none"));
  EXPECT_EQ(RewardConfigReader::Create("x", nlohmann::json::array(), {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RewardConfigReader, GettersDefaultAbsentOrNullKeysAndCheckTypesAndRanges) {
  auto r = RewardConfigReader::Create("t", {{"n", 0.5}, {"b", true}, {"s", "x"}, {"gone", nullptr}},
                                      {"n", "b", "s", "gone", "m"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r->Number("n", 1, 0, 1), 0.5);
  EXPECT_EQ(*r->Number("m", 3), 3);
  EXPECT_EQ(*r->Number("gone", 4), 4);
  EXPECT_FALSE(r->Has("gone"));
  EXPECT_TRUE(r->Has("n"));
  EXPECT_THAT(std::string(r->Number("n", 1, 0.75, 1).status().message()),
              HasSubstr("reward t: config key 'n' must be a number in [0.75, 1], got 0.5"));
  EXPECT_EQ(*r->Bool("b", false), true);
  EXPECT_EQ(r->Bool("n", false).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*r->String("s", ""), "x");
  EXPECT_EQ(r->String("n", "").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r->String("s", "", {"y", "z"}).status().message()),
              HasSubstr("must be one of y, z, got 'x'"));
}

}  // namespace
}  // namespace troupe::reward
