#include "runtime/transport/frame_codec.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "proto/worker.pb.h"
#include "runtime/testing/test_messages.pb.h"
#include "runtime/transport/transport_common.h"

namespace troupe {
namespace transport {
namespace {

std::string Flatten(const grpc::ByteBuffer& b) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(b.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices)
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// A byte buffer made of the given pieces (each its own slice), to test reads across slices.
grpc::ByteBuffer Pieces(const std::vector<std::string>& parts) {
  std::vector<grpc::Slice> slices;
  for (const std::string& p : parts) slices.emplace_back(p);
  return grpc::ByteBuffer(slices.data(), slices.size());
}

grpc::ByteBuffer FromString(const std::string& s, size_t piece) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < s.size(); i += piece) parts.push_back(s.substr(i, piece));
  return Pieces(parts);
}

std::string Joined(const FrameEntry& e) {
  std::string out;
  AppendPayload(e, &out);
  return out;
}

TEST(FrameCodec, BuiltCallFramesAreTheProtobufEncodingOfCallFrames) {
  testing::Num req;
  req.set_value(-42);
  req.set_caller(3);
  grpc::Slice piece(std::string(1000, 'x'));
  FrameBuilder b(FrameKind::kCalls);
  b.AddCall(7, "actor-1", "Add", 1500, req, req.ByteSizeLong());
  b.AddCallPiece(8, "actor-2", "Big", -1, 5000, 0, piece);
  b.AddCallPiece(8, "ignored", "ignored", 9, 9, 1000, piece);
  b.AddCancel(5);
  EXPECT_EQ(b.entries(), 4);
  grpc::ByteBuffer frame = b.Finish();
  EXPECT_TRUE(b.empty());

  proto::CallFrames parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(frame)));
  ASSERT_EQ(parsed.calls_size(), 4);
  const proto::CallFrame& a = parsed.calls(0);
  EXPECT_EQ(a.call_id(), 7u);
  EXPECT_EQ(a.actor_id(), "actor-1");
  EXPECT_EQ(a.method(), "Add");
  EXPECT_EQ(a.timeout_us(), 1500);
  EXPECT_EQ(a.total_bytes(), req.ByteSizeLong());
  EXPECT_EQ(a.payload(), req.SerializeAsString());
  const proto::CallFrame& first = parsed.calls(1);
  EXPECT_EQ(first.timeout_us(), -1);
  EXPECT_EQ(first.total_bytes(), 5000u);
  EXPECT_EQ(first.offset(), 0u);
  EXPECT_EQ(first.payload(), std::string(1000, 'x'));
  const proto::CallFrame& cont = parsed.calls(2);
  EXPECT_EQ(cont.call_id(), 8u);
  EXPECT_EQ(cont.offset(), 1000u);
  EXPECT_TRUE(cont.actor_id().empty()) << "continuation pieces carry no header";
  EXPECT_EQ(cont.total_bytes(), 0u);
  EXPECT_TRUE(parsed.calls(3).cancel());
  EXPECT_EQ(parsed.calls(3).call_id(), 5u);
}

TEST(FrameCodec, BuiltReplyFramesAreTheProtobufEncodingOfReplyFrames) {
  testing::Text reply;
  reply.set_text("hello");
  FrameBuilder b(FrameKind::kReplies);
  b.AddReply(1, reply, reply.ByteSizeLong());
  b.AddError(2, static_cast<int32_t>(absl::StatusCode::kNotFound), "no such actor");
  b.AddReplyPiece(3, 10, 0, grpc::Slice(std::string("01234")));
  b.AddReplyPiece(3, 10, 5, grpc::Slice(std::string("56789")));
  proto::ReplyFrames parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(b.Finish())));
  ASSERT_EQ(parsed.replies_size(), 4);
  EXPECT_EQ(parsed.replies(0).code(), 0);
  EXPECT_EQ(parsed.replies(0).payload(), reply.SerializeAsString());
  EXPECT_EQ(parsed.replies(1).code(), 5);
  EXPECT_EQ(parsed.replies(1).message(), "no such actor");
  EXPECT_EQ(parsed.replies(2).total_bytes(), 10u);
  EXPECT_EQ(parsed.replies(3).offset(), 5u);
  EXPECT_EQ(parsed.replies(3).payload(), "56789");
}

TEST(FrameCodec, ReaderDecodesGeneratedCallFramesSplitAcrossManySlices) {
  proto::CallFrames frames;
  for (int i = 0; i < 20; ++i) {
    proto::CallFrame* f = frames.add_calls();
    // Payload before the header fields: any field order must decode.
    f->set_payload(std::string(100 + i, static_cast<char>('a' + i)));
    f->set_call_id(1000 + i);
    f->set_actor_id("actor-" + std::to_string(i));
    f->set_method("Method");
    f->set_timeout_us(-7 * i);
    f->set_total_bytes(100 + i);
  }
  frames.mutable_calls(3)->set_cancel(true);
  const std::string wire = frames.SerializeAsString();
  for (size_t piece : {size_t{1}, size_t{7}, size_t{64}, wire.size()}) {
    SCOPED_TRACE(piece);
    FrameReader r(FrameKind::kCalls, FromString(wire, piece));
    int n = 0;
    while (r.Next()) {
      const FrameEntry& e = r.entry();
      EXPECT_EQ(e.call_id, 1000u + n);
      EXPECT_EQ(e.actor_id, "actor-" + std::to_string(n));
      EXPECT_EQ(e.method, "Method");
      EXPECT_EQ(e.timeout_us, -7 * n);
      EXPECT_EQ(e.cancel, n == 3);
      EXPECT_EQ(e.payload_size, 100u + n);
      EXPECT_EQ(Joined(e), std::string(100 + n, static_cast<char>('a' + n)));
      ++n;
    }
    EXPECT_TRUE(r.status().ok()) << r.status();
    EXPECT_EQ(n, 20);
  }
}

TEST(FrameCodec, PayloadSplitAcrossSlicesParsesIntoTheMessage) {
  testing::Text big;
  big.set_text(std::string(5000, 'q'));
  FrameBuilder b(FrameKind::kReplies);
  b.AddReply(9, big, big.ByteSizeLong());
  FrameReader r(FrameKind::kReplies, FromString(Flatten(b.Finish()), 333));
  ASSERT_TRUE(r.Next());
  EXPECT_GT(r.entry().payload.size(), 1u);
  testing::Text parsed;
  ASSERT_TRUE(ParsePayload(r.entry(), &parsed));
  EXPECT_EQ(parsed.text(), big.text());
  EXPECT_FALSE(r.Next());
  EXPECT_TRUE(r.status().ok());
}

TEST(FrameCodec, PayloadSlicesOutliveTheReaderAndReassembleWithoutCopies) {
  testing::Text big;
  big.set_text(std::string(10000, 'r'));
  const std::string wire = big.SerializeAsString();
  // Two pieces of one message, each in its own frame split across many slices.
  const size_t half = wire.size() / 2;
  std::vector<grpc::Slice> parts;
  for (int piece = 0; piece < 2; ++piece) {
    FrameBuilder b(FrameKind::kCalls);
    const std::string bytes = piece == 0 ? wire.substr(0, half) : wire.substr(half);
    b.AddCallPiece(4, "a", "M", 0, wire.size(), piece == 0 ? 0 : half, grpc::Slice(bytes));
    FrameReader r(FrameKind::kCalls, FromString(Flatten(b.Finish()), 999));
    ASSERT_TRUE(r.Next());
    r.AppendPayloadSlices(&parts);
  }
  EXPECT_GT(parts.size(), 2u);
  testing::Text parsed;
  ASSERT_TRUE(ParseFromSlices(parts, &parsed));
  EXPECT_EQ(parsed.text(), big.text());
  std::vector<grpc::Slice> junk = {
      grpc::Slice(std::string("\x0a\x05"
                              "ab"))};
  EXPECT_FALSE(ParseFromSlices(junk, &parsed)) << "a truncated message must not parse";
}

TEST(FrameCodec, EmptyRequestsTravelWithNoPayloadField) {
  testing::Empty empty;
  FrameBuilder b(FrameKind::kCalls);
  b.AddCall(1, "a", "Nothing", 0, empty, empty.ByteSizeLong());
  FrameReader r(FrameKind::kCalls, b.Finish());
  ASSERT_TRUE(r.Next());
  EXPECT_EQ(r.entry().payload_size, 0u);
  EXPECT_EQ(r.entry().total_bytes, 0u);
  testing::Empty parsed;
  EXPECT_TRUE(ParsePayload(r.entry(), &parsed));
}

TEST(FrameCodec, TruncatedFramesAreRejectedNotMisread) {
  testing::Text t;
  t.set_text("payload");
  FrameBuilder b(FrameKind::kCalls);
  b.AddCall(1, "actor", "M", 10, t, t.ByteSizeLong());
  b.AddCall(2, "actor", "M", 10, t, t.ByteSizeLong());
  const std::string wire = Flatten(b.Finish());
  for (size_t cut = 1; cut < wire.size(); ++cut) {
    FrameReader r(FrameKind::kCalls, FromString(wire.substr(0, cut), 5));
    int n = 0;
    while (r.Next()) ++n;
    // Either the cut fell between entries (fewer entries, OK) or the reader reports it.
    if (r.status().ok()) {
      EXPECT_LT(n, 2) << "cut " << cut;
    } else {
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_NE(r.status().message().find("CallFrames"), std::string::npos);
    }
  }
}

TEST(FrameCodec, RandomBytesNeverCrashTheReader) {
  std::mt19937 rng(1234);
  for (int i = 0; i < 2000; ++i) {
    std::string junk(rng() % 200, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    FrameReader r(FrameKind::kReplies, FromString(junk.empty() ? std::string() : junk, 17));
    int guard = 0;
    while (r.Next() && guard < 1000) {
      std::string sink;
      AppendPayload(r.entry(), &sink);
      EXPECT_EQ(sink.size(), r.entry().payload_size);
      ++guard;
    }
  }
}

TEST(FrameCodec, TokensCompareByContent) {
  EXPECT_TRUE(TokenMatches("secret", "secret"));
  EXPECT_FALSE(TokenMatches("secret", "secreT"));
  EXPECT_FALSE(TokenMatches("secret", "secret2"));
  EXPECT_FALSE(TokenMatches("secret", ""));
  EXPECT_TRUE(TokenMatches("", ""));
}

}  // namespace
}  // namespace transport
}  // namespace troupe
