// Test fixture for code that saves tokenizers: a Hugging Face tokenizer directory that uses every
// part of BpeTokenizer a checkpoint must keep, and texts to compare encodings on.
//
//   absl::StatusOr<std::string> dir = WriteTestBpeTokenizer(TempDir() + "/tok");
//   auto tok = LoadTokenizer(*dir);
//   ... save it, reload it, compare Encode over TokenizerTestTexts() ...
//
// testonly. Thread-safety: the functions are pure apart from writing `dir`.
#ifndef TROUPE_MODELS_TOKENIZERS_TEST_TOKENIZER_FILES_H_
#define TROUPE_MODELS_TOKENIZERS_TEST_TOKENIZER_FILES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace troupe::models {

// The tokenizer_config.json's chat_template: ChatML turns, bos_token first and eos_token last.
extern const char kTestChatTemplate[];

// Creates `dir` (and its parents) and writes, returning `dir`:
//   tokenizer.json: byte-level BPE over all 256 bytes (ids 0-255) plus a few merges; normalizer
//     Sequence[NFKC, Replace "’" -> "'"]; pre_tokenizer Sequence[Split (GPT-2 regex),
//     Digits, ByteLevel]; added tokens "<|endoftext|>", "<|im_start|>", "<|im_end|>" (special)
//     and "[TOOL]" (not special). Written with 4-space indents and sorted keys, so not as
//     BpeTokenizer::ToJson() writes it: a copy of this text and a re-serialization differ.
//   tokenizer_config.json: bos "<|endoftext|>", eos {"content": "<|im_end|>", ...} (the object
//     form), pad "<|endoftext|>", model_max_length 512 and kTestChatTemplate.
// The writer's error if a file cannot be written.
absl::StatusOr<std::string> WriteTestBpeTokenizer(const std::string& dir);

// Texts that reach every part of that tokenizer: ASCII words and digits, the special and added
// tokens inside text, text NFKC changes ("ﬁ", full-width letters, "’"), accents, CJK, emoji,
// newlines and runs of spaces.
std::vector<std::string> TokenizerTestTexts();

}  // namespace troupe::models

#endif  // TROUPE_MODELS_TOKENIZERS_TEST_TOKENIZER_FILES_H_
