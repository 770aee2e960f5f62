// Connection: the caller's end of ONE `Calls` stream to one worker address, multiplexing every
// call this process makes to actors served there. Used by RemoteActorRef through the
// ConnectionPool; not a public API.
//
// Sending: Send() registers the call (call id -> PendingCall) and queues it. If no write is in
// flight, the sending thread builds a frame from everything queued and starts the write itself;
// otherwise the call waits, and when the write in flight completes, its completion builds the
// next frame from every call queued meanwhile (batching; no writer thread, callers never block on
// the network). Large requests (serialized once by the caller, see PendingCall) go out one piece
// per turn, so small calls are not stuck behind them.
//
// Receiving: whichever thread holds the pool's completion queue (its poller thread, or a thread
// blocked in Future::Get on one of these calls, see cq_poller.h) handles reply frames; each
// reply completes its call (large replies are reassembled first, then parsed once).
//
// Deadlines: every call sits in a process-wide DeadlineQueue until it completes. When its
// deadline passes the call fails with DEADLINE_EXCEEDED and, if any of it was sent, a cancel
// entry tells the worker to drop it.
//
// Failure: when the stream ends (worker died, network error, bad token, Close) every call in
// flight fails — UNAUTHENTICATED for a refused token, else UNAVAILABLE naming the actor, the
// method and the address — and the connection refuses new calls (Send returns false), so the
// next call opens a new connection.
//
// Lifecycle:  Open --(read fails / write fails / Close)--> broken --(final status)--> done
//             --(no operation left in flight)--> ended (handed back to the pool)
//
// Thread-safety: all public methods are thread-safe.
#ifndef TROUPE_RUNTIME_TRANSPORT_CONNECTION_H_
#define TROUPE_RUNTIME_TRANSPORT_CONNECTION_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "runtime/actor.h"
#include "runtime/internal/call.h"
#include "runtime/internal/deadline_queue.h"
#include "runtime/internal/ref_counted.h"
#include "runtime/transport/frame_codec.h"
#include "runtime/transport/transport_common.h"

namespace troupe {
namespace transport {

class Connection;
class ConnectionPool;

// What a remote handle and its calls in flight share: the actor id, the connection in use and
// the actor's last observed state. Calls report UNAVAILABLE here so the handle re-resolves.
class RouteState : public troupe::internal::RefCounted {
 public:
  explicit RouteState(std::string actor_id) : actor_id_(std::move(actor_id)) {}

  const std::string& actor_id() const { return actor_id_; }

  // The cached connection (null when none or after Invalidate).
  std::shared_ptr<Connection> connection() const;
  void set_connection(std::shared_ptr<Connection> c);
  // Forgets the cached connection if it is `c` (null: whatever it is) and marks the actor
  // RESTARTING, so the next call asks the resolver again.
  void Invalidate(const Connection* c);

  ActorState state() const { return state_.load(std::memory_order_acquire); }
  // A call succeeded: ALIVE (unless DEAD).
  void MarkAlive();
  // The resolver said the actor is unknown/DEAD: DEAD for good, monitors told once.
  void MarkDead(const absl::Status& why);
  // The reason recorded by MarkDead.
  absl::Status death_reason() const;
  // Calls on_death once the actor is DEAD (at once if it is).
  void Monitor(std::function<void(const absl::Status&)> on_death);

 private:
  const std::string actor_id_;
  mutable absl::Mutex mu_;
  std::shared_ptr<Connection> conn_ ABSL_GUARDED_BY(mu_);
  absl::Status death_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void(const absl::Status&)>> watchers_ ABSL_GUARDED_BY(mu_);
  std::atomic<ActorState> state_{ActorState::kPending};
};

// One call in flight on a connection: the actor call plus what the transport needs to send it,
// expire it and match its reply. Lives in the connection's map and the deadline queue.
class PendingCall final : public troupe::internal::RefCounted,
                          public troupe::internal::DeadlineEntry {
 public:
  PendingCall(troupe::internal::RefPtr<troupe::internal::CallBase> call,
              troupe::internal::RefPtr<RouteState> route, absl::Duration timeout)
      : call_(std::move(call)), route_(std::move(route)), timeout_(timeout) {}

  troupe::internal::CallBase* call() const { return call_.get(); }
  RouteState* route() const { return route_.get(); }
  absl::Duration timeout() const { return timeout_; }

  // Serialized size of the request, and (large requests only) the bytes serialized once, kept
  // until the last piece is in a frame (set before Send; then touched only by the writer).
  size_t request_bytes = 0;
  grpc::Slice serialized;
  bool chunked = false;

  void OnDeadline() override;
  void OnDrain(const absl::Status& why) override;
  void RefEntry() override { Ref(); }
  void UnrefEntry() override { Unref(); }

 private:
  friend class Connection;
  troupe::internal::RefPtr<troupe::internal::CallBase> call_;
  troupe::internal::RefPtr<RouteState> route_;
  const absl::Duration timeout_;
  // Set by Connection::Send; the fields below are guarded by the connection's mutex.
  std::shared_ptr<Connection> conn_;
  uint64_t id_ = 0;
  uint64_t sent_bytes_ = 0;   // of a chunked request
  bool header_sent_ = false;  // some of it went out (a cancel is needed to drop it)
  bool finished_ = false;     // completed or expired: not to be sent any more
};

class Connection final : public std::enable_shared_from_this<Connection> {
 public:
  // Opens a stream to `address` on the pool's completion queue; the connection keeps itself
  // alive until every operation on the stream has completed.
  static std::shared_ptr<Connection> Open(std::shared_ptr<ConnectionPool> pool,
                                          const std::string& address);
  ~Connection();

  const std::string& address() const { return address_; }
  // True once the stream failed or was closed: the handle should find another connection.
  bool broken() const { return broken_flag_.load(std::memory_order_acquire); }

  // Takes `call` into flight: it completes with its reply, its deadline, or the stream's end.
  // A connection that broke but whose final status has not arrived yet still takes it, so that
  // it fails with the stream's real status (e.g. UNAUTHENTICATED). Returns false (and leaves
  // `call` untouched) once the stream has ended.
  bool Send(const troupe::internal::RefPtr<PendingCall>& call);

  // Why the stream ended (UNAUTHENTICATED, UNAVAILABLE, ...); OK while it has not.
  absl::Status end_reason() const;

  // Fails every call in flight with `why` and ends the stream.
  void Close(const absl::Status& why);

 private:
  friend class PendingCall;  // Expire

  enum class Op { kRead, kWrite, kFinish };
  // The completion-queue tag of one kind of operation (at most one of each is in flight).
  class Tag final : public CqTag {
   public:
    Tag(Connection* c, Op op) : c_(c), op_(op) {}
    void Run(bool ok) override { c_->OnEvent(op_, ok); }

   private:
    Connection* const c_;
    const Op op_;
  };

  // A reply arriving in pieces.
  struct Assembly {
    std::vector<grpc::Slice> parts;  // referenced, not copied
    uint64_t received = 0;
    uint64_t total = 0;
  };
  // One entry of the next frame.
  struct Item {
    troupe::internal::RefPtr<PendingCall> call;  // null for a cancel
    uint64_t cancel_id = 0;
    uint64_t offset = 0;  // chunked: the piece [offset, offset + length)
    uint64_t length = 0;
  };

  Connection(std::shared_ptr<ConnectionPool> pool, std::string address);
  void Start();
  // An operation completed (the pool's completion-queue thread).
  void OnEvent(Op op, bool ok);
  void OnReadDone(bool ok);
  void OnWriteDone(bool ok);
  void OnFinishDone();
  // The deadline of `call` passed (timer thread), or the queue drained.
  void Expire(PendingCall* call, absl::Status why, bool deadline);
  // Moves queued work into batch_; false if there is nothing to send.
  bool Collect() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Encodes batch_ and starts the write (the caller owns write_in_flight_).
  void WriteBatch();
  // Marks the stream broken.
  void BreakLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Nothing is in flight any more and the final status arrived: hand over to the pool.
  void End();
  void HandleReply(const FrameReader& reader);
  // Removes `id` from flight; null if it is no longer there (expired, cancelled).
  troupe::internal::RefPtr<PendingCall> TakeInFlight(uint64_t id);
  void Finish(troupe::internal::RefPtr<PendingCall> call, absl::Status status,
              std::unique_ptr<google::protobuf::Message> reply);

  const std::shared_ptr<ConnectionPool> pool_;
  const std::string address_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<grpc::GenericStub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  Tag read_tag_{this, Op::kRead};
  Tag write_tag_{this, Op::kWrite};
  Tag finish_tag_{this, Op::kFinish};
  grpc::Status final_status_;         // written by Finish's completion
  std::shared_ptr<Connection> self_;  // held while operations are in flight

  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, troupe::internal::RefPtr<PendingCall>> in_flight_
      ABSL_GUARDED_BY(mu_);
  std::deque<troupe::internal::RefPtr<PendingCall>> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> cancels_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  int ops_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;  // the final status arrived
  absl::Status close_reason_ ABSL_GUARDED_BY(mu_);
  absl::Status end_reason_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> broken_flag_{false};

  // Owned by whichever thread set write_in_flight_.
  std::vector<Item> batch_;
  FrameBuilder builder_{FrameKind::kCalls};
  grpc::ByteBuffer write_buf_;

  // Owned by the completion-queue thread.
  grpc::ByteBuffer read_buf_;
  absl::flat_hash_map<uint64_t, Assembly> assemblies_;
};

}  // namespace transport
}  // namespace troupe

#endif  // TROUPE_RUNTIME_TRANSPORT_CONNECTION_H_
