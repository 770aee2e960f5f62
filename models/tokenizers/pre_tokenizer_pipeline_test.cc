#include "models/tokenizers/pre_tokenizer_pipeline.h"

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/tokenizers/pre_tokenizer.h"
#include "nlohmann/json.hpp"

namespace troupe::models {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

// GPT-4o's pre-tokenizer regex (tiktoken o200k_base): cased words with marks, contractions
// attached, digits in threes, punctuation keeping trailing newlines and slashes.
constexpr char kO200kRegex[] =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

PreTokenizerPipeline OneSplit(std::shared_ptr<const SplitPattern> pattern,
                              SplitBehavior behavior = SplitBehavior::kIsolated,
                              bool invert = false) {
  PreTokenizerPipeline pipeline;
  pipeline.AddSplit(std::move(pattern), behavior, invert);
  return pipeline;
}

std::vector<std::string> Pieces(const PreTokenizerPipeline& pipeline, absl::string_view text) {
  std::string storage;
  std::vector<absl::string_view> pieces;
  const absl::Status status = pipeline.Split(text, &storage, &pieces);
  EXPECT_TRUE(status.ok()) << status;
  return std::vector<std::string>(pieces.begin(), pieces.end());
}

std::shared_ptr<const SplitPattern> Onig(absl::string_view regex) {
  absl::StatusOr<std::shared_ptr<const SplitPattern>> pattern = SplitPattern::OnigurumaOnly(regex);
  EXPECT_TRUE(pattern.ok()) << pattern.status();
  return pattern.ok() ? *pattern : nullptr;
}

std::shared_ptr<const SplitPattern> Literal(absl::string_view literal) {
  return SplitPattern::Literal(literal).value();
}

PreTokenizerPipeline MustParse(const json& node) {
  absl::StatusOr<PreTokenizerPipeline> pipeline =
      PreTokenizerPipeline::FromJson(node, "t/tokenizer.json", "pre_tokenizer");
  EXPECT_TRUE(pipeline.ok()) << pipeline.status();
  return pipeline.ok() ? *std::move(pipeline) : PreTokenizerPipeline();
}

absl::Status ParseError(const json& node) {
  return PreTokenizerPipeline::FromJson(node, "t/tokenizer.json", "pre_tokenizer").status();
}

// Expected pieces below were worked out by hand from the regex: alternatives tried left to
// right, greedy quantifiers backtracking.
TEST(PreTokenizerPipeline, O200kSplitsCasedWordsContractionsAndDigits) {
  const PreTokenizerPipeline o200k = OneSplit(Onig(kO200kRegex));
  // [Lu]* takes "HTTPS" and [Ll]+ "erver"; contractions stay on their word whatever the case;
  // a lone space before digits stays alone (\s+), digits go in threes; "\n" follows the "!!".
  EXPECT_THAT(Pieces(o200k, "Hello World's HTTPServer isn't 12345!!\n"),
              ElementsAre("Hello", " World's", " HTTPServer", " isn't", " ", "123", "45", "!!\n"));
  // An all-caps word matches only the second alternative; camelCase splits before the capital.
  EXPECT_THAT(Pieces(o200k, "DON'T you'RE camelCase"),
              ElementsAre("DON'T", " you'RE", " camel", "Case"));
  // Punctuation leads a word; \s*[\r\n]+ backtracks to the last newline; "  x" gives back a space.
  EXPECT_THAT(Pieces(o200k, "path/to/file.txt\r\n\r\n  x"),
              ElementsAre("path", "/to", "/file", ".txt", "\r\n\r\n", " ", " x"));
  // Combining marks (\p{M}) stay inside the word; CJK (Lo) is in both classes.
  EXPECT_THAT(Pieces(o200k, "naïve café 中文 e\u0301cole"),
              ElementsAre("naïve", " café", " 中文", " e\u0301cole"));
  EXPECT_THAT(Pieces(o200k, "ok 👍🏽 1234567"),
              ElementsAre("ok", " 👍🏽", " ", "123", "456", "7"));
}

// A corpus of tricky texts plus seeded random strings over a tricky alphabet.
std::vector<std::string> AgreementCorpus() {
  std::vector<std::string> corpus = {
      "",
      "Hello world's  123 !!\n\n  x",
      "I'M here, you'RE 'sa it'll go DON'T we've they'd I'm",
      "Café naïve façade — Ünïcödé ΑΒΓ αβγ Жук e\u0301 combining",
      "中文字符 日本語のテキスト 한국어 ½ ٣ ①②",
      "smile 😀😀 thumbs 👍🏽 family 👨‍👩‍👧 flags 🇫🇷",
      "  leading\n\n\ttabs\r\n  trailing   ",
      "x\r\r\n\n  \t y\u00A0z\u3000w\u2028v\u0085u",
      "12345 6789 3.14159 1,000,000 0x1F",
      "tab\t\tend  \n \n\nline2",
      "'''' ' s 's 'S 'ſ 'll 'LL 'Ll",
      std::string("nul\0byte", 8),
      "\xFF\xFE bad \xC3 more\xE2\x82 end\xF0\x9F",
      "a\xFF"
      "b \xFFword \xC3\xA9\xC3",
  };
  const std::vector<std::string> alphabet = {
      "a",  "Z",      "é",        "ß",    "Ж",    "中",       "ǅ",
      "ʰ",  "\u0301", "0",        "7",    "½",    "٣",        " ",
      "  ", "\t",     "\n",       "\r",   "\r\n", "\u00A0",   "\u3000",
      "!",  ".",      "/",        "'",    "s",    "t",        "re",
      "LL", "😀",      "👍🏽", "\xFF", "\xC3", "\xE2\x82", std::string("\0", 1),
      "-",  "_",      "ſ"};
  std::mt19937 rng(7);
  for (int i = 0; i < 400; ++i) {
    std::string text;
    const int length = 1 + static_cast<int>(rng() % 24);
    for (int j = 0; j < length; ++j) text += alphabet[rng() % alphabet.size()];
    corpus.push_back(text);
  }
  return corpus;
}

TEST(PreTokenizerPipeline, HandWrittenScannersAgreeWithOnigurumaOnTheCorpus) {
  const std::vector<std::string> corpus = AgreementCorpus();
  for (const char* regex :
       {kGpt2PreTokenizerRegex, kQwen2PreTokenizerRegex, kLlama3PreTokenizerRegex}) {
    const PreTokenizerPipeline scanner = OneSplit(SplitPattern::ScannerOnly(regex).value());
    const PreTokenizerPipeline onig = OneSplit(Onig(regex));
    int checked = 0;
    for (const std::string& text : corpus) {
      const std::vector<std::string> expected = Pieces(onig, text);
      ASSERT_EQ(Pieces(scanner, text), expected) << "regex " << regex << " on \"" << text << "\"";
      EXPECT_EQ(absl::StrJoin(expected, ""), text);
      ++checked;
    }
    EXPECT_EQ(checked, static_cast<int>(corpus.size()));
  }
}

TEST(PreTokenizerPipeline, RegexPicksTheScannerOnlyForKnownPatterns) {
  EXPECT_TRUE(SplitPattern::ScannerOnly(kQwen2PreTokenizerRegex).ok());
  EXPECT_EQ(SplitPattern::ScannerOnly(kO200kRegex).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(SplitPattern::Regex(kO200kRegex).ok());
  EXPECT_EQ(SplitPattern::Regex("(").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PreTokenizerPipeline, EachSplitBehaviorKeepsDropsOrMergesMatches) {
  const std::string text = "the-final--countdown";
  EXPECT_THAT(Pieces(OneSplit(Literal("-"), SplitBehavior::kRemoved), text),
              ElementsAre("the", "final", "countdown"));
  EXPECT_THAT(Pieces(OneSplit(Literal("-"), SplitBehavior::kIsolated), text),
              ElementsAre("the", "-", "final", "-", "-", "countdown"));
  EXPECT_THAT(Pieces(OneSplit(Literal("-"), SplitBehavior::kMergedWithPrevious), text),
              ElementsAre("the-", "final-", "-", "countdown"));
  EXPECT_THAT(Pieces(OneSplit(Literal("-"), SplitBehavior::kMergedWithNext), text),
              ElementsAre("the", "-final", "-", "-countdown"));
  EXPECT_THAT(Pieces(OneSplit(Literal("-"), SplitBehavior::kContiguous), text),
              ElementsAre("the", "-", "final", "--", "countdown"));
  // A match at either end.
  EXPECT_THAT(Pieces(OneSplit(Literal("-"), SplitBehavior::kMergedWithPrevious), "-a-"),
              ElementsAre("-", "a-"));
  EXPECT_THAT(Pieces(OneSplit(Literal("-"), SplitBehavior::kMergedWithNext), "-a-"),
              ElementsAre("-a", "-"));
}

TEST(PreTokenizerPipeline, InvertSwapsMatchesAndGaps) {
  // Matches are now the words: Removed keeps only the separators.
  EXPECT_THAT(Pieces(OneSplit(Onig(R"(\s+)"), SplitBehavior::kRemoved, /*invert=*/true),
                     "hello   world\tfoo"),
              ElementsAre("   ", "\t"));
  EXPECT_THAT(Pieces(OneSplit(Onig(R"(\s+)"), SplitBehavior::kRemoved), "hello   world\tfoo"),
              ElementsAre("hello", "world", "foo"));
  EXPECT_THAT(
      Pieces(OneSplit(Literal("-"), SplitBehavior::kMergedWithPrevious, /*invert=*/true), "a-b-c"),
      ElementsAre("a", "-b", "-c"));
}

TEST(PreTokenizerPipeline, EmptyRegexMatchesSplitButLeaveNoEmptyPieces) {
  EXPECT_THAT(Pieces(OneSplit(Onig("")), "abé"), ElementsAre("a", "b", "é"));
  EXPECT_THAT(Pieces(OneSplit(Onig("(?=[A-Z])"), SplitBehavior::kMergedWithNext), "helloWorldFoo"),
              ElementsAre("hello", "World", "Foo"));
}

TEST(PreTokenizerPipeline, LoadsSplitByteLevelDigitsAndPunctuationFromJson) {
  const PreTokenizerPipeline seq = MustParse(
      {{"type", "Sequence"},
       {"pretokenizers",
        {{{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "MergedWithNext"}},
         {{"type", "Digits"}, {"individual_digits", true}},
         {{"type", "Punctuation"}, {"behavior", "Isolated"}},
         {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}});
  EXPECT_TRUE(seq.has_byte_level());
  EXPECT_THAT(Pieces(seq, "Hey, you! ab12 ¿Qué?"),
              ElementsAre("Hey", ",", " you", "!", " ab", "1", "2", " ", "¿", "Qué", "?"));

  const PreTokenizerPipeline runs = MustParse({{"type", "Digits"}, {"individual_digits", false}});
  EXPECT_FALSE(runs.has_byte_level());
  EXPECT_THAT(Pieces(runs, "abc123d4٣٤"), ElementsAre("abc", "123", "d", "4٣٤"));

  const PreTokenizerPipeline byte_level = MustParse({{"type", "ByteLevel"}});
  EXPECT_TRUE(byte_level.add_prefix_space());
  EXPECT_THAT(Pieces(byte_level, "hello world"), ElementsAre(" hello", " world"));

  const PreTokenizerPipeline o200k =
      MustParse({{"type", "Sequence"},
                 {"pretokenizers",
                  {{{"type", "Split"},
                    {"pattern", {{"Regex", kO200kRegex}}},
                    {"behavior", "Isolated"},
                    {"invert", false}},
                   {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}});
  EXPECT_THAT(Pieces(o200k, "DON'T you'RE"), ElementsAre("DON'T", " you'RE"));
}

TEST(PreTokenizerPipeline, RefusesWhatItCannotHonourNamingTheField) {
  EXPECT_THAT(ParseError({{"type", "Metaspace"}}).message(),
              HasSubstr("t/tokenizer.json: field 'pre_tokenizer.type': unsupported pre-tokenizer "
                        "\"Metaspace\""));
  EXPECT_THAT(ParseError({{"type", "Sequence"},
                          {"pretokenizers", {{{"type", "Digits"}}, {{"type", "Whitespace"}}}}})
                  .message(),
              HasSubstr("field 'pre_tokenizer.pretokenizers[1].type'"));
  EXPECT_THAT(ParseError({{"type", "Split"}, {"pattern", {{"Regex", "(a"}}}}).message(),
              HasSubstr("field 'pre_tokenizer.pattern.Regex'"));
  EXPECT_THAT(ParseError({{"type", "Split"}, {"pattern", {{"String", ""}}}}).message(),
              HasSubstr("field 'pre_tokenizer.pattern.String'"));
  EXPECT_THAT(ParseError({{"type", "Split"}, {"pattern", {{"Glob", "*"}}}}).message(),
              HasSubstr("field 'pre_tokenizer.pattern'"));
  EXPECT_THAT(
      ParseError({{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", "Merged"}})
          .message(),
      HasSubstr("field 'pre_tokenizer.behavior': unknown split behavior \"Merged\""));
  EXPECT_THAT(
      ParseError({{"type", "Sequence"},
                  {"pretokenizers",
                   {{{"type", "Digits"}}, {{"type", "ByteLevel"}, {"add_prefix_space", true}}}}})
          .message(),
      HasSubstr("field 'pre_tokenizer.pretokenizers[1].add_prefix_space'"));
}

TEST(PreTokenizerPipeline, SplitsInvalidUtf8WithoutLosingBytes) {
  const std::string text = "ok\xFF\xFE go\xC3 \xE2\x82!";
  for (const PreTokenizerPipeline& pipeline :
       {OneSplit(Onig(kO200kRegex)), OneSplit(SplitPattern::Digit()),
        OneSplit(SplitPattern::Punctuation()), OneSplit(Literal("go"))}) {
    EXPECT_EQ(absl::StrJoin(Pieces(pipeline, text), ""), text);
  }
  EXPECT_THAT(Pieces(OneSplit(Onig(kO200kRegex)), text),
              ElementsAre("ok", "\xFF\xFE", " go", "\xC3", " \xE2\x82!"));
}

TEST(PreTokenizerPipeline, RandomBytesNeverCrashAndAlwaysConcatenateBack) {
  const PreTokenizerPipeline o200k = OneSplit(Onig(kO200kRegex));
  const PreTokenizerPipeline qwen2 = OneSplit(Onig(kQwen2PreTokenizerRegex));
  std::mt19937 rng(11);
  for (int i = 0; i < 500; ++i) {
    std::string text(1 + rng() % 40, '\0');
    for (char& c : text) c = static_cast<char>(rng() % 256);
    EXPECT_EQ(absl::StrJoin(Pieces(o200k, text), ""), text);
    EXPECT_EQ(Pieces(qwen2, text),
              Pieces(OneSplit(SplitPattern::ScannerOnly(kQwen2PreTokenizerRegex).value()), text));
  }
}

}  // namespace
}  // namespace troupe::models
