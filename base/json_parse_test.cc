#include "base/json_parse.h"

#include <string>

#include "gtest/gtest.h"

namespace troupe {
namespace {

std::string Nested(int levels, char open, char close) {
  return std::string(levels, open) + std::string(levels, close);
}

TEST(JsonNestingDepth, CountsObjectsAndArraysButNotBracketsInStrings) {
  EXPECT_EQ(JsonNestingDepth("3", 64), 0);
  EXPECT_EQ(JsonNestingDepth(R"({"a": [1, {"b": []}]})", 64), 4);
  EXPECT_EQ(JsonNestingDepth(R"({"a": "[[[[{{{{"})", 64), 1);
  // An escaped quote does not end the string, so the brackets after it are still text.
  EXPECT_EQ(JsonNestingDepth(R"(["\"[[[[", 1])", 64), 1);
  EXPECT_EQ(JsonNestingDepth(R"(["\\", [[2]]])", 64), 3);
}

TEST(JsonNestingDepth, StopsCountingPastTheBound) {
  EXPECT_EQ(JsonNestingDepth(Nested(10, '[', ']'), 10), 10);
  EXPECT_EQ(JsonNestingDepth(Nested(11, '[', ']'), 10), 11);
  EXPECT_EQ(JsonNestingDepth(Nested(1000, '{', '}'), 10), 11);
}

TEST(ParseJson, ParsesWhatIsWithinTheBound) {
  absl::StatusOr<nlohmann::json> j = ParseJson(R"({"prompt": [{"role": "user"}], "n": 2})");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ((*j)["n"], 2);
  EXPECT_EQ((*j)["prompt"][0]["role"], "user");
  ASSERT_TRUE(ParseJson("[" + Nested(63, '[', ']') + "]").ok());
}

// 100,000 levels parse in nlohmann without recursion, but the first copy or dump of the result
// overflows the stack: refused before anything is built.
TEST(ParseJson, RefusesDeepNestingBeforeBuildingAnything) {
  const std::string deep = R"({"prompt": )" + Nested(100000, '[', ']') + "}";
  absl::StatusOr<nlohmann::json> j = ParseJson(deep);
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(j.status().message(), "JSON nested deeper than 64 levels");
  EXPECT_EQ(ParseJson(Nested(65, '[', ']')).status().message(),
            "JSON nested deeper than 64 levels");
  EXPECT_TRUE(ParseJson(Nested(5, '[', ']'), /*max_depth=*/5).ok());
  EXPECT_FALSE(ParseJson(Nested(6, '[', ']'), /*max_depth=*/5).ok());
}

TEST(ParseJson, SaysWhyTextIsNotJson) {
  absl::StatusOr<nlohmann::json> j = ParseJson(R"({"a": )");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(j.status().message().find("not valid JSON ("), absl::string_view::npos) << j.status();
  EXPECT_EQ(j.status().message().find("[json.exception"), absl::string_view::npos) << j.status();
}

}  // namespace
}  // namespace troupe
