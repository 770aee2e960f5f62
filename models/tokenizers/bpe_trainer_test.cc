#include "models/tokenizers/bpe_trainer.h"

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/tokenizers/pre_tokenizer.h"
#include "nlohmann/json.hpp"

namespace troupe::models {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

std::unique_ptr<BpeTokenizer> MustTrain(const BpeTrainerOptions& options,
                                        const std::vector<std::string>& texts) {
  absl::StatusOr<std::unique_ptr<BpeTrainer>> trainer = BpeTrainer::Create(options);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  if (!trainer.ok()) return nullptr;
  for (const std::string& text : texts) EXPECT_TRUE((*trainer)->AddText(text));
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> tokenizer = (*trainer)->Train();
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? std::move(*tokenizer) : nullptr;
}

std::vector<std::string> Merges(const BpeTokenizer& tokenizer) {
  std::vector<std::string> merges;
  const json doc = json::parse(tokenizer.ToJson());
  for (const json& merge : doc["model"]["merges"]) {
    merges.push_back(merge.get<std::string>());
  }
  return merges;
}

// Sentences of made-up words, numbers, chat markup, newlines and some non-ASCII text.
std::vector<std::string> GeneratedCorpus(int documents, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::vector<std::string> words = {"the",     "model", "learns", "to",       "add",
                                          "numbers", "and",   "answer", "question", "then",
                                          "stops",   "über",  "naïve",  "日本語",   "число",
                                          "🙂",    "it's",  "we'll",  "x=3",      "(a+b)"};
  std::vector<std::string> texts;
  for (int d = 0; d < documents; ++d) {
    std::string text;
    if (rng() % 4 == 0) text += "<|im_start|>user\n";
    const int n = 3 + static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) {
      if (i > 0) text += rng() % 9 == 0 ? "\n" : (rng() % 13 == 0 ? "  " : " ");
      if (rng() % 5 == 0) {
        text += std::to_string(rng() % 10000);
      } else {
        text += words[rng() % words.size()];
      }
    }
    text += rng() % 2 == 0 ? "." : "?\n";
    if (rng() % 4 == 0) text += "<|im_end|>\n";
    texts.push_back(std::move(text));
  }
  return texts;
}

// The merges of a plain BPE trainer that recounts every pair after each merge (same rules: most
// frequent pair, ties to the smallest (left id, right id), no special tokens so byte b has id b).
std::vector<std::string> ReferenceMerges(const std::vector<std::string>& texts, int32_t vocab_size,
                                         int64_t min_frequency) {
  std::map<std::string, int64_t> word_counts;
  const PatternSplitter splitter = PatternSplitter::Qwen2();
  for (const std::string& text : texts) {
    std::vector<absl::string_view> pieces;
    splitter.Split(text, &pieces);
    for (absl::string_view piece : pieces) ++word_counts[std::string(piece)];
  }
  std::vector<std::pair<std::vector<int32_t>, int64_t>> words;
  for (const auto& [text, count] : word_counts) {
    words.emplace_back(std::vector<int32_t>(), count);
    for (unsigned char c : text) words.back().first.push_back(c);
  }
  std::vector<std::string> id_bytes;
  std::map<std::string, int32_t> bytes_to_id;
  for (int b = 0; b < 256; ++b) {
    id_bytes.emplace_back(1, static_cast<char>(b));
    bytes_to_id[id_bytes.back()] = b;
  }
  std::vector<std::string> merges;
  while (static_cast<int32_t>(id_bytes.size()) < vocab_size) {
    std::map<std::pair<int32_t, int32_t>, int64_t> counts;
    for (const auto& [symbols, count] : words) {
      for (size_t i = 0; i + 1 < symbols.size(); ++i) counts[{symbols[i], symbols[i + 1]}] += count;
    }
    std::pair<int32_t, int32_t> best;
    int64_t best_count = 0;
    for (const auto& [pair, count] : counts) {
      if (count > best_count) best = pair, best_count = count;
    }
    if (best_count < min_frequency || best_count == 0) break;
    const std::string bytes = id_bytes[best.first] + id_bytes[best.second];
    if (!bytes_to_id.count(bytes)) {
      bytes_to_id[bytes] = static_cast<int32_t>(id_bytes.size());
      id_bytes.push_back(bytes);
    }
    const int32_t merged = bytes_to_id[bytes];
    merges.push_back(BytesToByteLevelText(id_bytes[best.first]) + " " +
                     BytesToByteLevelText(id_bytes[best.second]));
    for (auto& [symbols, count] : words) {
      std::vector<int32_t> out;
      for (size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == best.first && symbols[i + 1] == best.second) {
          out.push_back(merged);
          ++i;
        } else {
          out.push_back(symbols[i]);
        }
      }
      symbols = std::move(out);
    }
  }
  return merges;
}

TEST(BpeTrainer, MergesTheMostFrequentPairFirst) {
  // Qwen2 pieces: "ab" x1, " ab" x2, "abc" x1. Pair counts: (a,b) 4, (Ġ,a) 2, (b,c) 1.
  // After "a b": (Ġ,ab) 2, (ab,c) 1. With min_frequency 2 the (ab,c) merge is not made.
  BpeTrainerOptions options;
  options.min_frequency = 2;
  auto tok = MustTrain(options, {"ab ab ab", "abc"});
  ASSERT_NE(tok, nullptr);
  EXPECT_THAT(Merges(*tok), ElementsAre("a b", "Ġ ab"));
  // 3 special tokens + 256 bytes + 2 merges.
  EXPECT_EQ(tok->vocab_size(), 261);
  EXPECT_EQ(tok->TokenId("ab").value(), 259);
  EXPECT_EQ(tok->TokenId("Ġab").value(), 260);
  EXPECT_THAT(tok->Encode("ab ab").value(), ElementsAre(259, 260));

  options.min_frequency = 1;
  tok = MustTrain(options, {"ab ab ab", "abc"});
  ASSERT_NE(tok, nullptr);
  EXPECT_THAT(Merges(*tok), ElementsAre("a b", "Ġ ab", "ab c"));
}

TEST(BpeTrainer, BreaksTiesBySmallestPairIds) {
  // Pieces "ab" and " cd" once each: every pair occurs once. Byte ids follow byte order, so
  // (Ġ,c) (space is 0x20) goes first, then (a,b), then (Ġc,d) whose left id is a new one.
  BpeTrainerOptions options;
  options.min_frequency = 1;
  auto tok = MustTrain(options, {"ab cd"});
  ASSERT_NE(tok, nullptr);
  EXPECT_THAT(Merges(*tok), ElementsAre("Ġ c", "a b", "Ġc d"));
}

TEST(BpeTrainer, MergesRepeatedSymbolsLeftToRight) {
  // "aaaa" x1: (a,a) counts 3 occurrences; merging left to right gives "aa aa", then (aa,aa).
  BpeTrainerOptions options;
  options.min_frequency = 1;
  auto tok = MustTrain(options, {"aaaa"});
  ASSERT_NE(tok, nullptr);
  EXPECT_THAT(Merges(*tok), ElementsAre("a a", "aa aa"));
  EXPECT_THAT(tok->Encode("aaaa").value(), ElementsAre(tok->TokenId("aaaa").value()));
  EXPECT_THAT(tok->Encode("aaa").value(),
              ElementsAre(tok->TokenId("aa").value(), tok->TokenId("a").value()));
}

TEST(BpeTrainer, MergesLikeATrainerThatRecountsEveryPair) {
  // Few letters, runs of one letter, spaces and newlines: many ties, overlapping pairs (a a a) and
  // words whose pairs change with every merge.
  for (const uint64_t seed : {11u, 12u, 13u}) {
    std::mt19937_64 rng(seed);
    std::vector<std::string> texts;
    for (int d = 0; d < 60; ++d) {
      std::string text;
      const int length = 20 + static_cast<int>(rng() % 80);
      for (int c = 0; c < length; ++c) {
        const uint64_t r = rng() % 10;
        text += r < 6 ? static_cast<char>('a' + rng() % 4) : r < 8 ? 'a' : r < 9 ? ' ' : '\n';
      }
      texts.push_back(std::move(text));
    }
    for (const int64_t min_frequency : {1, 3}) {
      BpeTrainerOptions options;
      options.special_tokens = {};
      options.vocab_size = 256 + 300;
      options.min_frequency = min_frequency;
      auto tok = MustTrain(options, texts);
      ASSERT_NE(tok, nullptr);
      const std::vector<std::string> expected =
          ReferenceMerges(texts, options.vocab_size, min_frequency);
      EXPECT_GT(expected.size(), 50u);
      EXPECT_EQ(Merges(*tok), expected) << "seed " << seed << " min_frequency " << min_frequency;
      for (const std::string& text : texts) {
        EXPECT_EQ(tok->Decode(tok->Encode(text).value()).value(), text);
      }
    }
  }
}

TEST(BpeTrainer, MergesInsideAVeryLongWordByDoubling) {
  // One piece of 2^16 letters: each merge pairs up the previous one's tokens, 16 merges in all.
  BpeTrainerOptions options;
  options.min_frequency = 1;
  const std::string word(1 << 16, 'a');
  auto tok = MustTrain(options, {word});
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->num_merges(), 16);
  EXPECT_EQ(tok->vocab_size(), 3 + 256 + 16);
  EXPECT_EQ(tok->Encode(word).value().size(), 1u);
  EXPECT_EQ(tok->Encode(std::string(7, 'a')).value().size(), 3u);  // 4 + 2 + 1
}

TEST(BpeTrainer, GivesTheSameTokenizerWhateverTheDocumentOrder) {
  BpeTrainerOptions options;
  options.vocab_size = 700;
  std::vector<std::string> texts = GeneratedCorpus(300, 1);
  auto first = MustTrain(options, texts);
  std::reverse(texts.begin(), texts.end());
  std::shuffle(texts.begin(), texts.end(), std::mt19937_64(7));
  auto second = MustTrain(options, texts);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(first->ToJson(), second->ToJson());
}

TEST(BpeTrainer, FillsTheVocabularyToExactlyVocabSize) {
  BpeTrainerOptions options;
  options.vocab_size = 400;
  options.min_frequency = 1;
  // Random letter strings hold far more pairs than 141 merges take.
  std::mt19937_64 rng(2);
  std::vector<std::string> texts;
  for (int d = 0; d < 100; ++d) {
    std::string text;
    for (int c = 0; c < 200; ++c)
      text += rng() % 6 == 0 ? ' ' : static_cast<char>('a' + rng() % 26);
    texts.push_back(std::move(text));
  }
  auto tok = MustTrain(options, texts);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 400);
  EXPECT_GE(tok->num_merges(), 400 - 259);
  const json doc = json::parse(tok->ToJson());
  EXPECT_EQ(doc["model"]["vocab"].size(), 400u);
  for (int32_t id = 0; id < 400; ++id) {
    absl::StatusOr<std::string> text = tok->TokenText(id);
    ASSERT_TRUE(text.ok()) << id;
    EXPECT_EQ(tok->TokenId(*text).value(), id) << *text;
  }
}

TEST(BpeTrainer, SpecialTokensGetTheFirstIdsAndStaySingleTokens) {
  BpeTrainerOptions options;
  options.vocab_size = 500;
  options.special_tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool>"};
  std::vector<std::string> texts = GeneratedCorpus(200, 3);
  texts.push_back("<tool><tool><tool> call<tool>");
  auto tok = MustTrain(options, texts);
  ASSERT_NE(tok, nullptr);
  for (int32_t id = 0; id < 4; ++id) {
    EXPECT_TRUE(tok->IsSpecialToken(id));
    EXPECT_EQ(tok->TokenText(id).value(), options.special_tokens[id]);
    EXPECT_THAT(tok->Encode(options.special_tokens[id]).value(), ElementsAre(id));
  }
  EXPECT_EQ(tok->Encode("<|im_start|>user\n").value()[0], 1);
  EXPECT_EQ(tok->Encode("x<|im_end|>y").value()[1], 2);
  // Special tokens never take part in merges: no merged token spells part of one.
  for (const std::string& merge : Merges(*tok)) {
    EXPECT_EQ(merge.find("im_"), std::string::npos) << merge;
    EXPECT_EQ(merge.find("tool>"), std::string::npos) << merge;
  }
}

TEST(BpeTrainer, EveryTrainingTextRoundTripsThroughEncodeAndDecode) {
  BpeTrainerOptions options;
  options.vocab_size = 800;
  const std::vector<std::string> texts = GeneratedCorpus(400, 4);
  auto tok = MustTrain(options, texts);
  ASSERT_NE(tok, nullptr);
  int64_t bytes = 0;
  int64_t tokens = 0;
  for (const std::string& text : texts) {
    absl::StatusOr<std::vector<int32_t>> ids = tok->Encode(text);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(tok->Decode(*ids).value(), text);
    bytes += static_cast<int64_t>(text.size());
    tokens += static_cast<int64_t>(ids->size());
  }
  // The merges pay off on the text they were learnt from.
  EXPECT_LT(tokens * 2, bytes);
}

TEST(BpeTrainer, TrainedTokenizerSurvivesToJsonAndFromJson) {
  BpeTrainerOptions options;
  options.vocab_size = 600;
  options.pre_tokenizer_regex = kGpt2PreTokenizerRegex;
  const std::vector<std::string> texts = GeneratedCorpus(200, 5);
  auto tok = MustTrain(options, texts);
  ASSERT_NE(tok, nullptr);
  const std::string written = tok->ToJson();
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> reloaded =
      BpeTokenizer::FromJson(written, "written.json");
  ASSERT_TRUE(reloaded.ok()) << reloaded.status();
  EXPECT_EQ((*reloaded)->ToJson(), written);
  for (const std::string& text : texts) {
    EXPECT_EQ((*reloaded)->Encode(text).value(), tok->Encode(text).value());
  }
  const json doc = json::parse(written);
  EXPECT_EQ(doc["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"], kGpt2PreTokenizerRegex);
}

TEST(BpeTrainer, ReportsProgressEndingAtTheMergeCount) {
  BpeTrainerOptions options;
  options.vocab_size = 400;
  options.min_frequency = 1;
  std::vector<BpeTrainProgress> reports;
  options.progress = [&](const BpeTrainProgress& p) { reports.push_back(p); };
  options.progress_interval_seconds = 0;
  auto tok = MustTrain(options, GeneratedCorpus(300, 6));
  ASSERT_NE(tok, nullptr);
  ASSERT_GE(reports.size(), 2u);
  EXPECT_EQ(reports.back().merges_done, tok->num_merges());
  EXPECT_EQ(reports.back().merges_target, 400 - 259);
  EXPECT_EQ(reports.front().merges_done, 64);
}

TEST(BpeTrainer, StopsAcceptingTextAtMaxTextBytes) {
  BpeTrainerOptions options;
  options.max_text_bytes = 10;
  auto trainer = BpeTrainer::Create(options);
  ASSERT_TRUE(trainer.ok());
  EXPECT_TRUE((*trainer)->AddText("hello"));
  EXPECT_TRUE((*trainer)->AddText("world"));
  EXPECT_FALSE((*trainer)->AddText("!"));
  EXPECT_FALSE((*trainer)->AddText(""));
  EXPECT_TRUE((*trainer)->full());
  EXPECT_EQ((*trainer)->text_bytes(), 10);
  EXPECT_EQ((*trainer)->distinct_words(), 2);
}

TEST(BpeTrainer, RefusesBadOptionsNamingThem) {
  BpeTrainerOptions options;
  options.vocab_size = 258;
  EXPECT_THAT(BpeTrainer::Create(options).status().message(), HasSubstr("vocab_size 258"));
  options = BpeTrainerOptions();
  options.min_frequency = 0;
  EXPECT_THAT(BpeTrainer::Create(options).status().message(), HasSubstr("min_frequency"));
  options = BpeTrainerOptions();
  options.special_tokens = {"<a>", "<a>"};
  EXPECT_THAT(BpeTrainer::Create(options).status().message(), HasSubstr("given twice"));
  options.special_tokens = {"!"};
  EXPECT_THAT(BpeTrainer::Create(options).status().message(), HasSubstr("byte 33"));
  options.special_tokens = {"<\xff>"};
  EXPECT_THAT(BpeTrainer::Create(options).status().message(), HasSubstr("not valid UTF-8"));
  options.special_tokens = {""};
  EXPECT_THAT(BpeTrainer::Create(options).status().message(), HasSubstr("empty"));
  options = BpeTrainerOptions();
  options.pre_tokenizer_regex = "\\w+";
  EXPECT_THAT(BpeTrainer::Create(options).status().message(), HasSubstr("pre_tokenizer_regex"));
  auto trainer = BpeTrainer::Create(BpeTrainerOptions());
  ASSERT_TRUE(trainer.ok());
  EXPECT_THAT((*trainer)->Train().status().message(), HasSubstr("no training text"));
}

}  // namespace
}  // namespace troupe::models
