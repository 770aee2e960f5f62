// Over ~900 lines on purpose: one gRPC stream's state machine (frames in, calls dispatched,
// replies batched out, cancellation) reads best whole; the framing lives in frame_codec.cc.
#include "runtime/transport/transport_server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <map>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "base/log.h"
#include "grpc/grpc.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/grpcpp.h"
#include "proto/worker.grpc.pb.h"
#include "runtime/internal/call.h"
#include "runtime/transport/frame_codec.h"
#include "runtime/transport/sample_probe.h"
#include "runtime/transport/token_checker.h"

namespace troupe {
namespace transport {
namespace {

using grpc::ByteBuffer;
using troupe::internal::CallBase;
using troupe::internal::RefPtr;
using troupe::internal::UntypedCall;
using MessagePtr = std::unique_ptr<google::protobuf::Message>;

struct Counters {
  std::atomic<int64_t> streams_opened{0};
  std::atomic<int64_t> streams_refused{0};
  std::atomic<int64_t> calls_received{0};
  std::atomic<int64_t> calls_dispatched{0};
  std::atomic<int64_t> cancels_received{0};
  std::atomic<int64_t> calls_cancelled{0};
  std::atomic<int64_t> replies_sent{0};
  std::atomic<int64_t> frames_received{0};
  std::atomic<int64_t> frames_sent{0};
};

void Bump(std::atomic<int64_t>& c, int64_t n = 1) { c.fetch_add(n, std::memory_order_relaxed); }

// Totals of one (actor, caller, method); owned by ServerShared, so stable for its lifetime.
struct CallCounters {
  std::atomic<int64_t> calls{0};
  std::atomic<int64_t> request_bytes{0};
  std::atomic<int64_t> reply_bytes{0};
  std::atomic<int64_t> errors{0};
  // From the application's sample probes (sample_probe.h).
  std::atomic<int64_t> samples{0};
  std::atomic<int64_t> policy_version_sum{0};
  std::atomic<int64_t> version{-1};
};

// Adds what `message`'s sample probe (if its type has one) says to `counters`.
void CountSamples(const google::protobuf::Message& message, CallCounters* counters) {
  if (counters == nullptr) return;
  const SampleProbe* probe = FindSampleProbe(message);
  if (probe == nullptr) return;
  const SampleTally t = (*probe)(message);
  if (t.samples > 0) {
    counters->samples.fetch_add(t.samples, std::memory_order_relaxed);
    counters->policy_version_sum.fetch_add(t.policy_version_sum, std::memory_order_relaxed);
  }
  if (t.version >= 0) counters->version.store(t.version, std::memory_order_relaxed);
}

// `Calls` is a registered asynchronous method: gRPC hands over the stream once its metadata has
// arrived, and the stream reads nothing before its token is checked. `Ping` is left unregistered
// (generic) so that it too arrives before its body: gRPC reads the request of a registered unary
// method before the server sees the call, which let an unauthenticated caller make the server
// buffer up to kMaxReceiveMessageBytes per call.
using AsyncService = proto::ActorTransport::WithGenericMethod_Ping<
    proto::ActorTransport::WithRawMethod_Calls<proto::ActorTransport::Service>>;

// Full gRPC method name of the liveness check (proto/worker.proto).
constexpr char kPingMethod[] = "/troupe.proto.ActorTransport/Ping";

// What the server and every stream share; streams keep it alive after the server is gone.
struct ServerShared {
  explicit ServerShared(const TransportServerOptions& o)
      : options(o), checker(o.token, o.token_check) {}

  const TransportServerOptions options;
  TokenChecker checker;
  std::string address;
  Counters counters;
  AsyncService service;
  grpc::AsyncGenericService generic;  // Ping, and methods this server does not have
  std::unique_ptr<grpc::ServerCompletionQueue> cq;

  absl::Mutex mu;
  absl::flat_hash_map<std::string, UntypedActorHandle> actors ABSL_GUARDED_BY(mu);
  bool shut_down ABSL_GUARDED_BY(mu) = false;
  // False once Shutdown began: no new stream or ping is requested from gRPC.
  bool accepting ABSL_GUARDED_BY(mu) = true;
  // Streams and pings with gRPC operations possibly in flight. The completion queue may only
  // be shut down once this is zero (no operation may start on a shut-down queue).
  int live ABSL_GUARDED_BY(mu) = 0;

  bool NoneLive() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return live == 0; }
  void Died() {
    absl::MutexLock lock(&mu);
    --live;
  }

  // Asks gRPC for the next caller's stream / ping (completion-queue thread, and at Start).
  void AcceptStream(const std::shared_ptr<ServerShared>& self);
  void AcceptGeneric(const std::shared_ptr<ServerShared>& self);

  // Call statistics by (actor id, caller, method). Streams look their counters up here once per
  // (actor, method) and cache the pointer, so the lock is off the per-call path.
  mutable absl::Mutex stats_mu;
  std::map<std::tuple<std::string, std::string, std::string>, std::unique_ptr<CallCounters>>
      call_counters ABSL_GUARDED_BY(stats_mu);

  CallCounters* CountersFor(absl::string_view actor_id, const std::string& caller,
                            const std::string& method) {
    absl::MutexLock lock(&stats_mu);
    std::unique_ptr<CallCounters>& c =
        call_counters[std::make_tuple(std::string(actor_id), caller, method)];
    if (c == nullptr) c = std::make_unique<CallCounters>();
    return c.get();
  }

  // The handle registered as `id`, or an invalid one.
  UntypedActorHandle Find(absl::string_view id) {
    absl::ReaderMutexLock lock(&mu);
    auto it = actors.find(id);
    return it == actors.end() ? UntypedActorHandle() : it->second;
  }
};

// The server's end of one caller's `Calls` stream.
//
// gRPC operations (accept, read, write, finish) complete on the server's one completion-queue
// thread, which also decodes frames and dispatches calls. A read is started only after the
// previous one was handled, so the reassembly and ordering state needs no lock. Replies come
// from local calls completing on actor threads: they queue under mu_, and the thread that finds
// no write in flight builds and starts the next frame (the same combining scheme as the client).
//
// Lifetime: reference counted. The reference taken at creation belongs to the gRPC operations
// and is dropped when none is left in flight; each local call in flight holds another, so a late
// reply finds the (closed) stream instead of freed memory.
class ServerStream final : public troupe::internal::RefCounted {
 public:
  explicit ServerStream(std::shared_ptr<ServerShared> shared)
      : shared_(std::move(shared)), builder_(FrameKind::kReplies) {}

  // Registers this stream object for the next incoming call. Caller holds shared_->mu.
  void Accept() {
    ops_ = 1;
    shared_->service.RequestCalls(&rpc_->ctx, &rpc_->stream, shared_->cq.get(), shared_->cq.get(),
                                  &accept_tag_);
  }

  // A local call (or readiness probe) finished.
  void OnLocalReply(uint64_t id, absl::StatusOr<MessagePtr> result);

 private:
  enum class Op { kAccept, kRead, kWrite, kFinish };
  class Tag final : public CqTag {
   public:
    Tag(ServerStream* s, Op op) : s_(s), op_(op) {}
    void Run(bool ok) override { s_->OnEvent(op_, ok); }

   private:
    ServerStream* const s_;
    const Op op_;
  };

  // A call not dispatched yet: its request is still arriving, or it waits behind one that is.
  struct Incoming {
    uint64_t id = 0;
    std::string actor_id;
    UntypedActorHandle actor;
    const MethodInfo* method = nullptr;  // null: readiness probe
    CallCounters* counters = nullptr;    // null: readiness probe
    absl::Time deadline = absl::InfiniteFuture();
    uint64_t total = 0;
    uint64_t received = 0;
    std::vector<grpc::Slice> parts;  // the pieces received, referenced (not copied)
    MessagePtr request;
    bool ready = false;    // complete (or dropped): may leave the order queue
    bool dropped = false;  // failed or cancelled: leaves without dispatch
  };

  // A reply waiting to be written.
  struct Out {
    enum Kind : uint8_t { kOk, kError, kLarge, kPiece };
    Kind kind = kOk;
    uint64_t id = 0;
    int32_t code = 0;
    std::string message;  // kError
    MessagePtr reply;     // kOk
    size_t bytes = 0;     // kOk: serialized size (cached in `reply`)
    grpc::Slice data;     // kLarge: the serialized reply; kPiece: one piece of it
    uint64_t total = 0;   // kLarge, kPiece
    uint64_t offset = 0;  // kLarge: bytes already taken; kPiece: where the piece starts
  };

  void OnEvent(Op op, bool ok);
  void OnAccepted();
  void OnReadDone(bool ok);
  void OnWriteDone(bool ok);
  // One operation ended without a successor; the last one drops gRPC's reference.
  void OpEnded();
  void HandleEntry(const FrameReader& reader);
  void HandleFirstPiece(const FrameReader& reader);
  void HandleContinuation(const FrameReader& reader);
  void HandleCancel(uint64_t id);
  // Parses `in`'s reassembled request; on failure replies INVALID_ARGUMENT and drops it.
  void ParseAssembled(Incoming* in);
  // Dispatches the ready calls at the head of `actor_id`'s order queue.
  void Release(const std::string& actor_id);
  void Dispatch(uint64_t id, const UntypedActorHandle& actor, const MethodInfo* method,
                CallCounters* counters, MessagePtr request, absl::Time deadline);
  // Queues an error reply; counts it against `counters` when given.
  void ReplyError(uint64_t id, const absl::Status& status, CallCounters* counters = nullptr);
  // The counters of calls from this stream's caller to `method` of `actor` (cached per stream).
  CallCounters* CountersFor(absl::string_view actor_id, const MethodInfo* method);
  void Enqueue(Out out);
  bool Collect() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WriteBatch();
  // The input ended (caller gone, cancelled, or a bad frame): cancel everything and finish the
  // RPC with `finish_with` once no write is in flight. The read's operation slot ends here.
  void CloseInput(const absl::Status& finish_with);

  std::string DescribeActor(const UntypedActorHandle& actor) const {
    return actor.ref()->target()->Describe();
  }

  // gRPC's side of the call; released as soon as no operation is left in flight (local calls
  // may keep this object alive longer, even past the server's end, but never touch it again).
  struct Rpc {
    grpc::ServerContext ctx;
    grpc::ServerAsyncReaderWriter<ByteBuffer, ByteBuffer> stream{&ctx};
  };

  const std::shared_ptr<ServerShared> shared_;
  std::unique_ptr<Rpc> rpc_ = std::make_unique<Rpc>();
  Tag accept_tag_{this, Op::kAccept};
  Tag read_tag_{this, Op::kRead};
  Tag write_tag_{this, Op::kWrite};
  Tag finish_tag_{this, Op::kFinish};

  // Read side (completion-queue thread).
  ByteBuffer read_buf_;
  std::string caller_ = kDefaultCaller;  // the stream's x-troupe-caller
  // Counters by actor id, then method (heterogeneous lookup: no string built per call).
  absl::flat_hash_map<std::string, absl::flat_hash_map<const MethodInfo*, CallCounters*>> counters_;
  absl::flat_hash_map<uint64_t, Incoming*> incoming_;  // not yet dispatched, by call id
  absl::flat_hash_map<std::string, std::deque<std::unique_ptr<Incoming>>> order_;

  absl::Mutex mu_;
  int ops_ ABSL_GUARDED_BY(mu_) = 0;  // gRPC operations in flight
  // A dispatched call whose reply is not queued yet (null call: readiness probe).
  struct Running {
    RefPtr<UntypedCall> call;
    CallCounters* counters = nullptr;
  };
  absl::flat_hash_map<uint64_t, Running> running_ ABSL_GUARDED_BY(mu_);
  std::deque<Out> out_ ABSL_GUARDED_BY(mu_);
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool input_closed_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status finish_status_ ABSL_GUARDED_BY(mu_);

  // Owned by whichever thread set write_in_flight_.
  std::vector<Out> batch_;
  FrameBuilder builder_;
  ByteBuffer write_buf_;
};

// One call of a method without a registered handler: a Ping (authenticated, then its request
// read and echoed) or an unknown method (UNIMPLEMENTED). Nothing is read before the token check.
// Requested, answered, freed; its steps run on the completion-queue thread.
class GenericCall final : public CqTag {
 public:
  explicit GenericCall(std::shared_ptr<ServerShared> shared) : shared_(std::move(shared)) {}

  // Registers this object for the next call. Caller holds shared_->mu.
  void Accept() {
    shared_->generic.RequestCall(&ctx_, &stream_, shared_->cq.get(), shared_->cq.get(), this);
  }

  void Run(bool ok) override {
    switch (step_) {
      case Step::kAccept:
        if (!ok) return End();  // the server is shutting down: no call came
        shared_->AcceptGeneric(shared_);
        return OnAccepted();
      case Step::kRead:
        return OnRead(ok);
      case Step::kFinish:
        return End();
    }
  }

 private:
  enum class Step { kAccept, kRead, kFinish };

  void OnAccepted() {
    if (ctx_.method() != kPingMethod) {
      return Finish(
          grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                       absl::StrCat("no method ", ctx_.method(), " at ", shared_->address)));
    }
    if (absl::Status auth = AuthenticateCall(shared_->checker, ctx_); !auth.ok()) {
      return Finish(ToGrpcStatus(auth));
    }
    step_ = Step::kRead;
    stream_.Read(&buf_, this);
  }

  void OnRead(bool ok) {
    proto::PingRequest request;
    if (!ok || !grpc::SerializationTraits<proto::PingRequest>::Deserialize(&buf_, &request).ok()) {
      return Finish(
          grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                       "Ping: the request is missing or is not a troupe.proto.PingRequest"));
    }
    proto::PingReply reply;
    reply.set_payload(std::move(*request.mutable_payload()));
    bool own_buffer = false;
    grpc::Status serialized =
        grpc::SerializationTraits<proto::PingReply>::Serialize(reply, &buf_, &own_buffer);
    if (!serialized.ok()) return Finish(serialized);
    step_ = Step::kFinish;
    stream_.WriteAndFinish(buf_, grpc::WriteOptions(), grpc::Status::OK, this);
  }

  void Finish(const grpc::Status& status) {
    step_ = Step::kFinish;
    stream_.Finish(status, this);
  }

  void End() {
    shared_->Died();
    delete this;
  }

  const std::shared_ptr<ServerShared> shared_;
  grpc::GenericServerContext ctx_;
  grpc::GenericServerAsyncReaderWriter stream_{&ctx_};
  grpc::ByteBuffer buf_;
  Step step_ = Step::kAccept;
};

void ServerShared::AcceptStream(const std::shared_ptr<ServerShared>& self) {
  absl::MutexLock lock(&mu);
  if (!accepting) return;
  ++live;
  (new ServerStream(self))->Accept();  // its creation reference belongs to its operations
}

void ServerShared::AcceptGeneric(const std::shared_ptr<ServerShared>& self) {
  absl::MutexLock lock(&mu);
  if (!accepting) return;
  ++live;
  (new GenericCall(self))->Accept();
}

void ServerStream::OnEvent(Op op, bool ok) {
  switch (op) {
    case Op::kAccept:
      if (!ok) {  // the server is shutting down: no call came
        OpEnded();
        return;
      }
      OnAccepted();
      return;
    case Op::kRead:
      OnReadDone(ok);
      return;
    case Op::kWrite:
      OnWriteDone(ok);
      return;
    case Op::kFinish:
      OpEnded();
      return;
  }
}

void ServerStream::OpEnded() {
  bool last;
  {
    absl::MutexLock lock(&mu_);
    last = --ops_ == 0;
  }
  if (last) {
    rpc_.reset();
    shared_->Died();
    Unref();  // gRPC's reference
  }
}

void ServerStream::OnAccepted() {
  shared_->AcceptStream(shared_);
  absl::Status auth = AuthenticateCall(shared_->checker, rpc_->ctx);
  if (!auth.ok()) {
    Bump(shared_->counters.streams_refused);
    {
      absl::MutexLock lock(&mu_);
      input_closed_ = finished_ = true;
    }
    rpc_->stream.Finish(ToGrpcStatus(auth), &finish_tag_);  // the accept's slot passes to Finish
    return;
  }
  Bump(shared_->counters.streams_opened);
  const auto& md = rpc_->ctx.client_metadata();
  if (auto it = md.find(kCallerMetadataKey); it != md.end() && it->second.size() > 0) {
    caller_.assign(it->second.data(), std::min<size_t>(it->second.size(), 128));
  }
  rpc_->stream.Read(&read_buf_, &read_tag_);  // the accept's slot passes to the read
}

void ServerStream::OnReadDone(bool ok) {
  if (!ok) {  // the caller half-closed, cancelled, or the connection broke
    CloseInput(absl::OkStatus());
    return;
  }
  Bump(shared_->counters.frames_received);
  absl::Status malformed;
  {
    FrameReader reader(FrameKind::kCalls, read_buf_);
    while (reader.Next()) HandleEntry(reader);
    malformed = reader.status();
  }
  if (!malformed.ok()) {
    CloseInput(malformed);
    return;
  }
  rpc_->stream.Read(&read_buf_, &read_tag_);
}

void ServerStream::HandleEntry(const FrameReader& reader) {
  const FrameEntry& e = reader.entry();
  if (e.cancel) {
    HandleCancel(e.call_id);
  } else if (e.offset != 0) {
    HandleContinuation(reader);
  } else {
    HandleFirstPiece(reader);
  }
}

void ServerStream::HandleFirstPiece(const FrameReader& reader) {
  const FrameEntry& e = reader.entry();
  Bump(shared_->counters.calls_received);
  UntypedActorHandle actor = shared_->Find(e.actor_id);
  if (!actor.valid()) {
    ReplyError(e.call_id, absl::NotFoundError(absl::StrCat("no actor '", e.actor_id,
                                                           "' is served at ", shared_->address)));
    return;
  }
  const MethodInfo* method = nullptr;
  CallCounters* counters = nullptr;
  if (!e.method.empty()) {
    method = actor.ref()->type().FindMethod(e.method);
    if (method == nullptr) {
      ReplyError(e.call_id, absl::NotFoundError(absl::StrCat(
                                DescribeActor(actor), " has no method '", e.method,
                                "' (methods: ", actor.ref()->type().MethodNames(), ")")));
      return;
    }
    counters = CountersFor(e.actor_id, method);
    counters->calls.fetch_add(1, std::memory_order_relaxed);
    counters->request_bytes.fetch_add(static_cast<int64_t>(e.total_bytes),
                                      std::memory_order_relaxed);
  }
  if (e.total_bytes > static_cast<uint64_t>(shared_->options.max_request_bytes) ||
      e.payload_size > e.total_bytes) {
    ReplyError(
        e.call_id,
        absl::InvalidArgumentError(absl::StrCat(
            "call to ", DescribeActor(actor), " method ", e.method, ": request of ", e.total_bytes,
            " bytes (", e.payload_size, " in the first piece) is over the limit of ",
            shared_->options.max_request_bytes, " bytes or inconsistent")),
        counters);
    return;
  }
  absl::Time deadline = absl::InfiniteFuture();
  if (e.timeout_us != 0) deadline = absl::Now() + absl::Microseconds(e.timeout_us);

  auto queue = order_.find(e.actor_id);
  const bool blocked = queue != order_.end() && !queue->second.empty();
  auto in = std::make_unique<Incoming>();
  if (e.payload_size == e.total_bytes) {  // whole request in this piece
    MessagePtr request;
    if (method != nullptr) {
      request.reset(method->request_prototype->New());
      if (!ParsePayload(e, request.get())) {
        ReplyError(e.call_id,
                   absl::InvalidArgumentError(absl::StrCat(
                       "call to ", DescribeActor(actor), " method ", e.method,
                       ": the request is not a valid ", request->GetDescriptor()->full_name(), " (",
                       e.payload_size, " bytes)")),
                   counters);
        return;
      }
    }
    if (!blocked) {
      Dispatch(e.call_id, actor, method, counters, std::move(request), deadline);
      return;
    }
    in->request = std::move(request);
    in->ready = true;
  } else {
    reader.AppendPayloadSlices(&in->parts);
    in->received = e.payload_size;
  }
  in->id = e.call_id;
  in->actor_id = e.actor_id;
  in->actor = std::move(actor);
  in->method = method;
  in->counters = counters;
  in->deadline = deadline;
  in->total = e.total_bytes;
  incoming_[e.call_id] = in.get();
  order_[e.actor_id].push_back(std::move(in));
}

void ServerStream::HandleContinuation(const FrameReader& reader) {
  const FrameEntry& e = reader.entry();
  auto it = incoming_.find(e.call_id);
  if (it == incoming_.end() || it->second->ready) return;  // piece of a call dropped earlier
  Incoming* in = it->second;
  if (e.offset != in->received || e.offset + e.payload_size > in->total) {
    ReplyError(in->id,
               absl::InvalidArgumentError(
                   absl::StrCat("call to ", DescribeActor(in->actor), ": request piece at offset ",
                                e.offset, " (", e.payload_size, " bytes) does not continue the ",
                                in->received, " of ", in->total, " bytes received")),
               in->counters);
    in->dropped = in->ready = true;
    in->parts.clear();
    incoming_.erase(it);
    Release(in->actor_id);
    return;
  }
  reader.AppendPayloadSlices(&in->parts);
  in->received += e.payload_size;
  if (in->received < in->total) return;
  incoming_.erase(it);
  ParseAssembled(in);
  Release(in->actor_id);
}

void ServerStream::ParseAssembled(Incoming* in) {
  in->ready = true;
  if (in->method == nullptr) return;  // probes carry no payload
  in->request.reset(in->method->request_prototype->New());
  const bool ok = ParseFromSlices(in->parts, in->request.get());
  in->parts.clear();  // release the received buffers before the call runs
  if (!ok) {
    ReplyError(in->id,
               absl::InvalidArgumentError(absl::StrCat(
                   "call to ", DescribeActor(in->actor), " method ", in->method->name,
                   ": the request is not a valid ", in->request->GetDescriptor()->full_name(), " (",
                   in->received, " bytes)")),
               in->counters);
    in->dropped = true;
    in->request.reset();
  }
}

void ServerStream::Release(const std::string& actor_id) {
  auto q = order_.find(actor_id);
  if (q == order_.end()) return;
  std::deque<std::unique_ptr<Incoming>>& queue = q->second;
  while (!queue.empty() && queue.front()->ready) {
    std::unique_ptr<Incoming> in = std::move(queue.front());
    queue.pop_front();
    incoming_.erase(in->id);
    if (!in->dropped) {
      Dispatch(in->id, in->actor, in->method, in->counters, std::move(in->request), in->deadline);
    }
  }
  if (queue.empty()) order_.erase(q);
}

void ServerStream::HandleCancel(uint64_t id) {
  Bump(shared_->counters.cancels_received);
  auto it = incoming_.find(id);
  if (it != incoming_.end()) {
    Incoming* in = it->second;
    incoming_.erase(it);
    in->dropped = in->ready = true;
    in->parts.clear();
    in->request.reset();
    Bump(shared_->counters.calls_cancelled);
    Release(in->actor_id);
    return;
  }
  RefPtr<UntypedCall> call;
  bool found = false;
  {
    absl::MutexLock lock(&mu_);
    auto r = running_.find(id);
    if (r != running_.end()) {
      found = true;
      call = std::move(r->second.call);
      running_.erase(r);
    }
    // A reply already queued is not wanted any more.
    for (auto o = out_.begin(); o != out_.end(); ++o) {
      if (o->id == id) {
        found = true;
        out_.erase(o);
        break;
      }
    }
  }
  if (found) Bump(shared_->counters.calls_cancelled);
  // Fails the local call (it leaves the actor system's deadline queue); the actor may still run
  // it if it was already in the mailbox, but its reply is dropped.
  if (call != nullptr) call->Fail(absl::CancelledError("the caller cancelled the call"));
}

void ServerStream::Dispatch(uint64_t id, const UntypedActorHandle& actor, const MethodInfo* method,
                            CallCounters* counters, MessagePtr request, absl::Time deadline) {
  if (request != nullptr) CountSamples(*request, counters);
  absl::Duration timeout = absl::ZeroDuration();  // zero: the actor's default
  if (deadline != absl::InfiniteFuture()) {
    timeout = deadline - absl::Now();
    if (timeout <= absl::ZeroDuration()) {
      ReplyError(id,
                 absl::DeadlineExceededError(
                     absl::StrCat("call to ", DescribeActor(actor), " method ",
                                  method != nullptr ? method->name : "(readiness probe)",
                                  ": the caller's deadline passed before the call started")),
                 counters);
      return;
    }
  }
  RefPtr<UntypedCall> call;
  if (method != nullptr) call = troupe::internal::MakeRef<UntypedCall>(method, std::move(request));
  bool inserted;
  {
    absl::MutexLock lock(&mu_);
    if (input_closed_) return;
    inserted = running_.try_emplace(id, Running{call, counters}).second;
  }
  if (!inserted) {
    ReplyError(id,
               absl::InvalidArgumentError(
                   absl::StrCat("call id ", id, " is already in flight on this stream")),
               counters);
    return;
  }
  Bump(shared_->counters.calls_dispatched);
  if (method == nullptr) {  // readiness probe
    actor.Ready().OnCompleteInline([self = RefPtr<ServerStream>(this), id](absl::Status s) {
      if (s.ok()) {
        self->OnLocalReply(id, MessagePtr(proto::PingReply::default_instance().New()));
      } else {
        self->OnLocalReply(id, s);
      }
    });
    return;
  }
  Future<MessagePtr> f(RefPtr<troupe::internal::FutureState<MessagePtr>>(call.get()));
  // 16 bytes of captures: stored inline in the future's callback, no allocation.
  std::move(f).OnCompleteInline(
      [self = RefPtr<ServerStream>(this), id](absl::StatusOr<MessagePtr> r) mutable {
        self->OnLocalReply(id, std::move(r));
      });
  CallOptions options;
  options.timeout = timeout;
  actor.ref()->Send(RefPtr<CallBase>(std::move(call)), options);
}

void ServerStream::OnLocalReply(uint64_t id, absl::StatusOr<MessagePtr> result) {
  RefPtr<UntypedCall> done;  // released after the lock
  CallCounters* counters;
  {
    absl::MutexLock lock(&mu_);
    auto it = running_.find(id);
    if (it == running_.end()) return;  // cancelled, or the stream closed
    done = std::move(it->second.call);
    counters = it->second.counters;
    running_.erase(it);
  }
  Out out;
  out.id = id;
  if (result.ok() && *result == nullptr) {
    result = absl::InternalError("the method produced no reply message");
  }
  if (!result.ok()) {
    out.kind = Out::kError;
    out.code = static_cast<int32_t>(result.status().code());
    out.message = std::string(result.status().message());
    if (counters != nullptr) counters->errors.fetch_add(1, std::memory_order_relaxed);
  } else {
    MessagePtr reply = std::move(*result);
    const size_t bytes = reply->ByteSizeLong();
    if (counters != nullptr) {
      counters->reply_bytes.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
      CountSamples(*reply, counters);
    }
    if (bytes > static_cast<size_t>(kMaxPayloadBytes)) {
      out.kind = Out::kError;
      out.code = static_cast<int32_t>(absl::StatusCode::kInternal);
      out.message = absl::StrCat("the reply is ", bytes, " bytes, over the 2 GiB limit");
    } else if (static_cast<int64_t>(bytes) > shared_->options.chunk_bytes) {
      // Serialized once, on this (the completing) thread; pieces are referenced.
      out.kind = Out::kLarge;
      out.data = grpc::Slice(bytes);
      reply->SerializeWithCachedSizesToArray(const_cast<uint8_t*>(out.data.begin()));
      out.total = bytes;
    } else {
      out.kind = Out::kOk;
      out.reply = std::move(reply);
      out.bytes = bytes;
    }
  }
  Enqueue(std::move(out));
}

void ServerStream::ReplyError(uint64_t id, const absl::Status& status, CallCounters* counters) {
  if (counters != nullptr) counters->errors.fetch_add(1, std::memory_order_relaxed);
  Out out;
  out.kind = Out::kError;
  out.id = id;
  out.code = static_cast<int32_t>(status.code());
  out.message = std::string(status.message());
  Enqueue(std::move(out));
}

CallCounters* ServerStream::CountersFor(absl::string_view actor_id, const MethodInfo* method) {
  auto by_actor = counters_.find(actor_id);
  if (by_actor == counters_.end()) by_actor = counters_.try_emplace(std::string(actor_id)).first;
  CallCounters*& c = by_actor->second[method];
  if (c == nullptr) c = shared_->CountersFor(actor_id, caller_, method->name);
  return c;
}

void ServerStream::Enqueue(Out out) {
  {
    absl::MutexLock lock(&mu_);
    if (input_closed_) return;
    out_.push_back(std::move(out));
    if (write_in_flight_) return;  // the write in flight's completion takes it
    write_in_flight_ = true;
    ++ops_;
    Collect();
  }
  WriteBatch();
}

bool ServerStream::Collect() {
  const int64_t budget = shared_->options.frame_bytes;
  const uint64_t chunk = static_cast<uint64_t>(shared_->options.chunk_bytes);
  int64_t used = 0;
  while (!out_.empty() && used < budget) {
    Out& front = out_.front();
    if (front.kind != Out::kLarge) {
      used += static_cast<int64_t>(front.bytes + front.message.size()) + 32;
      batch_.push_back(std::move(front));
      out_.pop_front();
      continue;
    }
    // One piece per turn, then to the back: other replies interleave with a large one.
    Out piece;
    piece.kind = Out::kPiece;
    piece.id = front.id;
    piece.total = front.total;
    piece.offset = front.offset;
    const uint64_t n = std::min<uint64_t>(chunk, front.total - front.offset);
    piece.data = front.data.sub(front.offset, front.offset + n);
    front.offset += n;
    used += static_cast<int64_t>(n) + 32;
    batch_.push_back(std::move(piece));
    if (front.offset < front.total) out_.push_back(std::move(front));
    out_.pop_front();
  }
  return !batch_.empty();
}

void ServerStream::WriteBatch() {
  int64_t replies = 0;
  for (Out& o : batch_) {
    switch (o.kind) {
      case Out::kOk:
        builder_.AddReply(o.id, *o.reply, o.bytes);
        ++replies;
        break;
      case Out::kError:
        builder_.AddError(o.id, o.code, o.message);
        ++replies;
        break;
      case Out::kPiece:
        builder_.AddReplyPiece(o.id, o.total, o.offset, o.data);
        if (o.offset == 0) ++replies;
        break;
      case Out::kLarge:
        break;  // never batched whole
    }
  }
  batch_.clear();
  write_buf_ = builder_.Finish();
  Bump(shared_->counters.replies_sent, replies);
  Bump(shared_->counters.frames_sent);
  rpc_->stream.Write(write_buf_, &write_tag_);
}

void ServerStream::OnWriteDone(bool ok) {
  bool write = false;
  bool finish = false;
  grpc::Status status;
  {
    absl::MutexLock lock(&mu_);
    if (ok && !input_closed_ && Collect()) {
      write = true;  // the next frame: the write's slot continues
    } else {
      write_in_flight_ = false;
      if (!ok) out_.clear();  // the caller is gone; its read side ends the stream
      if (input_closed_ && !finished_) {
        finished_ = true;  // the write's slot passes to Finish
        finish = true;
        status = finish_status_;
      } else {
        --ops_;  // never the last: the read or the finish is still in flight
      }
    }
  }
  if (write) WriteBatch();
  if (finish) rpc_->stream.Finish(status, &finish_tag_);
}

void ServerStream::CloseInput(const absl::Status& finish_with) {
  absl::flat_hash_map<uint64_t, Running> running;
  bool finish = false;
  grpc::Status status;
  {
    absl::MutexLock lock(&mu_);
    input_closed_ = true;
    finish_status_ = ToGrpcStatus(finish_with);
    running.swap(running_);
    out_.clear();
    if (!write_in_flight_ && !finished_) {
      finished_ = true;  // the read's slot passes to Finish
      finish = true;
      status = finish_status_;
    }
  }
  for (auto& [id, r] : running) {
    if (r.call != nullptr) r.call->Fail(absl::CancelledError("the caller's stream closed"));
  }
  incoming_.clear();
  order_.clear();
  if (finish) {
    rpc_->stream.Finish(status, &finish_tag_);
  } else {
    OpEnded();  // the write in flight finishes the stream when it completes
  }
}

absl::Status CheckOptions(const TransportServerOptions& o) {
  if (o.token.empty()) {
    return absl::InvalidArgumentError(
        "TransportServerOptions.token is empty; every transport server needs the cluster token");
  }
  if (absl::Status s = CheckMetadataValue("TransportServerOptions.token", o.token); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckStreamLimits("TransportServerOptions", o.chunk_bytes, o.frame_bytes,
                                         o.max_request_bytes);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateTokenCheckOptions(o.token_check); !s.ok()) return s;
  if (o.address.rfind(':') == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("TransportServerOptions.address '", o.address, "' is not host:port"));
  }
  return absl::OkStatus();
}

}  // namespace

class ActorTransportServer::Impl {
 public:
  std::shared_ptr<ServerShared> shared;
  std::unique_ptr<grpc::Server> server;
  std::thread cq_thread;
  int port = 0;
  absl::Mutex shutdown_mu;
  bool shut_down ABSL_GUARDED_BY(shutdown_mu) = false;
};

absl::StatusOr<std::unique_ptr<ActorTransportServer>> ActorTransportServer::Start(
    TransportServerOptions options) {
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  DisableMutexDeadlockDetection();
  auto impl = std::make_unique<Impl>();
  impl->shared = std::make_shared<ServerShared>(options);
  ServerShared& shared = *impl->shared;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.address, grpc::InsecureServerCredentials(), &impl->port);
  builder.RegisterService(&shared.service);
  builder.RegisterAsyncGenericService(&shared.generic);
  builder.SetMaxReceiveMessageSize(kMaxReceiveMessageBytes);
  // Callers ping idle streams (keepalive, see connection.cc): allow it.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  // Every method is asynchronous: no gRPC server threads, the one thread below does it all.
  shared.cq = builder.AddCompletionQueue();
  impl->server = builder.BuildAndStart();
  if (impl->server == nullptr || impl->port == 0) {
    if (impl->server != nullptr) impl->server->Shutdown();
    shared.cq->Shutdown();
    RunCompletionQueue(shared.cq.get());  // drain
    return absl::UnavailableError(
        absl::StrCat("transport server: cannot listen on ", options.address));
  }
  const std::string host = options.address.substr(0, options.address.rfind(':'));
  shared.address = absl::StrCat(host, ":", impl->port);
  shared.AcceptStream(impl->shared);
  shared.AcceptGeneric(impl->shared);
  impl->cq_thread = std::thread([cq = shared.cq.get()] { RunCompletionQueue(cq); });
  return std::unique_ptr<ActorTransportServer>(new ActorTransportServer(std::move(impl)));
}

ActorTransportServer::ActorTransportServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ActorTransportServer::~ActorTransportServer() { Shutdown(); }

const std::string& ActorTransportServer::address() const { return impl_->shared->address; }

int ActorTransportServer::port() const { return impl_->port; }

absl::Status ActorTransportServer::Register(const std::string& actor_id, UntypedActorHandle actor) {
  if (actor_id.empty()) return absl::InvalidArgumentError("Register: empty actor id");
  if (!actor.valid()) {
    return absl::InvalidArgumentError(absl::StrCat("Register '", actor_id, "': empty handle"));
  }
  ServerShared& s = *impl_->shared;
  absl::MutexLock lock(&s.mu);
  if (s.shut_down) {
    return absl::UnavailableError(absl::StrCat("Register '", actor_id, "': server shut down"));
  }
  if (!s.actors.try_emplace(actor_id, std::move(actor)).second) {
    return absl::AlreadyExistsError(
        absl::StrCat("Register: actor id '", actor_id, "' is already served at ", s.address));
  }
  return absl::OkStatus();
}

bool ActorTransportServer::Unregister(const std::string& actor_id) {
  ServerShared& s = *impl_->shared;
  UntypedActorHandle dropped;  // released after the lock
  absl::MutexLock lock(&s.mu);
  auto it = s.actors.find(actor_id);
  if (it == s.actors.end()) return false;
  dropped = std::move(it->second);
  s.actors.erase(it);
  return true;
}

void ActorTransportServer::Shutdown() {
  {
    absl::MutexLock lock(&impl_->shutdown_mu);
    if (impl_->shut_down) return;
    impl_->shut_down = true;
  }
  ServerShared& shared = *impl_->shared;
  absl::flat_hash_map<std::string, UntypedActorHandle> actors;
  {
    absl::MutexLock lock(&shared.mu);
    shared.accepting = false;
    shared.shut_down = true;
    actors.swap(shared.actors);
  }
  // Cancels every stream now (deadline = now); the completion-queue thread finishes them.
  impl_->server->Shutdown(std::chrono::system_clock::now());
  {
    absl::MutexLock lock(&shared.mu);
    while (!shared.mu.AwaitWithTimeout(absl::Condition(&shared, &ServerShared::NoneLive),
                                       absl::Seconds(10))) {
      TROUPE_LOG(WARNING) << absl::StrFormat(
          "troupe transport server %s: %d streams still finishing", shared.address.c_str(),
          shared.live);
    }
  }
  shared.cq->Shutdown();
  impl_->cq_thread.join();
  impl_->server.reset();
}

std::vector<CallStats> ActorTransportServer::call_stats() const {
  ServerShared& shared = *impl_->shared;
  std::vector<CallStats> out;
  absl::MutexLock lock(&shared.stats_mu);
  out.reserve(shared.call_counters.size());
  for (const auto& [key, c] : shared.call_counters) {
    CallStats s;
    s.actor_id = std::get<0>(key);
    s.caller = std::get<1>(key);
    s.method = std::get<2>(key);
    s.calls = c->calls.load(std::memory_order_relaxed);
    s.request_bytes = c->request_bytes.load(std::memory_order_relaxed);
    s.reply_bytes = c->reply_bytes.load(std::memory_order_relaxed);
    s.errors = c->errors.load(std::memory_order_relaxed);
    s.samples = c->samples.load(std::memory_order_relaxed);
    s.policy_version_sum = c->policy_version_sum.load(std::memory_order_relaxed);
    s.version = c->version.load(std::memory_order_relaxed);
    out.push_back(std::move(s));
  }
  return out;
}

TransportServerStats ActorTransportServer::stats() const {
  const Counters& c = impl_->shared->counters;
  TransportServerStats s;
  s.streams_opened = c.streams_opened.load();
  s.streams_refused = c.streams_refused.load();
  s.calls_received = c.calls_received.load();
  s.calls_dispatched = c.calls_dispatched.load();
  s.cancels_received = c.cancels_received.load();
  s.calls_cancelled = c.calls_cancelled.load();
  s.replies_sent = c.replies_sent.load();
  s.frames_received = c.frames_received.load();
  s.frames_sent = c.frames_sent.load();
  return s;
}

}  // namespace transport
}  // namespace troupe
