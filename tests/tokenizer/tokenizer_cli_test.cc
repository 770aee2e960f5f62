// `troupe tokenizer train` end to end: corpora in every accepted form, the written tokenizer
// loaded through LoadTokenizer, the refusals (bad records, a foreign output directory), and
// `troupe tokenizer encode`.
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/tokenizers/tokenizer.h"
#include "nlohmann/json.hpp"
#include "tests/cluster/process.h"

namespace troupe::tests {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using json = nlohmann::json;

constexpr char kTroupe[] = "cli/troupe";

// A new, empty directory `name` in this binary's temporary directory (removed when it exits).
std::string TestDir(const std::string& name) {
  static test::TempDir root("tokenizer_cli");
  const std::string dir = root.Path(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Short arithmetic and English-like documents, one per entry.
std::vector<std::string> Documents() {
  std::vector<std::string> docs;
  for (int i = 0; i < 150; ++i) {
    docs.push_back(absl::StrCat("What is ", i * 7 % 97, " plus ", i * 13 % 89, "? The answer is ",
                                i * 7 % 97 + i * 13 % 89, "."));
    docs.push_back(absl::StrCat("the quick brown fox number ", i, " jumps over the lazy dog's ",
                                i % 3 == 0 ? "tail" : "back", ", naïve café"));
  }
  return docs;
}

std::pair<int, std::string> Troupe(const std::string& dir, std::vector<std::string> args) {
  args.insert(args.begin(), kTroupe);
  return RunCommand(args, dir + "/troupe.log", absl::Seconds(120));
}

TEST(TokenizerCli, TrainsFromTextAndJsonlAndLoadsBackThroughLoadTokenizer) {
  const std::string dir = TestDir("train");
  const std::vector<std::string> docs = Documents();
  std::string text;
  std::string jsonl;
  for (size_t i = 0; i < docs.size(); ++i) {
    if (i % 2 == 0) {
      text += docs[i] + "\n";
    } else {
      jsonl += json({{"text", docs[i]}, {"id", i}}).dump() + "\n";
    }
  }
  test::WriteFile(dir + "/a.txt", text);
  test::WriteFile(dir + "/b.jsonl", jsonl);
  const auto [code, out] = Troupe(dir, {"tokenizer", "train", "--vocab-size", "320", "--out",
                                        dir + "/tok", dir + "/a.txt", dir + "/b.jsonl"});
  ASSERT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("merges/s"));
  EXPECT_THAT(out, HasSubstr("vocab 320"));

  absl::StatusOr<std::unique_ptr<models::Tokenizer>> tok = models::LoadTokenizer(dir + "/tok");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocab_size(), 320);
  EXPECT_EQ((*tok)->TokenId("<|endoftext|>").value(), 0);
  EXPECT_EQ((*tok)->bos_id(), 0);
  EXPECT_EQ((*tok)->eos_id(), 2);  // <|im_end|>
  EXPECT_EQ((*tok)->pad_id(), 0);
  size_t bytes = 0;
  size_t tokens = 0;
  for (const std::string& doc : docs) {
    absl::StatusOr<std::vector<int32_t>> ids = (*tok)->Encode(doc);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ((*tok)->Decode(*ids).value(), doc);
    bytes += doc.size();
    tokens += ids->size();
  }
  EXPECT_LT(tokens * 2, bytes);
  const json config = json::parse(test::ReadFile(dir + "/tok/tokenizer_config.json"));
  EXPECT_THAT(config["chat_template"].get<std::string>(), HasSubstr("<|im_start|>"));
  EXPECT_THAT(config["chat_template"].get<std::string>(), HasSubstr("add_generation_prompt"));
  EXPECT_EQ(config["added_tokens_decoder"]["2"]["content"], "<|im_end|>");
  // The template renders ChatML under Jinja (python3-jinja2, installed by tools/install_deps.sh).
  const std::string render = R"(import json, sys, jinja2
config = json.load(open(sys.argv[1]))
messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
out = jinja2.Environment().from_string(config["chat_template"]).render(
    messages=messages, add_generation_prompt=True)
sys.stdout.write(json.dumps(out)))";
  const auto [py, rendered] = RunCommand(
      {"/usr/bin/python3", "-c", render, dir + "/tok/tokenizer_config.json"}, dir + "/py.log");
  ASSERT_EQ(py, 0) << rendered;
  EXPECT_EQ(json::parse(rendered),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");

  // An earlier output may be replaced; the same input gives the same files.
  const std::string first = test::ReadFile(dir + "/tok/tokenizer.json");
  const auto [again, again_out] = Troupe(dir, {"tokenizer", "train", "--vocab-size", "320", "--out",
                                               dir + "/tok", dir + "/a.txt", dir + "/b.jsonl"});
  ASSERT_EQ(again, 0) << again_out;
  EXPECT_EQ(test::ReadFile(dir + "/tok/tokenizer.json"), first);

  const auto [enc, enc_out] =
      Troupe(dir, {"tokenizer", "encode", "--tokenizer", dir + "/tok", "<|im_start|>the fox"});
  ASSERT_EQ(enc, 0) << enc_out;
  EXPECT_EQ(enc_out.substr(0, 2), "1 ") << enc_out;
  EXPECT_THAT(enc_out, HasSubstr("\"<|im_start|>\""));
}

TEST(TokenizerCli, TakesEachChatMessageContentFromAJsonlField) {
  const std::string dir = TestDir("chat");
  std::string jsonl;
  for (int i = 0; i < 50; ++i) {
    jsonl += json({{"prompt",
                    {{{"role", "system"}, {"content", "You are a careful calculator."}},
                     {{"role", "user"}, {"content", absl::StrCat("Compute ", i, " times ", i)}}}}})
                 .dump() +
             "\n";
  }
  test::WriteFile(dir + "/chat.jsonl", jsonl);
  const auto [code, out] =
      Troupe(dir, {"tokenizer", "train", "--vocab-size", "300", "--jsonl-field", "prompt",
                   "--special-token", "<|endoftext|>", "--special-token", "<|im_start|>",
                   "--special-token", "<|im_end|>", "--special-token", "<tool>", "--out",
                   dir + "/tok", dir + "/chat.jsonl"});
  ASSERT_EQ(code, 0) << out;
  absl::StatusOr<std::unique_ptr<models::Tokenizer>> tok = models::LoadTokenizer(dir + "/tok");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->TokenId("<tool>").value(), 3);
  EXPECT_TRUE((*tok)->IsSpecialToken(3));
  // The system prompt was seen 50 times: its words are single tokens.
  EXPECT_TRUE((*tok)->TokenId("Ġcalculator").ok());
  // Roles are not training text.
  EXPECT_FALSE((*tok)->TokenId("system").ok());
}

TEST(TokenizerCli, ReadsWholeFilesAndStopsAtMaxTextBytes) {
  const std::string dir = TestDir("whole");
  std::string text;
  for (int i = 0; i < 20; ++i) text += "ab\n\ncd\n\n";
  test::WriteFile(dir + "/a.txt", text);
  // One document per line: the newlines are not training text.
  auto [code, out] = Troupe(
      dir, {"tokenizer", "train", "--vocab-size", "300", "--out", dir + "/lines", dir + "/a.txt"});
  ASSERT_EQ(code, 0) << out;
  auto lines = models::LoadTokenizer(dir + "/lines");
  ASSERT_TRUE(lines.ok()) << lines.status();
  EXPECT_TRUE((*lines)->TokenId("ab").ok());
  EXPECT_FALSE((*lines)->TokenId("ĊĊ").ok());
  // The whole file as one document: "\n\n" is a word, merged.
  std::tie(code, out) = Troupe(dir, {"tokenizer", "train", "--vocab-size", "300", "--whole-file",
                                     "--out", dir + "/whole", dir + "/a.txt"});
  ASSERT_EQ(code, 0) << out;
  auto whole = models::LoadTokenizer(dir + "/whole");
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_TRUE((*whole)->TokenId("ĊĊ").ok());

  std::tie(code, out) =
      Troupe(dir, {"tokenizer", "train", "--vocab-size", "300", "--max-text-bytes", "4", "--out",
                   dir + "/capped", dir + "/a.txt"});
  ASSERT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("read 0.0 MB, 2 documents"));
  EXPECT_THAT(out, HasSubstr("stopped at --max-text-bytes"));
}

TEST(TokenizerCli, NamesTheFileAndLineOfABadRecord) {
  const std::string dir = TestDir("bad");
  test::WriteFile(dir + "/c.jsonl", "{\"text\": \"fine\"}\n{\"text\": oops}\n");
  auto [code, out] = Troupe(
      dir, {"tokenizer", "train", "--vocab-size", "300", "--out", dir + "/tok", dir + "/c.jsonl"});
  EXPECT_EQ(code, 1);
  EXPECT_THAT(out, HasSubstr(dir + "/c.jsonl:2: malformed JSON"));
  EXPECT_FALSE(fs::exists(dir + "/tok"));  // nothing written, not even the directory

  test::WriteFile(dir + "/d.jsonl", "{\"text\": \"fine\"}\n\n{\"body\": \"x\"}\n");
  std::tie(code, out) = Troupe(
      dir, {"tokenizer", "train", "--vocab-size", "300", "--out", dir + "/tok", dir + "/d.jsonl"});
  EXPECT_EQ(code, 1);
  EXPECT_THAT(out, HasSubstr(dir + "/d.jsonl:3: no field \"text\""));

  test::WriteFile(dir + "/e.jsonl", "{\"text\": [{\"role\": \"user\"}]}\n");
  std::tie(code, out) = Troupe(
      dir, {"tokenizer", "train", "--vocab-size", "300", "--out", dir + "/tok", dir + "/e.jsonl"});
  EXPECT_EQ(code, 1);
  EXPECT_THAT(out, HasSubstr(dir + "/e.jsonl:1: text[0]: expected a message object"));
}

TEST(TokenizerCli, RefusesAForeignOutputDirectoryUnlessOverwrite) {
  const std::string dir = TestDir("foreign");
  test::WriteFile(dir + "/a.txt", "hello world\nhello there\n");
  fs::create_directories(dir + "/out");
  test::WriteFile(dir + "/out/model.safetensors", "weights");
  const std::vector<std::string> args = {"tokenizer", "train",      "--vocab-size", "300",
                                         "--out",     dir + "/out", dir + "/a.txt"};
  auto [code, out] = Troupe(dir, args);
  EXPECT_EQ(code, 1);
  EXPECT_THAT(out, HasSubstr("is not empty and not an earlier tokenizer output"));
  EXPECT_THAT(out, HasSubstr("model.safetensors"));
  EXPECT_FALSE(fs::exists(dir + "/out/tokenizer.json"));

  std::vector<std::string> overwrite = args;
  overwrite.push_back("--overwrite");
  std::tie(code, out) = Troupe(dir, overwrite);
  EXPECT_EQ(code, 0) << out;
  EXPECT_TRUE(fs::exists(dir + "/out/tokenizer.json"));
  EXPECT_EQ(test::ReadFile(dir + "/out/model.safetensors"), "weights");
}

}  // namespace
}  // namespace troupe::tests
