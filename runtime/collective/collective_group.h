// CollectiveGroup: a named group of world_size processes (or threads) that move bulk tensors
// together — broadcast of a state dict (trainer -> rollout workers), all-reduce of gradients
// (data-parallel trainers), barrier. Backends: Gloo on CPU (LibTorch c10d ProcessGroupGloo) and
// NCCL on GPUs (written against nccl.h, only in --config=cuda builds).
//
//   troupe::collective::ClusterKvStore kv(cluster);          // or InMemoryKvStore for threads
//   TROUPE_ASSIGN_OR_RETURN(auto group, CollectiveGroup::Create(&kv, {.name = "weights.0",
//                                                                     .world_size = 3,
//                                                                     .rank = my_rank}));
//   TROUPE_RETURN_IF_ERROR(group->Broadcast(tensors, /*root=*/0));
//   TROUPE_RETURN_IF_ERROR(group->AllReduce(grads, ReduceOp::kAvg));
//
// Protocol (who calls what, when):
//   * Every member calls Create with the same name, world_size and backend and its own rank.
//     There is no separate "join": rank 0 claims the name in the KV (ALREADY_EXISTS if taken),
//     the others wait for the claim, check it matches their options, and register their rank;
//     Create returns once all world_size members have connected and passed a barrier.
//   * Rendezvous goes through the KV under "collective/<name>/". Gloo rendezvous through a
//     c10d::Store backed by the KV (KvC10dStore) rather than a TCPStore: no extra server or
//     port per group, the head is already reachable by every member, and a member that never
//     shows up is named in the error. NCCL exchanges its 128-byte ncclUniqueId as one KV key.
//   * After Create, every member calls the same sequence of collective operations (same root,
//     same reduce op) with the same tensor layouts (dtypes and shapes, in the same order).
//     Broadcast and AllReduce check this first with one tiny all-reduce: a mismatch is
//     INVALID_ARGUMENT on every member and the group stays usable. (Barrier is not checked.)
//   * Bulk data moves in pieces of at most chunk_bytes (the plan: transfer_plan.h). Tensors of at
//     least min(chunk_bytes, 1 MiB) go straight from/into their own memory in chunk-sized slices
//     (no copy); smaller ones are packed into staging buffers. The plan depends only on dtypes
//     and shapes, so members may pass tensors with different strides. Up to max_in_flight
//     pieces are in flight, so extra memory stays below max_in_flight * chunk_bytes, plus one
//     contiguous copy of each non-contiguous tensor that goes straight (or, for an all-reduce
//     in float32 of a bfloat16 tensor, is larger than a chunk).
//   * Broadcast on one host (Gloo): when every member names the same host (GroupOptions::host_id)
//     and can map rank 0's shared-memory ring (shm_ring.h; decided at Create with one
//     all-reduce, so all members agree), the root copies each piece into a ring slot once and
//     every receiver copies it out, max_in_flight slots deep: no sockets, no per-receiver send
//     on the root. Off with GroupOptions::shared_memory.
//   * Hosts: rank 0 publishes its host_id at Create; a member whose host_id differs does not map
//     the ring. The decision is for the whole group, not per host: if the members span two or
//     more hosts, every broadcast goes over the sockets (the chain below), also between members
//     that share a host. Shared memory is therefore never used across hosts, at the cost of
//     loopback sockets between co-located members of a multi-host group (a per-host ring fed by
//     one receiver per host would avoid that; not done).
//   * Broadcast over Gloo otherwise is a pipelined chain of point-to-point sends, root -> root+1 ->
//   ...:
//     each member forwards piece k while receiving the next ones, so all links carry data at
//     once and adding receivers adds little time where links (not CPUs) are the limit — a
//     tree would make the root send every byte once per level. All-reduce and barrier use
//     Gloo's collectives; NCCL's broadcast is already a pipelined ring.
//   * A member that dies or stops calling in mid-operation makes the operation fail on the
//     members that talk to it at once (UNAVAILABLE) and on the rest when the operation timeout
//     passes (DEADLINE_EXCEEDED). A failed operation leaves the group BROKEN: every later
//     operation returns FAILED_PRECONDITION carrying the first error. To recover, every
//     surviving member calls Destroy, the coordinator (e.g. the trainer) picks a new name —
//     convention "<base>.<epoch>" with the epoch bumped — and tells the members (and a
//     replacement) over its normal control RPC to Create that group. A rank 0 that died leaves
//     the old name's keys behind; DeleteKeys removes them (a clean Destroy on rank 0 does).
//
// Lifecycle:
//
//   Create ──▶ READY ──(an operation fails or times out)──▶ BROKEN
//                │                                            │
//                └────────────── Destroy / ~CollectiveGroup ──┴──▶ DESTROYED
//
// Thread-safety: operations on one group are serialized by a mutex, but their order must match
// across members, so drive a group from one thread. Different groups are independent.
#ifndef TROUPE_RUNTIME_COLLECTIVE_COLLECTIVE_GROUP_H_
#define TROUPE_RUNTIME_COLLECTIVE_COLLECTIVE_GROUP_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "runtime/collective/collective_types.h"  // Backend, ReduceOp, BackendName
#include "runtime/collective/kv_store.h"

namespace troupe::collective {

// The host identity a member gives when GroupOptions::host_id is empty: this machine's boot id
// (/proc/sys/kernel/random/boot_id, else its hostname) and `gloo_host`, as "<boot id>@<host>".
// So processes on one machine listening on one address share memory, while nodes that stand
// for separate machines on one box — different addresses such as 127.0.0.2 and 127.0.0.3, or
// network namespaces — do not, and their weights really cross sockets.
std::string DefaultHostId(const std::string& gloo_host);

struct GroupOptions {
  // Unique among the live groups on one KV; letters, digits and "._-/" only.
  std::string name;
  int world_size = 0;
  // 0 .. world_size-1; rank 0 creates the group and is the usual broadcast root.
  int rank = -1;
  Backend backend = Backend::kGloo;
  // Bounds the rendezvous in Create and every later operation.
  absl::Duration timeout = absl::Seconds(60);
  // Largest piece moved by one backend call, and the size of each staging buffer.
  int64_t chunk_bytes = int64_t{16} << 20;
  // Pieces in flight at once (pipelining); memory for staging <= max_in_flight * chunk_bytes,
  // allocated only as far as small tensors need packing.
  int max_in_flight = 4;
  // Gloo: the address this member listens on and advertises to the others, so it must be one
  // they can reach: on a cluster, the node's own address (ActorContext::node_address(), from
  // `troupe start --node-ip-address`). Empty = this machine's hostname, falling back to
  // loopback; "127.0.0.1" when every member is on this machine.
  std::string gloo_host;
  // The host this member runs on: members share memory (see "Hosts" above) only if all give the
  // same host_id. Empty = DefaultHostId(gloo_host).
  std::string host_id;
  // Gloo: background threads of the process group (each runs one piece at a time).
  int gloo_threads = 2;
  // Gloo: broadcast through a shared-memory ring when every member is on one host (see the
  // protocol above); false = always through the sockets.
  bool shared_memory = true;
  // NCCL: CUDA device index (within CUDA_VISIBLE_DEVICES).
  int cuda_device = 0;
};

namespace internal {
class CollectiveBackend;
}
class ShmRing;

class CollectiveGroup {
 public:
  // Creates or joins group `options.name` (see the protocol above). INVALID_ARGUMENT for bad
  // options or options that differ from rank 0's; ALREADY_EXISTS if the name or this rank is
  // taken; DEADLINE_EXCEEDED naming the missing ranks if not all join within options.timeout;
  // UNIMPLEMENTED for kNccl in a build without --config=cuda; UNAVAILABLE if no GPU responds.
  // `kv` is not owned and must outlive the group.
  static absl::StatusOr<std::unique_ptr<CollectiveGroup>> Create(KvStore* kv, GroupOptions options);
  // Removes every KV key of group `name` (after a rank 0 died); returns how many were removed.
  static absl::StatusOr<int64_t> DeleteKeys(KvStore* kv, const std::string& name);
  // "collective/<name>/": where the group's keys live.
  static std::string KeyPrefix(const std::string& name);

  // Runs Destroy().
  ~CollectiveGroup();
  CollectiveGroup(const CollectiveGroup&) = delete;
  CollectiveGroup& operator=(const CollectiveGroup&) = delete;

  // Copies `root`'s tensors into the other members' tensors (same layouts everywhere; the
  // receivers' tensors are written in place). Any dtype; CPU tensors (CUDA ones too on NCCL).
  absl::Status Broadcast(absl::Span<const at::Tensor> tensors, int root);
  // Reduces each tensor element-wise across members, in place on every member. Dtypes: float32,
  // float64, float16, bfloat16 (reduced in float32), int8, uint8, int32, int64.
  absl::Status AllReduce(absl::Span<const at::Tensor> tensors, ReduceOp op);
  // Returns once every member has called Barrier.
  absl::Status Barrier();
  // Releases the connections (no communication; safe on a BROKEN group); rank 0 also deletes
  // the group's KV keys. Later operations return FAILED_PRECONDITION. Idempotent.
  absl::Status Destroy();

  // OK while READY; the error that broke the group, or FAILED_PRECONDITION once destroyed.
  // Waits for an operation in progress on another thread.
  absl::Status health() const;
  const GroupOptions& options() const { return options_; }
  const std::string& name() const { return options_.name; }
  int rank() const { return options_.rank; }
  int world_size() const { return options_.world_size; }
  KvStore* kv() const { return kv_; }
  // True if broadcasts go through the shared-memory ring (decided at Create): only when every
  // member gave the same host_id (see "Hosts" above).
  bool uses_shared_memory() const;
  // This member's host identity (options().host_id, or DefaultHostId(gloo_host) if empty).
  const std::string& host_id() const { return host_id_; }

 private:
  CollectiveGroup(KvStore* kv, GroupOptions options);

  // FAILED_PRECONDITION unless READY.
  absl::Status CheckUsable() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Turns an operation's error into the group's BROKEN state (once) and returns it.
  absl::Status Break(absl::Status error) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Checks with one all-reduce that every member made the same call (`salt` encodes the op and
  // its root) with the same tensor layout; INVALID_ARGUMENT on every member otherwise.
  absl::Status CheckSameLayout(absl::Span<const at::Tensor> tensors, int64_t salt, const char* op)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Plans the tensors' transfers and runs them (shared-memory ring, chain of sends, or
  // collective calls; see transfer_runner.h), up to max_in_flight at once.
  absl::Status RunTransfers(absl::Span<const at::Tensor> tensors, bool is_broadcast, int root,
                            ReduceOp op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  at::Tensor& StagingBuffer(int slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // At Create, collectively: maps rank 0's ring if every member is on rank 0's host and can map
  // it (else none does).
  absl::Status SetUpSharedMemory(absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  KvStore* const kv_;
  const GroupOptions options_;
  const std::string host_id_;
  mutable absl::Mutex mu_;
  std::unique_ptr<internal::CollectiveBackend> backend_ ABSL_GUARDED_BY(mu_);
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
  bool destroyed_ ABSL_GUARDED_BY(mu_) = false;
  // Staging buffers (bytes), one per in-flight slot, allocated on first use and kept.
  std::vector<at::Tensor> staging_ ABSL_GUARDED_BY(mu_);
  // Tag of the next point-to-point piece (advances alike on every member).
  int64_t next_tag_ ABSL_GUARDED_BY(mu_) = 0;
  // The shared-memory ring (null: broadcasts use the backend) and the number of its next piece
  // (advances alike on every member).
  std::unique_ptr<ShmRing> shm_ ABSL_GUARDED_BY(mu_);
  uint64_t next_piece_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace troupe::collective

#endif  // TROUPE_RUNTIME_COLLECTIVE_COLLECTIVE_GROUP_H_
