#include "data/sft_records.h"

#include <unistd.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::data {
namespace {

using ::testing::HasSubstr;

// One directory for the whole test binary (removed when it exits).
const test::TempDir& Tmp() {
  static const test::TempDir dir("sft_records_test");
  return dir;
}

std::string TempFile(const std::string& name, const std::string& contents) {
  const std::string path = Tmp().Path(absl::StrCat(name, "_", ::getpid()));
  test::WriteFile(path, contents);
  return path;
}

// "<user>content" for each message, then "<assistant>".
ChatRenderer FakeTemplate() {
  return [](const nlohmann::json& messages) -> absl::StatusOr<std::string> {
    std::string text;
    for (const nlohmann::json& m : messages) {
      if (!m.contains("content")) return absl::InvalidArgumentError("message without content");
      text += absl::StrCat("<", m.value("role", "?"), ">", m["content"].get<std::string>());
    }
    return text + "<assistant>";
  };
}

TEST(SftRecords, HoldsOutTheLastRecordsOfTheTrainingFile) {
  const std::string path = TempFile("tail.jsonl",
                                    "{\"prompt\": \"1+1=\", \"response\": \"2\"}\n"
                                    "\n"
                                    "{\"prompt\": \"2+2=\", \"response\": \"4\"}\n"
                                    "{\"prompt\": \"3+3=\", \"response\": \"6\"}\n");
  SftRecordOptions options;
  options.heldout_size = 1;
  absl::StatusOr<std::unique_ptr<SftRecords>> examples = SftRecords::Load({path}, options);
  ASSERT_TRUE(examples.ok()) << examples.status();
  ASSERT_EQ((*examples)->num_train(), 2);
  EXPECT_EQ((*examples)->Train(1).prompt, "2+2=");
  EXPECT_EQ((*examples)->Train(1).response, "4");
  ASSERT_EQ((*examples)->HeldOut().size(), 1u);
  EXPECT_EQ((*examples)->HeldOut()[0].prompt, "3+3=");
  EXPECT_EQ((*examples)->HeldOut()[0].reference, "6");
  EXPECT_THAT((*examples)->Describe(), HasSubstr("2 train / 1 held-out records"));
}

TEST(SftRecords, RendersChatMessagesAndReadsANestedReferenceFromAHeldOutFile) {
  const std::string train = TempFile(
      "chat_train.jsonl", R"({"messages": [{"role": "user", "content": "hi"}], "answer": "hello"})"
                          "\n");
  const std::string heldout = TempFile(
      "chat_heldout.jsonl", R"({"messages": [{"role": "system", "content": "be brief"}, )"
                            R"({"role": "user", "content": "7*6"}], "answer": "The answer is 42", )"
                            R"("reward_model": {"ground_truth": "42"}})"
                            "\n");
  SftRecordOptions options;
  options.prompt_key = "messages";
  options.response_key = "answer";
  options.reference_key = "reward_model.ground_truth";
  options.response_suffix = "<end>";
  options.heldout_paths = {heldout};
  options.renderer = FakeTemplate();
  absl::StatusOr<std::unique_ptr<SftRecords>> examples = SftRecords::Load({train}, options);
  ASSERT_TRUE(examples.ok()) << examples.status();
  EXPECT_EQ((*examples)->Train(0).prompt, "<user>hi<assistant>");
  EXPECT_EQ((*examples)->Train(0).response, "hello<end>");
  EXPECT_EQ((*examples)->HeldOut()[0].prompt, "<system>be brief<user>7*6<assistant>");
  EXPECT_EQ((*examples)->HeldOut()[0].reference, "42");
}

TEST(SftRecords, ReadsSeveralFilesGzipTooAndTheHeldOutDataSource) {
  const std::string a = TempFile("multi_a.jsonl", "{\"prompt\": \"1+1=\", \"response\": \"2\"}\n");
  const std::string b = TempFile("multi_b.jsonl",
                                 "{\"prompt\": \"2+2=\", \"response\": \"4\"}\n"
                                 "{\"prompt\": \"3+3=\", \"response\": \"6\"}\n");
  ASSERT_EQ(std::system(("gzip -f " + b).c_str()), 0);
  SftRecordOptions options;
  options.heldout_paths = {TempFile("multi_val.jsonl",
                                    "{\"question\": \"4+4=\", \"response\": \"8\", "
                                    "\"data_source\": \"arith\"}\n"
                                    "{\"question\": \"5+5=\", \"response\": \"10\"}\n")};
  options.heldout_prompt_key = "question";
  options.data_source_key = "data_source";
  options.default_data_source = "plain";
  absl::StatusOr<std::unique_ptr<SftRecords>> no_cache = SftRecords::Load({a, b + ".gz"}, options);
  EXPECT_FALSE(no_cache.ok());  // a .gz needs somewhere to be decompressed
  options.cache_dir = Tmp().Path("cache");
  absl::StatusOr<std::unique_ptr<SftRecords>> examples = SftRecords::Load({a, b + ".gz"}, options);
  ASSERT_TRUE(examples.ok()) << examples.status();
  ASSERT_EQ((*examples)->num_train(), 3);
  EXPECT_EQ((*examples)->Train(0).prompt, "1+1=");
  EXPECT_EQ((*examples)->Train(2).prompt, "3+3=");
  EXPECT_EQ((*examples)->Train(2).response, "6");
  const std::vector<SftHeldOut> heldout = (*examples)->HeldOut();
  ASSERT_EQ(heldout.size(), 2u);
  EXPECT_EQ(heldout[0].data_source, "arith");
  EXPECT_EQ(heldout[1].data_source, "plain");
  EXPECT_EQ(heldout[1].prompt, "5+5=");
  EXPECT_THAT((*examples)->Describe(), HasSubstr("multi_b.jsonl_"));
  EXPECT_THAT((*examples)->Describe(), HasSubstr("3 train / 2 held-out records"));
}

// The error of loading `contents` (one held-out record appended) with `options`.
std::string LoadError(const std::string& name, const std::string& contents,
                      SftRecordOptions options = SftRecordOptions()) {
  options.heldout_paths = {
      TempFile(name + "_heldout", "{\"prompt\": \"q\", \"response\": \"a\"}\n")};
  const std::string path = TempFile(name, contents);
  absl::StatusOr<std::unique_ptr<SftRecords>> examples = SftRecords::Load({path}, options);
  EXPECT_FALSE(examples.ok());
  return examples.ok() ? "" : std::string(examples.status().message());
}

TEST(SftRecords, NamesTheFileLineAndKeyOfABadRecord) {
  const std::string good = "{\"prompt\": \"q\", \"response\": \"a\"}\n";
  EXPECT_THAT(LoadError("missing.jsonl", good + "{\"prompt\": \"q\"}\n"),
              HasSubstr("missing.jsonl_" + std::to_string(::getpid()) + ":2: no key 'response'"));
  EXPECT_THAT(LoadError("number.jsonl", good + good + "{\"prompt\": 3, \"response\": \"a\"}\n"),
              HasSubstr(":3: key 'prompt': expected a string or an array of chat messages, got "
                        "number"));
  EXPECT_THAT(LoadError("response.jsonl", "{\"prompt\": \"q\", \"response\": [1]}\n"),
              HasSubstr(":1: key 'response': expected a string, got array"));
  EXPECT_THAT(LoadError("json.jsonl", good + "{\"prompt\": \n"), HasSubstr(":2: not valid JSON"));
  EXPECT_THAT(LoadError("array.jsonl", "[1, 2]\n"), HasSubstr(":1: expected a JSON object"));
  // Deep enough to overflow the stack of a copy: refused, not a crash.
  EXPECT_THAT(
      LoadError("deep.jsonl", good + "{\"prompt\": \"q\", \"response\": \"a\", \"x\": " +
                                  std::string(100000, '[') + std::string(100000, ']') + "}\n"),
      HasSubstr(":2: JSON nested deeper than 64 levels"));
  EXPECT_THAT(LoadError("norender.jsonl",
                        "{\"prompt\": [{\"role\": \"user\", \"content\": \"q\"}], "
                        "\"response\": \"a\"}\n"),
              HasSubstr(":1: key 'prompt': chat messages need a chat template to render them"));
  SftRecordOptions with_template;
  with_template.renderer = FakeTemplate();
  EXPECT_THAT(
      LoadError("render.jsonl", "{\"prompt\": [{\"role\": \"user\"}], \"response\": \"a\"}\n",
                with_template),
      HasSubstr(":1: key 'prompt': rendering the messages: message without content"));
  EXPECT_THAT(
      LoadError("message.jsonl", "{\"prompt\": [\"hi\"], \"response\": \"a\"}\n", with_template),
      HasSubstr(":1: key 'prompt': message 0 is a string, not an object"));
}

TEST(SftRecords, BoundsWhatItReads) {
  SftRecordOptions few;
  few.max_records = 2;
  const std::string good = "{\"prompt\": \"q\", \"response\": \"a\"}\n";
  EXPECT_THAT(LoadError("many.jsonl", good + good + good, few),
              HasSubstr(":3: more than 2 records"));
  SftRecordOptions short_lines;
  short_lines.max_line_bytes = 10;
  EXPECT_THAT(LoadError("long.jsonl", good, short_lines),
              HasSubstr(":1: line longer than 10 bytes"));
  // At the limit exactly, with and without a final newline: read.
  SftRecordOptions exact;
  exact.max_line_bytes = good.size() - 1;
  exact.heldout_size = 1;
  for (const std::string& contents : {good + good, good + good.substr(0, good.size() - 1)}) {
    const std::string path = TempFile("exact.jsonl", contents);
    absl::StatusOr<std::unique_ptr<SftRecords>> examples = SftRecords::Load({path}, exact);
    ASSERT_TRUE(examples.ok()) << examples.status();
    EXPECT_EQ((*examples)->num_train(), 1);
  }
  EXPECT_THAT(LoadError("over.jsonl", good + " " + good, exact), HasSubstr(":2: line longer than"));
}

TEST(SftRecords, RefusesAMissingFileAndAnEmptySplit) {
  absl::StatusOr<std::unique_ptr<SftRecords>> missing =
      SftRecords::Load({"/nonexistent/train.jsonl"}, SftRecordOptions());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("/nonexistent/train.jsonl"));
  const std::string one = TempFile("one.jsonl", "{\"prompt\": \"q\", \"response\": \"a\"}\n");
  absl::StatusOr<std::unique_ptr<SftRecords>> no_heldout =
      SftRecords::Load({one}, SftRecordOptions());
  EXPECT_THAT(std::string(no_heldout.status().message()), HasSubstr("heldout_size"));
  SftRecordOptions all_heldout;
  all_heldout.heldout_size = 1;
  absl::StatusOr<std::unique_ptr<SftRecords>> no_train = SftRecords::Load({one}, all_heldout);
  EXPECT_THAT(std::string(no_train.status().message()), HasSubstr("leaves no training records"));
}

}  // namespace
}  // namespace troupe::data
