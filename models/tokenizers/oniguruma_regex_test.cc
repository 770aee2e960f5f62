#include "models/tokenizers/oniguruma_regex.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::models {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> MatchTexts(absl::string_view pattern, absl::string_view text) {
  absl::StatusOr<std::shared_ptr<const OnigurumaRegex>> re = OnigurumaRegex::Compile(pattern);
  EXPECT_TRUE(re.ok()) << re.status();
  if (!re.ok()) return {};
  std::vector<OnigurumaRegex::Match> matches;
  const absl::Status status = (*re)->FindAll(text, &matches);
  EXPECT_TRUE(status.ok()) << status;
  std::vector<std::string> out;
  for (const OnigurumaRegex::Match& m : matches) {
    out.emplace_back(text.substr(m.start, m.end - m.start));
  }
  return out;
}

TEST(OnigurumaRegex, FindsUnicodePropertyClassesAndCaseInsensitiveGroups) {
  EXPECT_THAT(MatchTexts(R"(\p{Lu}\p{Ll}+)", "Hello Wörld ΑΒγδ"),
              ElementsAre("Hello", "Wörld", "Βγδ"));
  EXPECT_THAT(MatchTexts(R"((?i:'s|'re))", "it'S you'Re"), ElementsAre("'S", "'Re"));
  EXPECT_THAT(MatchTexts(R"(\p{N}{1,3})", "12345"), ElementsAre("123", "45"));
  EXPECT_THAT(MatchTexts(R"(\s+(?!\S))", "a   b"), ElementsAre("  "));
}

TEST(OnigurumaRegex, SkipsAnEmptyMatchRightAfterThePreviousMatch) {
  // Empty matches at every position, one per character boundary.
  absl::StatusOr<std::shared_ptr<const OnigurumaRegex>> re = OnigurumaRegex::Compile("x*");
  ASSERT_TRUE(re.ok());
  std::vector<OnigurumaRegex::Match> matches;
  ASSERT_TRUE((*re)->FindAll("axxé", &matches).ok());
  // "" at 0, "xx" at 1..3, then "" at 3 is skipped (it ends where "xx" ended), "" at 5 (after é).
  ASSERT_EQ(matches.size(), 3u);
  EXPECT_EQ(matches[0].start, 0u);
  EXPECT_EQ(matches[0].end, 0u);
  EXPECT_EQ(matches[1].start, 1u);
  EXPECT_EQ(matches[1].end, 3u);
  EXPECT_EQ(matches[2].start, 5u);
  EXPECT_EQ(matches[2].end, 5u);
}

TEST(OnigurumaRegex, TreatsInvalidBytesAsReplacementCharactersAndKeepsThem) {
  const std::string text =
      "ab\xFF"
      "cd\xE2\x82 x\xC3";
  EXPECT_THAT(MatchTexts(R"(\p{L}+)", text), ElementsAre("ab", "cd", "x"));
  EXPECT_THAT(MatchTexts(R"([^\s\p{L}\p{N}]+)", text), ElementsAre("\xFF", "\xE2\x82", "\xC3"));
  EXPECT_THAT(MatchTexts("\uFFFD", "a\xFF\xFE"), ElementsAre("\xFF", "\xFE"));
  // A NUL byte is an ordinary character.
  EXPECT_THAT(MatchTexts(R"(\p{L}+)", std::string("a\0b", 3)), ElementsAre("a", "b"));
}

TEST(OnigurumaRegex, LookbehindSeesTheTextBeforeTheSearchStart) {
  EXPECT_THAT(MatchTexts(R"((?<=a)b)", "abab"), ElementsAre("b", "b"));
}

TEST(OnigurumaRegex, RefusesPatternsThatDoNotCompile) {
  absl::StatusOr<std::shared_ptr<const OnigurumaRegex>> re = OnigurumaRegex::Compile("(ab");
  EXPECT_EQ(re.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(re.status().message(), HasSubstr("(ab"));
  re = OnigurumaRegex::Compile("\xFF");
  EXPECT_EQ(re.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(OnigurumaRegex, ReportsCatastrophicBacktrackingAsAnError) {
  absl::StatusOr<std::shared_ptr<const OnigurumaRegex>> re =
      OnigurumaRegex::Compile(R"((a|aa)+\p{N})");
  ASSERT_TRUE(re.ok());
  std::vector<OnigurumaRegex::Match> matches;
  const absl::Status status = (*re)->FindAll(std::string(60, 'a'), &matches);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
}

TEST(OnigurumaRegex, SearchesConcurrentlyOnOneCompiledRegex) {
  absl::StatusOr<std::shared_ptr<const OnigurumaRegex>> re =
      OnigurumaRegex::Compile(R"(\p{L}+|\p{N}+|\s+|[^\s\p{L}\p{N}]+)");
  ASSERT_TRUE(re.ok());
  std::string text;
  for (int i = 0; i < 200; ++i) text += "word 123 中文 !! ";
  std::vector<OnigurumaRegex::Match> expected;
  ASSERT_TRUE((*re)->FindAll(text, &expected).ok());
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        std::vector<OnigurumaRegex::Match> matches;
        if (!(*re)->FindAll(text, &matches).ok() || matches.size() != expected.size()) return;
      }
      ok[t] = 1;
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_THAT(ok, ElementsAre(1, 1, 1, 1));
}

}  // namespace
}  // namespace troupe::models
