#include "models/tokenizers/oniguruma_regex.h"

#include <oniguruma.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "models/tokenizers/unicode.h"

namespace troupe::models {
namespace {

constexpr char kReplacementUtf8[] = "\xEF\xBF\xBD";  // U+FFFD
constexpr size_t kReplacementBytes = 3;

// Called once, before the first compilation (function-local static initialisation is
// thread-safe). Returns Oniguruma's status.
int InitializeOniguruma() {
  static const int status = [] {
    OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
    return onig_initialize(encodings, 1);
  }();
  return status;
}

std::string OnigMessage(int code, const OnigErrorInfo* info) {
  OnigUChar buffer[ONIG_MAX_ERROR_MESSAGE_LEN];
  const int length = info != nullptr ? onig_error_code_to_str(buffer, code, info)
                                     : onig_error_code_to_str(buffer, code);
  return std::string(reinterpret_cast<const char*>(buffer), length > 0 ? length : 0);
}

// Length of the UTF-8 sequence led by byte `b` of valid text.
inline size_t SequenceLength(unsigned char b) {
  if (b < 0x80) return 1;
  if (b < 0xE0) return 2;
  if (b < 0xF0) return 3;
  return 4;
}

// True if every byte is ASCII; cheap pre-check before full validation.
bool IsAscii(absl::string_view text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

struct RegionDeleter {
  void operator()(OnigRegion* region) const { onig_region_free(region, /*free_self=*/1); }
};

}  // namespace

struct OnigurumaRegex::Compiled {
  regex_t* regex = nullptr;
  ~Compiled() {
    if (regex != nullptr) onig_free(regex);
  }
};

OnigurumaRegex::OnigurumaRegex(std::string pattern, std::unique_ptr<Compiled> compiled)
    : pattern_(std::move(pattern)), compiled_(std::move(compiled)) {}

OnigurumaRegex::~OnigurumaRegex() = default;

absl::StatusOr<std::shared_ptr<const OnigurumaRegex>> OnigurumaRegex::Compile(
    absl::string_view pattern) {
  if (!unicode::IsValidUtf8(pattern)) {
    return absl::InvalidArgumentError("regex pattern is not valid UTF-8");
  }
  const int init = InitializeOniguruma();
  if (init != ONIG_NORMAL) {
    return absl::InternalError(
        absl::StrCat("onig_initialize failed: ", OnigMessage(init, nullptr)));
  }
  static absl::Mutex* const compile_mu = new absl::Mutex();
  auto compiled = std::make_unique<Compiled>();
  OnigErrorInfo info;
  int status;
  {
    absl::MutexLock lock(compile_mu);
    const auto* begin = reinterpret_cast<const OnigUChar*>(pattern.data());
    status = onig_new(&compiled->regex, begin, begin + pattern.size(), ONIG_OPTION_NONE,
                      ONIG_ENCODING_UTF8, ONIG_SYNTAX_RUBY, &info);
  }
  if (status != ONIG_NORMAL) {
    compiled->regex = nullptr;  // onig_new frees it on failure
    return absl::InvalidArgumentError(
        absl::StrCat("regex \"", pattern, "\" does not compile: ", OnigMessage(status, &info)));
  }
  return std::shared_ptr<const OnigurumaRegex>(
      new OnigurumaRegex(std::string(pattern), std::move(compiled)));
}

absl::Status OnigurumaRegex::FindAll(absl::string_view text, std::vector<Match>* matches) const {
  if (IsAscii(text) || unicode::IsValidUtf8(text)) return FindAllValid(text, matches);

  // Replace each invalid byte by U+FFFD; original_offset[i] is the offset in `text` of byte i of
  // the substitute (matches start and end only on character boundaries, where it is exact).
  std::string substitute;
  std::vector<size_t> original_offset;
  substitute.reserve(text.size() + 16);
  original_offset.reserve(text.size() + 17);
  for (size_t pos = 0; pos < text.size();) {
    const unicode::DecodedChar c = unicode::DecodeUtf8(text, pos);
    if (c.code_point == unicode::kInvalidCodePoint) {
      substitute.append(kReplacementUtf8, kReplacementBytes);
      original_offset.insert(original_offset.end(), kReplacementBytes, pos);
    } else {
      substitute.append(text.data() + pos, c.length);
      for (int i = 0; i < c.length; ++i) original_offset.push_back(pos);
    }
    pos += c.length;
  }
  original_offset.push_back(text.size());
  const size_t first = matches->size();
  const absl::Status status = FindAllValid(substitute, matches);
  for (size_t i = first; i < matches->size(); ++i) {
    (*matches)[i].start = original_offset[(*matches)[i].start];
    (*matches)[i].end = original_offset[(*matches)[i].end];
  }
  return status;
}

absl::Status OnigurumaRegex::FindAllValid(absl::string_view text,
                                          std::vector<Match>* matches) const {
  std::unique_ptr<OnigRegion, RegionDeleter> region(onig_region_new());
  const auto* str = reinterpret_cast<const OnigUChar*>(text.data());
  const OnigUChar* const end = str + text.size();
  size_t pos = 0;
  bool have_previous = false;
  size_t previous_end = 0;
  while (pos <= text.size()) {
    const int r =
        onig_search(compiled_->regex, str, end, str + pos, end, region.get(), ONIG_OPTION_NONE);
    if (r == ONIG_MISMATCH) break;
    if (r < 0) {
      return absl::ResourceExhaustedError(absl::StrCat("regex \"", pattern_, "\" failed at byte ",
                                                       pos, ": ", OnigMessage(r, nullptr)));
    }
    const size_t start = static_cast<size_t>(region->beg[0]);
    const size_t stop = static_cast<size_t>(region->end[0]);
    if (start == stop && have_previous && stop == previous_end) {
      // An empty match right after the previous match: move one character on.
      if (pos >= text.size()) break;
      pos += SequenceLength(static_cast<unsigned char>(text[pos]));
      continue;
    }
    matches->push_back({start, stop});
    pos = stop;
    have_previous = true;
    previous_end = stop;
  }
  return absl::OkStatus();
}

}  // namespace troupe::models
