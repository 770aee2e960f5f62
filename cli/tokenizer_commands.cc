// `troupe tokenizer ...`: byte-level BPE tokenizers without downloading one.
//
//   troupe tokenizer train --vocab-size N --out DIR [--min-frequency F] [--special-token T]...
//                          [--jsonl-field KEY] [--whole-file] [--max-text-bytes B]
//                          [--pre-tokenizer qwen2|gpt2|llama3] [--bos-token T] [--eos-token T]
//                          [--pad-token T] [--model-max-length L] [--overwrite] FILES...
//       trains (models/tokenizers/bpe_trainer.h) and writes DIR/tokenizer.json and
//       DIR/tokenizer_config.json (bos/eos/pad, and a ChatML chat template when <|im_start|> and
//       <|im_end|> are special tokens). Input: a .jsonl file gives one document per record, the
//       string field KEY (default "text"), or, when that field is an array of chat messages, each
//       message's "content"; any other file gives one document per non-empty line, or the whole
//       file with --whole-file. Special tokens default to <|endoftext|>, <|im_start|>, <|im_end|>;
//       bos and pad default to the first, eos to <|im_end|> when present. A bad record is an error
//       naming the file and line. Progress (rate, ETA) goes to stderr.
//       DIR must be empty, absent, or hold only an earlier output (tokenizer.json,
//       tokenizer_config.json), else --overwrite is needed (which replaces only those two files).
//       Both files are written atomically (base/atomic_file.h).
//   troupe tokenizer encode --tokenizer PATH TEXT
//       prints the ids of TEXT on one line and their tokens (a JSON array) on the next.
//
// Exit code 0 on success, 1 on any error (printed as "troupe tokenizer train: <message>").
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/atomic_file.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "cli/command_registry.h"
#include "models/tokenizers/bpe_tokenizer.h"
#include "models/tokenizers/bpe_trainer.h"
#include "models/tokenizers/pre_tokenizer.h"
#include "models/tokenizers/tokenizer.h"
#include "nlohmann/json.hpp"

namespace troupe {
namespace {

using json = nlohmann::json;
using models::BpeTokenizer;
using models::BpeTrainer;

// ChatML: "<|im_start|>role\ncontent<|im_end|>\n" per message, then "<|im_start|>assistant\n"
// when add_generation_prompt.
constexpr char kChatMlTemplate[] =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\\n' }}{% endif %}";

constexpr const char* kOutputFiles[] = {"tokenizer.json", "tokenizer_config.json"};

struct TrainFlags {
  int32_t vocab_size = 0;
  std::string out;
  int64_t min_frequency = 2;
  std::vector<std::string> special_tokens;
  std::string jsonl_field = "text";
  bool whole_file = false;
  int64_t max_text_bytes = 0;
  std::string pre_tokenizer = "qwen2";
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  std::optional<std::string> pad_token;
  int64_t model_max_length = 0;
  bool overwrite = false;
  std::vector<std::string> files;
};

// Prints progress lines on stderr: rewritten in place on a terminal, one per report otherwise.
class ProgressLine {
 public:
  ProgressLine() : tty_(::isatty(2) == 1) {}
  void Show(const std::string& text) {
    if (tty_) {
      std::fprintf(stderr, "\r%-78s", text.c_str());
    } else {
      std::fprintf(stderr, "%s\n", text.c_str());
    }
    std::fflush(stderr);
    shown_ = true;
  }
  void Finish() {
    if (tty_ && shown_) std::fprintf(stderr, "\n");
    shown_ = false;
  }

 private:
  bool tty_;
  bool shown_ = false;
};

// An output directory is usable if absent, empty, or holding only an earlier run's files. Checked
// before training, so a refusal comes at once.
absl::Status CheckOutputDirectory(const std::string& dir, bool overwrite) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return absl::OkStatus();  // created once training succeeded
  if (!fs::is_directory(dir, ec)) {
    return absl::FailedPreconditionError(absl::StrCat("--out ", dir, ": not a directory"));
  }
  std::vector<std::string> others;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name != kOutputFiles[0] && name != kOutputFiles[1]) others.push_back(name);
  }
  if (ec) return absl::InternalError(absl::StrCat("--out ", dir, ": cannot list: ", ec.message()));
  if (!others.empty() && !overwrite) {
    std::sort(others.begin(), others.end());
    if (others.size() > 3) {
      others.resize(3);
      others.push_back("...");
    }
    return absl::FailedPreconditionError(
        absl::StrCat("--out ", dir, " is not empty and not an earlier tokenizer output (it holds ",
                     absl::StrJoin(others, ", "),
                     "); pass --overwrite to write tokenizer.json and tokenizer_config.json "
                     "into it anyway"));
  }
  return absl::OkStatus();
}

// Feeds the documents of one file to `add` (which returns false to stop reading). Errors name
// the file and line.
absl::Status ReadDocuments(const std::string& path, const TrainFlags& flags,
                           const std::function<bool(absl::string_view)>& add) {
  if (flags.whole_file && !absl::EndsWith(path, ".jsonl")) {
    TROUPE_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
    add(text);
    return absl::OkStatus();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  const bool jsonl = absl::EndsWith(path, ".jsonl");
  std::string line;
  for (int64_t line_number = 1; std::getline(in, line); ++line_number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (!jsonl) {
      if (!add(line)) return absl::OkStatus();
      continue;
    }
    const std::string where = absl::StrCat(path, ":", line_number);
    json record = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (record.is_discarded())
      return absl::InvalidArgumentError(absl::StrCat(where, ": malformed JSON"));
    if (!record.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": expected a JSON object"));
    }
    const auto field = record.find(flags.jsonl_field);
    if (field == record.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": no field \"", flags.jsonl_field, "\" (see --jsonl-field)"));
    }
    if (field->is_string()) {
      if (!add(field->get_ref<const std::string&>())) return absl::OkStatus();
      continue;
    }
    if (!field->is_array()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": field \"", flags.jsonl_field,
          "\" is neither a string nor an array of chat messages (objects with a \"content\")"));
    }
    for (size_t i = 0; i < field->size(); ++i) {
      const json& message = (*field)[i];
      const auto content = message.is_object() ? message.find("content") : message.end();
      if (!message.is_object() || content == message.end() || !content->is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": ", flags.jsonl_field, "[", i,
                                                       "]: expected a message object with a "
                                                       "string \"content\""));
      }
      if (!add(content->get_ref<const std::string&>())) return absl::OkStatus();
    }
  }
  if (in.bad()) return absl::InternalError(absl::StrCat(path, ": read error"));
  return absl::OkStatus();
}

absl::StatusOr<std::string> RegexByName(const std::string& name) {
  if (name == "qwen2") return std::string(models::kQwen2PreTokenizerRegex);
  if (name == "gpt2") return std::string(models::kGpt2PreTokenizerRegex);
  if (name == "llama3") return std::string(models::kLlama3PreTokenizerRegex);
  return absl::InvalidArgumentError(
      absl::StrCat("--pre-tokenizer ", name, ": expected qwen2, gpt2 or llama3"));
}

absl::Status Train(const TrainFlags& flags) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  const auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };

  models::BpeTrainerOptions options;
  options.vocab_size = flags.vocab_size;
  options.min_frequency = flags.min_frequency;
  if (!flags.special_tokens.empty()) options.special_tokens = flags.special_tokens;
  options.max_text_bytes = flags.max_text_bytes;
  TROUPE_ASSIGN_OR_RETURN(options.pre_tokenizer_regex, RegexByName(flags.pre_tokenizer));
  ProgressLine line;
  options.progress = [&line](const models::BpeTrainProgress& p) {
    const double rate = p.elapsed_seconds > 0 ? p.merges_done / p.elapsed_seconds : 0;
    // Merges whose result is already a token (two ways of spelling it) do not fill the vocabulary,
    // so merges_done may pass merges_target.
    const double eta = rate > 0 ? std::max(0.0, (p.merges_target - p.merges_done) / rate) : 0;
    line.Show(absl::StrFormat("merges %d/%d (%.0f%%), %.0f merges/s, ETA %.0f s", p.merges_done,
                              p.merges_target, 100.0 * p.merges_done / std::max(1, p.merges_target),
                              rate, eta));
  };
  const std::vector<std::string> specials = options.special_tokens;
  const auto is_special = [&](const std::string& token) {
    return std::find(specials.begin(), specials.end(), token) != specials.end();
  };
  for (const auto& [flag, value] :
       {std::pair<const char*, const std::optional<std::string>*>{"--bos-token", &flags.bos_token},
        {"--eos-token", &flags.eos_token},
        {"--pad-token", &flags.pad_token}}) {
    if (value->has_value() && !(*value)->empty() && !is_special(**value)) {
      return absl::InvalidArgumentError(absl::StrCat(flag, " ", **value,
                                                     ": not one of the special tokens (",
                                                     absl::StrJoin(specials, ", "), ")"));
    }
  }
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<BpeTrainer> trainer, BpeTrainer::Create(options));
  TROUPE_RETURN_IF_ERROR(CheckOutputDirectory(flags.out, flags.overwrite));

  double last_report = 0;
  int64_t documents = 0;
  for (const std::string& path : flags.files) {
    const absl::Status read = ReadDocuments(path, flags, [&](absl::string_view text) {
      if (!trainer->AddText(text)) return false;
      ++documents;
      if (seconds() - last_report >= 1.0) {
        last_report = seconds();
        line.Show(absl::StrFormat("read %.1f MB, %d documents, %d distinct words (%s)",
                                  trainer->text_bytes() / 1e6, documents, trainer->distinct_words(),
                                  path));
      }
      return true;
    });
    TROUPE_RETURN_IF_ERROR(read);
    if (trainer->full()) break;
  }
  line.Finish();
  std::fprintf(stderr, "read %.1f MB, %lld documents, %lld distinct words in %.1f s%s\n",
               trainer->text_bytes() / 1e6, static_cast<long long>(documents),
               static_cast<long long>(trainer->distinct_words()), seconds(),
               trainer->full() ? " (stopped at --max-text-bytes)" : "");

  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<BpeTokenizer> tokenizer, trainer->Train());
  line.Finish();
  if (tokenizer->vocab_size() < flags.vocab_size) {
    std::fprintf(stderr,
                 "vocabulary stopped at %d of %d: no remaining pair occurs --min-frequency %lld "
                 "times\n",
                 tokenizer->vocab_size(), flags.vocab_size,
                 static_cast<long long>(flags.min_frequency));
  }

  // bos/eos/pad: flags, else defaults among the special tokens ("" = none).
  const auto pick = [&](const std::optional<std::string>& flag,
                        const std::vector<std::string>& preferred) -> json {
    if (flag.has_value()) return flag->empty() ? json(nullptr) : json(*flag);
    for (const std::string& token : preferred) {
      if (is_special(token)) return token;
    }
    return specials.empty() ? json(nullptr) : json(specials[0]);
  };
  const json special_config = {{"bos_token", pick(flags.bos_token, {})},
                               {"eos_token", pick(flags.eos_token, {"<|im_end|>"})},
                               {"pad_token", pick(flags.pad_token, {})}};
  TROUPE_RETURN_IF_ERROR(
      tokenizer->ApplyTokenizerConfig(special_config.dump(), "special-token flags"));
  models::TokenizerConfigOptions config;
  if (flags.model_max_length > 0) config.model_max_length = flags.model_max_length;
  if (is_special("<|im_start|>") && is_special("<|im_end|>")) {
    config.chat_template = kChatMlTemplate;
  } else {
    std::fprintf(stderr,
                 "no chat template written: <|im_start|> and <|im_end|> are not both special "
                 "tokens\n");
  }
  std::error_code ec;
  std::filesystem::create_directories(flags.out, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("--out ", flags.out, ": cannot create: ", ec.message()));
  }
  const std::string tokenizer_path = absl::StrCat(flags.out, "/", kOutputFiles[0]);
  const std::string config_path = absl::StrCat(flags.out, "/", kOutputFiles[1]);
  TROUPE_RETURN_IF_ERROR(WriteFileAtomically(tokenizer_path, tokenizer->ToJson()));
  TROUPE_RETURN_IF_ERROR(WriteFileAtomically(config_path, tokenizer->ConfigJson(config)));
  std::printf("wrote %s and %s: vocab %d (%d merges) in %.1f s\n", tokenizer_path.c_str(),
              config_path.c_str(), tokenizer->vocab_size(), tokenizer->num_merges(), seconds());
  return absl::OkStatus();
}

absl::Status Encode(const std::string& path, const std::string& text) {
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<models::Tokenizer> tokenizer,
                          models::LoadTokenizer(path));
  TROUPE_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer->Encode(text));
  json tokens = json::array();
  for (const int32_t id : ids) {
    TROUPE_ASSIGN_OR_RETURN(std::string token, tokenizer->TokenText(id));
    tokens.push_back(std::move(token));
  }
  std::printf("%s\n%s\n", absl::StrJoin(ids, " ").c_str(),
              tokens.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
  return absl::OkStatus();
}

int Report(const char* command, const absl::Status& status) {
  if (status.ok()) return 0;
  std::fprintf(stderr, "troupe tokenizer %s: %s\n", command, std::string(status.message()).c_str());
  return 1;
}

void InstallTokenizerCommands(CLI::App& app, int* exit_code) {
  CLI::App* tokenizer = app.add_subcommand("tokenizer", "Train or try a byte-level BPE tokenizer");
  tokenizer->require_subcommand(1);

  auto flags = std::make_shared<TrainFlags>();
  CLI::App* train =
      tokenizer->add_subcommand("train",
                                "Train a byte-level BPE tokenizer; writes DIR/tokenizer.json and "
                                "DIR/tokenizer_config.json");
  train
      ->add_option("--vocab-size", flags->vocab_size,
                   "Vocabulary size, counting the 256 byte symbols and the special tokens")
      ->required()
      ->check(CLI::PositiveNumber);
  train->add_option("--out", flags->out, "Output directory")->required();
  train->add_option("--min-frequency", flags->min_frequency,
                    "Merge only pairs seen at least this often (default 2)");
  train
      ->add_option("--special-token", flags->special_tokens,
                   "A special token, repeatable (default <|endoftext|> <|im_start|> <|im_end|>)")
      ->allow_extra_args(false);
  train->add_option("--jsonl-field", flags->jsonl_field,
                    ".jsonl files: the field holding the text or the chat messages (default text)");
  train->add_flag("--whole-file", flags->whole_file,
                  "Plain text files: one document per file instead of one per line");
  train->add_option("--max-text-bytes", flags->max_text_bytes,
                    "Stop reading after this many bytes of documents (default: no limit)");
  train->add_option("--pre-tokenizer", flags->pre_tokenizer,
                    "Pre-tokenizer regex: qwen2 (default), gpt2 or llama3");
  // std::optional flags: set only when given ("" = no such token).
  auto bos = std::make_shared<std::string>();
  auto eos = std::make_shared<std::string>();
  auto pad = std::make_shared<std::string>();
  CLI::Option* bos_option =
      train->add_option("--bos-token", *bos, "BOS token (default: the first special; \"\" none)");
  CLI::Option* eos_option = train->add_option(
      "--eos-token", *eos, "EOS token (default <|im_end|> if special, else the first special)");
  CLI::Option* pad_option =
      train->add_option("--pad-token", *pad, "PAD token (default: the first special)");
  train->add_option("--model-max-length", flags->model_max_length,
                    "model_max_length in tokenizer_config.json (default: not written)");
  train->add_flag("--overwrite", flags->overwrite,
                  "Write into a non-empty --out that is not an earlier tokenizer output");
  train->add_option("files", flags->files, "Training text: .jsonl or plain text files")
      ->required()
      ->check(CLI::ExistingFile);
  train->callback([=] {
    if (bos_option->count() > 0) flags->bos_token = *bos;
    if (eos_option->count() > 0) flags->eos_token = *eos;
    if (pad_option->count() > 0) flags->pad_token = *pad;
    *exit_code = Report("train", Train(*flags));
  });

  auto encode_path = std::make_shared<std::string>();
  auto encode_text = std::make_shared<std::string>();
  CLI::App* encode =
      tokenizer->add_subcommand("encode", "Print the token ids and tokens of a text");
  encode->add_option("--tokenizer", *encode_path, "tokenizer.json or its directory")->required();
  encode->add_option("text", *encode_text, "Text to encode")->required();
  encode->callback([encode_path, encode_text, exit_code] {
    *exit_code = Report("encode", Encode(*encode_path, *encode_text));
  });
}

const bool registered = RegisterCliCommand(&InstallTokenizerCommands);

}  // namespace
}  // namespace troupe
