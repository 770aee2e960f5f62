#include "models/tokenizers/test_tokenizer_files.h"

#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/atomic_file.h"
#include "base/status_macros.h"
#include "models/tokenizers/bpe_tokenizer.h"
#include "nlohmann/json.hpp"

namespace troupe::models {

const char kTestChatTemplate[] =
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
    "{{ eos_token }}";

absl::StatusOr<std::string> WriteTestBpeTokenizer(const std::string& dir) {
  using json = nlohmann::json;
  json vocab = json::object();
  for (int b = 0; b < 256; ++b)
    vocab[BytesToByteLevelText(std::string(1, static_cast<char>(b)))] = b;
  const std::pair<const char*, const char*> merges[] = {
      {" ", "t"}, {"h", "e"}, {" t", "he"}, {"i", "n"}, {"\xE4", "\xB8"}, {"\xE4\xB8", "\xAD"}};
  json merge_list = json::array();
  int next_id = 256;
  for (const auto& [left_bytes, right_bytes] : merges) {
    const std::string left = BytesToByteLevelText(left_bytes);
    const std::string right = BytesToByteLevelText(right_bytes);
    if (!vocab.contains(left + right)) vocab[left + right] = next_id++;
    merge_list.push_back(absl::StrCat(left, " ", right));
  }
  json added = json::array();
  int added_id = 300;
  for (const char* content : {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "[TOOL]"}) {
    added.push_back({{"id", added_id++},
                     {"content", content},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", std::string(content) != "[TOOL]"}});
  }
  const json tokenizer = {
      {"added_tokens", added},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "NFKC"}},
          {{"type", "Replace"}, {"pattern", {{"String", "\xE2\x80\x99"}}}, {"content", "'"}}}}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern",
            {{"Regex",
              R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          {{"type", "Digits"}, {"individual_digits", true}},
          {{"type", "ByteLevel"},
           {"add_prefix_space", false},
           {"trim_offsets", false},
           {"use_regex", false}}}}}},
      {"post_processor", {{"type", "ByteLevel"}, {"trim_offsets", false}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}}}};
  const json config = {{"bos_token", "<|endoftext|>"},
                       {"eos_token",
                        {{"content", "<|im_end|>"},
                         {"lstrip", false},
                         {"normalized", false},
                         {"rstrip", false},
                         {"single_word", false}}},
                       {"pad_token", "<|endoftext|>"},
                       {"model_max_length", 512},
                       {"chat_template", kTestChatTemplate}};
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  TROUPE_RETURN_IF_ERROR(
      WriteFileAtomically(absl::StrCat(dir, "/tokenizer.json"), tokenizer.dump(4) + "\n"));
  TROUPE_RETURN_IF_ERROR(
      WriteFileAtomically(absl::StrCat(dir, "/tokenizer_config.json"), config.dump(4) + "\n"));
  return dir;
}

std::vector<std::string> TokenizerTestTexts() {
  return {
      "The thing in the inn",
      "<|im_start|>user\n12+34=46<|im_end|>\n<|im_start|>assistant\n",
      "call [TOOL] then<|endoftext|>done",
      "\xEF\xAC\x81ne \xEF\xBC\xB4HE it\xE2\x80\x99s",  // "ﬁne ＴHE it’s": NFKC and Replace
      "Caf\xC3\xA9 na\xC3\xAFve e\xCC\x81",             // "Café naïve é" (é decomposed)
      "\xE4\xB8\xAD\xE6\x96\x87 \xE4\xB8\xAD",          // "中文 中"
      "smile \xF0\x9F\x98\x80 ok",                      // "smile 😀 ok"
      "  spaces   and\n\nnewlines\t tab 2024",
      "",
  };
}

}  // namespace troupe::models
