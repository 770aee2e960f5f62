#include "data/record.h"

#include "gtest/gtest.h"

namespace troupe::data {
namespace {

TEST(LookupDotted, WalksNestedObjects) {
  const nlohmann::json r = {{"reward_model", {{"ground_truth", "81"}, {"style", "rule"}}}};
  const nlohmann::json* v = LookupDotted(r, "reward_model.ground_truth");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(*v, "81");
  EXPECT_EQ(LookupDotted(r, "reward_model"), &r["reward_model"]);
}

TEST(LookupDotted, FindsALiteralKeyWithDotsFirst) {
  const nlohmann::json r = {{"a.b", 1}, {"a", {{"b", 2}}}};
  ASSERT_NE(LookupDotted(r, "a.b"), nullptr);
  EXPECT_EQ(*LookupDotted(r, "a.b"), 1);
}

TEST(LookupDotted, FindsNothingThroughAMissingKeyOrANonObject) {
  const nlohmann::json r = {{"a", {{"b", "text"}}}, {"list", {1, 2}}};
  EXPECT_EQ(LookupDotted(r, "a.c"), nullptr);
  EXPECT_EQ(LookupDotted(r, "a.b.c"), nullptr);
  EXPECT_EQ(LookupDotted(r, "list.0"), nullptr);
  EXPECT_EQ(LookupDotted(nlohmann::json::array(), "a"), nullptr);
}

}  // namespace
}  // namespace troupe::data
