#include "models/tokenizers/char_tokenizer.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::models {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::unique_ptr<CharTokenizer> Arithmetic() {
  absl::StatusOr<std::unique_ptr<CharTokenizer>> tok = CharTokenizer::Create("0123456789+=");
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? std::move(*tok) : nullptr;
}

TEST(CharTokenizer, NumbersSpecialTokensFirstThenTheAlphabet) {
  auto tok = Arithmetic();
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 15);
  EXPECT_EQ(tok->pad_id(), 0);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_EQ(tok->TokenId("0").value(), 3);
  EXPECT_EQ(tok->TokenId("=").value(), 14);
  EXPECT_EQ(tok->TokenId("<eos>").value(), 2);
  EXPECT_EQ(tok->TokenId("x").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(tok->TokenText(13).value(), "+");
  EXPECT_TRUE(tok->IsSpecialToken(1));
  EXPECT_FALSE(tok->IsSpecialToken(3));
}

TEST(CharTokenizer, RoundTripsArithmeticWithSpecialTokens) {
  auto tok = Arithmetic();
  ASSERT_NE(tok, nullptr);
  absl::StatusOr<std::vector<int32_t>> ids = tok->Encode("<bos>12+34=46<eos>");
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_THAT(*ids, ElementsAre(1, 4, 5, 13, 6, 7, 14, 7, 9, 2));
  EXPECT_EQ(tok->Decode(*ids).value(), "<bos>12+34=46<eos>");
  DecodeOptions skip;
  skip.skip_special_tokens = true;
  EXPECT_EQ(tok->Decode(*ids, skip).value(), "12+34=46");
}

TEST(CharTokenizer, NamesTheCharacterAndPositionOutsideTheAlphabet) {
  auto tok = Arithmetic();
  ASSERT_NE(tok, nullptr);
  absl::StatusOr<std::vector<int32_t>> ids = tok->Encode("12+3x=4");
  EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ids.status().message(),
              HasSubstr("character 'x' (U+0078) at character 4 (byte offset 4)"));
  // A special token counts as one character; its bytes still count in the offset.
  ids = tok->Encode("<bos>1 2");
  EXPECT_THAT(ids.status().message(), HasSubstr("U+0020 at character 2 (byte offset 6)"));
  // With special-token matching off, "<" is just an unknown character.
  EncodeOptions plain;
  plain.match_special_tokens = false;
  ids = tok->Encode("<bos>1", plain);
  EXPECT_THAT(ids.status().message(), HasSubstr("'<' (U+003C) at character 0"));
  ids = tok->Encode("1\xFF");
  EXPECT_THAT(ids.status().message(), HasSubstr("invalid UTF-8 byte 0xFF at character 1"));
}

TEST(CharTokenizer, HandlesMultiByteAlphabets) {
  CharTokenizerOptions options;
  options.special_tokens = {"<eos>"};
  options.pad_token = "";
  options.bos_token = "";
  absl::StatusOr<std::unique_ptr<CharTokenizer>> tok = CharTokenizer::Create("αβγ中😀", options);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->eos_id(), 0);
  EXPECT_FALSE((*tok)->pad_id().has_value());
  EXPECT_THAT((*tok)->Encode("γ😀中<eos>").value(), ElementsAre(3, 5, 4, 0));
  EXPECT_EQ((*tok)->Decode({3, 5, 4, 0}).value(), "γ😀中<eos>");
  EXPECT_THAT((*tok)->Encode("αβδ").status().message(),
              HasSubstr("'δ' (U+03B4) at character 2 (byte offset 4)"));
}

TEST(CharTokenizer, RejectsIdsOutsideTheVocabularyOnDecode) {
  auto tok = Arithmetic();
  ASSERT_NE(tok, nullptr);
  absl::StatusOr<std::string> text = tok->Decode({3, 15});
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(text.status().message(), HasSubstr("id 15 at index 1"));
}

TEST(CharTokenizer, RefusesInconsistentDefinitions) {
  EXPECT_EQ(CharTokenizer::Create("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(CharTokenizer::Create("abca").status().message(), HasSubstr("'a' (U+0061)"));
  EXPECT_THAT(CharTokenizer::Create("ab\xFF").status().message(), HasSubstr("UTF-8"));
  CharTokenizerOptions single;
  single.special_tokens = {"<pad>", "<bos>", "<eos>", "+"};
  EXPECT_THAT(CharTokenizer::Create("1+1", single).status().message(),
              HasSubstr("both in the alphabet and a special token"));
  CharTokenizerOptions unlisted;
  unlisted.eos_token = "</s>";
  EXPECT_THAT(CharTokenizer::Create("ab", unlisted).status().message(), HasSubstr("eos_token"));
}

TEST(CharTokenizer, SavesAndLoadsItsJsonForm) {
  auto tok = Arithmetic();
  ASSERT_NE(tok, nullptr);
  absl::StatusOr<std::unique_ptr<CharTokenizer>> again =
      CharTokenizer::FromJson(tok->ToJson(), "saved.json");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)->alphabet(), "0123456789+=");
  EXPECT_EQ((*again)->vocab_size(), tok->vocab_size());
  EXPECT_EQ((*again)->eos_id(), 2);
  EXPECT_EQ((*again)->Encode("<bos>9+9=18").value(), tok->Encode("<bos>9+9=18").value());
}

TEST(CharTokenizer, ReadsDefaultsAndNullsFromJson) {
  absl::StatusOr<std::unique_ptr<CharTokenizer>> tok = CharTokenizer::FromJson(
      R"({"type": "char", "alphabet": "ab", "special_tokens": ["<eos>", "<sep>"],
          "bos_token": null})",
      "c.json");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->eos_id(), 0);              // conventional name, listed
  EXPECT_FALSE((*tok)->pad_id().has_value());  // conventional name, not listed
  EXPECT_FALSE((*tok)->bos_id().has_value());  // explicit null
  EXPECT_THAT((*tok)->Encode("a<sep>b").value(), ElementsAre(2, 1, 3));
}

TEST(CharTokenizer, RefusesBadJsonNamingTheFileAndField) {
  const auto error = [](absl::string_view json) {
    return CharTokenizer::FromJson(json, "dir/chars.json").status();
  };
  EXPECT_THAT(error(R"({"type": "char"})").message(),
              HasSubstr("dir/chars.json: field 'alphabet': missing"));
  EXPECT_THAT(error(R"({"type": "chars", "alphabet": "ab"})").message(),
              HasSubstr("dir/chars.json: field 'type'"));
  EXPECT_THAT(error(R"({"type": "char", "alphabet": "ab", "eos_token": "</s>"})").message(),
              HasSubstr("dir/chars.json: field 'eos_token'"));
  EXPECT_THAT(error(R"({"type": "char", "alphabet": "ab", "special_tokens": [1]})").message(),
              HasSubstr("dir/chars.json: field 'special_tokens[0]'"));
  EXPECT_THAT(error(R"({"type": "char", "alphabet": "aba"})").message(),
              HasSubstr("dir/chars.json: char tokenizer: character 'a'"));
  EXPECT_THAT(error(R"({"type": "char", "alphabet": )").message(),
              HasSubstr("dir/chars.json: malformed JSON"));
}

}  // namespace
}  // namespace troupe::models
