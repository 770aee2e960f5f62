#include "models/tokenizers/tokenizer.h"

#include <sys/stat.h>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/file_util.h"
#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/tokenizers/char_tokenizer.h"
#include "models/tokenizers/test_tokenizer_files.h"
#include "nlohmann/json.hpp"

namespace troupe::models {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

// A byte-level BPE file over the symbols of "ab " only: merges a b -> ab, Ġ ab -> Ġab.
constexpr char kTinyBpe[] = R"({
  "added_tokens": [{"id": 5, "content": "</s>", "special": true}],
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
  "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "Ġ": 2, "ab": 3, "Ġab": 4},
            "merges": ["a b", "Ġ ab"]}
})";

class LoadTokenizerTest : public ::testing::Test {
 protected:
  // A fresh directory in the test's temporary directory.
  std::string Dir(const std::string& name) {
    const std::string dir = tmp_.Path(name);
    std::filesystem::create_directories(dir);
    return dir;
  }
  static std::string Write(const std::string& path, const std::string& contents) {
    test::WriteFile(path, contents);
    return path;
  }

  test::TempDir tmp_{"tokenizer"};
};

TEST_F(LoadTokenizerTest, LoadsAHuggingFaceTokenizerJsonAsBpe) {
  const std::string path = Write(Dir("bpe") + "/tokenizer.json", kTinyBpe);
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = LoadTokenizer(path);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_THAT((*tok)->Encode("ab ab</s>").value(), ElementsAre(3, 4, 5));
  EXPECT_EQ((*tok)->Decode({3, 4, 5}).value(), "ab ab</s>");
  EXPECT_FALSE((*tok)->eos_id().has_value());  // no tokenizer_config.json beside it
}

TEST_F(LoadTokenizerTest, ReadsSpecialIdsFromTheConfigBesideIt) {
  const std::string dir = Dir("with_config");
  Write(dir + "/tokenizer.json", kTinyBpe);
  Write(dir + "/tokenizer_config.json", R"({"eos_token": "</s>", "pad_token": "</s>"})");
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = LoadTokenizer(dir);  // a directory works too
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->eos_id(), 5);
  EXPECT_EQ((*tok)->pad_id(), 5);
  EXPECT_FALSE((*tok)->bos_id().has_value());

  Write(dir + "/tokenizer_config.json", R"({"bos_token": "<s>"})");
  absl::Status bad = LoadTokenizer(dir).status();
  EXPECT_THAT(bad.message(), HasSubstr(dir + "/tokenizer_config.json: field 'bos_token'"));
}

TEST_F(LoadTokenizerTest, LoadsACharTokenizerFile) {
  const std::string path =
      Write(Dir("chars") + "/chars.json", R"({"type": "char", "alphabet": "0123456789+="})");
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = LoadTokenizer(path);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_THAT((*tok)->Encode("<bos>1+1=2<eos>").value(), ElementsAre(1, 4, 13, 4, 14, 5, 2));
  EXPECT_EQ((*tok)->vocab_size(), 15);
}

TEST_F(LoadTokenizerTest, RefusesBadFilesNamingTheFileAndField) {
  const std::string dir = Dir("bad");
  const auto message = [&](const std::string& name, const std::string& contents) {
    const std::string path = Write(dir + "/" + name, contents);
    absl::Status status = LoadTokenizer(path).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(std::string(status.message()), HasSubstr(path)) << name;
    return std::string(status.message());
  };
  EXPECT_THAT(message("wordpiece.json", R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}})"),
              HasSubstr("field 'model.type'"));
  EXPECT_THAT(message("novocab.json", R"({"model": {"type": "BPE", "merges": []}})"),
              HasSubstr("field 'model.vocab': missing"));
  EXPECT_THAT(message("broken.json", R"({"model": {"type": "BPE", "vocab": {)"),
              HasSubstr("malformed JSON"));
  EXPECT_THAT(message("badmerge.json",
                      R"({"pre_tokenizer": {"type": "ByteLevel"},
                          "model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a q"]}})"),
              HasSubstr("field 'model.merges[0]': token \"q\""));
  EXPECT_THAT(message("other.json", R"({"vocab_size": 10})"), HasSubstr("field 'model'"));
}

TEST_F(LoadTokenizerTest, ReportsMissingFilesAsNotFound) {
  absl::Status status = LoadTokenizer(Dir("missing") + "/nope.json").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("nope.json"));
  // A directory without tokenizer.json.
  status = LoadTokenizer(Dir("empty_dir")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("empty_dir/tokenizer.json"));
}

TEST_F(LoadTokenizerTest, ABpeTokenizerWrittenOutLoadsBackEncodingEveryTextIdentically) {
  absl::StatusOr<std::string> source = WriteTestBpeTokenizer(Dir("rich_source"));
  ASSERT_TRUE(source.ok()) << source.status();
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = LoadTokenizer(*source);
  ASSERT_TRUE(tok.ok()) << tok.status();
  absl::StatusOr<std::string> tokenizer_json = (*tok)->ToTokenizerJson();
  ASSERT_TRUE(tokenizer_json.ok()) << tokenizer_json.status();
  absl::StatusOr<std::string> config_json = (*tok)->ToTokenizerConfigJson("");
  ASSERT_TRUE(config_json.ok()) << config_json.status();
  // Written from the object, not copied: the source text is formatted differently.
  EXPECT_TRUE(*tokenizer_json != ReadFileToString(*source + "/tokenizer.json").value());

  const std::string saved = Dir("rich_saved");
  Write(saved + "/tokenizer.json", *tokenizer_json);
  Write(saved + "/tokenizer_config.json", *config_json);
  absl::StatusOr<std::unique_ptr<Tokenizer>> back = LoadTokenizer(saved);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)->kind(), "bpe");
  EXPECT_EQ((*back)->vocab_size(), (*tok)->vocab_size());
  EXPECT_EQ((*back)->bos_id(), (*tok)->bos_id());
  EXPECT_EQ((*back)->eos_id(), (*tok)->eos_id());
  EXPECT_EQ((*back)->pad_id(), (*tok)->pad_id());
  ASSERT_EQ((*tok)->eos_id(), (*tok)->TokenId("<|im_end|>").value());
  for (const std::string& text : TokenizerTestTexts()) {
    for (bool special : {true, false}) {
      absl::StatusOr<std::vector<int32_t>> want =
          (*tok)->Encode(text, {.match_special_tokens = special});
      ASSERT_TRUE(want.ok()) << want.status();
      EXPECT_EQ((*back)->Encode(text, {.match_special_tokens = special}).value(), *want) << text;
      EXPECT_EQ((*back)->Decode(*want).value(), (*tok)->Decode(*want).value()) << text;
    }
  }
  // NFKC ran on the way in, both times: "ﬁ" is "fi".
  EXPECT_EQ((*back)->Encode("\xEF\xAC\x81").value(), (*back)->Encode("fi").value());
  for (int32_t id = 0; id < (*tok)->vocab_size(); ++id) {
    EXPECT_EQ((*back)->IsSpecialToken(id), (*tok)->IsSpecialToken(id)) << id;
  }

  // The configuration keeps the keys the tokenizer does not define.
  const json config = json::parse(*config_json);
  EXPECT_EQ(config["chat_template"], std::string(kTestChatTemplate));
  EXPECT_EQ(config["model_max_length"], 512);
  EXPECT_EQ(config["eos_token"], std::string("<|im_end|>"));
  EXPECT_EQ(config["bos_token"], std::string("<|endoftext|>"));
  // Saving the reloaded tokenizer gives the same files again.
  EXPECT_TRUE((*back)->ToTokenizerJson().value() == *tokenizer_json);
  EXPECT_EQ((*back)->ToTokenizerConfigJson("").value(), *config_json);
}

TEST_F(LoadTokenizerTest, ByteLevelDecodeCanReplaceACutCharacterForProtobufStrings) {
  absl::StatusOr<std::string> source = WriteTestBpeTokenizer(Dir("cut_utf8"));
  ASSERT_TRUE(source.ok()) << source.status();
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = LoadTokenizer(*source);
  ASSERT_TRUE(tok.ok()) << tok.status();
  absl::StatusOr<std::vector<int32_t>> ids = (*tok)->Encode("x\xC3\xA9");  // x é
  ASSERT_TRUE(ids.ok()) << ids.status();
  ASSERT_GE(ids->size(), 2u);
  // Without the last byte's token the text ends inside "é": raw bytes by default (not UTF-8),
  // U+FFFD for each stray byte when asked.
  const std::vector<int32_t> cut(ids->begin(), ids->end() - 1);
  absl::StatusOr<std::string> raw = (*tok)->Decode(cut);
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_EQ(*raw, "x\xC3");
  EXPECT_EQ((*tok)->Decode(cut, {.replace_invalid_utf8 = true}).value(), "x\xEF\xBF\xBD");
  EXPECT_EQ((*tok)->Decode(*ids, {.replace_invalid_utf8 = true}).value(), "x\xC3\xA9");
}

TEST_F(LoadTokenizerTest, ABpeConfigIsWrittenOverTheGivenBaseWithItsOwnSpecialTokens) {
  absl::StatusOr<std::string> source = WriteTestBpeTokenizer(Dir("rich_base"));
  ASSERT_TRUE(source.ok()) << source.status();
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = LoadTokenizer(*source);
  ASSERT_TRUE(tok.ok()) << tok.status();
  absl::StatusOr<std::string> written = (*tok)->ToTokenizerConfigJson(
      R"({"chat_template": "{{ x }}", "eos_token": "<|endoftext|>", "note": 7})");
  ASSERT_TRUE(written.ok()) << written.status();
  const json config = json::parse(*written);
  EXPECT_EQ(config["chat_template"], std::string("{{ x }}"));
  EXPECT_EQ(config["note"], 7);
  EXPECT_FALSE(config.contains("model_max_length"));          // the base replaces the loaded config
  EXPECT_EQ(config["eos_token"], std::string("<|im_end|>"));  // the tokenizer's, not the base's
  EXPECT_EQ(config["added_tokens_decoder"]["303"]["content"], std::string("[TOOL]"));

  absl::StatusOr<std::string> bad = (*tok)->ToTokenizerConfigJson("[1, 2]");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("tokenizer_config.json"));
}

TEST_F(LoadTokenizerTest, ACharTokenizerIsWrittenAsItsFileAndCarriesAConfigUnchanged) {
  absl::StatusOr<std::unique_ptr<CharTokenizer>> chars =
      CharTokenizer::Create("ab\xC3\xA9", {.special_tokens = {"<pad>", "<s>", "</s>"},
                                           .pad_token = "<pad>",
                                           .bos_token = "<s>",
                                           .eos_token = "</s>"});
  ASSERT_TRUE(chars.ok()) << chars.status();
  const Tokenizer& tok = **chars;
  EXPECT_EQ(tok.kind(), "char");
  absl::StatusOr<std::string> text = tok.ToTokenizerJson();
  ASSERT_TRUE(text.ok()) << text.status();
  absl::StatusOr<std::unique_ptr<Tokenizer>> back =
      LoadTokenizer(Write(Dir("char_saved") + "/tokenizer.json", *text));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)->Encode("<s>ab\xC3\xA9</s>").value(), tok.Encode("<s>ab\xC3\xA9</s>").value());
  EXPECT_EQ((*back)->eos_id(), tok.eos_id());
  EXPECT_EQ(tok.ToTokenizerConfigJson("").value(), "");
  const std::string config = R"({"chat_template": "{{ messages }}"})";
  EXPECT_EQ(tok.ToTokenizerConfigJson(config).value(), config);
  EXPECT_EQ(tok.ToTokenizerConfigJson("nope").status().code(), absl::StatusCode::kInvalidArgument);
}

// A tokenizer kind that does not implement writing.
class OpaqueTokenizer final : public Tokenizer {
 public:
  using Tokenizer::Decode;
  using Tokenizer::Encode;
  absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view,
                                              const EncodeOptions&) const override {
    return std::vector<int32_t>{};
  }
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t>,
                                     const DecodeOptions&) const override {
    return std::string();
  }
  int32_t vocab_size() const override { return 0; }
  absl::StatusOr<int32_t> TokenId(absl::string_view) const override {
    return absl::NotFoundError("none");
  }
  absl::StatusOr<std::string> TokenText(int32_t) const override {
    return absl::InvalidArgumentError("none");
  }
  bool IsSpecialToken(int32_t) const override { return false; }
  std::optional<int32_t> bos_id() const override { return std::nullopt; }
  std::optional<int32_t> eos_id() const override { return std::nullopt; }
  std::optional<int32_t> pad_id() const override { return std::nullopt; }
  absl::string_view kind() const override { return "opaque"; }
};

TEST(Tokenizer, AKindWithoutWritingIsUnimplementedNamingTheKind) {
  const OpaqueTokenizer tok;
  absl::Status json_status = tok.ToTokenizerJson().status();
  EXPECT_EQ(json_status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(json_status.message()), HasSubstr("opaque tokenizer"));
  absl::Status config_status = tok.ToTokenizerConfigJson("{}").status();
  EXPECT_EQ(config_status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(config_status.message()), HasSubstr("opaque tokenizer"));
}

}  // namespace
}  // namespace troupe::models
