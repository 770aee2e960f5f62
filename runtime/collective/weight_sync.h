// WeightPublisher / WeightSubscriber: versioned policy weights from the trainer (publisher,
// rank 0) to rollout workers (subscribers, ranks 1..N) over a CollectiveGroup.
//
//   // Trainer, once:
//   TROUPE_ASSIGN_OR_RETURN(auto pub, WeightPublisher::Create(&kv, {.name = "policy.0",
//                                                                   .world_size = 3,
//                                                                   .rank = 0}, state_dict));
//   // ... after each optimizer step:
//   TROUPE_RETURN_IF_ERROR(pub->Publish(step + 1, state_dict));
//
//   // Rollout worker r, once (targets = its own preallocated parameter tensors):
//   TROUPE_ASSIGN_OR_RETURN(auto sub, WeightSubscriber::Create(&kv, {.name = "policy.0",
//                                                                    .world_size = 3,
//                                                                    .rank = r}, params));
//   // ... between decode steps (or in a thread of its own: AwaitAnnouncedVersion(timeout)):
//   TROUPE_ASSIGN_OR_RETURN(int64_t announced, sub->AnnouncedVersion());   // one KV read
//   if (announced > sub->version()) TROUPE_ASSIGN_OR_RETURN(int64_t v, sub->Receive());
//   // ... the weights of version v: sub->weights() (here: `params` themselves)
//
// With WeightSyncOptions{.in_place = true} passed to every Create, members on one host share
// one copy of each version instead (sub->weights() are then views of the publisher's buffers).
// Members on different hosts (GroupOptions::host_id; by default this machine plus gloo_host, so
// give each member its node's address) always receive copies over Gloo's sockets.
//
// Protocol:
//   * Creation (every member, collectively): the group is created (see collective_group.h), the
//     publisher broadcasts its manifest — every tensor's name, dtype and shape, in the order it
//     will send them — and each subscriber matches it against its targets by name. One
//     all-reduce shares the first mismatch, so on a mismatch Create fails on every member with
//     INVALID_ARGUMENT naming the tensor (and the subscriber rank), and the group is destroyed.
//   * Publish(v) (publisher): checks the state dict against the manifest (INVALID_ARGUMENT naming
//     the tensor, nothing sent); v must exceed the last published version. It writes v to the KV
//     key "collective/<name>/weights/announced" (what AnnouncedVersion reads), broadcasts one
//     list — a header [magic, v, manifest hash, count], then the tensors in manifest order
//     (chunked and layout-checked, see CollectiveGroup::Broadcast) — then joins a one-int
//     all-reduce that every subscriber enters only after it has the whole version and checked
//     the header: Publish returns OK only once every subscriber has v.
//   * Receive() (each subscriber, once per published version, in order): takes part in those
//     two steps, writing straight into its targets, and returns v. Publish blocks until every
//     subscriber calls Receive, so subscribers should poll AnnouncedVersion between units of
//     work (a decode step) and Receive promptly; the group timeout bounds the wait.
//   * In-place mode (WeightSyncOptions::in_place on every member, and the group runs over shared
//     memory, i.e. every member gave the same host_id: see "Hosts" in collective_group.h; one
//     member on another host makes the whole group copy over sockets): at Create the publisher
//     makes one SharedSegment holding two buffers of the whole state dict (each tensor 64-byte
//     aligned, in manifest order, after a 64-byte control block holding the announced version),
//     puts its description in the KV key "collective/<name>/weights/segment", and every subscriber
//     maps it (two one-int all-reduces agree on the mode; any member that does not ask for it or
//     cannot map the segment makes everyone use the copy path). Publish then copies the state dict
//     once into buffer (publish count % 2) and broadcasts only the header, which names the buffer;
//     subscribers write nothing and read the version in place through weights(). So the publisher's
//     work no longer grows with the number of subscribers. A buffer is overwritten two versions
//     later, i.e. only after Publish(v+1) returned, which is after every subscriber entered
//     Receive(v+1): a subscriber must stop reading version v's views when it calls Receive again.
//   * Failure: if a member dies or stalls past the timeout, Publish / Receive fail on every
//     member (UNAVAILABLE or DEADLINE_EXCEEDED) and the group is BROKEN. While a Receive fails,
//     its targets may hold a mix of two versions: keep generating with them only if that is
//     acceptable, else wait for the next version. Recovery: every survivor destroys its
//     publisher / subscriber; the trainer picks a new group name ("policy.<epoch+1>") and tells
//     the workers (and any replacement) over its control RPC to create them again; the first
//     Publish then sends the full current weights.
//
// Ownership: both keep handles to the tensors they were given (subscribers write into their
// storage); `kv` is not owned and must outlive them.
// Thread-safety: drive each object from one thread; version() and AnnouncedVersion() may be
// called from any thread.
#ifndef TROUPE_RUNTIME_COLLECTIVE_WEIGHT_SYNC_H_
#define TROUPE_RUNTIME_COLLECTIVE_WEIGHT_SYNC_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "runtime/collective/collective_group.h"
#include "runtime/collective/kv_store.h"

namespace troupe::collective {

class SharedSegment;

// How versions reach the subscribers; give every member the same (if they differ, the copy path
// is used).
struct WeightSyncOptions {
  // Subscribers read each version in place from a segment the publisher writes once, instead of
  // each receiving its own copy (see "In-place mode" above). Takes effect only when the group runs
  // over shared memory; in_place() tells whether it did.
  bool in_place = false;
};

// One entry of a state dict.
struct NamedTensor {
  std::string name;
  at::Tensor tensor;
};

// Name, dtype and shape of each tensor, in publish order.
struct ManifestEntry {
  std::string name;
  at::ScalarType dtype;
  std::vector<int64_t> shape;
};

class WeightPublisher {
 public:
  // Creates the group as its rank 0 (options.rank must be 0) and agrees the manifest taken from
  // `state` (its names, dtypes and shapes, in this order) with every subscriber. Errors: those
  // of CollectiveGroup::Create; INVALID_ARGUMENT for duplicate or empty names, undefined
  // tensors, or a subscriber whose targets differ (naming the tensor and the rank).
  static absl::StatusOr<std::unique_ptr<WeightPublisher>> Create(
      KvStore* kv, GroupOptions options, absl::Span<const NamedTensor> state,
      WeightSyncOptions sync = {});
  ~WeightPublisher();

  // Sends `state` (matched to the manifest by name, any order) as version `version` to every
  // subscriber; returns once all have it. INVALID_ARGUMENT (nothing sent) if a tensor is
  // missing, extra or differs from the manifest, or `version` <= the last one published.
  absl::Status Publish(int64_t version, absl::Span<const NamedTensor> state);
  // The last version published successfully; -1 before the first.
  int64_t version() const { return version_.load(); }
  const std::vector<ManifestEntry>& manifest() const { return manifest_; }
  // True if the members agreed on in-place mode at Create.
  bool in_place() const { return segment_ != nullptr; }
  CollectiveGroup& group() { return *group_; }
  // Destroys the group (see CollectiveGroup::Destroy). Idempotent.
  absl::Status Close();

 private:
  WeightPublisher(std::unique_ptr<CollectiveGroup> group, std::vector<ManifestEntry> manifest,
                  int64_t manifest_hash);
  std::unique_ptr<CollectiveGroup> group_;
  const std::vector<ManifestEntry> manifest_;
  const int64_t manifest_hash_;
  std::atomic<int64_t> version_{-1};
  // In-place mode: views of the segment's two buffers, in manifest order (empty otherwise).
  std::vector<at::Tensor> buffers_[2];
  std::shared_ptr<SharedSegment> segment_;  // in-place mode only
  int64_t publishes_ = 0;                   // successful Publish calls
};

class WeightSubscriber {
 public:
  // Joins the group as options.rank (>= 1) and checks the publisher's manifest against
  // `targets` (matched by name): INVALID_ARGUMENT naming the first tensor that is missing,
  // extra, or of another dtype or shape — on every member. Keeps handles to `targets`.
  // In in-place mode the targets only serve this check; nothing is written into them.
  static absl::StatusOr<std::unique_ptr<WeightSubscriber>> Create(
      KvStore* kv, GroupOptions options, absl::Span<const NamedTensor> targets,
      WeightSyncOptions sync = {});
  ~WeightSubscriber();

  // The newest version the publisher has announced, -1 if none: one non-blocking KV read.
  absl::StatusOr<int64_t> AnnouncedVersion();
  // Waits until the announced version exceeds version() or `timeout` passes, and returns it. In
  // in-place mode it sleeps on a futex in the shared segment (the publisher wakes it), so a
  // waiting subscriber costs nothing and notices at once; otherwise it polls AnnouncedVersion
  // every 10 ms.
  absl::StatusOr<int64_t> AwaitAnnouncedVersion(absl::Duration timeout);
  // Waits for the publisher's next Publish, writes it into the targets (in-place mode: makes it
  // what weights() shows) and returns its version.
  absl::StatusOr<int64_t> Receive();
  // The last version received completely; -1 before the first.
  int64_t version() const { return version_.load(); }
  // The last version received, in manifest order. Copy mode: the targets. In-place mode: views
  // of the publisher's segment (empty before the first Receive) — read them, never write them,
  // and stop reading them when Receive is called again (they then may be overwritten).
  std::vector<NamedTensor> weights() const;
  // True if the members agreed on in-place mode at Create.
  bool in_place() const { return segment_ != nullptr; }
  CollectiveGroup& group() { return *group_; }
  // Destroys the group (see CollectiveGroup::Destroy). Idempotent.
  absl::Status Close();

 private:
  WeightSubscriber(std::unique_ptr<CollectiveGroup> group, at::Tensor header,
                   std::vector<at::Tensor> receive_list, std::vector<std::string> names,
                   int64_t manifest_hash);
  std::unique_ptr<CollectiveGroup> group_;
  // Where each version's header lands: [magic, version, manifest hash, count, buffer].
  const at::Tensor header_;
  // header_, then the targets in manifest order: what one Broadcast receives in copy mode.
  const std::vector<at::Tensor> receive_list_;
  const std::vector<std::string> names_;  // manifest order
  const int64_t manifest_hash_;
  std::atomic<int64_t> version_{-1};
  // In-place mode: views of the segment's two buffers, in manifest order (empty otherwise), and
  // which one holds version() (-1 before the first Receive).
  std::vector<at::Tensor> buffers_[2];
  std::shared_ptr<SharedSegment> segment_;  // in-place mode only
  int current_ = -1;
  int64_t receives_ = 0;  // successful Receive calls
};

}  // namespace troupe::collective

#endif  // TROUPE_RUNTIME_COLLECTIVE_WEIGHT_SYNC_H_
