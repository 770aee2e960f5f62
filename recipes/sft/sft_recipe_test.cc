#include "recipes/sft/sft_recipe.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "data/sft_examples.h"
#include "data/sft_records.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/chat/chat_template.h"
#include "models/tokenizers/bpe_tokenizer.h"
#include "models/tokenizers/char_tokenizer.h"
#include "models/tokenizers/test_tokenizer_files.h"
#include "models/tokenizers/tokenizer.h"
#include "models/transformer.h"
#include "nlohmann/json.hpp"
#include "recipes/sft/sft_test_util.h"

namespace troupe::recipes {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A "shift" task over the letters a-f: prompt "cab=", response "dbc" (each letter's successor,
// f wraps to a). Every 3-letter word, in a fixed shuffled order; the last `heldout` are held out.
std::shared_ptr<data::SftExamples> ShiftExamples(int heldout, const std::string& response_suffix) {
  const std::string letters = "abcdef";
  std::vector<std::pair<std::string, std::string>> words;
  for (int i = 0; i < 216; ++i) {
    // 101 is coprime with 216: a fixed permutation of the words.
    const int w = (i * 101) % 216;
    std::string word;
    std::string shifted;
    for (int d : {w / 36, (w / 6) % 6, w % 6}) {
      word += letters[d];
      shifted += letters[(d + 1) % 6];
    }
    words.push_back({word, shifted});
  }
  std::vector<data::SftExample> train;
  std::vector<data::SftHeldOut> held;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i + heldout < words.size()) {
      train.push_back({words[i].first + "=", words[i].second + response_suffix});
    } else {
      held.push_back({words[i].first + "=", words[i].second});
    }
  }
  return std::make_shared<data::VectorSftExamples>(std::move(train), std::move(held),
                                                   "shift words");
}

SftOptions SmallOptions() {
  SftOptions o = TinySftOptions();
  o.model.num_hidden_layers = 2;
  o.steps = 400;  // stops at the target accuracy well before
  o.warmup_steps = 10;
  o.eval_every = 50;
  o.eval_slots = 16;
  o.log_every = 50;
  o.target_accuracy = 0.95;
  o.seed = 5;
  return o;
}

// One id per letter a-f and "=", and no bos or pad: pad falls back to eos.
std::shared_ptr<models::Tokenizer> LetterTokenizer() {
  models::CharTokenizerOptions specials;
  specials.special_tokens = {"<eos>"};
  specials.pad_token = "";
  specials.bos_token = "";
  absl::StatusOr<std::unique_ptr<models::CharTokenizer>> tokenizer =
      models::CharTokenizer::Create("abcdef=", specials);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return std::move(*tokenizer);
}

absl::StatusOr<SftResult> Train(const SftInputs& inputs, const SftOptions& options,
                                std::vector<std::string>* lines = nullptr) {
  return RunSft(inputs, options, CollectLines(lines));
}

TEST(RunSft, LearnsStringPromptsWithACharacterTokenizerWithoutBosOrPad) {
  SftInputs inputs;
  inputs.examples = ShiftExamples(/*heldout=*/36, "");
  inputs.tokenizer = LetterTokenizer();
  SftOptions options = SmallOptions();
  options.out_dir = TempDir("shift_char");
  std::vector<std::string> lines;
  absl::StatusOr<SftResult> result = Train(inputs, options, &lines);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->reached_target) << result->final_accuracy << " after " << result->steps;
  EXPECT_EQ(lines.front(), "shift words");
  EXPECT_THAT(lines[1], HasSubstr("180 train / 36 held-out examples"));
  ASSERT_FALSE(result->examples.empty());
  EXPECT_THAT(result->examples[0], HasSubstr("= -> "));

  // The checkpoint's config takes the tokenizer's ids; its tokenizer file reloads as the same.
  absl::StatusOr<models::ModelConfig> config =
      models::LoadModelConfig(options.out_dir + "/config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->vocab_size, 8);
  EXPECT_FALSE(config->bos_token_id.has_value());
  EXPECT_THAT(config->eos_token_ids, ElementsAre(0));
  EXPECT_EQ(config->pad_token_id, 0);
  absl::StatusOr<std::unique_ptr<models::Tokenizer>> reloaded =
      models::LoadTokenizer(options.out_dir);
  ASSERT_TRUE(reloaded.ok()) << reloaded.status();
  EXPECT_EQ((*reloaded)->Encode("fab=").value(), inputs.tokenizer->Encode("fab=").value());
  nlohmann::json metrics = nlohmann::json::parse(ReadAll(options.out_dir + "/sft_metrics.json"));
  EXPECT_EQ(metrics["final_heldout_accuracy"], result->final_accuracy);
}

TEST(RunSft, GradesWithTheCallersFunction) {
  SftInputs inputs;
  inputs.examples = ShiftExamples(/*heldout=*/20, "");
  inputs.tokenizer = LetterTokenizer();
  inputs.grader = [](const std::string&, const data::SftHeldOut&) { return true; };  // any stopped
  SftOptions options = SmallOptions();
  options.steps = 20;
  options.eval_every = 20;
  options.target_accuracy = 1.0;
  absl::StatusOr<SftResult> lenient = Train(inputs, options);
  inputs.grader = [](const std::string&, const data::SftHeldOut&) { return false; };
  absl::StatusOr<SftResult> strict = Train(inputs, options);
  ASSERT_TRUE(lenient.ok() && strict.ok());
  EXPECT_GT(lenient->final_accuracy, 0.0);
  EXPECT_EQ(strict->final_accuracy, 0.0);
}

// A byte-level BPE tokenizer.json: the letters a-f, "=", the merge "a b", the special tokens
// <|endoftext|> (eos, in tokenizer_config.json) and <|im_end|> (a chat template's end of turn).
std::string WriteBpeTokenizer(const std::string& dir) {
  nlohmann::json vocab = {{"a", 0}, {"b", 1}, {"c", 2}, {"d", 3},
                          {"e", 4}, {"f", 5}, {"=", 6}, {"ab", 7}};
  nlohmann::json added = nlohmann::json::array();
  int id = 8;
  for (const char* token : {"<|endoftext|>", "<|im_end|>"}) {
    added.push_back({{"id", id++},
                     {"content", token},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  nlohmann::json tokenizer = {
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b"}}}}};
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/tokenizer.json") << tokenizer.dump();
  std::ofstream(dir + "/tokenizer_config.json") << R"({"eos_token": "<|endoftext|>"})";
  return dir;
}

TEST(RunSft, LearnsJsonlRecordsWithABpeTokenizerStopsAtAnExtraStopTokenAndSavesItsFiles) {
  const std::string tokenizer_dir = WriteBpeTokenizer(TempDir("bpe_tok"));
  absl::StatusOr<std::unique_ptr<models::Tokenizer>> tokenizer =
      models::LoadTokenizer(tokenizer_dir);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  ASSERT_EQ((*tokenizer)->eos_id(), 8);
  ASSERT_THAT((*tokenizer)->Encode("cab=").value(), ElementsAre(2, 7, 6));
  // The shift words as JSONL records, the last 36 held out. Responses end with the template's
  // <|im_end|>, then the recipe's <|endoftext|>; generation stops at <|im_end|>, whose text the
  // grader does not see.
  const std::shared_ptr<data::SftExamples> words = ShiftExamples(/*heldout=*/36, "");
  const std::string jsonl = TempDir("shift.jsonl");
  {
    std::ofstream out(jsonl);
    for (int64_t i = 0; i < words->num_train(); ++i) {
      out << nlohmann::json{{"prompt", words->Train(i).prompt},
                            {"response", words->Train(i).response}}
                 .dump()
          << "\n";
    }
    for (const data::SftHeldOut& h : words->HeldOut()) {
      out << nlohmann::json{{"prompt", h.prompt}, {"response", h.reference}}.dump() << "\n";
    }
  }
  data::SftRecordOptions jsonl_options;
  jsonl_options.heldout_size = 36;
  jsonl_options.response_suffix = "<|im_end|>";
  absl::StatusOr<std::unique_ptr<data::SftRecords>> examples =
      data::SftRecords::Load({jsonl}, jsonl_options);
  ASSERT_TRUE(examples.ok()) << examples.status();
  SftInputs inputs;
  inputs.examples = std::move(*examples);
  inputs.tokenizer = std::move(*tokenizer);
  inputs.tokenizer_path = tokenizer_dir;
  inputs.extra_stop_ids = {9};
  inputs.skip_special_tokens = false;  // a response cut at <|endoftext|> would end "<|im_end|>"
  SftOptions options = SmallOptions();
  options.out_dir = TempDir("shift_bpe");
  // Words with "ab" in them are one token shorter: the few of them teach the model less well.
  options.target_accuracy = 0.85;
  std::vector<std::string> lines;
  absl::StatusOr<SftResult> result = Train(inputs, options, &lines);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->reached_target) << absl::StrJoin(lines, "\n") << "\n"
                                      << absl::StrJoin(result->examples, "\n");

  // The tokenizer is written from the object (the source file is compact JSON; this is not).
  EXPECT_TRUE(ReadAll(options.out_dir + "/tokenizer.json") ==
              inputs.tokenizer->ToTokenizerJson().value());
  EXPECT_TRUE(ReadAll(options.out_dir + "/tokenizer.json") !=
              ReadAll(tokenizer_dir + "/tokenizer.json"));
  EXPECT_EQ(ReadAll(options.out_dir + "/tokenizer_config.json"),
            inputs.tokenizer->ToTokenizerConfigJson("").value());
  absl::StatusOr<std::unique_ptr<models::Tokenizer>> reloaded =
      models::LoadTokenizer(options.out_dir);
  ASSERT_TRUE(reloaded.ok()) << reloaded.status();
  EXPECT_EQ((*reloaded)->eos_id(), 8);
  absl::StatusOr<models::ModelConfig> config =
      models::LoadModelConfig(options.out_dir + "/config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->vocab_size, 10);
  EXPECT_THAT(config->eos_token_ids, ElementsAre(8, 9));
  EXPECT_EQ(config->pad_token_id, 8);
}

// A tokenizer with a normalizer, a Split + Digits + ByteLevel pre-tokenizer, special and added
// tokens and a chat template (models/tokenizers/test_tokenizer_files.h), through a one-step run.
TEST(RunSft, SavesTheTokenizerWrittenFromTheObjectSoItReloadsToTheSameEncodingAndChatTemplate) {
  absl::StatusOr<std::string> source = models::WriteTestBpeTokenizer(TempDir("rich_tok"));
  ASSERT_TRUE(source.ok()) << source.status();
  absl::StatusOr<std::unique_ptr<models::Tokenizer>> loaded = models::LoadTokenizer(*source);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const std::shared_ptr<const models::Tokenizer> tokenizer = std::move(*loaded);
  SftInputs inputs;
  inputs.examples = std::make_shared<data::VectorSftExamples>(
      std::vector<data::SftExample>{{"<|im_start|>user\n12+34=<|im_end|>\n", "46"},
                                    {"Caf\xC3\xA9 \xE4\xB8\xAD=", "the \xF0\x9F\x98\x80"}},
      std::vector<data::SftHeldOut>{{"1+1=", "2"}}, "two pairs");
  inputs.tokenizer = tokenizer;
  SftOptions options = SmallOptions();
  options.steps = 1;
  options.batch_size = 2;
  options.eval_every = 1;
  options.eval_size = 1;
  options.eval_slots = 1;
  options.max_new_tokens = 2;

  const nlohmann::ordered_json messages = nlohmann::ordered_json::parse(
      R"([{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}])");
  absl::StatusOr<models::ChatTemplate> source_chat =
      models::ChatTemplate::FromTokenizerConfigFile(*source + "/tokenizer_config.json");
  ASSERT_TRUE(source_chat.ok()) << source_chat.status();
  const std::string rendered = source_chat->Render(messages, true).value();
  ASSERT_THAT(rendered, HasSubstr("<|im_end|>"));

  // With tokenizer_path (its tokenizer_config.json is the base) and without (the configuration
  // the tokenizer was loaded with is): the same files.
  std::vector<std::string> saved;
  for (const std::string& path : {*source, std::string()}) {
    inputs.tokenizer_path = path;
    options.out_dir = TempDir(path.empty() ? "rich_saved_pathless" : "rich_saved");
    absl::StatusOr<SftResult> result = Train(inputs, options);
    ASSERT_TRUE(result.ok()) << result.status();
    const std::string& dir = options.out_dir;
    saved.push_back(ReadAll(dir + "/tokenizer.json") + ReadAll(dir + "/tokenizer_config.json"));

    // Written from the object, not copied.
    EXPECT_TRUE(ReadAll(dir + "/tokenizer.json") != ReadAll(*source + "/tokenizer.json"));
    absl::StatusOr<std::unique_ptr<models::Tokenizer>> back = models::LoadTokenizer(dir);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ((*back)->vocab_size(), tokenizer->vocab_size());
    EXPECT_EQ((*back)->bos_id(), tokenizer->bos_id());
    EXPECT_EQ((*back)->eos_id(), tokenizer->eos_id());
    EXPECT_EQ((*back)->pad_id(), tokenizer->pad_id());
    for (int32_t id = 0; id < tokenizer->vocab_size(); ++id) {
      EXPECT_EQ((*back)->IsSpecialToken(id), tokenizer->IsSpecialToken(id)) << id;
    }
    for (const std::string& text : models::TokenizerTestTexts()) {
      EXPECT_EQ((*back)->Encode(text).value(), tokenizer->Encode(text).value()) << text;
      EXPECT_EQ((*back)->Encode(text, {.match_special_tokens = false}).value(),
                tokenizer->Encode(text, {.match_special_tokens = false}).value())
          << text;
    }
    absl::StatusOr<models::ChatTemplate> chat =
        models::ChatTemplate::FromTokenizerConfigFile(dir + "/tokenizer_config.json");
    ASSERT_TRUE(chat.ok()) << chat.status();
    EXPECT_EQ(chat->Render(messages, true).value(), rendered);
    EXPECT_EQ(chat->special_tokens(), source_chat->special_tokens());
  }
  ASSERT_EQ(saved.size(), 2u);
  EXPECT_TRUE(saved[0] == saved[1]) << "the files differ with and without tokenizer_path";
}

TEST(RunSft, RefusesInputsItCannotUseNamingTheField) {
  SftInputs inputs;
  inputs.examples = ShiftExamples(10, "");
  inputs.tokenizer = LetterTokenizer();
  const SftOptions options = SmallOptions();
  auto message = [&](const SftInputs& in, const SftOptions& o) {
    return std::string(ValidateSftInputs(in, o).message());
  };
  SftInputs no_examples = inputs;
  no_examples.examples = nullptr;
  EXPECT_THAT(message(no_examples, options), HasSubstr("sft inputs: examples: not set"));
  SftInputs bos = inputs;
  bos.add_bos = true;
  EXPECT_THAT(message(bos, options), HasSubstr("add_bos: is set but the tokenizer has no bos"));
  SftInputs stop = inputs;
  stop.extra_stop_ids = {0, 8};
  EXPECT_THAT(message(stop, options),
              HasSubstr("extra_stop_ids[1]: 8 is outside the tokenizer's vocabulary [0, 8)"));
  absl::StatusOr<std::unique_ptr<models::CharTokenizer>> no_eos = models::CharTokenizer::Create(
      "abcdef=", {.special_tokens = {"<pad>"}, .bos_token = "", .eos_token = ""});
  ASSERT_TRUE(no_eos.ok()) << no_eos.status();
  SftInputs eos = inputs;
  eos.tokenizer = std::move(*no_eos);
  EXPECT_THAT(message(eos, options), HasSubstr("tokenizer: has no eos token"));

  const std::string tokenizer_dir = WriteBpeTokenizer(TempDir("bpe_unsaved"));
  SftInputs bpe = inputs;
  bpe.tokenizer = std::move(*models::LoadTokenizer(tokenizer_dir));
  SftOptions saving = options;
  saving.out_dir = TempDir("unsaved");
  EXPECT_TRUE(ValidateSftInputs(bpe, saving).ok());  // a BPE tokenizer writes itself
  bpe.tokenizer_path = tokenizer_dir + "/missing";
  absl::StatusOr<SftResult> missing = Train(bpe, saving);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("tokenizer_path"));
  EXPECT_FALSE(std::filesystem::exists(saving.out_dir));

  // Text the tokenizer cannot write names the example.
  SftInputs unwritable = inputs;
  unwritable.examples = std::make_shared<data::VectorSftExamples>(
      std::vector<data::SftExample>{{"ab=", "bc"}, {"ab=", "xyz"}},
      std::vector<data::SftHeldOut>{{"ab=", "bc"}}, "bad");
  absl::StatusOr<SftResult> bad = Train(unwritable, options);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("train example 1: "));
  unwritable.examples = std::make_shared<data::VectorSftExamples>(
      std::vector<data::SftExample>{{"ab=", "bc"}}, std::vector<data::SftHeldOut>{}, "no held-out");
  bad = Train(unwritable, options);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("have no held-out problems"));
}

TEST(RunSft, RejectsBadOptionsNamingTheField) {
  SftOptions steps = SmallOptions();
  steps.steps = 0;
  EXPECT_THAT(std::string(ValidateSftOptions(steps).message()), HasSubstr("steps = 0"));
  SftOptions seq = SmallOptions();
  seq.max_seq_len = 1;
  EXPECT_THAT(std::string(ValidateSftOptions(seq).message()), HasSubstr("max_seq_len = 1"));
  SftOptions heads = SmallOptions();
  heads.model.hidden_size = 30;
  EXPECT_THAT(std::string(ValidateSftOptions(heads).message()), HasSubstr("sft options: model"));
}

}  // namespace
}  // namespace troupe::recipes
