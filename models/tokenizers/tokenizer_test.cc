#include "models/tokenizers/tokenizer.h"

#include <sys/stat.h>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::models {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

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
  // A fresh directory under the test's temporary directory.
  std::string Dir(const std::string& name) {
    const char* tmp = std::getenv("TEST_TMPDIR");
    const std::string dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name);
    ::mkdir(dir.c_str(), 0755);
    return dir;
  }
  static std::string Write(const std::string& path, const std::string& contents) {
    std::FILE* file = std::fopen(path.c_str(), "wb");
    EXPECT_NE(file, nullptr) << path;
    if (file != nullptr) {
      std::fwrite(contents.data(), 1, contents.size(), file);
      std::fclose(file);
    }
    return path;
  }
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

}  // namespace
}  // namespace troupe::models
