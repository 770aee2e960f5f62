#include "data/preference_pairs.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/tokenizers/tokenizer.h"

namespace troupe::data {
namespace {

using ::testing::HasSubstr;

std::string TempFile(const std::string& name, const std::string& text) {
  static const test::TempDir dir("preference_pairs_test");  // removed when the binary exits
  const std::string path = dir.Path(name);
  test::WriteFile(path, text);
  return path;
}

std::unique_ptr<models::Tokenizer> CharTokenizer() {
  const std::string path =
      TempFile("char_tokenizer.json", R"({"type": "char", "alphabet": "0123456789+="})");
  absl::StatusOr<std::unique_ptr<models::Tokenizer>> tokenizer = models::LoadTokenizer(path);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return *std::move(tokenizer);
}

TEST(LoadPreferencePairs, ReadsTextRecordsInFileOrder) {
  const std::string path =
      TempFile("ok.jsonl",
               "{\"prompt\": \"1+2=\", \"chosen\": \"3\", \"rejected\": \"4\"}\n"
               "\n"
               "{\"prompt\": \"5+5=\", \"chosen\": \"10\", \"rejected\": \"0\"}\n");
  absl::StatusOr<std::vector<PreferencePair>> pairs = LoadPreferencePairs({path}, {}, nullptr);
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  ASSERT_EQ(pairs->size(), 2u);
  EXPECT_EQ((*pairs)[1].where, path + ":3");
  EXPECT_EQ((*pairs)[1].prompt, "5+5=");
  EXPECT_EQ((*pairs)[1].chosen, "10");
  EXPECT_EQ((*pairs)[1].rejected, "0");
}

TEST(LoadPreferencePairs, NamesFileLineAndKeyOfEveryBadRecord) {
  const std::string path =
      TempFile("bad.jsonl",
               "{\"prompt\": \"1+2=\", \"chosen\": \"3\", \"rejected\": \"4\"}\n"
               "{\"prompt\": \"1+2=\", \"rejected\": \"4\"}\n"
               "{\"prompt\": \"1+2=\", \"chosen\": \"\", \"rejected\": \"4\"}\n"
               "{\"prompt\": \"1+2=\", \"chosen\": \"3\", \"rejected\": \"3\"}\n"
               "{\"prompt\": \"1+2=\", \"chosen\": 3, \"rejected\": \"4\"}\n");
  absl::StatusOr<std::vector<PreferencePair>> pairs = LoadPreferencePairs({path}, {}, nullptr);
  ASSERT_FALSE(pairs.ok());
  EXPECT_EQ(pairs.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(pairs.status().message());
  EXPECT_THAT(message, HasSubstr(path + ":2: no key 'chosen'"));
  EXPECT_THAT(message, HasSubstr(path + ":3: key 'chosen' is an empty response"));
  EXPECT_THAT(message, HasSubstr(path + ":4: 'chosen' and 'rejected' are the same response"));
  EXPECT_THAT(message, HasSubstr(path + ":5: key 'chosen': expected a string, got number"));
  EXPECT_THAT(message, ::testing::Not(HasSubstr(":1:")));
}

TEST(LoadPreferencePairs, RefusesARecordNestedTooDeepWithItsFileAndLine) {
  const std::string path =
      TempFile("deep.jsonl",
               "{\"prompt\": \"1+2=\", \"chosen\": \"3\", \"rejected\": \"4\"}\n"
               "{\"prompt\": \"1+2=\", \"chosen\": \"3\", \"rejected\": \"4\", \"meta\": " +
                   std::string(100000, '{') + std::string(100000, '}') + "}\n");
  absl::StatusOr<std::vector<PreferencePair>> pairs = LoadPreferencePairs({path}, {}, nullptr);
  ASSERT_FALSE(pairs.ok());
  EXPECT_THAT(pairs.status().message(), HasSubstr(path + ":2: JSON nested deeper than 64 levels"));
}

TEST(LoadPreferencePairs, ReadsTheKeysItIsGiven) {
  const std::string path =
      TempFile("keys.jsonl", "{\"q\": \"1+2=\", \"pair\": {\"good\": \"3\", \"bad\": \"4\"}}\n");
  absl::StatusOr<std::vector<PreferencePair>> pairs = LoadPreferencePairs(
      {path}, {.prompt_key = "q", .chosen_key = "pair.good", .rejected_key = "pair.bad"}, nullptr);
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  EXPECT_EQ((*pairs)[0].chosen, "3");
  absl::StatusOr<std::vector<PreferencePair>> missing = LoadPreferencePairs({path}, {}, nullptr);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr(path + ":1: no key 'prompt'"));
}

TEST(LoadPreferencePairs, RefusesChatMessagesWithoutATemplateAndRendersThemWithOne) {
  const std::string path = TempFile(
      "chat.jsonl",
      "{\"prompt\": [{\"role\": \"user\", \"content\": \"1+2=\"}], "
      "\"chosen\": [{\"role\": \"assistant\", \"content\": \"3\"}], \"rejected\": \"4\"}\n");
  absl::StatusOr<std::vector<PreferencePair>> refused = LoadPreferencePairs({path}, {}, nullptr);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(),
              HasSubstr(path + ":1: key 'prompt' is a list of chat messages, and no chat template "
                               "renders them (set data.chat_template"));
  const PairRenderer renderer = [](const nlohmann::json& messages) -> absl::StatusOr<std::string> {
    return absl::StrCat("<u>", messages[0]["content"].get<std::string>(), "<a>");
  };
  absl::StatusOr<std::vector<PreferencePair>> pairs = LoadPreferencePairs({path}, {}, renderer);
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  EXPECT_EQ((*pairs)[0].prompt, "<u>1+2=<a>");
  EXPECT_EQ((*pairs)[0].chosen, "3");
}

// A template that fails every record (at its render budget, say) is paid for the first
// kMaxListedErrors records only, not for the whole file, before the refusal.
TEST(LoadPreferencePairs, StopsRenderingAtTheFirstBadRecordsItLists) {
  std::string lines;
  for (int i = 0; i < 500; ++i) {
    lines +=
        "{\"prompt\": [{\"role\": \"user\", \"content\": \"1+2=\"}], "
        "\"chosen\": \"3\", \"rejected\": \"4\"}\n";
  }
  const std::string path = TempFile("costly.jsonl", lines);
  int renders = 0;
  const PairRenderer renderer =
      [&renders](const nlohmann::json& messages) -> absl::StatusOr<std::string> {
    ++renders;
    return absl::ResourceExhaustedError("t.jinja:1: render time exceeds max_render_time (1s)");
  };
  absl::StatusOr<std::vector<PreferencePair>> pairs = LoadPreferencePairs({path}, {}, renderer);
  ASSERT_FALSE(pairs.ok());
  EXPECT_EQ(renders, kMaxListedErrors);
  EXPECT_THAT(pairs.status().message(),
              HasSubstr(absl::StrCat(path, ":", kMaxListedErrors, ": key 'prompt': rendering")));
  EXPECT_THAT(pairs.status().message(), HasSubstr("max_render_time"));
  EXPECT_THAT(pairs.status().message(),
              HasSubstr("(stopped at the first 10 bad records; the records after them were not "
                        "checked)"));
}

TEST(EncodePairs, IsBosPromptResponseEosWithinTheLengthLimits) {
  std::unique_ptr<models::Tokenizer> tokenizer = CharTokenizer();
  const std::vector<PreferencePair> pairs = {{"f:1", "1+2=", "3", "12"}};
  absl::StatusOr<std::vector<EncodedPair>> encoded =
      EncodePairs(pairs, *tokenizer, {.max_prompt_length = 5, .max_response_length = 3});
  ASSERT_TRUE(encoded.ok()) << encoded.status();
  // <pad>=0 <bos>=1 <eos>=2, then '0'..'9' = 3..12, '+' = 13, '=' = 14.
  EXPECT_EQ((*encoded)[0].chosen, (std::vector<int64_t>{1, 4, 13, 5, 14, 6, 2}));
  EXPECT_EQ((*encoded)[0].rejected, (std::vector<int64_t>{1, 4, 13, 5, 14, 4, 5, 2}));
  EXPECT_EQ((*encoded)[0].prompt_length, 5) << "<bos> 1 + 2 =";

  absl::StatusOr<std::vector<EncodedPair>> long_response =
      EncodePairs(pairs, *tokenizer, {.max_prompt_length = 5, .max_response_length = 2});
  ASSERT_FALSE(long_response.ok());
  EXPECT_THAT(long_response.status().message(),
              HasSubstr("f:1: 'rejected' is 3 tokens with eos, more than "
                        "data.max_response_length = 2"));
  absl::StatusOr<std::vector<EncodedPair>> long_prompt =
      EncodePairs(pairs, *tokenizer, {.max_prompt_length = 4, .max_response_length = 3});
  ASSERT_FALSE(long_prompt.ok());
  EXPECT_THAT(long_prompt.status().message(),
              HasSubstr("f:1: the prompt is 5 tokens, more than data.max_prompt_length = 4"));
  // truncation: left keeps the bos and the prompt's end.
  absl::StatusOr<std::vector<EncodedPair>> cut = EncodePairs(
      pairs, *tokenizer,
      {.max_prompt_length = 3, .max_response_length = 3, .truncation = Truncation::kLeft});
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_EQ((*cut)[0].chosen, (std::vector<int64_t>{1, 5, 14, 6, 2}));
}

}  // namespace
}  // namespace troupe::data
