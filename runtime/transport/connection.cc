#include "runtime/transport/connection.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpc/grpc.h"
#include "runtime/transport/connection_pool.h"
#include "runtime/transport/remote_actor_ref.h"
#include "runtime/transport/transport_common.h"

namespace troupe {
namespace transport {
namespace {

using troupe::internal::CallBase;
using troupe::internal::RefPtr;

// Time left until the call's deadline, in whole microseconds rounded up (at least 1); 0 = none.
int64_t TimeoutMicros(const PendingCall& call, absl::Time now) {
  const absl::Time deadline = call.deadline();
  if (deadline == absl::InfiniteFuture()) return 0;
  const absl::Duration left = deadline - now;
  const int64_t us = absl::ToInt64Microseconds(absl::Ceil(left, absl::Microseconds(1)));
  return std::max<int64_t>(us, 1);
}

const std::string& WireMethodName(const CallBase& call) {
  static const std::string* const kProbe = new std::string();
  return call.method() == &ReadyProbeMethod() ? *kProbe : call.method()->name;
}

}  // namespace

// ---- RouteState -----------------------------------------------------------------------------

std::shared_ptr<Connection> RouteState::connection() const {
  absl::MutexLock lock(&mu_);
  return conn_;
}

void RouteState::set_connection(std::shared_ptr<Connection> c) {
  absl::MutexLock lock(&mu_);
  conn_.swap(c);  // the old one (if any) is released after the lock
}

void RouteState::Invalidate(const Connection* c) {
  std::shared_ptr<Connection> old;
  {
    absl::MutexLock lock(&mu_);
    if (c == nullptr || conn_.get() == c) old.swap(conn_);
  }
  ActorState s = state_.load(std::memory_order_acquire);
  if (s != ActorState::kDead && s != ActorState::kRestarting) {
    state_.compare_exchange_strong(s, ActorState::kRestarting, std::memory_order_acq_rel);
  }
}

void RouteState::MarkAlive() {
  ActorState s = state_.load(std::memory_order_acquire);
  if (s != ActorState::kAlive && s != ActorState::kDead) {
    state_.compare_exchange_strong(s, ActorState::kAlive, std::memory_order_acq_rel);
  }
}

void RouteState::MarkDead(const absl::Status& why) {
  std::vector<std::function<void(const absl::Status&)>> watchers;
  std::shared_ptr<Connection> old;
  {
    absl::MutexLock lock(&mu_);
    if (state_.load(std::memory_order_acquire) == ActorState::kDead) return;
    death_ = why;
    state_.store(ActorState::kDead, std::memory_order_release);
    watchers.swap(watchers_);
    old.swap(conn_);
  }
  for (auto& w : watchers) w(why);
}

absl::Status RouteState::death_reason() const {
  absl::MutexLock lock(&mu_);
  return death_;
}

void RouteState::Monitor(std::function<void(const absl::Status&)> on_death) {
  absl::Status death;
  {
    absl::MutexLock lock(&mu_);
    if (state_.load(std::memory_order_acquire) != ActorState::kDead) {
      watchers_.push_back(std::move(on_death));
      return;
    }
    death = death_;
  }
  on_death(death);
}

// ---- PendingCall ----------------------------------------------------------------------------

void PendingCall::OnDeadline() { conn_->Expire(this, absl::OkStatus(), /*deadline=*/true); }

void PendingCall::OnDrain(const absl::Status& why) {
  // The transport's deadline queue is never drained; kept correct anyway.
  conn_->Expire(this, why, /*deadline=*/false);
}

// ---- Connection -----------------------------------------------------------------------------

std::shared_ptr<Connection> Connection::Open(std::shared_ptr<ConnectionPool> pool,
                                             const std::string& address) {
  std::shared_ptr<Connection> c(new Connection(std::move(pool), address));
  c->Start();
  return c;
}

Connection::Connection(std::shared_ptr<ConnectionPool> pool, std::string address)
    : pool_(std::move(pool)), address_(std::move(address)) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxReceiveMessageBytes);
  // A channel of its own, not shared with earlier connections to the same address: a worker
  // that restarted on the same port is reached at once, not after the old channel's backoff.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // (GRPC_ARG_MIN_RECONNECT_BACKOFF_MS stays at its default: gRPC also uses it as the connect
  // timeout, and a short one fails handshakes on a busy machine.)
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // Notice a silently dead peer (host gone) within ~30 s even when no call is in flight.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 20000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  channel_ = grpc::CreateCustomChannel(address_, grpc::InsecureChannelCredentials(), args);
  stub_ = std::make_unique<grpc::GenericStub>(channel_);
  if (!pool_->options().token.empty()) {
    context_.AddMetadata(kTokenMetadataKey, pool_->options().token);
  }
  if (!pool_->options().caller.empty()) {
    context_.AddMetadata(kCallerMetadataKey, pool_->options().caller);
  }
}

Connection::~Connection() = default;

void Connection::Start() {
  self_ = shared_from_this();
  {
    absl::MutexLock lock(&mu_);
    ops_in_flight_ = 1;  // the first read
  }
  // Corked: the initial metadata (with the token) leaves with the first frame, so StartCall
  // starts no operation of its own (gRPC's async stream reuses the write slot for it, which
  // would otherwise forbid writing until it completed).
  context_.set_initial_metadata_corked(true);
  call_ = stub_->PrepareCall(&context_, kCallsMethod, pool_->cq());
  call_->StartCall(nullptr);
  call_->Read(&read_buf_, &read_tag_);
}

void Connection::OnEvent(Op op, bool ok) {
  switch (op) {
    case Op::kRead:
      OnReadDone(ok);
      return;
    case Op::kWrite:
      OnWriteDone(ok);
      return;
    case Op::kFinish:
      OnFinishDone();
      return;
  }
}

absl::Status Connection::end_reason() const {
  absl::MutexLock lock(&mu_);
  return end_reason_;
}

bool Connection::Send(const RefPtr<PendingCall>& call) {
  {
    absl::MutexLock lock(&mu_);
    if (done_) return false;
    call->conn_ = shared_from_this();
    call->id_ = next_id_++;
    // Queued for its deadline before any thread can send it or see its reply.
    ConnectionPool::Deadlines()->Add(call.get(), call->timeout());
    in_flight_.emplace(call->id_, call);
    pool_->poller()->AddInFlight(1);
    if (broken_) return true;  // the final status fails it
    queue_.push_back(call);
    if (write_in_flight_) return true;  // the write in flight's completion takes it
    write_in_flight_ = true;
    ++ops_in_flight_;
    Collect();
  }
  WriteBatch();
  return true;
}

bool Connection::Collect() {
  const int64_t budget = pool_->options().frame_bytes;
  const uint64_t chunk = static_cast<uint64_t>(pool_->options().chunk_bytes);
  int64_t used = 0;
  for (uint64_t id : cancels_) batch_.push_back(Item{nullptr, id});
  used += static_cast<int64_t>(cancels_.size()) * 16;
  cancels_.clear();
  while (!queue_.empty() && used < budget) {
    RefPtr<PendingCall> call = std::move(queue_.front());
    queue_.pop_front();
    if (call->finished_) continue;  // expired before it was sent
    call->header_sent_ = true;
    if (!call->chunked) {
      used += static_cast<int64_t>(call->request_bytes) + 64;
      batch_.push_back(Item{std::move(call)});
      continue;
    }
    // One piece per turn; the rest goes to the back so that other calls interleave.
    const uint64_t offset = call->sent_bytes_;
    const uint64_t length = std::min<uint64_t>(chunk, call->request_bytes - offset);
    call->sent_bytes_ += length;
    used += static_cast<int64_t>(length) + 64;
    const bool more = call->sent_bytes_ < call->request_bytes;
    batch_.push_back(Item{call, 0, offset, length});
    if (more) queue_.push_back(std::move(call));
  }
  return !batch_.empty();
}

void Connection::WriteBatch() {
  const absl::Time now = absl::Now();
  int64_t calls = 0, cancels = 0;
  for (Item& item : batch_) {
    if (item.call == nullptr) {
      builder_.AddCancel(item.cancel_id);
      ++cancels;
      continue;
    }
    PendingCall& pc = *item.call;
    const CallBase& call = *pc.call();
    if (!pc.chunked) {
      const google::protobuf::Message& request = call.request();
      builder_.AddCall(pc.id_, pc.route()->actor_id(), WireMethodName(call), TimeoutMicros(pc, now),
                       request, request.ByteSizeLong());
      ++calls;
    } else {
      builder_.AddCallPiece(pc.id_, pc.route()->actor_id(), WireMethodName(call),
                            TimeoutMicros(pc, now), pc.request_bytes, item.offset,
                            pc.serialized.sub(item.offset, item.offset + item.length));
      if (item.offset == 0) ++calls;
      // Last piece: the frame references what it needs; the call need not keep the bytes while
      // it waits for its reply. (Only the writer, this thread, touches `serialized`.)
      if (item.offset + item.length == pc.request_bytes) pc.serialized = grpc::Slice();
    }
  }
  batch_.clear();
  write_buf_ = builder_.Finish();
  ClientCounters& counters = pool_->counters();
  counters.calls_sent.fetch_add(calls, std::memory_order_relaxed);
  counters.cancels_sent.fetch_add(cancels, std::memory_order_relaxed);
  counters.frames_sent.fetch_add(1, std::memory_order_relaxed);
  call_->Write(write_buf_, &write_tag_);
}

void Connection::End() {
  // The pool keeps this object until a caller thread releases it (tearing a channel down on the
  // completion-queue thread is not allowed); the local reference keeps the pool alive meanwhile.
  std::shared_ptr<ConnectionPool> pool = pool_;
  pool->Ended(std::move(self_));
}

void Connection::BreakLocked() {
  broken_ = true;
  broken_flag_.store(true, std::memory_order_release);
}

void Connection::OnWriteDone(bool ok) {
  bool write = false;
  bool end = false;
  {
    absl::MutexLock lock(&mu_);
    if (ok && !broken_ && Collect()) {
      write = true;  // the next frame: the write stays in flight
    } else {
      write_in_flight_ = false;
      if (!ok) BreakLocked();
      end = --ops_in_flight_ == 0 && done_;
    }
  }
  if (!ok) context_.TryCancel();  // the read side ends too and collects the status
  if (write) WriteBatch();
  if (end) End();
}

void Connection::OnReadDone(bool ok) {
  if (!ok) {
    // The stream is over; its status tells why (Finish is called once, after reads end).
    {
      absl::MutexLock lock(&mu_);
      BreakLocked();  // the read's place in ops_in_flight_ passes to Finish
    }
    call_->Finish(&final_status_, &finish_tag_);
    return;
  }
  pool_->counters().frames_received.fetch_add(1, std::memory_order_relaxed);
  absl::Status malformed;
  {
    FrameReader reader(FrameKind::kReplies, read_buf_);
    while (reader.Next()) HandleReply(reader);
    malformed = reader.status();
  }
  if (!malformed.ok()) {
    // The next read fails at once and collects the status.
    Close(absl::UnavailableError(absl::StrCat(
        "the worker at ", address_, " sent an undecodable frame: ", malformed.message())));
  } else if (!assemblies_.empty()) {
    // Drop partial replies of calls that expired meanwhile.
    absl::MutexLock lock(&mu_);
    for (auto it = assemblies_.begin(); it != assemblies_.end();) {
      if (!in_flight_.contains(it->first)) {
        assemblies_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  call_->Read(&read_buf_, &read_tag_);
}

RefPtr<PendingCall> Connection::TakeInFlight(uint64_t id) {
  RefPtr<PendingCall> call;
  absl::MutexLock lock(&mu_);
  auto it = in_flight_.find(id);
  if (it == in_flight_.end()) return call;
  call = std::move(it->second);
  in_flight_.erase(it);
  pool_->poller()->AddInFlight(-1);
  call->finished_ = true;
  return call;
}

void Connection::HandleReply(const FrameReader& reader) {
  const FrameEntry& e = reader.entry();
  if (e.offset == 0) {
    if (e.code != 0) {
      Finish(TakeInFlight(e.call_id),
             absl::Status(static_cast<absl::StatusCode>(e.code), e.message), nullptr);
      return;
    }
    if (e.payload_size != e.total_bytes && e.total_bytes <= e.payload_size) {
      Finish(
          TakeInFlight(e.call_id),
          absl::InternalError(absl::StrCat("the worker at ", address_, " sent a reply of ",
                                           e.payload_size, " bytes announced as ", e.total_bytes)),
          nullptr);
      return;
    }
    if (e.payload_size == e.total_bytes) {
      RefPtr<PendingCall> call = TakeInFlight(e.call_id);
      if (call == nullptr) return;  // expired meanwhile
      const MethodInfo& method = *call->call()->method();
      std::unique_ptr<google::protobuf::Message> reply(method.reply_prototype->New());
      if (!ParsePayload(e, reply.get())) {
        Finish(std::move(call),
               absl::InternalError(absl::StrCat("the reply is not a valid ",
                                                reply->GetDescriptor()->full_name(), " (",
                                                e.payload_size, " bytes)")),
               nullptr);
        return;
      }
      Finish(std::move(call), absl::OkStatus(), std::move(reply));
      return;
    }
    if (e.total_bytes > static_cast<uint64_t>(kMaxPayloadBytes)) {
      Finish(TakeInFlight(e.call_id),
             absl::InternalError(absl::StrCat("the worker announced a reply of ", e.total_bytes,
                                              " bytes, over the 2 GiB limit")),
             nullptr);
      return;
    }
    Assembly& a = assemblies_[e.call_id];
    a.parts.clear();
    reader.AppendPayloadSlices(&a.parts);
    a.received = e.payload_size;
    a.total = e.total_bytes;
    return;
  }
  auto it = assemblies_.find(e.call_id);
  if (it == assemblies_.end()) return;  // a piece of a reply dropped earlier
  Assembly& a = it->second;
  if (e.offset != a.received || e.offset + e.payload_size > a.total) {
    assemblies_.erase(it);
    Finish(TakeInFlight(e.call_id),
           absl::InternalError(
               absl::StrCat("the worker at ", address_, " sent reply pieces out of order")),
           nullptr);
    return;
  }
  reader.AppendPayloadSlices(&a.parts);
  a.received += e.payload_size;
  if (a.received < a.total) return;
  std::vector<grpc::Slice> parts = std::move(a.parts);
  const uint64_t size = a.received;
  assemblies_.erase(it);
  RefPtr<PendingCall> call = TakeInFlight(e.call_id);
  if (call == nullptr) return;
  std::unique_ptr<google::protobuf::Message> reply(call->call()->method()->reply_prototype->New());
  const bool parsed = ParseFromSlices(parts, reply.get());
  parts.clear();  // release the received buffers before the caller sees the reply
  if (!parsed) {
    Finish(std::move(call),
           absl::InternalError(absl::StrCat("the reply is not a valid ",
                                            reply->GetDescriptor()->full_name(), " (", size,
                                            " bytes)")),
           nullptr);
    return;
  }
  Finish(std::move(call), absl::OkStatus(), std::move(reply));
}

void Connection::Finish(RefPtr<PendingCall> call, absl::Status status,
                        std::unique_ptr<google::protobuf::Message> reply) {
  if (call == nullptr) return;
  ConnectionPool::Deadlines()->Remove(call.get());
  pool_->counters().replies_received.fetch_add(1, std::memory_order_relaxed);
  if (status.ok()) {
    call->route()->MarkAlive();
    call->call()->CompleteWithMessage(std::move(reply));
    return;
  }
  // The worker may have lost the actor (it restarted elsewhere): ask the resolver next time.
  if (status.code() == absl::StatusCode::kUnavailable) call->route()->Invalidate(nullptr);
  call->call()->Fail(std::move(status));
}

void Connection::Expire(PendingCall* call, absl::Status why, bool deadline) {
  bool owned = false;
  bool write = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = in_flight_.find(call->id_);
    if (it != in_flight_.end() && it->second.get() == call) {
      owned = true;
      in_flight_.erase(it);
      pool_->poller()->AddInFlight(-1);
      call->finished_ = true;
      if (call->header_sent_ && !broken_) {
        cancels_.push_back(call->id_);
        if (!write_in_flight_ && Collect()) {
          write_in_flight_ = true;
          ++ops_in_flight_;
          write = true;
        }
      }
    }
  }
  if (write) WriteBatch();
  if (!owned) return;  // its reply (or the stream's end) completed it first
  if (deadline) {
    call->call()->OnDeadline();  // DEADLINE_EXCEEDED naming the actor, method and timeout
  } else {
    call->call()->Fail(
        absl::Status(why.code(), absl::StrCat(call->call()->Describe(), ": ", why.message())));
  }
  pool_->poller()->Wake();  // a thread waiting for it may be polling the queue
}

void Connection::Close(const absl::Status& why) {
  absl::flat_hash_map<uint64_t, RefPtr<PendingCall>> failed;
  {
    absl::MutexLock lock(&mu_);
    if (!broken_) close_reason_ = why;
    BreakLocked();
    failed.swap(in_flight_);
    for (auto& [id, call] : failed) call->finished_ = true;
    pool_->poller()->AddInFlight(-static_cast<int64_t>(failed.size()));
    queue_.clear();
    cancels_.clear();
  }
  context_.TryCancel();  // every operation in flight completes, the read with !ok
  for (auto& [id, call] : failed) {
    ConnectionPool::Deadlines()->Remove(call.get());
    call->route()->Invalidate(this);
    call->call()->Fail(
        absl::Status(why.code(), absl::StrCat(call->call()->Describe(), ": ", why.message())));
  }
  if (!failed.empty()) pool_->poller()->Wake();
}

void Connection::OnFinishDone() {
  absl::flat_hash_map<uint64_t, RefPtr<PendingCall>> failed;
  absl::Status reason;
  {
    absl::MutexLock lock(&mu_);
    BreakLocked();
    done_ = true;
    failed.swap(in_flight_);
    for (auto& [id, call] : failed) call->finished_ = true;
    pool_->poller()->AddInFlight(-static_cast<int64_t>(failed.size()));
    queue_.clear();
    cancels_.clear();
    reason = close_reason_;
  }
  assemblies_.clear();
  const grpc::Status& status = final_status_;
  if (reason.ok()) {
    if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
      reason = absl::UnauthenticatedError(absl::StrCat(
          "the worker at ", address_, " refused the stream: ", status.error_message()));
    } else {
      reason = absl::UnavailableError(absl::StrCat(
          "connection to ", address_, " lost: ",
          status.ok() ? std::string("stream closed by the worker") : status.error_message(),
          " (gRPC code ", static_cast<int>(status.error_code()), ")"));
    }
  }
  {
    absl::MutexLock lock(&mu_);
    end_reason_ = reason;
  }
  for (auto& [id, call] : failed) {
    ConnectionPool::Deadlines()->Remove(call.get());
    call->route()->Invalidate(this);
    call->call()->Fail(absl::Status(
        reason.code(), absl::StrCat(call->call()->Describe(), ": ", reason.message())));
  }
  failed.clear();
  bool end;
  {
    absl::MutexLock lock(&mu_);
    end = --ops_in_flight_ == 0;
  }
  if (end) End();
}

}  // namespace transport
}  // namespace troupe
