#include "models/tokenizers/added_tokens.h"

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace troupe::models {
namespace {

AddedToken Token(int32_t id, std::string content, bool special = true) {
  AddedToken token;
  token.id = id;
  token.content = std::move(content);
  token.special = special;
  return token;
}

// "text|id" per segment, for compact expectations.
std::vector<std::string> Describe(const AddedTokenMatcher& matcher, absl::string_view text,
                                  bool match_special = true) {
  std::vector<AddedTokenMatcher::Segment> segments;
  matcher.Split(text, match_special, &segments);
  std::vector<std::string> out;
  for (const auto& s : segments) out.push_back(std::string(s.text) + "|" + std::to_string(s.id));
  return out;
}

TEST(AddedTokenMatcher, SplitsSpecialTokensOutOfText) {
  const AddedTokenMatcher matcher({Token(1, "<|im_start|>"), Token(2, "<|im_end|>")});
  EXPECT_EQ(Describe(matcher, "<|im_start|>user\nhi<|im_end|>"),
            (std::vector<std::string>{"<|im_start|>|1", "user\nhi|-1", "<|im_end|>|2"}));
  EXPECT_EQ(Describe(matcher, "no tokens <| here"),
            (std::vector<std::string>{"no tokens <| here|-1"}));
  EXPECT_TRUE(Describe(matcher, "").empty());
}

TEST(AddedTokenMatcher, PrefersTheLongestTokenAtTheLeftmostPosition) {
  const AddedTokenMatcher matcher({Token(1, "<a>"), Token(2, "<a><b>"), Token(3, "b>")});
  EXPECT_EQ(Describe(matcher, "x<a><b>y<a>b>"),
            (std::vector<std::string>{"x|-1", "<a><b>|2", "y|-1", "<a>|1", "b>|3"}));
}

TEST(AddedTokenMatcher, LeavesSpecialTokensAsTextWhenAsked) {
  const AddedTokenMatcher matcher({Token(1, "<eos>"), Token(2, "[TOOL]", /*special=*/false)});
  EXPECT_EQ(Describe(matcher, "a<eos>[TOOL]", /*match_special=*/false),
            (std::vector<std::string>{"a<eos>|-1", "[TOOL]|2"}));
}

TEST(AddedTokenMatcher, StripOptionsAbsorbNeighbouringWhitespace) {
  AddedToken mask = Token(7, "<mask>");
  mask.lstrip = true;
  mask.rstrip = true;
  const AddedTokenMatcher matcher({mask});
  EXPECT_EQ(Describe(matcher, "a \t<mask>\u00A0 b"),
            (std::vector<std::string>{"a|-1", " \t<mask>\u00A0 |7", "b|-1"}));
}

TEST(AddedTokenMatcher, SingleWordTokensMatchOnlyBetweenNonWordCharacters) {
  AddedToken cat = Token(5, "cat", /*special=*/false);
  cat.single_word = true;
  const AddedTokenMatcher matcher({cat});
  EXPECT_EQ(Describe(matcher, "cat concat cats é cat!"),
            (std::vector<std::string>{"cat|5", " concat cats é |-1", "cat|5", "!|-1"}));
}

}  // namespace
}  // namespace troupe::models
