#include "models/tokenizers/bpe_tokenizer.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/tokenizers/pre_tokenizer.h"
#include "nlohmann/json.hpp"

namespace troupe::models {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

// A hand-written GPT-2 style file. Symbols: "Ġ" is the byte-level form of ' ', "Ċ" of '\n'.
// Merge ranks are the positions in "merges".
constexpr char kSmallTokenizerJson[] = R"json({
  "version": "1.0",
  "added_tokens": [
    {"id": 22, "content": "<|endoftext|>", "single_word": false, "lstrip": false,
     "rstrip": false, "normalized": false, "special": true}
  ],
  "normalizer": null,
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
                    "use_regex": true},
  "post_processor": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false,
                     "use_regex": true},
  "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true,
              "use_regex": true},
  "model": {
    "type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": "",
    "end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false,
    "vocab": {"h": 0, "e": 1, "l": 2, "o": 3, "w": 4, "r": 5, "d": 6, "Ġ": 7, "!": 8, "'": 9,
              "s": 10, "Ċ": 11, "he": 12, "ll": 13, "lo": 14, "hell": 15, "hello": 16,
              "Ġw": 17, "or": 18, "Ġwor": 19, "ld": 20, "'s": 21},
    "merges": ["h e", "l l", "l o", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "l d", "' s"]
  }
})json";

std::unique_ptr<BpeTokenizer> MustLoad(absl::string_view json_text) {
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> tokenizer =
      BpeTokenizer::FromJson(json_text, "test/tokenizer.json");
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? std::move(*tokenizer) : nullptr;
}

std::vector<int32_t> MustEncode(const Tokenizer& tokenizer, absl::string_view text,
                                EncodeOptions options = EncodeOptions()) {
  absl::StatusOr<std::vector<int32_t>> ids = tokenizer.Encode(text, options);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : std::vector<int32_t>();
}

absl::Status LoadError(absl::string_view json_text) {
  return BpeTokenizer::FromJson(json_text, "bad/tokenizer.json").status();
}

TEST(BpeTokenizer, AppliesMergesInRankOrder) {
  auto tok = MustLoad(kSmallTokenizerJson);
  ASSERT_NE(tok, nullptr);
  // hello: h e l l o -> (h e)#0 -> he l l o -> (l l)#1 -> he ll o -> (he ll)#3 -> hell o
  //        -> (hell o)#4 -> hello. " world": Ġ w o r l d -> (Ġ w)#5 -> (o r)#6 -> (Ġw or)#7
  //        -> (l d)#8 -> Ġwor ld. "'s" is its own piece -> (' s)#9. "!!" has no merge.
  EXPECT_THAT(MustEncode(*tok, "hello world's!!\n"), ElementsAre(16, 19, 20, 21, 8, 8, 11));
  // l l o: (l l)#1 beats (l o)#2.
  EXPECT_THAT(MustEncode(*tok, "llo"), ElementsAre(13, 3));
  // l l l: the two (l l) pairs tie on rank; the leftmost merges first.
  EXPECT_THAT(MustEncode(*tok, "lll"), ElementsAre(13, 2));
}

TEST(BpeTokenizer, SwappingTwoMergeRanksChangesTheResult) {
  const std::string swapped =
      absl::StrReplaceAll(kSmallTokenizerJson, {{R"("l l", "l o")", R"("l o", "l l")"}});
  auto tok = MustLoad(swapped);
  ASSERT_NE(tok, nullptr);
  EXPECT_THAT(MustEncode(*tok, "llo"), ElementsAre(2, 14));
}

TEST(BpeTokenizer, AcceptsMergesAsPairsOfStrings) {
  const std::string pairs = absl::StrReplaceAll(
      kSmallTokenizerJson,
      {{R"(["h e", "l l", "l o", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "l d", "' s"])",
        R"([["h", "e"], ["l", "l"], ["l", "o"], ["he", "ll"], ["hell", "o"], ["Ġ", "w"],
            ["o", "r"], ["Ġw", "or"], ["l", "d"], ["'", "s"]])"}});
  ASSERT_NE(pairs, kSmallTokenizerJson);
  auto tok = MustLoad(pairs);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->num_merges(), 10);
  EXPECT_THAT(MustEncode(*tok, "hello world's!!\n"), ElementsAre(16, 19, 20, 21, 8, 8, 11));
  EXPECT_THAT(MustEncode(*tok, "lll"), ElementsAre(13, 2));
}

TEST(BpeTokenizer, DecodesIdsBackToText) {
  auto tok = MustLoad(kSmallTokenizerJson);
  ASSERT_NE(tok, nullptr);
  absl::StatusOr<std::string> text = tok->Decode({16, 19, 20, 21, 8, 8, 11, 22});
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "hello world's!!\n<|endoftext|>");
  DecodeOptions skip;
  skip.skip_special_tokens = true;
  EXPECT_EQ(tok->Decode({16, 22, 7}, skip).value(), "hello ");
}

TEST(BpeTokenizer, RejectsIdsOutsideTheVocabularyOnDecode) {
  auto tok = MustLoad(kSmallTokenizerJson);
  ASSERT_NE(tok, nullptr);
  for (int32_t bad : {23, -1, 1000}) {
    absl::StatusOr<std::string> text = tok->Decode({16, bad});
    EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(text.status().message(), HasSubstr(absl::StrCat("id ", bad, " at index 1")));
  }
}

TEST(BpeTokenizer, MatchesSpecialTokensBeforeBpe) {
  auto tok = MustLoad(kSmallTokenizerJson);
  ASSERT_NE(tok, nullptr);
  EXPECT_THAT(MustEncode(*tok, "hello<|endoftext|> world"), ElementsAre(16, 22, 19, 20));
  // As plain text, '<' has no symbol in this small vocabulary: the error names the byte.
  EncodeOptions plain;
  plain.match_special_tokens = false;
  absl::StatusOr<std::vector<int32_t>> ids = tok->Encode("hello<|endoftext|>", plain);
  EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ids.status().message(), HasSubstr("byte 0x3C"));
}

TEST(BpeTokenizer, ReportsVocabularyLookups) {
  auto tok = MustLoad(kSmallTokenizerJson);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 23);
  EXPECT_EQ(tok->TokenId("<|endoftext|>").value(), 22);
  EXPECT_EQ(tok->TokenId("Ġwor").value(), 19);
  EXPECT_EQ(tok->TokenId("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(tok->TokenText(7).value(), "Ġ");
  EXPECT_EQ(tok->TokenText(22).value(), "<|endoftext|>");
  EXPECT_TRUE(tok->IsSpecialToken(22));
  EXPECT_FALSE(tok->IsSpecialToken(16));
  EXPECT_FALSE(tok->eos_id().has_value());
}

TEST(BpeTokenizer, FailsOnBytesWithoutASymbolUnlessUnkIsSet) {
  auto tok = MustLoad(kSmallTokenizerJson);
  ASSERT_NE(tok, nullptr);
  absl::StatusOr<std::vector<int32_t>> ids = tok->Encode("Hello");
  EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ids.status().message(), HasSubstr("byte 0x48"));

  std::string with_unk =
      absl::StrReplaceAll(kSmallTokenizerJson, {{R"("unk_token": null)", R"("unk_token": "<unk>")"},
                                                {R"("'s": 21})", R"("'s": 21, "<unk>": 23})"}});
  auto unk = MustLoad(with_unk);
  ASSERT_NE(unk, nullptr);
  // H -> <unk>; e l l o -> (l l)#1 -> e ll o (no further merge applies).
  EXPECT_THAT(MustEncode(*unk, "Hello"), ElementsAre(23, 1, 13, 3));
  EXPECT_THAT(MustEncode(*unk, "HHello"), ElementsAre(23, 23, 1, 13, 3));
  auto fused =
      MustLoad(absl::StrReplaceAll(with_unk, {{R"("fuse_unk": false)", R"("fuse_unk": true)"}}));
  ASSERT_NE(fused, nullptr);
  EXPECT_THAT(MustEncode(*fused, "HHello"), ElementsAre(23, 1, 13, 3));
}

TEST(BpeTokenizer, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  // Only "h e" remains as a merge, so BPE alone cannot build "hello".
  std::string only_he = absl::StrReplaceAll(
      kSmallTokenizerJson,
      {{R"(["h e", "l l", "l o", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "l d", "' s"])",
        R"(["h e"])"}});
  auto merges_only = MustLoad(only_he);
  ASSERT_NE(merges_only, nullptr);
  EXPECT_THAT(MustEncode(*merges_only, "hello"), ElementsAre(12, 2, 2, 3));
  auto ignore = MustLoad(absl::StrReplaceAll(
      only_he, {{R"("fuse_unk": false)", R"("fuse_unk": false, "ignore_merges": true)"}}));
  ASSERT_NE(ignore, nullptr);
  EXPECT_THAT(MustEncode(*ignore, "hello"), ElementsAre(16));
}

TEST(BpeTokenizer, AddPrefixSpaceAppliesToEachStretchBetweenSpecialTokens) {
  auto tok = MustLoad(absl::StrReplaceAll(
      kSmallTokenizerJson,
      {{R"("pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false)",
        R"("pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": true)"}}));
  ASSERT_NE(tok, nullptr);
  EXPECT_THAT(tok->PreTokenize("hello world").value(), ElementsAre(" hello", " world"));
  EXPECT_THAT(tok->PreTokenize(" world").value(), ElementsAre(" world"));
  // " hello" has no merge across Ġ h; "world" after the special token gets its space back.
  EXPECT_THAT(MustEncode(*tok, "world<|endoftext|>world"), ElementsAre(19, 20, 22, 19, 20));
}

// --- A full byte-level vocabulary (all 256 byte symbols) ---------------------------------------

// GPT-2's byte -> code point table, written out independently of the implementation.
std::vector<char32_t> ByteSymbols() {
  std::vector<int> printable;
  for (int b = '!'; b <= '~'; ++b) printable.push_back(b);
  for (int b = 0xA1; b <= 0xAC; ++b) printable.push_back(b);
  for (int b = 0xAE; b <= 0xFF; ++b) printable.push_back(b);
  std::vector<char32_t> symbols(256, 0);
  for (int b : printable) symbols[b] = static_cast<char32_t>(b);
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    if (symbols[b] == 0) symbols[b] = next++;
  }
  return symbols;
}

std::string ToUtf8(char32_t cp) {
  std::u32string s(1, cp);
  std::string out;
  for (char32_t c : s) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

// Ids 0..255: byte symbols in byte order. Then a few merges, including the three bytes of
// 中 (E4 B8 AD -> "ä" "¸" "Ń"). Added tokens 300..303.
json FullByteTokenizer(const json& pre_tokenizer) {
  const std::vector<char32_t> symbols = ByteSymbols();
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[ToUtf8(symbols[b])] = b;
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"i", "n"}, {"Ġ", "a"}, {"ä", "¸"}, {"ä¸", "Ń"}};
  json merge_list = json::array();
  int next_id = 256;
  for (const auto& [left, right] : merges) {
    if (!vocab.contains(left + right)) vocab[left + right] = next_id++;
    merge_list.push_back(left + " " + right);
  }
  json added = json::array();
  int added_id = 300;
  for (const char* content : {"<|im_start|>", "<|im_end|>", "<|endoftext|>"}) {
    added.push_back({{"id", added_id++}, {"content", content}, {"special", true}});
  }
  added.push_back({{"id", added_id}, {"content", "[TOOL]"}, {"special", false}});
  return json{{"added_tokens", added},
              {"normalizer", {{"type", "NFC"}}},
              {"pre_tokenizer", pre_tokenizer},
              {"decoder", {{"type", "ByteLevel"}}},
              {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}}}};
}

json Qwen2PreTokenizer() {
  return {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"},
             {"pattern", {{"Regex", kQwen2PreTokenizerRegex}}},
             {"behavior", "Isolated"},
             {"invert", false}},
            {{"type", "ByteLevel"},
             {"add_prefix_space", false},
             {"trim_offsets", false},
             {"use_regex", false}}}}};
}

json Gpt2PreTokenizer() {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
}

TEST(BpeTokenizer, ByteSymbolsFollowTheGpt2Table) {
  auto tok = MustLoad(FullByteTokenizer(Gpt2PreTokenizer()).dump());
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->TokenText(' ').value(), "Ġ");
  EXPECT_EQ(tok->TokenText('\n').value(), "Ċ");
  EXPECT_EQ(tok->TokenText(0xAD).value(), "Ń");
  EXPECT_EQ(tok->TokenText('A').value(), "A");
  EXPECT_EQ(tok->TokenText(0xE9).value(), "é");
  // é is C3 A9 in UTF-8: two byte tokens, "Ã" and "©".
  EXPECT_THAT(MustEncode(*tok, "é"), ElementsAre(0xC3, 0xA9));
  // 中 is E4 B8 AD: merged by ("ä" "¸") then ("ä¸" "Ń").
  const int32_t zhong = tok->TokenId("ä¸Ń").value();
  EXPECT_THAT(MustEncode(*tok, "中"), ElementsAre(zhong));
  EXPECT_THAT(MustEncode(*tok, " the"), ElementsAre(tok->TokenId("Ġthe").value()));
}

TEST(BpeTokenizer, WritesBytesInByteLevelForm) {
  EXPECT_EQ(BytesToByteLevelText(" the\n"), "ĠtheĊ");
  EXPECT_EQ(BytesToByteLevelText("é"), "Ã©");
  EXPECT_EQ(BytesToByteLevelText(std::string("\x00\xAD", 2)), "ĀŃ");
}

TEST(BpeTokenizer, RoundTripsAllKindsOfTextWithBothPatterns) {
  const std::vector<std::string> texts = {
      "The quick brown fox jumps over the lazy dog. 1234567890",
      "Café naïve façade — Ünïcödé ΑΒΓ αβγ Жук",
      "smile 😀 thumbs 👍🏽 family 👨‍👩‍👧 flags 🇫🇷",
      "中文字符 日本語のテキスト 한국어",
      "  leading\n\n\ttabs\r\n  trailing   ",
      "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4<|endoftext|>",
      "[TOOL] call(x='y') [TOOL]",
      "",
      std::string("\x00\x01\x7F\xFF binary", 12),
  };
  for (const json& pre : {Gpt2PreTokenizer(), Qwen2PreTokenizer()}) {
    auto tok = MustLoad(FullByteTokenizer(pre).dump());
    ASSERT_NE(tok, nullptr);
    for (const std::string& text : texts) {
      for (bool match_special : {true, false}) {
        EncodeOptions options;
        options.match_special_tokens = match_special;
        const std::vector<int32_t> ids = MustEncode(*tok, text, options);
        absl::StatusOr<std::string> back = tok->Decode(ids);
        ASSERT_TRUE(back.ok()) << back.status();
        EXPECT_EQ(*back, text) << pre.dump();
      }
    }
  }
}

TEST(BpeTokenizer, PreTokenizesWithTheSplitRegexFromTheFile) {
  auto qwen = MustLoad(FullByteTokenizer(Qwen2PreTokenizer()).dump());
  auto gpt2 = MustLoad(FullByteTokenizer(Gpt2PreTokenizer()).dump());
  ASSERT_NE(qwen, nullptr);
  ASSERT_NE(gpt2, nullptr);
  const std::string text = "Hello world's  123 !!\n\n  x";
  EXPECT_THAT(qwen->PreTokenize(text).value(),
              ElementsAre("Hello", " world", "'s", " ", " ", "1", "2", "3", " !!\n\n", " ", " x"));
  EXPECT_THAT(gpt2->PreTokenize(text).value(),
              ElementsAre("Hello", " world", "'s", " ", " 123", " !!", "\n\n ", " x"));
}

// GPT-4o's pre-tokenizer regex (tiktoken o200k_base), which only Oniguruma runs.
constexpr char kO200kRegex[] =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

json O200kPreTokenizer() {
  json pre = Qwen2PreTokenizer();
  pre["pretokenizers"][0]["pattern"]["Regex"] = kO200kRegex;
  return pre;
}

TEST(BpeTokenizer, LoadsAnO200kSplitAndRoundTrips) {
  json doc = FullByteTokenizer(O200kPreTokenizer());
  doc["normalizer"] = nullptr;
  auto tok = MustLoad(doc.dump());
  ASSERT_NE(tok, nullptr);
  EXPECT_THAT(tok->PreTokenize("DON'T you'RE camelCase 12345!!\n").value(),
              ElementsAre("DON'T", " you'RE", " camel", "Case", " ", "123", "45", "!!\n"));
  const std::vector<std::string> texts = {
      "The quick brown fox can't jump 1234567 times.\r\n\r\n  Next",
      "Café naïve e\u0301cole — Ünïcödé ΑΒΓ αβγ Жук 中文字符 日本語 한국어",
      "smile 😀 thumbs 👍🏽 family 👨‍👩‍👧 path/to/file.txt",
      "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4<|endoftext|>",
      std::string("\x00\x01\x7F\xFF binary \xC3", 13),
  };
  for (const std::string& text : texts) {
    const std::vector<int32_t> ids = MustEncode(*tok, text);
    EXPECT_EQ(tok->Decode(ids).value(), text);
  }
  // " the" still merges to one token: pieces start with their space.
  EXPECT_THAT(MustEncode(*tok, " the"), ElementsAre(tok->TokenId("Ġthe").value()));
}

TEST(BpeTokenizer, AppliesTheNfcNormalizerBeforeEncoding) {
  // FullByteTokenizer's normalizer is NFC: decomposed e + U+0301 encodes as precomposed é.
  auto nfc = MustLoad(FullByteTokenizer(Qwen2PreTokenizer()).dump());
  ASSERT_NE(nfc, nullptr);
  EXPECT_EQ(MustEncode(*nfc,
                       "caf"
                       "e\u0301"),
            MustEncode(*nfc, "caf\u00E9"));
  EXPECT_THAT(MustEncode(*nfc, "e\u0301"), ElementsAre(0xC3, 0xA9));
  EXPECT_EQ(nfc->Decode(MustEncode(*nfc, "e\u0301<|im_end|>e\u0301")).value(),
            "\u00E9<|im_end|>\u00E9");
  EXPECT_THAT(nfc->PreTokenize("x e\u0301").value(), ElementsAre("x", " \u00E9"));

  json none = FullByteTokenizer(Qwen2PreTokenizer());
  none["normalizer"] = nullptr;
  auto raw = MustLoad(none.dump());
  ASSERT_NE(raw, nullptr);
  EXPECT_THAT(MustEncode(*raw, "e\u0301"), ElementsAre('e', 0xCC, 0x81));

  json nfkc = FullByteTokenizer(Gpt2PreTokenizer());
  nfkc["normalizer"] = {{"type", "Sequence"},
                        {"normalizers", {{{"type", "NFKC"}}, {{"type", "Lowercase"}}}}};
  auto folded = MustLoad(nfkc.dump());
  ASSERT_NE(folded, nullptr);
  EXPECT_EQ(MustEncode(*folded, "\uFF34HE \uFB01ne"), MustEncode(*folded, "the fine"));
}

TEST(BpeTokenizer, EncodesConsistentlyFromConcurrentThreads) {
  auto tok = MustLoad(FullByteTokenizer(Qwen2PreTokenizer()).dump());
  ASSERT_NE(tok, nullptr);
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i) {
    texts.push_back(absl::StrCat("the thing ", i, " in 中文 ", i * 7919, " then\n"));
  }
  std::vector<std::vector<int32_t>> expected;
  {
    auto fresh = MustLoad(FullByteTokenizer(Qwen2PreTokenizer()).dump());
    ASSERT_NE(fresh, nullptr);
    for (const std::string& text : texts) expected.push_back(MustEncode(*fresh, text));
  }
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round) {
        for (size_t i = t; i < texts.size(); i += (round % 2 == 0 ? 1 : 3)) {
          absl::StatusOr<std::vector<int32_t>> ids = tok->Encode(texts[i]);
          if (!ids.ok() || *ids != expected[i]) ++mismatches[t];
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_THAT(mismatches, ElementsAre(0, 0, 0, 0));
}

TEST(BpeTokenizer, EncodesSpecialTokensInsideTextAsSingleIds) {
  auto tok = MustLoad(FullByteTokenizer(Qwen2PreTokenizer()).dump());
  ASSERT_NE(tok, nullptr);
  const std::vector<int32_t> body = MustEncode(*tok, "user\nthe");
  std::vector<int32_t> expected = {300};
  expected.insert(expected.end(), body.begin(), body.end());
  expected.push_back(301);
  EXPECT_EQ(MustEncode(*tok, "<|im_start|>user\nthe<|im_end|>"), expected);

  EncodeOptions plain;
  plain.match_special_tokens = false;
  const std::vector<int32_t> as_text = MustEncode(*tok, "<|im_start|>hi", plain);
  EXPECT_GT(as_text.size(), 3u);
  for (int32_t id : as_text) EXPECT_LT(id, 300);
  // Non-special added tokens are matched either way.
  EXPECT_THAT(MustEncode(*tok, "[TOOL]", plain), ElementsAre(303));

  DecodeOptions skip;
  skip.skip_special_tokens = true;
  EXPECT_EQ(tok->Decode(MustEncode(*tok, "<|im_start|>hi<|im_end|>[TOOL]"), skip).value(),
            "hi[TOOL]");
}

TEST(BpeTokenizer, TakesBosEosPadFromTokenizerConfig) {
  auto tok = MustLoad(kSmallTokenizerJson);
  ASSERT_NE(tok, nullptr);
  ASSERT_TRUE(tok->ApplyTokenizerConfig(
                     R"({"bos_token": null, "eos_token": "<|endoftext|>",
                         "pad_token": {"content": "<|endoftext|>", "special": true}})",
                     "cfg.json")
                  .ok());
  EXPECT_FALSE(tok->bos_id().has_value());
  EXPECT_EQ(tok->eos_id(), 22);
  EXPECT_EQ(tok->pad_id(), 22);

  absl::Status bad = tok->ApplyTokenizerConfig(R"({"eos_token": "<|im_end|>"})", "cfg.json");
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("cfg.json: field 'eos_token'"));
}

// --- Writing tokenizer.json and tokenizer_config.json -------------------------------------------

TEST(BpeTokenizer, ToJsonReloadsToATokenizerThatEncodesIdentically) {
  auto tok = MustLoad(kSmallTokenizerJson);
  ASSERT_NE(tok, nullptr);
  const std::string written = tok->ToJson();
  auto reloaded = MustLoad(written);
  ASSERT_NE(reloaded, nullptr);
  for (const char* text : {"hello world's!!\n", "lll", "<|endoftext|>hello<|endoftext|>",
                           "helloworld hello  world\n\n'sld"}) {
    EXPECT_EQ(MustEncode(*reloaded, text), MustEncode(*tok, text)) << text;
  }
  EXPECT_EQ(reloaded->num_merges(), tok->num_merges());
  EXPECT_EQ(reloaded->vocab_size(), tok->vocab_size());
  EXPECT_EQ(reloaded->ToJson(), written);
}

TEST(BpeTokenizer, ToJsonWritesMergesInRankOrderAndTheNodesAsLoaded) {
  auto tok = MustLoad(kSmallTokenizerJson);
  ASSERT_NE(tok, nullptr);
  const json doc = json::parse(tok->ToJson());
  const json original = json::parse(kSmallTokenizerJson);
  EXPECT_EQ(doc["model"]["merges"], original["model"]["merges"]);
  EXPECT_EQ(doc["model"]["vocab"], original["model"]["vocab"]);
  EXPECT_EQ(doc["model"]["type"], "BPE");
  for (const char* node : {"normalizer", "pre_tokenizer", "post_processor", "decoder"}) {
    EXPECT_EQ(doc[node], original[node]) << node;
  }
  EXPECT_EQ(doc["added_tokens"], original["added_tokens"]);
  // Vocabulary in id order, as Hugging Face writes it.
  const std::string text = tok->ToJson();
  EXPECT_LT(text.find("\"h\": 0"), text.find("\"e\": 1"));
  EXPECT_LT(text.find("\"ld\": 20"), text.find("\"'s\": 21"));
}

TEST(BpeTokenizer, ToJsonKeepsMergesAsPairsWhenReadAsPairs) {
  json doc = json::parse(kSmallTokenizerJson);
  json pairs = json::array();
  for (const json& merge : doc["model"]["merges"]) {
    const std::string text = merge.get<std::string>();
    pairs.push_back({text.substr(0, text.find(' ')), text.substr(text.find(' ') + 1)});
  }
  doc["model"]["merges"] = pairs;
  // A repeated pair keeps its first rank and is written once.
  doc["model"]["merges"].push_back({"h", "e"});
  auto tok = MustLoad(doc.dump());
  ASSERT_NE(tok, nullptr);
  const json written = json::parse(tok->ToJson());
  ASSERT_EQ(written["model"]["merges"].size(), 10u);
  EXPECT_EQ(written["model"]["merges"][5], json::array({"Ġ", "w"}));
}

TEST(BpeTokenizer, ToJsonKeepsAddedTokenFlagsAndUnknownToken) {
  json doc = json::parse(kSmallTokenizerJson);
  doc["model"]["unk_token"] = "'s";
  doc["added_tokens"].push_back({{"id", 23},
                                 {"content", "[TOOL]"},
                                 {"single_word", true},
                                 {"lstrip", true},
                                 {"rstrip", false},
                                 {"normalized", true},
                                 {"special", false}});
  auto tok = MustLoad(doc.dump());
  ASSERT_NE(tok, nullptr);
  const json written = json::parse(tok->ToJson());
  EXPECT_EQ(written["model"]["unk_token"], "'s");
  EXPECT_EQ(written["added_tokens"], doc["added_tokens"]);
  auto reloaded = MustLoad(written.dump());
  ASSERT_NE(reloaded, nullptr);
  EXPECT_EQ(MustEncode(*reloaded, "a [TOOL] b"), MustEncode(*tok, "a [TOOL] b"));
}

TEST(BpeTokenizer, ConfigJsonWritesTokensTemplateAndAddedTokensDecoder) {
  auto tok = MustLoad(kSmallTokenizerJson);
  ASSERT_NE(tok, nullptr);
  ASSERT_TRUE(tok->ApplyTokenizerConfig(
                     R"({"eos_token": "<|endoftext|>", "custom_key": 7, "model_max_length": 64})",
                     "cfg.json")
                  .ok());
  TokenizerConfigOptions options;
  options.chat_template = "{{ messages }}";
  const std::string text = tok->ConfigJson(options);
  const json config = json::parse(text);
  EXPECT_EQ(config["eos_token"], "<|endoftext|>");
  EXPECT_TRUE(config["bos_token"].is_null());
  EXPECT_TRUE(config["pad_token"].is_null());
  EXPECT_EQ(config["custom_key"], 7);
  EXPECT_EQ(config["model_max_length"], 64);
  EXPECT_EQ(config["chat_template"], "{{ messages }}");
  EXPECT_EQ(config["added_tokens_decoder"]["22"]["content"], "<|endoftext|>");
  EXPECT_EQ(config["added_tokens_decoder"]["22"]["special"], true);
  EXPECT_EQ(config["added_tokens_decoder"]["22"]["normalized"], false);

  options.model_max_length = 2048;
  EXPECT_EQ(json::parse(tok->ConfigJson(options))["model_max_length"], 2048);

  // Applying the written config restores the special ids and writes the same config again.
  auto reloaded = MustLoad(tok->ToJson());
  ASSERT_NE(reloaded, nullptr);
  ASSERT_TRUE(reloaded->ApplyTokenizerConfig(text, "written.json").ok());
  EXPECT_EQ(reloaded->eos_id(), 22);
  EXPECT_FALSE(reloaded->bos_id().has_value());
  EXPECT_EQ(reloaded->ConfigJson({}), text);
}

// --- Refused files ------------------------------------------------------------------------------

TEST(BpeTokenizer, RefusesOtherModelTypesNamingTheField) {
  for (const char* type : {"WordPiece", "Unigram", "WordLevel"}) {
    absl::Status status = LoadError(absl::StrReplaceAll(
        kSmallTokenizerJson, {{R"("type": "BPE")", absl::StrCat("\"type\": \"", type, "\"")}}));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr("bad/tokenizer.json: field 'model.type'"));
    EXPECT_THAT(status.message(), HasSubstr(type));
  }
}

TEST(BpeTokenizer, RefusesAMissingVocabulary) {
  json doc = json::parse(kSmallTokenizerJson);
  doc["model"].erase("vocab");
  absl::Status status = LoadError(doc.dump());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("bad/tokenizer.json: field 'model.vocab': missing"));

  doc = json::parse(kSmallTokenizerJson);
  doc.erase("model");
  EXPECT_THAT(LoadError(doc.dump()).message(), HasSubstr("field 'model': missing"));
}

TEST(BpeTokenizer, RefusesMalformedJson) {
  absl::Status status = LoadError(R"({"model": {"type": "BPE", "vocab": {"a": 0,}})");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("bad/tokenizer.json: malformed JSON at byte"));
  EXPECT_EQ(LoadError("").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(LoadError("[1, 2]").message(), HasSubstr("expected a JSON object"));
}

TEST(BpeTokenizer, RefusesMergesThatReferToUnknownTokens) {
  absl::Status status =
      LoadError(absl::StrReplaceAll(kSmallTokenizerJson, {{R"("l l", "l o")", R"("l l", "l x")"}}));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("field 'model.merges[2]': token \"x\""));

  // Both parts known, but their concatenation is not a token.
  status =
      LoadError(absl::StrReplaceAll(kSmallTokenizerJson, {{R"("l l", "l o")", R"("l l", "o l")"}}));
  EXPECT_THAT(status.message(), HasSubstr("field 'model.merges[2]': merged token \"ol\""));

  status =
      LoadError(absl::StrReplaceAll(kSmallTokenizerJson, {{R"("l l", "l o")", R"("l l", "lo")"}}));
  EXPECT_THAT(status.message(), HasSubstr("field 'model.merges[2]'"));
  status =
      LoadError(absl::StrReplaceAll(kSmallTokenizerJson, {{R"("l l", "l o")", R"("l l", ["l"])"}}));
  EXPECT_THAT(status.message(), HasSubstr("field 'model.merges[2]'"));
}

TEST(BpeTokenizer, RefusesUnsupportedPipelinePartsNamingTheField) {
  json qwen = FullByteTokenizer(Qwen2PreTokenizer());
  qwen["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(\\w+";
  EXPECT_THAT(LoadError(qwen.dump()).message(),
              HasSubstr("field 'pre_tokenizer.pretokenizers[0].pattern.Regex'"));
  qwen["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Merged";
  qwen["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\w+";
  EXPECT_THAT(LoadError(qwen.dump()).message(),
              HasSubstr("field 'pre_tokenizer.pretokenizers[0].behavior'"));

  json metaspace = FullByteTokenizer({{"type", "Metaspace"}});
  EXPECT_THAT(LoadError(metaspace.dump()).message(), HasSubstr("field 'pre_tokenizer.type'"));

  json split_only = FullByteTokenizer(Qwen2PreTokenizer());
  split_only["pre_tokenizer"]["pretokenizers"].erase(1);
  EXPECT_THAT(LoadError(split_only.dump()).message(), HasSubstr("no ByteLevel step"));

  json fallback = FullByteTokenizer(Gpt2PreTokenizer());
  fallback["model"]["byte_fallback"] = true;
  EXPECT_THAT(LoadError(fallback.dump()).message(), HasSubstr("field 'model.byte_fallback'"));

  json bert = FullByteTokenizer(Gpt2PreTokenizer());
  bert["normalizer"] = {{"type", "BertNormalizer"}};
  EXPECT_THAT(LoadError(bert.dump()).message(), HasSubstr("field 'normalizer.type'"));
  json nested = FullByteTokenizer(Gpt2PreTokenizer());
  nested["normalizer"] = {{"type", "Sequence"},
                          {"normalizers", {{{"type", "NFC"}}, {{"type", "StripAccents"}}}}};
  EXPECT_THAT(LoadError(nested.dump()).message(),
              HasSubstr("field 'normalizer.normalizers[1].type'"));
  json normalized_token = FullByteTokenizer(Gpt2PreTokenizer());
  normalized_token["added_tokens"][1]["normalized"] = true;
  EXPECT_THAT(LoadError(normalized_token.dump()).message(),
              HasSubstr("field 'added_tokens[1].normalized'"));

  json wordpiece_decoder = FullByteTokenizer(Gpt2PreTokenizer());
  wordpiece_decoder["decoder"] = {{"type", "WordPiece"}};
  EXPECT_THAT(LoadError(wordpiece_decoder.dump()).message(), HasSubstr("field 'decoder.type'"));
}

TEST(BpeTokenizer, RefusesBadVocabularyAndAddedTokenEntries) {
  json doc = json::parse(kSmallTokenizerJson);
  doc["model"]["vocab"]["x"] = 3;  // "o" already has id 3
  EXPECT_THAT(LoadError(doc.dump()).message(),
              HasSubstr("field 'model.vocab': id 3 is assigned to both"));

  doc = json::parse(kSmallTokenizerJson);
  doc["model"]["vocab"]["x"] = "seven";
  EXPECT_THAT(LoadError(doc.dump()).message(), HasSubstr("field 'model.vocab[\"x\"]'"));

  doc = json::parse(kSmallTokenizerJson);
  doc["added_tokens"][0]["id"] = 16;  // "hello"
  EXPECT_THAT(LoadError(doc.dump()).message(), HasSubstr("field 'added_tokens[0].id'"));

  doc = json::parse(kSmallTokenizerJson);
  doc["added_tokens"][0].erase("content");
  EXPECT_THAT(LoadError(doc.dump()).message(), HasSubstr("field 'added_tokens[0].content'"));
}

}  // namespace
}  // namespace troupe::models
