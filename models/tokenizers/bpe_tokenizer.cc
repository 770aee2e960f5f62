#include "models/tokenizers/bpe_tokenizer.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "models/tokenizers/json_util.h"
#include "models/tokenizers/unicode.h"
#include "nlohmann/json.hpp"

namespace troupe::models {
namespace {

using internal::FieldError;
using internal::FindMember;
using internal::Quote;
using json = nlohmann::json;

constexpr size_t kMaxCachedPieceBytes = 256;
constexpr size_t kMaxCacheEntries = 1 << 17;

// GPT-2's reversible byte <-> unicode map: printable Latin-1 bytes ('!'..'~', '¡'..'¬', '®'..'ÿ')
// stand for themselves; the other 68 bytes (controls, space, DEL, NBSP, soft hyphen) map, in byte
// order, to U+0100 onwards, so space is 'Ġ' (U+0120) and '\n' is 'Ċ' (U+010A).
class ByteAlphabet {
 public:
  ByteAlphabet() {
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const char32_t cp = printable ? static_cast<char32_t>(b) : next++;
      byte_to_cp_[b] = cp;
      cp_to_byte_[cp] = static_cast<int16_t>(b);
      unicode::AppendUtf8(cp, &byte_text_[b]);
    }
  }
  // The symbol text of byte `b` (UTF-8 of its code point).
  const std::string& ByteText(uint8_t b) const { return byte_text_[b]; }
  // The byte a symbol stands for, or -1 if `cp` is not a symbol.
  int ByteOf(char32_t cp) const { return cp < kSize ? cp_to_byte_[cp] : -1; }

 private:
  static constexpr char32_t kSize = 256 + 68;
  std::array<char32_t, 256> byte_to_cp_{};
  std::array<int16_t, kSize> cp_to_byte_ = MakeUnset();
  std::array<std::string, 256> byte_text_;

  static std::array<int16_t, kSize> MakeUnset() {
    std::array<int16_t, kSize> a;
    a.fill(-1);
    return a;
  }
};

const ByteAlphabet& Alphabet() {
  static const ByteAlphabet* const alphabet = new ByteAlphabet();
  return *alphabet;
}

// The bytes a vocabulary token stands for. Characters outside the byte alphabet (which byte-level
// BPE never produces) are kept as their own UTF-8.
std::string TokenBytes(absl::string_view token) {
  const ByteAlphabet& alphabet = Alphabet();
  std::string bytes;
  bytes.reserve(token.size());
  for (size_t pos = 0; pos < token.size();) {
    const unicode::DecodedChar c = unicode::DecodeUtf8(token, pos);
    const int b = c.code_point == unicode::kInvalidCodePoint ? -1 : alphabet.ByteOf(c.code_point);
    if (b >= 0) {
      bytes.push_back(static_cast<char>(b));
    } else {
      bytes.append(token.data() + pos, c.length);
    }
    pos += c.length;
  }
  return bytes;
}

struct Node {
  int32_t id;  // -1 once merged into its left neighbour
  int32_t prev;
  int32_t next;
};

struct Candidate {
  int32_t rank;
  int32_t pos;  // index of the left node
  int32_t left_id;
  int32_t right_id;
  int32_t merged_id;
};

// Min-heap order: lowest rank first, then leftmost.
struct CandidateAfter {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  }
};

}  // namespace

std::string BytesToByteLevelText(absl::string_view bytes) {
  std::string text;
  text.reserve(bytes.size() * 2);
  for (char b : bytes) text += Alphabet().ByteText(static_cast<uint8_t>(b));
  return text;
}

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::FromJson(absl::string_view json_text,
                                                                     absl::string_view source) {
  TROUPE_ASSIGN_OR_RETURN(json root, internal::ParseJson(json_text, source));
  return FromJsonValue(root, source);
}

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::FromJsonValue(
    const json& root, absl::string_view source) {
  std::unique_ptr<BpeTokenizer> tokenizer(new BpeTokenizer());
  try {
    TROUPE_RETURN_IF_ERROR(tokenizer->Load(root, source));
    tokenizer->KeepSourceNodes(root);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": unexpected tokenizer.json structure: ", e.what()));
  }
  return tokenizer;
}

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::FromFile(const std::string& path) {
  TROUPE_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<BpeTokenizer> tokenizer, FromJson(text, path));
  TROUPE_RETURN_IF_ERROR(tokenizer->LoadConfigBeside(path));
  return tokenizer;
}

absl::Status BpeTokenizer::Load(const json& root, absl::string_view source) {
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": expected a JSON object at top level"));
  }
  const json* model = FindMember(root, "model");
  if (model == nullptr) return FieldError(source, "model", "missing");
  if (!model->is_object()) return FieldError(source, "model", "expected an object");

  TROUPE_ASSIGN_OR_RETURN(std::string type,
                          internal::OptionalString(*model, "type", "BPE", source, "model.type"));
  if (type != "BPE") {
    return FieldError(
        source, "model.type",
        absl::StrCat("unsupported model type ", Quote(type), " (only \"BPE\" is supported)"));
  }
  TROUPE_ASSIGN_OR_RETURN(
      bool byte_fallback,
      internal::OptionalBool(*model, "byte_fallback", false, source, "model.byte_fallback"));
  if (byte_fallback) {
    return FieldError(source, "model.byte_fallback",
                      "byte_fallback (SentencePiece-style) BPE is not supported; only byte-level "
                      "BPE is");
  }
  if (const json* dropout = FindMember(*model, "dropout");
      dropout != nullptr && !dropout->is_null()) {
    if (!dropout->is_number()) return FieldError(source, "model.dropout", "expected a number");
    if (dropout->get<double>() > 0) {
      return FieldError(source, "model.dropout", "BPE dropout is not supported");
    }
  }
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const std::string field = absl::StrCat("model.", affix);
    TROUPE_ASSIGN_OR_RETURN(std::string value,
                            internal::OptionalString(*model, affix, "", source, field));
    if (!value.empty()) {
      return FieldError(source, field,
                        absl::StrCat(Quote(value), " is not supported by byte-level BPE"));
    }
  }
  TROUPE_ASSIGN_OR_RETURN(
      fuse_unk_, internal::OptionalBool(*model, "fuse_unk", false, source, "model.fuse_unk"));
  TROUPE_ASSIGN_OR_RETURN(ignore_merges_, internal::OptionalBool(*model, "ignore_merges", false,
                                                                 source, "model.ignore_merges"));

  TROUPE_RETURN_IF_ERROR(LoadVocab(*model, source));
  TROUPE_ASSIGN_OR_RETURN(std::string unk, internal::OptionalString(*model, "unk_token", "", source,
                                                                    "model.unk_token"));
  if (!unk.empty()) {
    const auto it = vocab_.find(unk);
    if (it == vocab_.end()) {
      return FieldError(source, "model.unk_token",
                        absl::StrCat("token ", Quote(unk), " is not in model.vocab"));
    }
    unk_id_ = it->second;
  }
  TROUPE_RETURN_IF_ERROR(LoadMerges(*model, source));
  TROUPE_RETURN_IF_ERROR(LoadAddedTokens(root, source));

  TROUPE_RETURN_IF_ERROR(LoadNormalizerAndPreTokenizer(root, source));

  if (const json* decoder = FindMember(root, "decoder");
      decoder != nullptr && !decoder->is_null()) {
    if (!decoder->is_object()) return FieldError(source, "decoder", "expected an object");
    TROUPE_ASSIGN_OR_RETURN(std::string decoder_type,
                            internal::OptionalString(*decoder, "type", "", source, "decoder.type"));
    bool ok = decoder_type == "ByteLevel";
    if (decoder_type == "Sequence") {
      const json* steps = FindMember(*decoder, "decoders");
      ok = steps != nullptr && steps->is_array() && !steps->empty() &&
           std::all_of(steps->begin(), steps->end(), [](const json& step) {
             return step.is_object() && step.value("type", std::string()) == "ByteLevel";
           });
    }
    if (!ok) {
      return FieldError(source, "decoder.type",
                        absl::StrCat("unsupported decoder ", Quote(decoder_type),
                                     " (supported: null, \"ByteLevel\")"));
    }
  }
  return absl::OkStatus();
}

void BpeTokenizer::SetToken(int32_t id, std::string token, std::string bytes) {
  if (static_cast<size_t>(id) >= id_bytes_.size()) {
    id_text_.resize(id + 1);
    id_bytes_.resize(id + 1);
    id_present_.resize(id + 1, 0);
    id_special_.resize(id + 1, 0);
  }
  id_text_[id] = std::move(token);
  id_bytes_[id] = std::move(bytes);
  id_present_[id] = 1;
}

absl::Status BpeTokenizer::LoadVocab(const json& model, absl::string_view source) {
  const json* vocab = FindMember(model, "vocab");
  if (vocab == nullptr) return FieldError(source, "model.vocab", "missing");
  if (!vocab->is_object()) {
    return FieldError(source, "model.vocab", "expected an object mapping token text to id");
  }
  if (vocab->empty()) return FieldError(source, "model.vocab", "empty");
  vocab_.reserve(vocab->size());
  for (const auto& item : vocab->items()) {
    const std::string& token = item.key();
    TROUPE_ASSIGN_OR_RETURN(
        int32_t id,
        internal::ToId(item.value(), source, absl::StrCat("model.vocab[", Quote(token), "]")));
    if (static_cast<size_t>(id) < id_present_.size() && id_present_[id]) {
      return FieldError(source, "model.vocab",
                        absl::StrCat("id ", id, " is assigned to both ", Quote(id_text_[id]),
                                     " and ", Quote(token)));
    }
    std::string bytes = TokenBytes(token);
    if (ignore_merges_) bytes_to_id_.emplace(bytes, id);
    vocab_.emplace(token, id);
    SetToken(id, token, std::move(bytes));
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = vocab_.find(Alphabet().ByteText(static_cast<uint8_t>(b)));
    byte_id_[b] = it == vocab_.end() ? -1 : it->second;
  }
  return absl::OkStatus();
}

absl::Status BpeTokenizer::LoadMerges(const json& model, absl::string_view source) {
  const json* merges = FindMember(model, "merges");
  if (merges == nullptr) return FieldError(source, "model.merges", "missing");
  if (!merges->is_array()) return FieldError(source, "model.merges", "expected an array");
  merges_.reserve(merges->size());
  std::string left;
  std::string right;
  for (size_t i = 0; i < merges->size(); ++i) {
    const json& entry = (*merges)[i];
    const std::string field = absl::StrCat("model.merges[", i, "]");
    if (entry.is_string()) {
      const std::string& text = entry.get_ref<const std::string&>();
      const size_t space = text.find(' ');
      if (space == std::string::npos || space == 0 || space + 1 == text.size() ||
          text.find(' ', space + 1) != std::string::npos) {
        return FieldError(
            source, field,
            absl::StrCat("expected two tokens separated by one space, got ", Quote(text)));
      }
      left.assign(text, 0, space);
      right.assign(text, space + 1);
    } else if (entry.is_array() && entry.size() == 2 && entry[0].is_string() &&
               entry[1].is_string()) {
      left = entry[0].get<std::string>();
      right = entry[1].get<std::string>();
    } else {
      return FieldError(source, field,
                        "expected a \"left right\" string or a [\"left\", \"right\"] pair");
    }
    const auto left_it = vocab_.find(left);
    if (left_it == vocab_.end()) {
      return FieldError(source, field,
                        absl::StrCat("token ", Quote(left), " is not in model.vocab"));
    }
    const auto right_it = vocab_.find(right);
    if (right_it == vocab_.end()) {
      return FieldError(source, field,
                        absl::StrCat("token ", Quote(right), " is not in model.vocab"));
    }
    const auto merged_it = vocab_.find(absl::StrCat(left, right));
    if (merged_it == vocab_.end()) {
      return FieldError(source, field,
                        absl::StrCat("merged token ", Quote(absl::StrCat(left, right)),
                                     " is not in model.vocab"));
    }
    // A repeated pair keeps its first (lowest) rank.
    merges_.try_emplace(PairKey(left_it->second, right_it->second),
                        Merge{static_cast<int32_t>(i), merged_it->second});
  }
  return absl::OkStatus();
}

absl::Status BpeTokenizer::LoadAddedTokens(const json& root, absl::string_view source) {
  const json* added = FindMember(root, "added_tokens");
  if (added == nullptr || added->is_null()) return absl::OkStatus();
  if (!added->is_array()) return FieldError(source, "added_tokens", "expected an array");
  std::vector<AddedToken> tokens;
  for (size_t i = 0; i < added->size(); ++i) {
    const json& entry = (*added)[i];
    const std::string field = absl::StrCat("added_tokens[", i, "]");
    if (!entry.is_object()) return FieldError(source, field, "expected an object");
    AddedToken token;
    const json* id = FindMember(entry, "id");
    if (id == nullptr) return FieldError(source, field + ".id", "missing");
    TROUPE_ASSIGN_OR_RETURN(token.id, internal::ToId(*id, source, field + ".id"));
    TROUPE_ASSIGN_OR_RETURN(
        token.content, internal::OptionalString(entry, "content", "", source, field + ".content"));
    if (token.content.empty()) return FieldError(source, field + ".content", "missing or empty");
    TROUPE_ASSIGN_OR_RETURN(
        token.special, internal::OptionalBool(entry, "special", false, source, field + ".special"));
    TROUPE_ASSIGN_OR_RETURN(
        token.lstrip, internal::OptionalBool(entry, "lstrip", false, source, field + ".lstrip"));
    TROUPE_ASSIGN_OR_RETURN(
        token.rstrip, internal::OptionalBool(entry, "rstrip", false, source, field + ".rstrip"));
    TROUPE_ASSIGN_OR_RETURN(
        token.single_word,
        internal::OptionalBool(entry, "single_word", false, source, field + ".single_word"));
    if (added_by_content_.contains(token.content)) {
      return FieldError(source, field + ".content",
                        absl::StrCat(Quote(token.content), " appears twice"));
    }
    const bool taken = static_cast<size_t>(token.id) < id_present_.size() && id_present_[token.id];
    if (taken && id_text_[token.id] != token.content) {
      return FieldError(
          source, field + ".id",
          absl::StrCat("id ", token.id, " already belongs to ", Quote(id_text_[token.id])));
    }
    SetToken(token.id, token.content, token.content);
    id_special_[token.id] = token.special ? 1 : 0;
    added_by_content_.emplace(token.content, token.id);
    tokens.push_back(std::move(token));
  }
  added_ = AddedTokenMatcher(std::move(tokens));
  return absl::OkStatus();
}

absl::Status BpeTokenizer::LoadNormalizerAndPreTokenizer(const json& root,
                                                         absl::string_view source) {
  if (const json* normalizer = FindMember(root, "normalizer"); normalizer != nullptr) {
    TROUPE_ASSIGN_OR_RETURN(normalizer_, Normalizer::FromJson(*normalizer, source, "normalizer"));
  }
  if (!normalizer_.empty()) {
    // Hugging Face matches "normalized": true added tokens in the normalized text; here all added
    // tokens are matched before normalization, which agrees only for "normalized": false.
    const json* added = FindMember(root, "added_tokens");
    for (size_t i = 0; added != nullptr && added->is_array() && i < added->size(); ++i) {
      const std::string field = absl::StrCat("added_tokens[", i, "].normalized");
      TROUPE_ASSIGN_OR_RETURN(
          bool normalized, internal::OptionalBool((*added)[i], "normalized", false, source, field));
      if (normalized) {
        return FieldError(source, field,
                          "added tokens matched after normalization are not supported with a "
                          "normalizer (set \"normalized\": false)");
      }
    }
  }
  const json* pre_tokenizer = FindMember(root, "pre_tokenizer");
  if (pre_tokenizer == nullptr || pre_tokenizer->is_null()) {
    return FieldError(source, "pre_tokenizer",
                      "missing: byte-level BPE needs a ByteLevel pre-tokenizer");
  }
  TROUPE_ASSIGN_OR_RETURN(pre_tokenizer_,
                          PreTokenizerPipeline::FromJson(*pre_tokenizer, source, "pre_tokenizer"));
  if (!pre_tokenizer_.has_byte_level()) {
    return FieldError(source, "pre_tokenizer",
                      "no ByteLevel step: only byte-level BPE is supported");
  }
  return absl::OkStatus();
}

absl::Status BpeTokenizer::ApplyTokenizerConfig(absl::string_view config_json,
                                                absl::string_view source) {
  TROUPE_ASSIGN_OR_RETURN(json config, internal::ParseJson(config_json, source));
  if (!config.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": expected a JSON object at top level"));
  }
  struct Slot {
    const char* field;
    std::optional<int32_t>* id;
  };
  for (const Slot& slot :
       {Slot{"bos_token", &bos_id_}, Slot{"eos_token", &eos_id_}, Slot{"pad_token", &pad_id_}}) {
    const json* value = FindMember(config, slot.field);
    if (value == nullptr || value->is_null()) continue;
    std::string content;
    if (value->is_string()) {
      content = value->get<std::string>();
    } else if (value->is_object() && value->contains("content") &&
               value->at("content").is_string()) {
      content = value->at("content").get<std::string>();
    } else {
      return FieldError(source, slot.field, "expected a string or {\"content\": string}");
    }
    absl::StatusOr<int32_t> id = TokenId(content);
    if (!id.ok()) {
      return FieldError(source, slot.field,
                        absl::StrCat("token ", Quote(content), " is not in the vocabulary"));
    }
    *slot.id = *id;
  }
  config_json_ = config.dump();
  return absl::OkStatus();
}

absl::Status BpeTokenizer::LoadConfigBeside(const std::string& tokenizer_json_path) {
  const std::string config_path =
      internal::SiblingPath(tokenizer_json_path, "tokenizer_config.json");
  if (!internal::IsRegularFile(config_path)) return absl::OkStatus();
  TROUPE_ASSIGN_OR_RETURN(std::string text, ReadFileToString(config_path));
  return ApplyTokenizerConfig(text, config_path);
}

absl::Status BpeTokenizer::PreTokenizeInto(absl::string_view text, std::string* normalized,
                                           std::string* storage,
                                           std::vector<absl::string_view>* pieces) const {
  if (!normalizer_.empty()) {
    TROUPE_RETURN_IF_ERROR(normalizer_.Normalize(text, normalized));
    text = *normalized;
  }
  return pre_tokenizer_.Split(text, storage, pieces);
}

absl::StatusOr<std::vector<std::string>> BpeTokenizer::PreTokenize(absl::string_view text) const {
  std::string normalized;
  std::string storage;
  std::vector<absl::string_view> pieces;
  TROUPE_RETURN_IF_ERROR(PreTokenizeInto(text, &normalized, &storage, &pieces));
  return std::vector<std::string>(pieces.begin(), pieces.end());
}

absl::StatusOr<std::vector<int32_t>> BpeTokenizer::Encode(absl::string_view text,
                                                          const EncodeOptions& options) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<AddedTokenMatcher::Segment> segments;
  if (added_.empty()) {
    segments.push_back({text, -1});
  } else {
    added_.Split(text, options.match_special_tokens, &segments);
  }
  std::string normalized;
  std::string storage;
  std::vector<absl::string_view> pieces;
  for (const AddedTokenMatcher::Segment& segment : segments) {
    if (segment.id >= 0) {
      ids.push_back(segment.id);
      continue;
    }
    pieces.clear();
    TROUPE_RETURN_IF_ERROR(PreTokenizeInto(segment.text, &normalized, &storage, &pieces));
    for (absl::string_view piece : pieces) TROUPE_RETURN_IF_ERROR(EncodePiece(piece, &ids));
  }
  return ids;
}

absl::Status BpeTokenizer::EncodePiece(absl::string_view piece, std::vector<int32_t>* out) const {
  if (piece.size() == 1) {
    const int32_t id = byte_id_[static_cast<unsigned char>(piece[0])];
    if (id >= 0) {
      out->push_back(id);
      return absl::OkStatus();
    }
  }
  if (ignore_merges_) {
    const auto it = bytes_to_id_.find(piece);
    if (it != bytes_to_id_.end()) {
      out->push_back(it->second);
      return absl::OkStatus();
    }
  }
  if (piece.size() > kMaxCachedPieceBytes) return MergePiece(piece, out);
  {
    absl::ReaderMutexLock lock(&cache_mu_);
    const auto it = cache_.find(piece);
    if (it != cache_.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return absl::OkStatus();
    }
  }
  const size_t before = out->size();
  TROUPE_RETURN_IF_ERROR(MergePiece(piece, out));
  absl::WriterMutexLock lock(&cache_mu_);
  if (cache_.size() >= kMaxCacheEntries) cache_.clear();
  cache_.try_emplace(piece, out->begin() + before, out->end());
  return absl::OkStatus();
}

absl::Status BpeTokenizer::MergePiece(absl::string_view piece, std::vector<int32_t>* out) const {
  thread_local std::vector<Node> nodes;
  thread_local std::vector<Candidate> heap;
  nodes.clear();
  heap.clear();
  bool previous_unknown = false;
  for (size_t i = 0; i < piece.size(); ++i) {
    const unsigned char b = static_cast<unsigned char>(piece[i]);
    int32_t id = byte_id_[b];
    if (id < 0) {
      if (unk_id_ < 0) {
        return absl::InvalidArgumentError(
            absl::StrFormat("byte 0x%02X (in %s) has no token in model.vocab and "
                            "model.unk_token is not set",
                            b, Quote(piece)));
      }
      if (fuse_unk_ && previous_unknown) continue;
      id = unk_id_;
      previous_unknown = true;
    } else {
      previous_unknown = false;
    }
    const int32_t index = static_cast<int32_t>(nodes.size());
    nodes.push_back({id, index - 1, -1});
    if (index > 0) nodes[index - 1].next = index;
  }
  const auto push_candidate = [&](int32_t pos) {
    const int32_t right = nodes[pos].next;
    if (right < 0) return;
    const auto it = merges_.find(PairKey(nodes[pos].id, nodes[right].id));
    if (it == merges_.end()) return;
    heap.push_back({it->second.rank, pos, nodes[pos].id, nodes[right].id, it->second.merged_id});
    std::push_heap(heap.begin(), heap.end(), CandidateAfter());
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(nodes.size()); ++i) push_candidate(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), CandidateAfter());
    const Candidate c = heap.back();
    heap.pop_back();
    Node& left = nodes[c.pos];
    // Skip candidates made stale by earlier merges.
    if (left.id != c.left_id || left.next < 0 || nodes[left.next].id != c.right_id) continue;
    Node& right = nodes[left.next];
    left.id = c.merged_id;
    left.next = right.next;
    if (right.next >= 0) nodes[right.next].prev = c.pos;
    right.id = -1;
    if (left.prev >= 0) push_candidate(left.prev);
    push_candidate(c.pos);
  }
  for (int32_t i = nodes.empty() ? -1 : 0; i >= 0; i = nodes[i].next) out->push_back(nodes[i].id);
  return absl::OkStatus();
}

absl::StatusOr<std::string> BpeTokenizer::Decode(absl::Span<const int32_t> ids,
                                                 const DecodeOptions& options) const {
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= vocab_size() || !id_present_[id]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "id ", id, " at index ", i, " is not in the vocabulary (vocab_size ", vocab_size(), ")"));
    }
    if (options.skip_special_tokens && id_special_[id]) continue;
    text += id_bytes_[id];
  }
  if (options.replace_invalid_utf8 && !unicode::IsValidUtf8(text)) {
    return unicode::ReplaceInvalidUtf8(text);
  }
  return text;
}

absl::StatusOr<int32_t> BpeTokenizer::TokenId(absl::string_view token) const {
  if (const auto it = added_by_content_.find(token); it != added_by_content_.end()) {
    return it->second;
  }
  if (const auto it = vocab_.find(token); it != vocab_.end()) return it->second;
  return absl::NotFoundError(absl::StrCat("no token ", Quote(token), " in the vocabulary"));
}

absl::StatusOr<std::string> BpeTokenizer::TokenText(int32_t id) const {
  if (id < 0 || id >= vocab_size() || !id_present_[id]) {
    return absl::InvalidArgumentError(
        absl::StrCat("id ", id, " is not in the vocabulary (vocab_size ", vocab_size(), ")"));
  }
  return id_text_[id];
}

bool BpeTokenizer::IsSpecialToken(int32_t id) const {
  return id >= 0 && id < vocab_size() && id_special_[id];
}

void BpeTokenizer::KeepSourceNodes(const json& root) {
  const auto keep = [&](const char* key, std::string* out) {
    const json* node = FindMember(root, key);
    *out = node == nullptr ? "null" : node->dump();
  };
  keep("normalizer", &normalizer_json_);
  keep("pre_tokenizer", &pre_tokenizer_json_);
  keep("post_processor", &post_processor_json_);
  keep("decoder", &decoder_json_);
  keep("truncation", &truncation_json_);
  keep("padding", &padding_json_);
  if (const json* added = FindMember(root, "added_tokens"); added != nullptr && added->is_array()) {
    for (const json& entry : *added) {
      const json* normalized = FindMember(entry, "normalized");
      const int32_t id = entry.at("id").get<int32_t>();
      added_normalized_[id] = normalized != nullptr && normalized->is_boolean()
                                  ? normalized->get<bool>()
                                  : !IsSpecialToken(id);
    }
  }
  const json& merges = root.at("model").at("merges");
  merges_as_pairs_ = !merges.empty() && merges[0].is_array();
}

std::string BpeTokenizer::ToJson() const {
  using ordered_json = nlohmann::ordered_json;
  const auto node = [](const std::string& text) { return ordered_json::parse(text); };
  ordered_json root;
  root["version"] = "1.0";
  root["truncation"] = node(truncation_json_);
  root["padding"] = node(padding_json_);
  ordered_json added = ordered_json::array();
  for (const AddedToken& token : added_.tokens()) {
    const auto normalized = added_normalized_.find(token.id);
    added.push_back({{"id", token.id},
                     {"content", token.content},
                     {"single_word", token.single_word},
                     {"lstrip", token.lstrip},
                     {"rstrip", token.rstrip},
                     {"normalized",
                      normalized == added_normalized_.end() ? !token.special : normalized->second},
                     {"special", token.special}});
  }
  root["added_tokens"] = std::move(added);
  root["normalizer"] = node(normalizer_json_);
  root["pre_tokenizer"] = node(pre_tokenizer_json_);
  root["post_processor"] = node(post_processor_json_);
  root["decoder"] = node(decoder_json_);

  ordered_json model;
  model["type"] = "BPE";
  model["dropout"] = nullptr;
  model["unk_token"] = unk_id_ >= 0 ? ordered_json(id_text_[unk_id_]) : ordered_json(nullptr);
  model["continuing_subword_prefix"] = nullptr;
  model["end_of_word_suffix"] = nullptr;
  model["fuse_unk"] = fuse_unk_;
  model["byte_fallback"] = false;
  model["ignore_merges"] = ignore_merges_;
  std::vector<std::pair<int32_t, const std::string*>> by_id;
  by_id.reserve(vocab_.size());
  for (const auto& [text, id] : vocab_) by_id.emplace_back(id, &text);
  std::sort(by_id.begin(), by_id.end());
  // Keys are unique, so they go straight into ordered_map's vector (its operator[] and emplace
  // search linearly, which is quadratic over a 150k vocabulary).
  ordered_json::object_t vocab;
  auto& entries = static_cast<std::vector<std::pair<const std::string, ordered_json>>&>(vocab);
  entries.reserve(by_id.size());
  for (const auto& [id, text] : by_id) entries.emplace_back(*text, id);
  model["vocab"] = std::move(vocab);
  std::vector<std::pair<int32_t, uint64_t>> by_rank;
  by_rank.reserve(merges_.size());
  for (const auto& [key, merge] : merges_) by_rank.emplace_back(merge.rank, key);
  std::sort(by_rank.begin(), by_rank.end());
  ordered_json merges = ordered_json::array();
  for (const auto& [rank, key] : by_rank) {
    const std::string& left = id_text_[static_cast<int32_t>(key >> 32)];
    const std::string& right = id_text_[static_cast<int32_t>(key & 0xFFFFFFFFu)];
    if (merges_as_pairs_) {
      merges.push_back({left, right});
    } else {
      merges.push_back(absl::StrCat(left, " ", right));
    }
  }
  model["merges"] = std::move(merges);
  root["model"] = std::move(model);
  return root.dump(2);
}

std::string BpeTokenizer::ConfigJson(const TokenizerConfigOptions& options) const {
  return ConfigJsonOver(config_json_.empty() ? json::object() : json::parse(config_json_), options);
}

absl::StatusOr<std::string> BpeTokenizer::ToTokenizerConfigJson(
    absl::string_view base_config_json) const {
  if (base_config_json.empty()) return ConfigJson({});
  TROUPE_ASSIGN_OR_RETURN(json config,
                          internal::ParseJson(base_config_json, "tokenizer_config.json"));
  if (!config.is_object()) {
    return absl::InvalidArgumentError("tokenizer_config.json: expected a JSON object at top level");
  }
  return ConfigJsonOver(std::move(config), {});
}

std::string BpeTokenizer::ConfigJsonOver(json config, const TokenizerConfigOptions& options) const {
  json decoder = json::object();
  for (const AddedToken& token : added_.tokens()) {
    const auto normalized = added_normalized_.find(token.id);
    decoder[std::to_string(token.id)] = {
        {"content", token.content},
        {"lstrip", token.lstrip},
        {"normalized", normalized == added_normalized_.end() ? !token.special : normalized->second},
        {"rstrip", token.rstrip},
        {"single_word", token.single_word},
        {"special", token.special}};
  }
  config["added_tokens_decoder"] = std::move(decoder);
  const auto token_or_null = [&](const std::optional<int32_t>& id) {
    return id.has_value() ? json(id_text_[*id]) : json(nullptr);
  };
  config["bos_token"] = token_or_null(bos_id_);
  config["eos_token"] = token_or_null(eos_id_);
  config["pad_token"] = token_or_null(pad_id_);
  if (!config.contains("clean_up_tokenization_spaces")) {
    config["clean_up_tokenization_spaces"] = false;
  }
  if (!config.contains("tokenizer_class")) config["tokenizer_class"] = "PreTrainedTokenizerFast";
  if (options.model_max_length.has_value()) config["model_max_length"] = *options.model_max_length;
  if (options.chat_template.has_value()) config["chat_template"] = *options.chat_template;
  return config.dump(2);
}

}  // namespace troupe::models
