#include "models/tokenizers/unicode.h"

#include <string>

#include "gtest/gtest.h"

namespace troupe::models::unicode {
namespace {

TEST(Unicode, ClassifiesLettersAcrossScripts) {
  for (char32_t cp : {U'A', U'z', U'é', U'ß', U'Ω', U'ж', U'Ж', U'中', U'字', U'한', U'あ', U'ア',
                      U'ا', U'א', U'ｶ', U'ª', U'𐐀'}) {
    EXPECT_EQ(Classify(cp), CharClass::kLetter) << "U+" << std::hex << static_cast<int>(cp);
  }
}

TEST(Unicode, ClassifiesDecimalLetterAndOtherNumbers) {
  for (char32_t cp : {U'0', U'9', U'٣', U'１', U'Ⅷ', U'½', U'²', U'①'}) {
    EXPECT_EQ(Classify(cp), CharClass::kNumber) << "U+" << std::hex << static_cast<int>(cp);
  }
}

TEST(Unicode, WhitespaceIsTheWhiteSpaceProperty) {
  for (char32_t cp :
       {U' ', U'\t', U'\n', U'\v', U'\f', U'\r', U'\u0085', U'\u00A0', U'\u1680', U'\u2000',
        U'\u2009', U'\u200A', U'\u2028', U'\u2029', U'\u202F', U'\u205F', U'\u3000'}) {
    EXPECT_EQ(Classify(cp), CharClass::kWhitespace) << "U+" << std::hex << static_cast<int>(cp);
  }
  // Zero-width space, BOM and the Mongolian vowel separator are not White_Space.
  for (char32_t cp : {U'\u200B', U'\uFEFF', U'\u180E'}) {
    EXPECT_EQ(Classify(cp), CharClass::kOther) << "U+" << std::hex << static_cast<int>(cp);
  }
}

TEST(Unicode, PunctuationSymbolsMarksAndEmojiAreOther) {
  for (char32_t cp :
       {U'!', U'\'', U'_', U'—', U'…', U'€', U'\u0301', U'😀', U'\u0000', U'\u007F', U'。', U'，'}) {
    EXPECT_EQ(Classify(cp), CharClass::kOther) << "U+" << std::hex << static_cast<int>(cp);
  }
  EXPECT_EQ(Classify(kInvalidCodePoint), CharClass::kOther);
}

TEST(Unicode, ReplacesEachInvalidByteWithTheReplacementCharacter) {
  EXPECT_EQ(ReplaceInvalidUtf8("a\xC3\xA9z"), "a\xC3\xA9z");  // valid: unchanged
  // A cut two-byte sequence, a stray continuation byte, and 0xFF.
  EXPECT_EQ(ReplaceInvalidUtf8("a\xC3"), "a\xEF\xBF\xBD");
  EXPECT_EQ(ReplaceInvalidUtf8("\xA9"
                               "b"
                               "\xFF"),
            "\xEF\xBF\xBD"
            "b"
            "\xEF\xBF\xBD");
  EXPECT_TRUE(IsValidUtf8(ReplaceInvalidUtf8("\xE4\xB8x\xF0\x9F\x98")));
}

TEST(Unicode, DecodesOneToFourByteSequences) {
  const std::string text = "a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80";  // a é 中 😀
  DecodedChar c = DecodeUtf8(text, 0);
  EXPECT_EQ(c.code_point, U'a');
  EXPECT_EQ(c.length, 1);
  c = DecodeUtf8(text, 1);
  EXPECT_EQ(c.code_point, U'é');
  EXPECT_EQ(c.length, 2);
  c = DecodeUtf8(text, 3);
  EXPECT_EQ(c.code_point, U'中');
  EXPECT_EQ(c.length, 3);
  c = DecodeUtf8(text, 6);
  EXPECT_EQ(c.code_point, U'😀');
  EXPECT_EQ(c.length, 4);
  EXPECT_EQ(DecodeUtf8(text, text.size()).length, 0);
}

TEST(Unicode, RejectsMalformedSequencesOneByteAtATime) {
  for (const std::string& bad : {std::string("\x80"), std::string("\xC0\x80"),  // stray, overlong
                                 std::string("\xED\xA0\x80"),                   // surrogate
                                 std::string("\xE4\xB8"),                       // truncated
                                 std::string("\xF4\x90\x80\x80"),               // > U+10FFFF
                                 std::string("\xFF"), std::string("\xC3\x41")}) {
    const DecodedChar c = DecodeUtf8(bad, 0);
    EXPECT_EQ(c.code_point, kInvalidCodePoint) << bad;
    EXPECT_EQ(c.length, 1) << bad;
    EXPECT_FALSE(IsValidUtf8(bad)) << bad;
  }
  EXPECT_TRUE(IsValidUtf8("plain ascii, é, 中, 😀"));
}

TEST(Unicode, AppendUtf8InvertsDecode) {
  for (char32_t cp : {U'\u0000', U'\u007F', U'\u0080', U'\u07FF', U'\u0800', U'\uFFFD',
                      U'\U00010000', U'\U0010FFFF'}) {
    std::string text;
    AppendUtf8(cp, &text);
    const DecodedChar c = DecodeUtf8(text, 0);
    EXPECT_EQ(c.code_point, cp);
    EXPECT_EQ(static_cast<size_t>(c.length), text.size());
  }
}

}  // namespace
}  // namespace troupe::models::unicode
