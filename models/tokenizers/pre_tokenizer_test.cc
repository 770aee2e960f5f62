#include "models/tokenizers/pre_tokenizer.h"

#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::models {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> SplitWith(const PatternSplitter& splitter, absl::string_view text) {
  std::vector<absl::string_view> pieces;
  splitter.Split(text, &pieces);
  return std::vector<std::string>(pieces.begin(), pieces.end());
}

// Expected splits below were derived by reading each regex (leftmost alternative first, greedy
// quantifiers backtracking) and cross-checked against a regex engine with \p{..} support.

TEST(PatternSplitter, Gpt2SplitsTheMixedExample) {
  // "  123": a two-space run before a digit gives back its last space (\s+(?!\S)), which then
  // leads " 123". "\n\n  x": the run "\n\n  " keeps all but its last character.
  EXPECT_THAT(SplitWith(PatternSplitter::Gpt2(), "Hello world's  123 !!\n\n  x"),
              ElementsAre("Hello", " world", "'s", " ", " 123", " !!", "\n\n ", " x"));
}

TEST(PatternSplitter, Qwen2SplitsTheMixedExample) {
  // Single digits; a lone space before a digit stays alone (\s+); punctuation keeps the
  // newlines that follow it (" ?[^\s\p{L}\p{N}]+[\r\n]*").
  EXPECT_THAT(SplitWith(PatternSplitter::Qwen2(), "Hello world's  123 !!\n\n  x"),
              ElementsAre("Hello", " world", "'s", " ", " ", "1", "2", "3", " !!\n\n", " ", " x"));
}

TEST(PatternSplitter, Llama3GroupsDigitsByThree) {
  EXPECT_THAT(SplitWith(PatternSplitter::Llama3(), "Hello world's  123 !!\n\n  x"),
              ElementsAre("Hello", " world", "'s", " ", " ", "123", " !!\n\n", " ", " x"));
  EXPECT_THAT(SplitWith(PatternSplitter::Llama3(), "12345 6789"),
              ElementsAre("123", "45", " ", "678", "9"));
  EXPECT_THAT(SplitWith(PatternSplitter::Qwen2(), "12345 6789"),
              ElementsAre("1", "2", "3", "4", "5", " ", "6", "7", "8", "9"));
  EXPECT_THAT(SplitWith(PatternSplitter::Gpt2(), "12345 6789"), ElementsAre("12345", " 6789"));
}

TEST(PatternSplitter, ContractionsAreCaseSensitiveOnlyInGpt2) {
  EXPECT_THAT(SplitWith(PatternSplitter::Gpt2(), "I'M here, you'RE 'sa"),
              ElementsAre("I", "'", "M", " here", ",", " you", "'", "RE", " '", "sa"));
  EXPECT_THAT(SplitWith(PatternSplitter::Qwen2(), "I'M here, you'RE 'sa"),
              ElementsAre("I", "'M", " here", ",", " you", "'RE", " '", "sa"));
  // The first matching alternative wins even when a later one would match more: "'s" + "a".
  EXPECT_THAT(SplitWith(PatternSplitter::Qwen2(), "'sa"), ElementsAre("'s", "a"));
  EXPECT_THAT(SplitWith(PatternSplitter::Gpt2(), "it'll go"), ElementsAre("it", "'ll", " go"));
}

TEST(PatternSplitter, Qwen2LetsAnyNonNewlineSeparatorLeadAWord) {
  EXPECT_THAT(SplitWith(PatternSplitter::Gpt2(), "don't\tstop"),
              ElementsAre("don", "'t", "\t", "stop"));
  EXPECT_THAT(SplitWith(PatternSplitter::Qwen2(), "don't\tstop"),
              ElementsAre("don", "'t", "\tstop"));
  EXPECT_THAT(SplitWith(PatternSplitter::Gpt2(), "x\u00A0y"), ElementsAre("x", "\u00A0", "y"));
  EXPECT_THAT(SplitWith(PatternSplitter::Qwen2(), "x\u00A0y"), ElementsAre("x", "\u00A0y"));
  EXPECT_THAT(SplitWith(PatternSplitter::Qwen2(), "it'll\u3000go"),
              ElementsAre("it", "'ll", "\u3000go"));
}

TEST(PatternSplitter, WhitespaceRunsGiveBackTheirLastCharacterBeforeText) {
  EXPECT_THAT(SplitWith(PatternSplitter::Gpt2(), "  leading"), ElementsAre(" ", " leading"));
  EXPECT_THAT(SplitWith(PatternSplitter::Gpt2(), "tab\t\tend"),
              ElementsAre("tab", "\t", "\t", "end"));
  EXPECT_THAT(SplitWith(PatternSplitter::Qwen2(), "tab\t\tend"), ElementsAre("tab", "\t", "\tend"));
  // At the end of the text the whole run is kept.
  EXPECT_THAT(SplitWith(PatternSplitter::Gpt2(), "x  "), ElementsAre("x", "  "));
  EXPECT_THAT(SplitWith(PatternSplitter::Qwen2(), "   "), ElementsAre("   "));
}

TEST(PatternSplitter, NewlinesFollowEachPatternsRules) {
  EXPECT_THAT(SplitWith(PatternSplitter::Gpt2(), "line1\n  \nline2"),
              ElementsAre("line", "1", "\n  ", "\n", "line", "2"));
  // \s*[\r\n]+ runs up to the last newline of the whitespace run.
  EXPECT_THAT(SplitWith(PatternSplitter::Qwen2(), "line1\n  \nline2"),
              ElementsAre("line", "1", "\n  \n", "line", "2"));
  EXPECT_THAT(SplitWith(PatternSplitter::Qwen2(), "a\r\n\r\n b"),
              ElementsAre("a", "\r\n\r\n", " b"));
  EXPECT_THAT(SplitWith(PatternSplitter::Gpt2(), "!!\n\nA"), ElementsAre("!!", "\n", "\n", "A"));
  EXPECT_THAT(SplitWith(PatternSplitter::Qwen2(), "!!\n\nA"), ElementsAre("!!\n\n", "A"));
}

TEST(PatternSplitter, HandlesNonLatinScriptsNumbersAndEmoji) {
  const std::string text = "Ünïcödé ΑΒΓ Жук 中文字 ½ ٣";
  EXPECT_THAT(SplitWith(PatternSplitter::Gpt2(), text),
              ElementsAre("Ünïcödé", " ΑΒΓ", " Жук", " 中文字", " ½", " ٣"));
  EXPECT_THAT(SplitWith(PatternSplitter::Qwen2(), text),
              ElementsAre("Ünïcödé", " ΑΒΓ", " Жук", " 中文字", " ", "½", " ", "٣"));
  EXPECT_THAT(SplitWith(PatternSplitter::Gpt2(), "smile 😀😀 ok"),
              ElementsAre("smile", " 😀😀", " ok"));
}

TEST(PatternSplitter, PiecesAlwaysConcatenateBackToTheInput) {
  const std::vector<std::string> inputs = {"",
                                           " ",
                                           "'",
                                           "\n",
                                           "a",
                                           "''''",
                                           " ' s",
                                           "\xFF\xFE bad \xC3",
                                           "x\r\r\n\n  \t y",
                                           "emoji 👨‍👩‍👧 zwj",
                                           "combining e\u0301 mark",
                                           std::string("nul\0byte", 8)};
  for (const PatternSplitter& splitter :
       {PatternSplitter::Gpt2(), PatternSplitter::Qwen2(), PatternSplitter::Llama3()}) {
    for (const std::string& input : inputs) {
      const std::vector<std::string> pieces = SplitWith(splitter, input);
      EXPECT_EQ(absl::StrJoin(pieces, ""), input);
      for (const std::string& piece : pieces) EXPECT_FALSE(piece.empty());
    }
  }
}

TEST(PatternSplitter, RecognisesTheKnownRegexesAndRejectsOthers) {
  absl::StatusOr<PatternSplitter> gpt2 = PatternSplitter::FromRegex(kGpt2PreTokenizerRegex);
  ASSERT_TRUE(gpt2.ok());
  EXPECT_EQ(gpt2->regex(), kGpt2PreTokenizerRegex);
  absl::StatusOr<PatternSplitter> qwen2 = PatternSplitter::FromRegex(kQwen2PreTokenizerRegex);
  ASSERT_TRUE(qwen2.ok());
  EXPECT_THAT(SplitWith(*qwen2, "123"), ElementsAre("1", "2", "3"));
  absl::StatusOr<PatternSplitter> llama3 = PatternSplitter::FromRegex(kLlama3PreTokenizerRegex);
  ASSERT_TRUE(llama3.ok());
  EXPECT_THAT(SplitWith(*llama3, "123"), ElementsAre("123"));

  absl::StatusOr<PatternSplitter> other = PatternSplitter::FromRegex(R"(\w+|\s+)");
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(other.status().message(), HasSubstr(R"(\w+|\s+)"));
}

}  // namespace
}  // namespace troupe::models
