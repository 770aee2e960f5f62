#include "runtime/transport/frame_codec.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "google/protobuf/io/zero_copy_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/wire_format_lite.h"

namespace troupe {
namespace transport {
namespace {

using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;
using google::protobuf::io::CodedOutputStream;

constexpr uint32_t kVarint = 0;
constexpr uint32_t kLen = 2;

// Field numbers of proto/worker.proto.
constexpr int kEntriesField = 1;  // CallFrames.calls / ReplyFrames.replies
constexpr int kCallId = 1;
constexpr int kCallActorId = 2;
constexpr int kCallMethod = 3;
constexpr int kCallTimeoutUs = 4;
constexpr int kCallTotalBytes = 5;
constexpr int kCallOffset = 6;
constexpr int kCallCancel = 7;
constexpr int kReplyCode = 2;
constexpr int kReplyMessage = 3;
constexpr int kReplyTotalBytes = 4;
constexpr int kReplyOffset = 5;
constexpr int kPayload = 15;  // both

constexpr uint32_t Tag(int field, uint32_t wire_type) {
  return (static_cast<uint32_t>(field) << 3) | wire_type;
}

size_t VarintSize(uint64_t v) { return CodedOutputStream::VarintSize64(v); }

// Size of a varint field (tag + value); 0 when `v` is 0 and `skip_zero`.
size_t VarintFieldSize(int field, uint64_t v, bool skip_zero = true) {
  if (v == 0 && skip_zero) return 0;
  return VarintSize(Tag(field, kVarint)) + VarintSize(v);
}

// Size of a length-delimited field of `n` bytes; 0 when empty.
size_t LenFieldSize(int field, size_t n) {
  if (n == 0) return 0;
  return VarintSize(Tag(field, kLen)) + VarintSize(n) + n;
}

uint8_t* PutVarint(uint64_t v, uint8_t* p) { return CodedOutputStream::WriteVarint64ToArray(v, p); }

uint8_t* PutVarintField(int field, uint64_t v, uint8_t* p, bool skip_zero = true) {
  if (v == 0 && skip_zero) return p;
  p = PutVarint(Tag(field, kVarint), p);
  return PutVarint(v, p);
}

uint8_t* PutLenField(int field, absl::string_view s, uint8_t* p) {
  if (s.empty()) return p;
  p = PutVarint(Tag(field, kLen), p);
  p = PutVarint(s.size(), p);
  std::memcpy(p, s.data(), s.size());
  return p + s.size();
}

// Tag and length prefix of the payload field (its bytes follow).
uint8_t* PutPayloadPrefix(size_t n, uint8_t* p) {
  p = PutVarint(Tag(kPayload, kLen), p);
  return PutVarint(n, p);
}

size_t PayloadPrefixSize(size_t n) { return VarintSize(Tag(kPayload, kLen)) + VarintSize(n); }

// The header fields of a CallFrame (everything but the payload).
size_t CallHeaderSize(uint64_t call_id, absl::string_view actor_id, absl::string_view method,
                      int64_t timeout_us, uint64_t total_bytes, uint64_t offset) {
  return VarintFieldSize(kCallId, call_id, /*skip_zero=*/false) +
         LenFieldSize(kCallActorId, actor_id.size()) + LenFieldSize(kCallMethod, method.size()) +
         VarintFieldSize(kCallTimeoutUs, static_cast<uint64_t>(timeout_us)) +
         VarintFieldSize(kCallTotalBytes, total_bytes) + VarintFieldSize(kCallOffset, offset);
}

uint8_t* PutCallHeader(uint64_t call_id, absl::string_view actor_id, absl::string_view method,
                       int64_t timeout_us, uint64_t total_bytes, uint64_t offset, uint8_t* p) {
  p = PutVarintField(kCallId, call_id, p, /*skip_zero=*/false);
  p = PutLenField(kCallActorId, actor_id, p);
  p = PutLenField(kCallMethod, method, p);
  p = PutVarintField(kCallTimeoutUs, static_cast<uint64_t>(timeout_us), p);
  p = PutVarintField(kCallTotalBytes, total_bytes, p);
  return PutVarintField(kCallOffset, offset, p);
}

size_t ReplyHeaderSize(uint64_t call_id, int32_t code, absl::string_view message,
                       uint64_t total_bytes, uint64_t offset) {
  // int32 fields are sign-extended to 64 bits on the wire.
  return VarintFieldSize(kCallId, call_id, /*skip_zero=*/false) +
         VarintFieldSize(kReplyCode, static_cast<uint64_t>(static_cast<int64_t>(code))) +
         LenFieldSize(kReplyMessage, message.size()) +
         VarintFieldSize(kReplyTotalBytes, total_bytes) + VarintFieldSize(kReplyOffset, offset);
}

uint8_t* PutReplyHeader(uint64_t call_id, int32_t code, absl::string_view message,
                        uint64_t total_bytes, uint64_t offset, uint8_t* p) {
  p = PutVarintField(kCallId, call_id, p, /*skip_zero=*/false);
  p = PutVarintField(kReplyCode, static_cast<uint64_t>(static_cast<int64_t>(code)), p);
  p = PutLenField(kReplyMessage, message, p);
  p = PutVarintField(kReplyTotalBytes, total_bytes, p);
  return PutVarintField(kReplyOffset, offset, p);
}

uint8_t* U8(char* p) { return reinterpret_cast<uint8_t*>(p); }

}  // namespace

namespace internal {

// A ZeroCopyInputStream over a sequence of byte ranges (a payload's views, a received message's
// slices), read in place: no copy.
class ViewStream final : public google::protobuf::io::ZeroCopyInputStream {
 public:
  explicit ViewStream(absl::Span<const absl::string_view> views) : views_(views) {}

  bool Next(const void** data, int* size) override {
    while (index_ < views_.size()) {
      const absl::string_view v = views_[index_];
      if (pos_ < v.size()) {
        *data = v.data() + pos_;
        *size = static_cast<int>(v.size() - pos_);
        count_ += *size;
        pos_ = v.size();
        return true;
      }
      ++index_;
      pos_ = 0;
    }
    return false;
  }
  void BackUp(int count) override {
    pos_ -= count;
    count_ -= count;
  }
  bool Skip(int count) override {
    const void* data;
    int size;
    while (count > 0) {
      if (!Next(&data, &size)) return false;
      if (size > count) {
        BackUp(size - count);
        return true;
      }
      count -= size;
    }
    return true;
  }
  int64_t ByteCount() const override { return count_; }

 private:
  absl::Span<const absl::string_view> views_;
  size_t index_ = 0;
  size_t pos_ = 0;
  int64_t count_ = 0;
};

}  // namespace internal

using internal::ViewStream;

// ---- FrameBuilder ---------------------------------------------------------------------------

char* FrameBuilder::Grow(size_t n) {
  const size_t at = inline_.size();
  inline_.resize(at + n);
  size_ += n;
  return &inline_[at];
}

void FrameBuilder::BeginEntry(size_t body_bytes) {
  const size_t n = VarintSize(Tag(kEntriesField, kLen)) + VarintSize(body_bytes);
  uint8_t* p = U8(Grow(n));
  p = PutVarint(Tag(kEntriesField, kLen), p);
  PutVarint(body_bytes, p);
  ++entries_;
}

void FrameBuilder::FlushInline() {
  if (inline_.empty()) return;
  slices_.emplace_back(inline_.data(), inline_.size());
  inline_.clear();
}

void FrameBuilder::AddCall(uint64_t call_id, absl::string_view actor_id, absl::string_view method,
                           int64_t timeout_us, const google::protobuf::Message& request,
                           size_t request_bytes) {
  const size_t header = CallHeaderSize(call_id, actor_id, method, timeout_us, request_bytes, 0);
  const size_t payload = request_bytes == 0 ? 0 : PayloadPrefixSize(request_bytes) + request_bytes;
  BeginEntry(header + payload);
  uint8_t* p = U8(Grow(header + payload));
  p = PutCallHeader(call_id, actor_id, method, timeout_us, request_bytes, 0, p);
  if (request_bytes != 0) {
    p = PutPayloadPrefix(request_bytes, p);
    request.SerializeWithCachedSizesToArray(p);
  }
}

void FrameBuilder::AddCallPiece(uint64_t call_id, absl::string_view actor_id,
                                absl::string_view method, int64_t timeout_us, uint64_t total_bytes,
                                uint64_t offset, const grpc::Slice& piece) {
  if (offset != 0) {  // continuation pieces carry only id, offset and bytes
    actor_id = method = absl::string_view();
    timeout_us = 0;
    total_bytes = 0;
  }
  const size_t header = CallHeaderSize(call_id, actor_id, method, timeout_us, total_bytes, offset);
  const size_t prefix = piece.size() == 0 ? 0 : PayloadPrefixSize(piece.size());
  BeginEntry(header + prefix + piece.size());
  uint8_t* p = U8(Grow(header + prefix));
  p = PutCallHeader(call_id, actor_id, method, timeout_us, total_bytes, offset, p);
  if (piece.size() != 0) {
    PutPayloadPrefix(piece.size(), p);
    FlushInline();
    slices_.push_back(piece);
    size_ += piece.size();
  }
}

void FrameBuilder::AddCancel(uint64_t call_id) {
  const size_t body = VarintFieldSize(kCallId, call_id, false) + VarintFieldSize(kCallCancel, 1);
  BeginEntry(body);
  uint8_t* p = U8(Grow(body));
  p = PutVarintField(kCallId, call_id, p, false);
  PutVarintField(kCallCancel, 1, p);
}

void FrameBuilder::AddReply(uint64_t call_id, const google::protobuf::Message& reply,
                            size_t reply_bytes) {
  const size_t header = ReplyHeaderSize(call_id, 0, "", reply_bytes, 0);
  const size_t payload = reply_bytes == 0 ? 0 : PayloadPrefixSize(reply_bytes) + reply_bytes;
  BeginEntry(header + payload);
  uint8_t* p = U8(Grow(header + payload));
  p = PutReplyHeader(call_id, 0, "", reply_bytes, 0, p);
  if (reply_bytes != 0) {
    p = PutPayloadPrefix(reply_bytes, p);
    reply.SerializeWithCachedSizesToArray(p);
  }
}

void FrameBuilder::AddError(uint64_t call_id, int32_t code, absl::string_view message) {
  const size_t body = ReplyHeaderSize(call_id, code, message, 0, 0);
  BeginEntry(body);
  PutReplyHeader(call_id, code, message, 0, 0, U8(Grow(body)));
}

void FrameBuilder::AddReplyPiece(uint64_t call_id, uint64_t total_bytes, uint64_t offset,
                                 const grpc::Slice& piece) {
  if (offset != 0) total_bytes = 0;
  const size_t header = ReplyHeaderSize(call_id, 0, "", total_bytes, offset);
  const size_t prefix = piece.size() == 0 ? 0 : PayloadPrefixSize(piece.size());
  BeginEntry(header + prefix + piece.size());
  uint8_t* p = U8(Grow(header + prefix));
  p = PutReplyHeader(call_id, 0, "", total_bytes, offset, p);
  if (piece.size() != 0) {
    PutPayloadPrefix(piece.size(), p);
    FlushInline();
    slices_.push_back(piece);
    size_ += piece.size();
  }
}

grpc::ByteBuffer FrameBuilder::Finish() {
  FlushInline();
  grpc::ByteBuffer out(slices_.data(), slices_.size());
  slices_.clear();
  size_ = 0;
  entries_ = 0;
  return out;
}

// ---- FrameReader ----------------------------------------------------------------------------

FrameReader::FrameReader(FrameKind kind, const grpc::ByteBuffer& buffer) : kind_(kind) {
  grpc::Status s = buffer.Dump(&slices_);
  if (!s.ok()) {
    status_ = absl::InvalidArgumentError(absl::StrCat("unreadable frame: ", s.error_message()));
    return;
  }
  views_.reserve(slices_.size());
  for (const grpc::Slice& slice : slices_) {
    views_.emplace_back(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  stream_ = std::make_unique<ViewStream>(views_);
  in_ = std::make_unique<CodedInputStream>(stream_.get());
}

FrameReader::~FrameReader() = default;

bool FrameReader::Fail(absl::string_view what) {
  if (status_.ok()) {
    status_ = absl::InvalidArgumentError(
        absl::StrCat("malformed ", kind_ == FrameKind::kCalls ? "CallFrames" : "ReplyFrames",
                     " message: ", what));
  }
  in_.reset();
  return false;
}

bool FrameReader::Next() {
  if (in_ == nullptr) return false;
  while (true) {
    const uint32_t tag = in_->ReadTag();
    if (tag == 0) {
      if (!in_->ConsumedEntireMessage()) return Fail("truncated or invalid tag");
      in_.reset();
      return false;
    }
    if (tag != Tag(kEntriesField, kLen)) {
      if (!WireFormatLite::SkipField(in_.get(), tag)) return Fail("unskippable unknown field");
      continue;
    }
    uint32_t len;
    if (!in_->ReadVarint32(&len)) return Fail("truncated entry length");
    if (len > static_cast<uint32_t>(INT32_MAX)) return Fail("entry length out of range");
    const CodedInputStream::Limit limit = in_->PushLimit(static_cast<int>(len));
    if (in_->BytesUntilLimit() != static_cast<int>(len)) return Fail("entry runs past the end");
    if (!ReadEntry(static_cast<int>(len))) return false;
    in_->PopLimit(limit);
    return true;
  }
}

bool FrameReader::ReadEntry(int /*limit*/) {
  FrameEntry& e = entry_;
  e.call_id = 0;
  e.actor_id.clear();
  e.method.clear();
  e.timeout_us = 0;
  e.cancel = false;
  e.code = 0;
  e.message.clear();
  e.total_bytes = 0;
  e.offset = 0;
  e.payload.clear();
  e.payload_size = 0;
  const bool calls = kind_ == FrameKind::kCalls;
  while (in_->BytesUntilLimit() > 0) {
    const uint32_t tag = in_->ReadTag();
    if (tag == 0) return Fail("truncated entry");
    const int field = static_cast<int>(tag >> 3);
    const uint32_t wire = tag & 7;
    uint64_t v = 0;
    if (wire == kVarint) {
      if (!in_->ReadVarint64(&v)) return Fail("truncated varint");
      if (field == kCallId) {
        e.call_id = v;
      } else if (calls && field == kCallTimeoutUs) {
        e.timeout_us = static_cast<int64_t>(v);
      } else if (calls && field == kCallTotalBytes) {
        e.total_bytes = v;
      } else if (calls && field == kCallOffset) {
        e.offset = v;
      } else if (calls && field == kCallCancel) {
        e.cancel = v != 0;
      } else if (!calls && field == kReplyCode) {
        e.code = static_cast<int32_t>(static_cast<int64_t>(v));
      } else if (!calls && field == kReplyTotalBytes) {
        e.total_bytes = v;
      } else if (!calls && field == kReplyOffset) {
        e.offset = v;
      }
      continue;
    }
    if (wire == kLen) {
      uint32_t len;
      if (!in_->ReadVarint32(&len)) return Fail("truncated length");
      if (static_cast<int64_t>(len) > in_->BytesUntilLimit()) {
        return Fail("field runs past the end of its entry");
      }
      const int n = static_cast<int>(len);
      if (field == kPayload) {
        int left = n;
        while (left > 0) {
          const void* data;
          int size;
          if (!in_->GetDirectBufferPointer(&data, &size)) return Fail("truncated payload");
          const int take = size < left ? size : left;
          e.payload.emplace_back(static_cast<const char*>(data), take);
          in_->Skip(take);
          left -= take;
        }
        e.payload_size += n;
        continue;
      }
      std::string* dst = nullptr;
      if (calls && field == kCallActorId) dst = &e.actor_id;
      if (calls && field == kCallMethod) dst = &e.method;
      if (!calls && field == kReplyMessage) dst = &e.message;
      if (dst != nullptr) {
        if (!in_->ReadString(dst, n)) return Fail("truncated string");
      } else if (!in_->Skip(n)) {
        return Fail("truncated unknown field");
      }
      continue;
    }
    if (!WireFormatLite::SkipField(in_.get(), tag)) return Fail("unskippable unknown field");
  }
  if (in_->BytesUntilLimit() != 0) return Fail("entry length mismatch");
  return true;
}

void FrameReader::AppendPayloadSlices(std::vector<grpc::Slice>* out) const {
  size_t i = 0;
  for (absl::string_view v : entry_.payload) {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(v.data());
    // Views are in slice order: continue the scan where the previous one was found.
    while (i < slices_.size() && !(p >= slices_[i].begin() && p < slices_[i].end())) ++i;
    if (i == slices_.size()) {  // not expected: fall back to a copy
      out->emplace_back(v.data(), v.size());
      i = 0;
      continue;
    }
    const size_t begin = static_cast<size_t>(p - slices_[i].begin());
    out->push_back(slices_[i].sub(begin, begin + v.size()));
  }
}

bool ParseFromSlices(const std::vector<grpc::Slice>& parts, google::protobuf::Message* message) {
  message->Clear();
  std::vector<absl::string_view> views;
  views.reserve(parts.size());
  for (const grpc::Slice& s : parts) {
    views.emplace_back(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  ViewStream in(views);
  return message->ParseFromZeroCopyStream(&in);
}

bool ParsePayload(const FrameEntry& entry, google::protobuf::Message* message) {
  if (entry.payload.size() <= 1) {
    message->Clear();
    if (entry.payload.empty()) return true;
    return message->ParseFromArray(entry.payload[0].data(),
                                   static_cast<int>(entry.payload[0].size()));
  }
  ViewStream in(entry.payload);
  return message->ParseFromZeroCopyStream(&in);
}

void AppendPayload(const FrameEntry& entry, std::string* out) {
  for (absl::string_view v : entry.payload) out->append(v.data(), v.size());
}

}  // namespace transport
}  // namespace troupe
