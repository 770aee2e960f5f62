// Resource amounts for the cluster scheduler: names interned to small integers, amounts in fixed
// point, so that fit checks are integer compares over a few array slots and sums never drift.
//
//   ResourceNames names;                                   // "CPU"=0, "GPU"=1, "memory"=2, ...
//   auto req = ResourceRequest::FromMap({{"CPU", 0.5}, {"GPU", 2}}, &names);   // sparse
//   ResourceVector avail = ResourceVector::FromRequest(*node_total);           // dense
//   if (avail.Covers(*req)) avail.Subtract(*req);
//
// Units: every amount is stored as int64 units of 1/10000 (Ray's convention), rounded to the
// nearest unit; 0.1 CPU is exactly 1000 units, so ten 0.1-CPU actors fill one CPU exactly.
// "memory" is in bytes; amounts up to kMaxResourceAmount (1e14, i.e. 100 TB) are accepted.
// "GPU" must be a whole number, in requests and node totals alike.
//
// Thread-safety: none of these types is thread-safe; they are values owned by their user.
#ifndef TROUPE_RUNTIME_SCHEDULER_RESOURCES_H_
#define TROUPE_RUNTIME_SCHEDULER_RESOURCES_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "proto/core.pb.h"

namespace troupe {
namespace scheduler {

// Named amounts as users write them: {"CPU": 0.5, "GPU": 2, "memory": 1e9, "my_accel": 1}.
using ResourceMap = std::map<std::string, double>;

// Small integer naming a resource within one ResourceNames table.
using ResourceId = int32_t;

inline constexpr int64_t kUnitsPerWhole = 10000;
inline constexpr double kMaxResourceAmount = 1e14;
inline constexpr ResourceId kCpu = 0;
inline constexpr ResourceId kGpu = 1;
inline constexpr ResourceId kMemory = 2;

// Interning table of resource names. "CPU", "GPU" and "memory" are always ids 0, 1, 2.
class ResourceNames {
 public:
  ResourceNames();

  // The id of `name`, adding it if new. Ids are dense: 0 .. size()-1.
  ResourceId Intern(absl::string_view name);
  // The id of `name`, or nullopt if it was never interned.
  std::optional<ResourceId> Find(absl::string_view name) const;
  // The name of `id`; `id` must be < size().
  const std::string& Name(ResourceId id) const { return names_[id]; }
  int size() const { return static_cast<int>(names_.size()); }

 private:
  std::vector<std::string> names_;
  absl::flat_hash_map<std::string, ResourceId> ids_;
};

// `amount` of resource `name` in units. InvalidArgument (naming the resource) when the amount is
// negative, not finite, above kMaxResourceAmount, or a fractional "GPU".
absl::StatusOr<int64_t> ToUnits(absl::string_view name, double amount);
// Units back to an amount (exact for every value ToUnits produces up to 2^53 units).
double ToAmount(int64_t units);
// Units as short text: "8", "0.5", "17179869184" (no exponent, at most 4 decimals).
std::string FormatUnits(int64_t units);

// A sparse set of positive amounts (what an actor or bundle asks for), sorted by id.
class ResourceRequest {
 public:
  struct Entry {
    ResourceId id;
    int64_t units;
  };

  ResourceRequest() = default;
  // Parses `amounts`, interning every name into `names` (so an unknown custom resource gets an
  // id that no node has yet). Zero amounts are dropped. Errors as ToUnits.
  static absl::StatusOr<ResourceRequest> FromMap(const ResourceMap& amounts, ResourceNames* names);

  // Adds `units` of `id` (saturating at INT64_MAX); units <= 0 is a no-op.
  void Add(ResourceId id, int64_t units);
  // Adds every entry of `other`.
  void AddAll(const ResourceRequest& other);
  // Units of `id` (0 if absent).
  int64_t Get(ResourceId id) const;
  // True when every amount here is <= the same amount in `other`.
  bool FitsWithin(const ResourceRequest& other) const;

  absl::Span<const Entry> entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }
  // Whole GPUs requested.
  int gpus() const { return static_cast<int>(Get(kGpu) / kUnitsPerWhole); }

  ResourceMap ToMap(const ResourceNames& names) const;
  // "{CPU: 0.5, GPU: 2}" in id order.
  std::string DebugString(const ResourceNames& names) const;

 private:
  absl::InlinedVector<Entry, 4> entries_;
};

// A dense vector of units indexed by ResourceId (a node's total or available resources).
// Slots beyond size() read as 0.
class ResourceVector {
 public:
  ResourceVector() = default;
  static ResourceVector FromRequest(const ResourceRequest& request);

  int64_t Get(ResourceId id) const { return id < static_cast<int>(units_.size()) ? units_[id] : 0; }
  void Set(ResourceId id, int64_t units);
  int size() const { return static_cast<int>(units_.size()); }
  // Sets every amount to 0.
  void Clear() { units_.clear(); }

  // True when every amount of `request` is available here.
  bool Covers(const ResourceRequest& request) const {
    for (const ResourceRequest::Entry& e : request.entries()) {
      if (Get(e.id) < e.units) return false;
    }
    return true;
  }
  // Covers(request) after first taking away `minus` (a tentative reservation).
  bool CoversAfter(const ResourceRequest& minus, const ResourceRequest& request) const {
    for (const ResourceRequest::Entry& e : request.entries()) {
      if (Get(e.id) - minus.Get(e.id) < e.units) return false;
    }
    return true;
  }
  // Takes `request` away; the caller has checked Covers(request).
  void Subtract(const ResourceRequest& request);
  // Gives `request` back.
  void Add(const ResourceRequest& request);

  // Non-zero entries by name.
  ResourceMap ToMap(const ResourceNames& names) const;

 private:
  absl::InlinedVector<int64_t, 8> units_;
};

// The amounts of a protobuf Resources message.
ResourceMap ResourceMapFromProto(const proto::Resources& resources);

}  // namespace scheduler
}  // namespace troupe

#endif  // TROUPE_RUNTIME_SCHEDULER_RESOURCES_H_
