#include "data/record_prompts.h"

#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/tokenizers/char_tokenizer.h"
#include "tasks/arithmetic/arithmetic_task.h"

namespace troupe::data {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::shared_ptr<const models::Tokenizer> Tokenizer() {
  return std::shared_ptr<const models::Tokenizer>(
      *models::CharTokenizer::Create(tasks::ArithmeticTask::kAlphabet));
}

Record Rec(const std::string& prompt, const std::string& answer, int line) {
  return {.where = "t.jsonl:" + std::to_string(line),
          .data_source = "arithmetic",
          .prompt = prompt,
          .ground_truth = answer,
          .extra_info_json = ""};
}

std::unique_ptr<PromptRecordSource> Records(int n) {
  std::vector<Record> records;
  for (int i = 0; i < n; ++i) {
    records.push_back(Rec(std::to_string(i) + "+1=", std::to_string(i + 1), i + 1));
  }
  return InMemoryPromptRecords(std::move(records), "mem");
}

TEST(RecordPrompts, ARecordBecomesBosPlusItsEncodingWithItsAnswerAndSource) {
  auto prompts = RecordPrompts::Create(Records(5), nullptr, Tokenizer(), {.shuffle = false});
  ASSERT_TRUE(prompts.ok()) << prompts.status();
  absl::StatusOr<proto::Prompt> p = (*prompts)->Get(7);  // epoch 1, record 2
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->text(), "2+1=");
  EXPECT_EQ(p->reference_answer(), "3");
  EXPECT_EQ(p->data_source(), "arithmetic");
  const std::shared_ptr<const models::Tokenizer> tok = Tokenizer();
  std::vector<int32_t> expected = {*tok->bos_id()};
  const std::vector<int32_t> ids = *tok->Encode("2+1=");
  expected.insert(expected.end(), ids.begin(), ids.end());
  EXPECT_EQ(std::vector<int32_t>(p->tokens().begin(), p->tokens().end()), expected);
}

TEST(RecordPrompts, ShuffledDrawsAreAPureFunctionOfSeedAndIndex) {
  auto a = RecordPrompts::Create(Records(50), nullptr, Tokenizer(), {.seed = 3});
  auto b = RecordPrompts::Create(Records(50), nullptr, Tokenizer(), {.seed = 3});
  std::set<std::string> epoch;
  for (int64_t i = 0; i < 50; ++i) {
    EXPECT_EQ((*a)->Get(i)->text(), (*b)->Get(i)->text());
    epoch.insert((*a)->Get(i)->text());
  }
  EXPECT_EQ(epoch.size(), 50u);
  // Any draw can be made again without the draws before it, in any order (what a resumed
  // cursor, recipes/rl/prompt_source.h, relies on).
  for (int64_t i = 80; i > 20; --i) EXPECT_EQ((*a)->Get(i)->text(), (*b)->Get(i)->text());
}

TEST(RecordPrompts, AnOverlongPromptIsRefusedCutOrFilteredAsConfigured) {
  std::vector<Record> records = {Rec("1+1=", "2", 1), Rec("1234+5678=", "6912", 2)};
  auto strict = RecordPrompts::Create(InMemoryPromptRecords(records, ""), nullptr, Tokenizer(),
                                      {.max_prompt_length = 6, .shuffle = false});
  EXPECT_EQ((*strict)->Scan().message(),
            "t.jsonl:2: prompt of 11 tokens, more than data.max_prompt_length = 6 (set "
            "data.truncation: left or right, or data.filter_overlong_prompts)");
  auto left = RecordPrompts::Create(
      InMemoryPromptRecords(records, ""), nullptr, Tokenizer(),
      {.max_prompt_length = 6, .truncation = Truncation::kLeft, .shuffle = false});
  ASSERT_TRUE((*left)->Scan().ok());
  proto::Prompt cut = *(*left)->Get(1);
  ASSERT_EQ(cut.tokens_size(), 6);
  EXPECT_EQ(cut.tokens(0), *Tokenizer()->bos_id());
  EXPECT_EQ(
      *Tokenizer()->Decode(std::vector<int32_t>(cut.tokens().begin() + 1, cut.tokens().end())),
      "5678=");
  auto right = RecordPrompts::Create(
      InMemoryPromptRecords(records, ""), nullptr, Tokenizer(),
      {.max_prompt_length = 6, .truncation = Truncation::kRight, .shuffle = false});
  proto::Prompt head = *(*right)->Get(1);
  EXPECT_EQ(
      *Tokenizer()->Decode(std::vector<int32_t>(head.tokens().begin() + 1, head.tokens().end())),
      "1234+");
  auto filtered =
      RecordPrompts::Create(InMemoryPromptRecords(records, ""), InMemoryPromptRecords(records, ""),
                            Tokenizer(), {.max_prompt_length = 6, .filter_overlong = true});
  ASSERT_TRUE((*filtered)->Scan().ok());
  EXPECT_EQ((*filtered)->filtered(), 1);
  // What the recipe reads through the PromptDataset interface (summary.json's prompts_filtered).
  EXPECT_EQ(static_cast<const PromptDataset&>(**filtered).filtered(), 1);
  EXPECT_EQ((*filtered)->size(), 1);
  for (int i = 0; i < 4; ++i) EXPECT_EQ((*filtered)->Get(i)->text(), "1+1=");
  EXPECT_EQ((*filtered)->HeldOut()->size(), 1u);
  EXPECT_EQ((*filtered)->heldout_filtered(), 1);
}

TEST(RecordPrompts, AMessagesPromptNeedsARenderer) {
  Record chat = Rec("", "2", 4);
  chat.prompt = nlohmann::json::parse(R"([{"role": "user", "content": "1+1="}])");
  auto none = RecordPrompts::Create(InMemoryPromptRecords({chat}, ""), nullptr, Tokenizer(),
                                    {.shuffle = false});
  EXPECT_THAT((*none)->Scan().message(),
              HasSubstr("t.jsonl:4: the prompt is a list of chat messages, and no chat template"));
  RecordPromptsOptions o{.shuffle = false};
  o.renderer = [](const nlohmann::json& messages) -> absl::StatusOr<std::string> {
    return messages[0]["content"].get<std::string>();
  };
  auto rendered = RecordPrompts::Create(InMemoryPromptRecords({chat}, ""), nullptr, Tokenizer(), o);
  ASSERT_TRUE((*rendered)->Scan().ok());
  EXPECT_EQ((*rendered)->Get(0)->text(), "1+1=");
  EXPECT_EQ((*rendered)->data_sources(), std::set<std::string>{"arithmetic"});
}

// A template that fails each record only at its render budget costs that budget per bad record:
// Scan stops at the fifth instead of rendering every record before it refuses.
TEST(RecordPrompts, ScanStopsAtTheFifthBadRecord) {
  std::vector<Record> records;
  for (int i = 0; i < 100; ++i) {
    Record r = Rec("", "2", i + 1);
    r.prompt = nlohmann::json::parse(R"([{"role": "user", "content": "1+1="}])");
    records.push_back(std::move(r));
  }
  int renders = 0;
  RecordPromptsOptions o{.shuffle = false};
  o.renderer = [&renders](const nlohmann::json&) -> absl::StatusOr<std::string> {
    ++renders;
    return absl::ResourceExhaustedError("t.jinja:1: render time exceeds max_render_time (1s)");
  };
  auto prompts =
      RecordPrompts::Create(InMemoryPromptRecords(std::move(records), ""), nullptr, Tokenizer(), o);
  ASSERT_TRUE(prompts.ok()) << prompts.status();
  const absl::Status scanned = (*prompts)->Scan();
  EXPECT_EQ(renders, 5);
  EXPECT_THAT(scanned.message(), HasSubstr("t.jsonl:5: rendering the chat messages: t.jinja:1: "
                                           "render time exceeds max_render_time (1s)"));
  EXPECT_THAT(scanned.message(), Not(HasSubstr("t.jsonl:6:")));
  EXPECT_THAT(scanned.message(), HasSubstr("(stopped at the first 5 bad records"));
}

TEST(RecordPrompts, HeldOutIsTheFirstHeldoutSizeValidationRecordsInOrder) {
  auto prompts = RecordPrompts::Create(Records(5), Records(30), Tokenizer(), {.heldout_size = 10});
  absl::StatusOr<std::vector<proto::Prompt>> heldout = (*prompts)->HeldOut();
  ASSERT_TRUE(heldout.ok());
  ASSERT_EQ(heldout->size(), 10u);
  EXPECT_EQ((*heldout)[9].text(), "9+1=");
  EXPECT_EQ((*heldout)[9].prompt_id(), 9);
}

TEST(RecordPrompts, ReadsAJsonlFileThroughOpenPromptRecords) {
  test::TempDir dir("record_prompts_test");
  const std::string path = dir.Path("r.jsonl");
  test::WriteFile(path, R"({"question": "3+4=", "answer": 7, "extra": {"k": "v"}})"
                        "\n");
  RecordKeys keys{.prompt_key = "question",
                  .answer_key = "answer",
                  .extra_info_key = "extra",
                  .default_data_source = "arithmetic"};
  auto train = OpenPromptRecords({path}, keys, "");
  ASSERT_TRUE(train.ok()) << train.status();
  auto prompts = RecordPrompts::Create(*std::move(train), nullptr, Tokenizer(), {});
  proto::Prompt p = *(*prompts)->Get(0);
  EXPECT_EQ(p.text(), "3+4=");
  EXPECT_EQ(p.reference_answer(), "7");
  EXPECT_EQ(p.extra_info_json(), R"({"k":"v"})");
  EXPECT_EQ((*prompts)->Identity()["train"][0]["path"], path);
}

TEST(RecordPrompts, ReadsAJsonArrayFileAsTheSameRecords) {
  test::TempDir dir("record_prompts_test");
  const std::string path = dir.Path("r.json");
  test::WriteFile(path,
                  "[\n"
                  R"({"prompt": "3+4=", "reward_model": {"ground_truth": "7"}},)"
                  "\n"
                  R"({"prompt": "1+1="})"
                  "\n]\n");
  auto train = OpenPromptRecords({path}, {.default_data_source = "arithmetic"}, "");
  ASSERT_TRUE(train.ok()) << train.status();
  ASSERT_EQ((*train)->size(), 2);
  EXPECT_EQ((*train)->Read(0)->ground_truth, "7");
  EXPECT_EQ((*train)->Read(1).status().message(), path + ":3: no key 'reward_model.ground_truth'");
}

// The issue-30 probe: the default cache was one /tmp/troupe-data-cache shared by every user.
TEST(DataCacheDir, IsOneOfThisUsersOwnUnlessTroupeDataCacheSaysOtherwise) {
  const char* saved = std::getenv("TROUPE_DATA_CACHE");
  const std::string keep = saved != nullptr ? saved : "";
  ::unsetenv("TROUPE_DATA_CACHE");
  const std::string dir = DataCacheDir();
  EXPECT_THAT(dir, ::testing::EndsWith("/troupe-data-cache-" + std::to_string(::geteuid())));
  ::setenv("TROUPE_DATA_CACHE", "/somewhere/else", 1);
  EXPECT_EQ(DataCacheDir(), "/somewhere/else");
  if (saved != nullptr) {
    ::setenv("TROUPE_DATA_CACHE", keep.c_str(), 1);
  } else {
    ::unsetenv("TROUPE_DATA_CACHE");
  }
}

}  // namespace
}  // namespace troupe::data
