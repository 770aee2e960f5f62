#include "models/tokenizers/normalizer.h"

#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace troupe::models {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

Normalizer MustParse(const json& node) {
  absl::StatusOr<Normalizer> normalizer =
      Normalizer::FromJson(node, "t/tokenizer.json", "normalizer");
  EXPECT_TRUE(normalizer.ok()) << normalizer.status();
  return normalizer.ok() ? *std::move(normalizer) : Normalizer();
}

std::string Normalized(const Normalizer& normalizer, absl::string_view text) {
  std::string out;
  const absl::Status status = normalizer.Normalize(text, &out);
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

absl::Status ParseError(const json& node) {
  return Normalizer::FromJson(node, "t/tokenizer.json", "normalizer").status();
}

TEST(Normalizer, NullIsTheIdentity) {
  const Normalizer identity = MustParse(nullptr);
  EXPECT_TRUE(identity.empty());
  EXPECT_EQ(Normalized(identity, "e\u0301 \xFF"), "e\u0301 \xFF");
}

TEST(Normalizer, AppliesTheFourUnicodeNormalizationForms) {
  const Normalizer nfc = MustParse({{"type", "NFC"}});
  const Normalizer nfd = MustParse({{"type", "NFD"}});
  const Normalizer nfkc = MustParse({{"type", "NFKC"}});
  const Normalizer nfkd = MustParse({{"type", "NFKD"}});
  // é decomposed (e + COMBINING ACUTE) composes under NFC; Å + dot below reorders marks.
  EXPECT_EQ(Normalized(nfc,
                       "caf"
                       "e\u0301"),
            "caf\u00E9");
  EXPECT_EQ(Normalized(nfc, "\u00E9"), "\u00E9");
  EXPECT_EQ(Normalized(nfd, "caf\u00E9"), "cafe\u0301");
  // Hangul syllables: 한 = ᄒ ᅡ ᆫ.
  EXPECT_EQ(Normalized(nfd, "\uD55C"), "\u1112\u1161\u11AB");
  EXPECT_EQ(Normalized(nfc, "\u1112\u1161\u11AB"), "\uD55C");
  // Compatibility forms fold only under NFK*: ligature fi, circled 1, fullwidth A, superscript 2.
  EXPECT_EQ(Normalized(nfc, "\uFB01 \u2460 \uFF21 x\u00B2"), "\uFB01 \u2460 \uFF21 x\u00B2");
  EXPECT_EQ(Normalized(nfkc, "\uFB01 \u2460 \uFF21 x\u00B2"), "fi 1 A x2");
  EXPECT_EQ(Normalized(nfkd, "\uFB01 \u00E9"), "fi e\u0301");
  // The Kelvin sign is a canonical singleton: even NFC maps it to K.
  EXPECT_EQ(Normalized(nfc, "\u212A"), "K");
  EXPECT_EQ(Normalized(nfkc, "plain ASCII text\n"), "plain ASCII text\n");
}

TEST(Normalizer, LowercasesAllScriptsWithFinalSigma) {
  const Normalizer lower = MustParse({{"type", "Lowercase"}});
  EXPECT_EQ(Normalized(lower, "HELLO World"), "hello world");
  EXPECT_EQ(Normalized(lower, "ÜNÏCÖDÉ ЖУК ΟΔΟΣ"), "ünïcödé жук οδος");
  // Capital I with dot above lowercases to i + combining dot (root locale), as in Rust.
  EXPECT_EQ(Normalized(lower, "\u0130"), "i\u0307");
}

TEST(Normalizer, ReplacesLiteralsAndRegexMatches) {
  const Normalizer spaces =
      MustParse({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}});
  EXPECT_EQ(Normalized(spaces, "a b  c"), "a\u2581b\u2581\u2581c");
  const Normalizer runs =
      MustParse({{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}});
  EXPECT_EQ(Normalized(runs, "a  b     c d"), "a b c d");
  const Normalizer erase =
      MustParse({{"type", "Replace"}, {"pattern", {{"String", "``"}}}, {"content", ""}});
  EXPECT_EQ(Normalized(erase, "``quote``"), "quote");
}

TEST(Normalizer, PrependsOnlyToNonEmptyTextAndRunsSequencesInOrder) {
  const Normalizer prepend = MustParse({{"type", "Prepend"}, {"prepend", "\u2581"}});
  EXPECT_EQ(Normalized(prepend, "hey"), "\u2581hey");
  EXPECT_EQ(Normalized(prepend, ""), "");
  const Normalizer sentencepiece_like =
      MustParse({{"type", "Sequence"},
                 {"normalizers",
                  {{{"type", "Prepend"}, {"prepend", "\u2581"}},
                   {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}},
                   {{"type", "NFKC"}},
                   {{"type", "Lowercase"}}}}});
  EXPECT_EQ(Normalized(sentencepiece_like, "Hello \uFF37orld"), "\u2581hello\u2581world");
}

TEST(Normalizer, PassesInvalidBytesThroughAndNormalizesTheValidStretches) {
  const Normalizer nfc = MustParse({{"type", "NFC"}});
  EXPECT_EQ(Normalized(nfc,
                       "e\u0301\xFF"
                       "e\u0301\xC3"),
            "\u00E9\xFF\u00E9\xC3");
  // An invalid byte separates a base letter from a following mark: they do not compose.
  EXPECT_EQ(Normalized(nfc, "e\xFF\u0301"), "e\xFF\u0301");
  const Normalizer lower = MustParse({{"type", "Lowercase"}});
  EXPECT_EQ(Normalized(lower, "\xE2\x82\xC9\xFFÉ"), "\xE2\x82\xC9\xFF\u00E9");
  EXPECT_EQ(Normalized(lower, std::string("A\0B", 3)), std::string("a\0b", 3));
}

TEST(Normalizer, RefusesWhatItCannotHonourNamingTheField) {
  EXPECT_THAT(ParseError({{"type", "BertNormalizer"}}).message(),
              HasSubstr("t/tokenizer.json: field 'normalizer.type': unsupported normalizer "
                        "\"BertNormalizer\""));
  EXPECT_THAT(
      ParseError({{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Strip"}}}}})
          .message(),
      HasSubstr("field 'normalizer.normalizers[1].type'"));
  EXPECT_THAT(ParseError({{"type", "Sequence"}}).message(),
              HasSubstr("field 'normalizer.normalizers'"));
  EXPECT_THAT(
      ParseError({{"type", "Replace"}, {"pattern", {{"String", ""}}}, {"content", "x"}}).message(),
      HasSubstr("field 'normalizer.pattern.String'"));
  EXPECT_THAT(
      ParseError({{"type", "Replace"}, {"pattern", {{"Regex", "(x"}}}, {"content", "x"}}).message(),
      HasSubstr("field 'normalizer.pattern.Regex'"));
  EXPECT_THAT(ParseError({{"type", "Replace"}, {"pattern", {{"String", "a"}}}}).message(),
              HasSubstr("field 'normalizer.content'"));
  EXPECT_THAT(ParseError({{"type", "Prepend"}}).message(), HasSubstr("field 'normalizer.prepend'"));
  EXPECT_THAT(ParseError("NFC").message(), HasSubstr("field 'normalizer': expected an object"));
}

TEST(Normalizer, NormalizesConcurrently) {
  const Normalizer nfc = MustParse(
      {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Lowercase"}}}}});
  std::string text;
  for (int i = 0; i < 300; ++i) text += "CAFE\u0301 Ünïcödé ";
  const std::string expected = Normalized(nfc, text);
  std::vector<int> ok(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        std::string out;
        if (!nfc.Normalize(text, &out).ok() || out != expected) return;
      }
      ok[t] = 1;
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(ok, std::vector<int>(4, 1));
}

}  // namespace
}  // namespace troupe::models
