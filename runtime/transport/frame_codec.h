// Encoding and decoding of the transport's stream messages (CallFrames / ReplyFrames of
// proto/worker.proto) directly on gRPC byte buffers.
//
// Why by hand: a generated CallFrames would copy every payload into its `bytes` field and gRPC
// would copy it again when serializing the frame. FrameBuilder writes the few header bytes itself
// and attaches payload pieces as references to slices holding the serialized message, so a large
// request is serialized once and never copied by the transport on the sending side. FrameReader
// walks a received buffer's slices and exposes each entry's payload as views into them, so the
// receiver copies payload bytes at most once (into a reassembly buffer) before parsing.
// The bytes produced are exactly the protobuf encoding of CallFrames / ReplyFrames.
//
// Example (sender):
//   FrameBuilder b(FrameKind::kCalls);
//   b.AddCall(7, "actor-1", "Add", /*timeout_us=*/500000, request, request.ByteSizeLong());
//   grpc::ByteBuffer frame = b.Finish();
// Example (receiver):
//   FrameReader r(FrameKind::kCalls, frame);
//   while (r.Next()) { const FrameEntry& e = r.entry(); ... ParsePayload(e, msg.get()) ... }
//   if (!r.status().ok()) ... the frame was malformed ...
//
// Thread-safety: a FrameBuilder or FrameReader is used by one thread at a time.
#ifndef TROUPE_RUNTIME_TRANSPORT_FRAME_CODEC_H_
#define TROUPE_RUNTIME_TRANSPORT_FRAME_CODEC_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/message.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"

namespace troupe {
namespace transport {
namespace internal {
class ViewStream;  // frame_codec.cc
}  // namespace internal

enum class FrameKind { kCalls, kReplies };

// One decoded CallFrame (kCalls) or ReplyFrame (kReplies). Fields of the other kind stay at
// their defaults.
struct FrameEntry {
  uint64_t call_id = 0;
  // CallFrame only.
  std::string actor_id;
  std::string method;
  int64_t timeout_us = 0;
  bool cancel = false;
  // ReplyFrame only.
  int32_t code = 0;
  std::string message;
  // Both.
  uint64_t total_bytes = 0;
  uint64_t offset = 0;
  // The payload as views into the received buffer's slices (valid until the reader moves on).
  absl::InlinedVector<absl::string_view, 2> payload;
  size_t payload_size = 0;
};

// Builds one stream message. Entries are appended in order; Finish hands the message out and
// resets the builder (keeping its scratch capacity).
class FrameBuilder {
 public:
  explicit FrameBuilder(FrameKind kind) : kind_(kind) {}

  // Bytes appended since the last Finish.
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Entries appended since the last Finish.
  int entries() const { return entries_; }

  // kCalls: a call whose whole request is serialized inline. `request_bytes` must equal
  // request.ByteSizeLong() computed just before (its cached sizes are used).
  void AddCall(uint64_t call_id, absl::string_view actor_id, absl::string_view method,
               int64_t timeout_us, const google::protobuf::Message& request, size_t request_bytes);
  // kCalls: one piece of a large request; `piece` is referenced, not copied. The first piece
  // (offset 0) carries actor_id/method/timeout_us; continuation pieces ignore them.
  void AddCallPiece(uint64_t call_id, absl::string_view actor_id, absl::string_view method,
                    int64_t timeout_us, uint64_t total_bytes, uint64_t offset,
                    const grpc::Slice& piece);
  // kCalls: the caller gave up on `call_id`.
  void AddCancel(uint64_t call_id);

  // kReplies: an OK reply serialized inline (`reply_bytes` as for AddCall).
  void AddReply(uint64_t call_id, const google::protobuf::Message& reply, size_t reply_bytes);
  // kReplies: a failed call (code != 0).
  void AddError(uint64_t call_id, int32_t code, absl::string_view message);
  // kReplies: one piece of a large OK reply, referenced.
  void AddReplyPiece(uint64_t call_id, uint64_t total_bytes, uint64_t offset,
                     const grpc::Slice& piece);

  // The message built so far; the builder is empty afterwards.
  grpc::ByteBuffer Finish();

 private:
  // Writes the entry tag and length, then returns where the entry's body starts.
  void BeginEntry(size_t body_bytes);
  // Moves the inline bytes gathered so far into a slice.
  void FlushInline();
  char* Grow(size_t n);

  const FrameKind kind_;
  std::string inline_;               // header bytes and inline payloads not yet in a slice
  std::vector<grpc::Slice> slices_;  // finished slices, in order
  size_t size_ = 0;
  int entries_ = 0;
};

// Decodes one received stream message. Holds references to the buffer's slices.
class FrameReader {
 public:
  // `buffer` may be destroyed after construction (its slices are referenced).
  FrameReader(FrameKind kind, const grpc::ByteBuffer& buffer);
  ~FrameReader();
  FrameReader(const FrameReader&) = delete;
  FrameReader& operator=(const FrameReader&) = delete;

  // Decodes the next entry into entry(); false at the end or when the message is malformed
  // (then status() is INVALID_ARGUMENT naming the problem).
  bool Next();
  const FrameEntry& entry() const { return entry_; }
  const absl::Status& status() const { return status_; }

  // Appends the current entry's payload as references to the received slices (no copy), so a
  // piece can outlive the reader (reassembly without copying, see ParseFromSlices).
  void AppendPayloadSlices(std::vector<grpc::Slice>* out) const;

 private:
  bool Fail(absl::string_view what);
  bool ReadEntry(int limit);

  const FrameKind kind_;
  std::vector<grpc::Slice> slices_;
  std::vector<absl::string_view> views_;  // slices_' bytes, what stream_ reads
  std::unique_ptr<internal::ViewStream> stream_;
  std::unique_ptr<google::protobuf::io::CodedInputStream> in_;
  FrameEntry entry_;
  absl::Status status_;
};

// Parses an entry's whole payload (not a piece) into `message` (cleared first). False if the
// bytes are not a valid encoding of message's type.
bool ParsePayload(const FrameEntry& entry, google::protobuf::Message* message);

// Appends an entry's payload bytes to `out`.
void AppendPayload(const FrameEntry& entry, std::string* out);

// Parses the concatenation of `parts` into `message` (cleared first): a payload reassembled from
// pieces is parsed straight from the received slices. False if it is not a valid encoding.
bool ParseFromSlices(const std::vector<grpc::Slice>& parts, google::protobuf::Message* message);

}  // namespace transport
}  // namespace troupe

#endif  // TROUPE_RUNTIME_TRANSPORT_FRAME_CODEC_H_
