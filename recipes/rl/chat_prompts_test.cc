#include "recipes/rl/chat_prompts.h"

#include <filesystem>
#include <set>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "recipes/rl/job_data.h"

namespace troupe::recipes {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

namespace fs = std::filesystem;

constexpr char kChatMl[] =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\\n' }}{% endif %}";

class ChatPromptsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(tmp_.path());
    fs::create_directories(dir_ / "tok");
    Write("tok/tokenizer.json", "{}");  // never read here
  }
  std::string Write(const std::string& leaf, const std::string& text) {
    const fs::path path = dir_ / leaf;
    test::WriteFile(path.string(), text);
    return path.string();
  }
  // A job whose tokenizer is tok/tokenizer.json.
  JobSpec Spec() {
    JobSpec spec;
    spec.model.init = ModelInit::kRandom;
    spec.model.tokenizer = (dir_ / "tok" / "tokenizer.json").string();
    return spec;
  }
  test::TempDir tmp_{::testing::UnitTest::GetInstance()->current_test_info()->name()};
  fs::path dir_;
};

const nlohmann::json kMessages = nlohmann::json::parse(
    R"([{"role": "system", "content": "Add."}, {"role": "user", "content": "23+58="}])");

TEST_F(ChatPromptsTest, TheTokenizersConfigTemplateRendersWithTheGenerationPrompt) {
  Write("tok/tokenizer_config.json", nlohmann::json({{"chat_template", kChatMl}}).dump());
  absl::StatusOr<JobChatTemplate> chat = LoadJobChatTemplate(Spec());
  ASSERT_TRUE(chat.ok()) << chat.status();
  ASSERT_TRUE(chat->renderer);
  EXPECT_EQ(chat->source, (dir_ / "tok" / "tokenizer_config.json").string());
  absl::StatusOr<std::string> text = chat->renderer(kMessages);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text,
            "<|im_start|>system\nAdd.<|im_end|>\n<|im_start|>user\n23+58=<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST_F(ChatPromptsTest, NoTemplateAnywhereMeansNoRenderer) {
  absl::StatusOr<JobChatTemplate> chat = LoadJobChatTemplate(Spec());
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_FALSE(chat->renderer);
  Write("tok/tokenizer_config.json", R"({"bos_token": "<s>"})");
  chat = LoadJobChatTemplate(Spec());
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_FALSE(chat->renderer);
  JobSpec random;  // init: sft/random without model.tokenizer: the task's own tokenizer
  random.model.init = ModelInit::kRandom;
  EXPECT_EQ(JobTokenizerConfigPath(random), "");
}

TEST_F(ChatPromptsTest, ATemplateFileSeesTheTokenizersSpecialTokensAndWinsOverItsTemplate) {
  Write("tok/tokenizer_config.json",
        nlohmann::json({{"chat_template", kChatMl}, {"bos_token", "<s>"}}).dump());
  JobSpec spec = Spec();
  spec.data.chat_template =
      Write("plain.jinja",
            "{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
            "{% if add_generation_prompt %}[assistant] {% endif %}");
  absl::StatusOr<JobChatTemplate> chat = LoadJobChatTemplate(spec);
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(chat->source, spec.data.chat_template);
  absl::StatusOr<std::string> text = chat->renderer(kMessages);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "<s>[system] Add.\n[user] 23+58=\n[assistant] ");
}

TEST_F(ChatPromptsTest, AJsonChatTemplateIsATokenizerConfig) {
  JobSpec spec = Spec();
  spec.data.chat_template =
      Write("other_config.json",
            nlohmann::json({{"chat_template", "{{ eos_token }}{{ messages[0].content }}"},
                            {"eos_token", {{"content", "</s>"}}}})
                .dump());
  absl::StatusOr<JobChatTemplate> chat = LoadJobChatTemplate(spec);
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(*chat->renderer(kMessages), "</s>Add.");

  spec.data.chat_template = Write("no_template.json", R"({"eos_token": "</s>"})");
  chat = LoadJobChatTemplate(spec);
  EXPECT_THAT(chat.status().message(), HasSubstr("data.chat_template"));
  EXPECT_THAT(chat.status().message(), HasSubstr("no \"chat_template\""));
}

TEST_F(ChatPromptsTest, TemplateErrorsNameTheKeyTheFileAndItsLine) {
  JobSpec spec = Spec();
  spec.data.chat_template = Write("broken.jinja", "line one\n{% if messages %}\nunclosed");
  absl::StatusOr<JobChatTemplate> chat = LoadJobChatTemplate(spec);
  ASSERT_FALSE(chat.ok());
  EXPECT_EQ(chat.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(chat.status().message(), HasSubstr("data.chat_template"));
  EXPECT_THAT(chat.status().message(), HasSubstr("broken.jinja")) << chat.status();
  EXPECT_THAT(chat.status().message(), HasSubstr(":3: unexpected end of template"));

  // An error raised while rendering is the renderer's, with the template's own message.
  spec.data.chat_template =
      Write("strict.jinja",
            "{% if messages[0].role != 'user' %}{{ raise_exception('first turn must be the "
            "user') }}{% endif %}{{ messages[0].content }}");
  chat = LoadJobChatTemplate(spec);
  ASSERT_TRUE(chat.ok()) << chat.status();
  absl::StatusOr<std::string> text = chat->renderer(kMessages);
  EXPECT_THAT(text.status().message(), HasSubstr("first turn must be the user"));
}

TEST_F(ChatPromptsTest, AnUnreadableOrMalformedTokenizerConfigNamesModelTokenizer) {
  Write("tok/tokenizer_config.json", "{not json");
  absl::StatusOr<JobChatTemplate> chat = LoadJobChatTemplate(Spec());
  ASSERT_FALSE(chat.ok());
  EXPECT_THAT(chat.status().message(), HasSubstr("model.tokenizer"));
  EXPECT_THAT(chat.status().message(), HasSubstr("not a JSON object"));
}

// The issue's hostile template: every render doubles a string until the render's output bound
// (models/chat/jinja.h's RenderOptions) stops it. A dataset of 8,100 such records is refused
// after its first 5, each named FILE:LINE with the template and the bound, in a few seconds
// (rendering every record before refusing took minutes).
TEST_F(ChatPromptsTest, ACostlyTemplateIsRefusedAtTheFirstBadRecordsNamingThemAndTheTemplate) {
  const std::string config =
      Write("tok/tokenizer_config.json",
            nlohmann::json({{"chat_template",
                             "{% set ns = namespace(s='ab') %}{% for i in range(40) %}"
                             "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}"}})
                .dump());
  std::string lines;
  for (int i = 0; i < 8100; ++i) {
    lines += R"({"prompt": [{"role": "user", "content": "1+2="}], "reward_model": )"
             R"({"ground_truth": "3"}, "data_source": "arith"})"
             "\n";
  }
  JobSpec spec = Spec();
  const std::string data = Write("train.jsonl", lines);
  spec.data.train_files = {data};
  absl::StatusOr<JobChatTemplate> chat = LoadJobChatTemplate(spec);
  ASSERT_TRUE(chat.ok()) << chat.status();
  const absl::Time start = absl::Now();
  absl::StatusOr<std::set<std::string>> checked =
      CheckDatasetRecords(spec, chat->renderer, /*tokenizer=*/nullptr);
  const absl::Duration took = absl::Now() - start;
  ASSERT_FALSE(checked.ok());
  const std::string message(checked.status().message());
  for (int line = 1; line <= 5; ++line) {
    EXPECT_THAT(message, HasSubstr(data + ":" + std::to_string(line) +
                                   ": rendering the chat messages: " + config +
                                   "#chat_template[default]:1: output exceeds max_output_bytes"));
  }
  EXPECT_THAT(message, Not(HasSubstr(data + ":6:")));
  EXPECT_THAT(message, HasSubstr("(stopped at the first 5 bad records; the records after them "
                                 "were not checked)"));
  EXPECT_LT(took, absl::Seconds(30));
}

}  // namespace
}  // namespace troupe::recipes
