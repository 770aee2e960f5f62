#include "runtime/collective/weight_sync.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "base/trace/span_recorder.h"
#include "runtime/collective/shm_segment.h"
#include "runtime/future.h"

namespace troupe::collective {
namespace {

constexpr int64_t kHeaderMagic = 0x7472757065577473;  // "troupeWts"-ish; guards against skew
constexpr int64_t kNoMismatch = std::numeric_limits<int64_t>::max();

std::string AnnounceKey(const std::string& group) {
  return CollectiveGroup::KeyPrefix(group) + "weights/announced";
}

std::string SegmentKey(const std::string& group) {
  return CollectiveGroup::KeyPrefix(group) + "weights/segment";
}

constexpr int kHeaderLength = 5;  // [magic, version, manifest hash, count, buffer or -1]
constexpr size_t kTensorAlignment = 64;

// The start of an in-place segment, before its two buffers: the announced version, so that
// subscribers on this machine wait for it on a futex instead of polling the KV store.
struct Control {
  std::atomic<int64_t> announced_plus_one;  // 0 (the segment starts zeroed): none yet
  std::atomic<uint32_t> seq;                // bumped with every announcement; the futex word
};
constexpr size_t kControlBytes = 64;
static_assert(sizeof(Control) <= kControlBytes);
static_assert(std::atomic<int64_t>::is_always_lock_free &&
              std::atomic<uint32_t>::is_always_lock_free);

Control* ControlOf(SharedSegment& segment) { return reinterpret_cast<Control*>(segment.data()); }

// Where each tensor of the manifest sits in one in-place buffer, and the buffer's size.
struct BufferLayout {
  std::vector<size_t> offsets;
  size_t bytes = 0;
};

BufferLayout PlanBuffer(const std::vector<ManifestEntry>& manifest) {
  BufferLayout layout;
  for (const ManifestEntry& e : manifest) {
    size_t n = c10::elementSize(e.dtype);
    for (int64_t d : e.shape) n *= static_cast<size_t>(d);
    layout.bytes = (layout.bytes + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
    layout.offsets.push_back(layout.bytes);
    layout.bytes += n;
  }
  return layout;
}

// Views of the two buffers of `segment` laid out by `layout`; each keeps the segment mapped.
void MakeViews(const std::shared_ptr<SharedSegment>& segment,
               const std::vector<ManifestEntry>& manifest, const BufferLayout& layout,
               std::vector<at::Tensor> (&buffers)[2]) {
  for (int b = 0; b < 2; ++b) {
    buffers[b].clear();
    for (size_t i = 0; i < manifest.size(); ++i) {
      uint8_t* data = segment->data() + kControlBytes + b * layout.bytes + layout.offsets[i];
      buffers[b].push_back(at::from_blob(
          data, manifest[i].shape, [segment](void*) {}, at::TensorOptions(manifest[i].dtype)));
    }
  }
}

std::string Describe(at::ScalarType dtype, absl::Span<const int64_t> shape) {
  return absl::StrCat(c10::toString(dtype), "[", absl::StrJoin(shape, ", "), "]");
}

std::string Describe(const ManifestEntry& e) { return Describe(e.dtype, e.shape); }

std::string Describe(const at::Tensor& t) {
  return Describe(t.scalar_type(), absl::Span<const int64_t>(t.sizes().data(), t.sizes().size()));
}

bool Matches(const ManifestEntry& e, const at::Tensor& t) {
  return t.scalar_type() == e.dtype &&
         std::vector<int64_t>(t.sizes().begin(), t.sizes().end()) == e.shape;
}

// Checks names (non-empty, unique, no tab/newline) and that every tensor is defined.
// The timeline track of a weight sync: the calling actor's, else "weights".
const char* TraceTrack() {
  const char* actor = ::troupe::internal::CurrentMailboxActor();
  return actor != nullptr ? actor : "weights";
}

absl::Status ValidateStateDict(absl::Span<const NamedTensor> state, const char* what) {
  absl::flat_hash_set<std::string> seen;
  for (size_t i = 0; i < state.size(); ++i) {
    const NamedTensor& nt = state[i];
    if (nt.name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": entry ", i, " has an empty name"));
    }
    if (nt.name.find_first_of("\t\n") != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": tensor name '", nt.name, "' contains a tab or newline"));
    }
    if (!seen.insert(nt.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": tensor name '", nt.name, "' appears twice"));
    }
    if (!nt.tensor.defined()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": tensor '", nt.name, "' is undefined"));
    }
  }
  return absl::OkStatus();
}

// "name\tdtype-code\td0,d1,...\n" per entry.
std::string SerializeManifest(const std::vector<ManifestEntry>& manifest) {
  std::string out;
  for (const ManifestEntry& e : manifest) {
    absl::StrAppend(&out, e.name, "\t", static_cast<int>(e.dtype), "\t",
                    absl::StrJoin(e.shape, ","), "\n");
  }
  return out;
}

absl::StatusOr<std::vector<ManifestEntry>> ParseManifest(const std::string& text) {
  std::vector<ManifestEntry> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, '\t');
    int dtype = 0;
    if (f.size() != 3 || !absl::SimpleAtoi(f[1], &dtype)) {
      return absl::DataLossError(absl::StrCat("weight manifest: malformed line '", line, "'"));
    }
    ManifestEntry e{std::string(f[0]), static_cast<at::ScalarType>(dtype), {}};
    for (absl::string_view d : absl::StrSplit(f[2], ',', absl::SkipEmpty())) {
      int64_t v = 0;
      if (!absl::SimpleAtoi(d, &v)) {
        return absl::DataLossError(
            absl::StrCat("weight manifest: malformed shape in '", line, "'"));
      }
      e.shape.push_back(v);
    }
    out.push_back(std::move(e));
  }
  return out;
}

int64_t Hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return static_cast<int64_t>(h >> 2);
}

template <typename Fn>
absl::Status Catching(const char* what, Fn fn) {
  try {
    fn();
    return absl::OkStatus();
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat(what, ": ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(what, ": ", e.what()));
  }
}

// Collectively shares each member's first manifest mismatch (MIN over index*world+rank; the
// publisher and matching subscribers contribute kNoMismatch) and turns it into one error that
// names the tensor on every member. `local_detail` is this member's own account of its mismatch.
absl::Status AgreeOnManifest(CollectiveGroup& group, const std::vector<ManifestEntry>& manifest,
                             int64_t local_code, const std::string& local_detail) {
  at::Tensor code;
  TROUPE_RETURN_IF_ERROR(
      Catching("manifest check", [&] { code = at::full({1}, local_code, at::kLong); }));
  TROUPE_RETURN_IF_ERROR(group.AllReduce({code}, ReduceOp::kMin));
  const int64_t agreed = code.data_ptr<int64_t>()[0];
  if (agreed == kNoMismatch) return absl::OkStatus();
  const int64_t index = agreed / group.world_size();
  const int64_t rank = agreed % group.world_size();
  std::string msg = absl::StrCat("weight manifest mismatch in group '", group.name(), "'");
  if (index < static_cast<int64_t>(manifest.size())) {
    absl::StrAppend(&msg, " at tensor '", manifest[index].name, "' (index ", index,
                    "): the publisher sends ", Describe(manifest[index]), ", subscriber rank ",
                    rank);
    if (rank == group.rank() && !local_detail.empty()) {
      absl::StrAppend(&msg, " ", local_detail);
    } else {
      absl::StrAppend(&msg, " differs");
    }
  } else {
    absl::StrAppend(&msg, ": subscriber rank ", rank, " has a target the publisher does not send",
                    rank == group.rank() ? absl::StrCat(" (", local_detail, ")") : "");
  }
  return absl::InvalidArgumentError(msg);
}

// Collectively: true iff every member passes true (one-int all-reduce MIN).
absl::StatusOr<bool> AllAgree(CollectiveGroup& group, bool mine) {
  at::Tensor flag;
  TROUPE_RETURN_IF_ERROR(
      Catching("in-place agreement", [&] { flag = at::full({1}, mine ? 1 : 0, at::kLong); }));
  TROUPE_RETURN_IF_ERROR(group.AllReduce({flag}, ReduceOp::kMin));
  return flag.data_ptr<int64_t>()[0] == 1;
}

}  // namespace

// ---- WeightPublisher --------------------------------------------------------------------------

WeightPublisher::WeightPublisher(std::unique_ptr<CollectiveGroup> group,
                                 std::vector<ManifestEntry> manifest, int64_t manifest_hash)
    : group_(std::move(group)), manifest_(std::move(manifest)), manifest_hash_(manifest_hash) {}

WeightPublisher::~WeightPublisher() { Close().IgnoreError(); }

absl::Status WeightPublisher::Close() { return group_->Destroy(); }

absl::StatusOr<std::unique_ptr<WeightPublisher>> WeightPublisher::Create(
    KvStore* kv, GroupOptions options, absl::Span<const NamedTensor> state,
    WeightSyncOptions sync) {
  if (options.rank != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("WeightPublisher must be rank 0 of its group, got rank ", options.rank));
  }
  TROUPE_RETURN_IF_ERROR(ValidateStateDict(state, "WeightPublisher state dict"));
  std::vector<ManifestEntry> manifest;
  for (const NamedTensor& nt : state) {
    manifest.push_back(
        {nt.name, nt.tensor.scalar_type(), {nt.tensor.sizes().begin(), nt.tensor.sizes().end()}});
  }
  const std::string text = SerializeManifest(manifest);
  const int64_t hash = Hash(text);
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<CollectiveGroup> group,
                          CollectiveGroup::Create(kv, std::move(options)));
  at::Tensor header, bytes;
  TROUPE_RETURN_IF_ERROR(Catching("manifest", [&] {
    header = at::tensor({static_cast<int64_t>(text.size()), hash}, at::kLong);
    bytes = at::empty({static_cast<int64_t>(text.size())}, at::kByte);
    std::memcpy(bytes.data_ptr(), text.data(), text.size());
  }));
  absl::Status s = group->Broadcast({header}, 0);
  if (s.ok()) s = group->Broadcast({bytes}, 0);
  if (s.ok()) s = AgreeOnManifest(*group, manifest, kNoMismatch, "");
  // In-place mode: make the segment and say where it is, then agree (twice: everyone asks for
  // it, everyone mapped it).
  const BufferLayout layout = PlanBuffer(manifest);
  std::shared_ptr<SharedSegment> segment;
  bool in_place = false;
  if (s.ok()) {
    if (sync.in_place && group->uses_shared_memory() && layout.bytes > 0) {
      absl::StatusOr<std::unique_ptr<SharedSegment>> made =
          SharedSegment::Create(kControlBytes + 2 * layout.bytes, "in-place weights");
      if (made.ok() &&
          kv->Put(SegmentKey(group->name()), (*made)->description(), /*if_absent=*/false).ok()) {
        segment = std::move(*made);
      }
    }
    absl::StatusOr<bool> asked = AllAgree(*group, segment != nullptr);
    if (asked.ok() && *asked) asked = AllAgree(*group, true);
    if (!asked.ok()) s = asked.status();
    in_place = s.ok() && *asked;
  }
  if (!s.ok()) {
    group->Destroy().IgnoreError();
    return s;
  }
  std::unique_ptr<WeightPublisher> pub(
      new WeightPublisher(std::move(group), std::move(manifest), hash));
  if (in_place) {
    MakeViews(segment, pub->manifest_, layout, pub->buffers_);
    pub->segment_ = std::move(segment);
  }
  return pub;
}

absl::Status WeightPublisher::Publish(int64_t version, absl::Span<const NamedTensor> state) {
  ScopedSpan span("weights", "publish weights", TraceTrack());
  if (version <= version_.load()) {
    return absl::InvalidArgumentError(absl::StrCat("Publish: version ", version,
                                                   " is not above the last published version ",
                                                   version_.load()));
  }
  // Match the state dict to the manifest by name before anything is sent.
  absl::flat_hash_map<std::string, const at::Tensor*> by_name;
  for (const NamedTensor& nt : state) by_name[nt.name] = &nt.tensor;
  std::vector<at::Tensor> ordered;
  ordered.reserve(manifest_.size());
  for (const ManifestEntry& e : manifest_) {
    auto it = by_name.find(e.name);
    if (it == by_name.end() || !it->second->defined()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Publish: tensor '", e.name, "' of the manifest is missing"));
    }
    if (!Matches(e, *it->second)) {
      return absl::InvalidArgumentError(absl::StrCat("Publish: tensor '", e.name, "' is ",
                                                     Describe(*it->second), ", the manifest says ",
                                                     Describe(e)));
    }
    ordered.push_back(*it->second);
  }
  if (by_name.size() != manifest_.size() || state.size() != manifest_.size()) {
    absl::flat_hash_set<std::string> known;
    for (const ManifestEntry& e : manifest_) known.insert(e.name);
    for (const NamedTensor& nt : state) {
      if (!known.contains(nt.name)) {
        return absl::InvalidArgumentError(
            absl::StrCat("Publish: tensor '", nt.name, "' is not in the manifest"));
      }
    }
    return absl::InvalidArgumentError("Publish: the state dict names a tensor twice");
  }

  TROUPE_RETURN_IF_ERROR(group_->health());
  TROUPE_RETURN_IF_ERROR(
      group_->kv()->Put(AnnounceKey(group_->name()), absl::StrCat(version), /*if_absent=*/false));
  if (segment_ != nullptr) {
    Control* control = ControlOf(*segment_);
    control->announced_plus_one.store(version + 1, std::memory_order_release);
    control->seq.fetch_add(1, std::memory_order_acq_rel);
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&control->seq), FUTEX_WAKE, INT_MAX, nullptr,
            nullptr, 0);
  }
  const int64_t buffer = in_place() ? publishes_ % 2 : -1;
  at::Tensor header, commit;
  TROUPE_RETURN_IF_ERROR(Catching("Publish", [&] {
    header = at::tensor(
        {kHeaderMagic, version, manifest_hash_, static_cast<int64_t>(manifest_.size()), buffer},
        at::kLong);
    commit = at::zeros({1}, at::kLong);
    // In-place: every subscriber is done with this buffer's previous contents (see the header).
    if (buffer >= 0) {
      for (size_t i = 0; i < ordered.size(); ++i) buffers_[buffer][i].copy_(ordered[i]);
    }
  }));
  if (buffer >= 0) {
    // Only the header travels; it names the buffer.
    TROUPE_RETURN_IF_ERROR(group_->Broadcast({header}, 0));
  } else {
    // One broadcast: the header first, then the tensors in manifest order.
    ordered.insert(ordered.begin(), header);
    TROUPE_RETURN_IF_ERROR(group_->Broadcast(ordered, 0));
  }
  // Subscribers enter this only with the whole version written: OK here means all have it.
  TROUPE_RETURN_IF_ERROR(group_->AllReduce({commit}, ReduceOp::kMax));
  version_.store(version);
  ++publishes_;
  return absl::OkStatus();
}

// ---- WeightSubscriber -------------------------------------------------------------------------

WeightSubscriber::WeightSubscriber(std::unique_ptr<CollectiveGroup> group, at::Tensor header,
                                   std::vector<at::Tensor> receive_list,
                                   std::vector<std::string> names, int64_t manifest_hash)
    : group_(std::move(group)),
      header_(std::move(header)),
      receive_list_(std::move(receive_list)),
      names_(std::move(names)),
      manifest_hash_(manifest_hash) {}

WeightSubscriber::~WeightSubscriber() { Close().IgnoreError(); }

absl::Status WeightSubscriber::Close() { return group_->Destroy(); }

absl::StatusOr<std::unique_ptr<WeightSubscriber>> WeightSubscriber::Create(
    KvStore* kv, GroupOptions options, absl::Span<const NamedTensor> targets,
    WeightSyncOptions sync) {
  if (options.rank < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "WeightSubscriber must be rank >= 1 of its group (rank 0 publishes), got rank ",
        options.rank));
  }
  TROUPE_RETURN_IF_ERROR(ValidateStateDict(targets, "WeightSubscriber targets"));
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<CollectiveGroup> group,
                          CollectiveGroup::Create(kv, std::move(options)));
  auto fail = [&group](absl::Status s) {
    group->Destroy().IgnoreError();
    return s;
  };
  at::Tensor header, bytes;
  absl::Status s = Catching("manifest", [&] { header = at::zeros({2}, at::kLong); });
  if (s.ok()) s = group->Broadcast({header}, 0);
  if (!s.ok()) return fail(s);
  const int64_t length = header.data_ptr<int64_t>()[0];
  const int64_t hash = header.data_ptr<int64_t>()[1];
  s = Catching("manifest", [&] { bytes = at::empty({length}, at::kByte); });
  if (s.ok()) s = group->Broadcast({bytes}, 0);
  if (!s.ok()) return fail(s);
  const std::string text(static_cast<const char*>(bytes.data_ptr()), static_cast<size_t>(length));
  absl::StatusOr<std::vector<ManifestEntry>> manifest = ParseManifest(text);
  if (!manifest.ok()) return fail(manifest.status());

  // Find this member's first mismatch, in manifest order.
  absl::flat_hash_map<std::string, const at::Tensor*> by_name;
  for (const NamedTensor& nt : targets) by_name[nt.name] = &nt.tensor;
  int64_t index = kNoMismatch;
  std::string detail;
  std::vector<at::Tensor> ordered;
  for (size_t i = 0; i < manifest->size() && index == kNoMismatch; ++i) {
    const ManifestEntry& e = (*manifest)[i];
    auto it = by_name.find(e.name);
    if (it == by_name.end()) {
      index = static_cast<int64_t>(i);
      detail = "has no such target";
    } else if (!Matches(e, *it->second)) {
      index = static_cast<int64_t>(i);
      detail = absl::StrCat("has ", Describe(*it->second));
    } else {
      ordered.push_back(*it->second);
    }
  }
  if (index == kNoMismatch && targets.size() > manifest->size()) {
    absl::flat_hash_set<std::string> sent;
    for (const ManifestEntry& e : *manifest) sent.insert(e.name);
    for (const NamedTensor& nt : targets) {
      if (!sent.contains(nt.name)) {
        detail = absl::StrCat("target '", nt.name, "'");
        break;
      }
    }
    index = static_cast<int64_t>(manifest->size());
  }
  const int64_t code =
      index == kNoMismatch ? kNoMismatch : index * group->world_size() + group->rank();
  s = AgreeOnManifest(*group, *manifest, code, detail);
  if (!s.ok()) return fail(s);
  if (Hash(text) != hash) {
    return fail(absl::DataLossError("weight manifest: hash differs from the publisher's"));
  }
  // In-place mode (see the publisher's Create): map the publisher's segment.
  const BufferLayout layout = PlanBuffer(*manifest);
  std::shared_ptr<SharedSegment> segment;
  absl::StatusOr<bool> agreed =
      AllAgree(*group, sync.in_place && group->uses_shared_memory() && layout.bytes > 0);
  if (agreed.ok() && *agreed) {
    absl::StatusOr<std::string> where = kv->Get(SegmentKey(group->name()), absl::Seconds(10));
    if (where.ok()) {
      absl::StatusOr<std::unique_ptr<SharedSegment>> opened =
          SharedSegment::Open(*where, "in-place weights");
      if (opened.ok() && (*opened)->size() == kControlBytes + 2 * layout.bytes) {
        segment = std::move(*opened);
      }
    }
    agreed = AllAgree(*group, segment != nullptr);
  }
  if (!agreed.ok()) return fail(agreed.status());
  at::Tensor receive_header;
  s = Catching("Receive header", [&] { receive_header = at::zeros({kHeaderLength}, at::kLong); });
  if (!s.ok()) return fail(s);
  ordered.insert(ordered.begin(), receive_header);
  std::vector<std::string> names;
  for (const ManifestEntry& e : *manifest) names.push_back(e.name);
  std::unique_ptr<WeightSubscriber> sub(new WeightSubscriber(
      std::move(group), receive_header, std::move(ordered), std::move(names), hash));
  if (*agreed) {
    MakeViews(segment, *manifest, layout, sub->buffers_);
    sub->segment_ = std::move(segment);
  }
  return sub;
}

std::vector<NamedTensor> WeightSubscriber::weights() const {
  std::vector<NamedTensor> out;
  if (in_place() && current_ < 0) return out;
  const std::vector<at::Tensor>& tensors = in_place() ? buffers_[current_] : receive_list_;
  const size_t skip = in_place() ? 0 : 1;  // the copy path's list starts with the header
  out.reserve(names_.size());
  for (size_t i = 0; i < names_.size(); ++i) out.push_back({names_[i], tensors[i + skip]});
  return out;
}

absl::StatusOr<int64_t> WeightSubscriber::AnnouncedVersion() {
  absl::StatusOr<std::string> v =
      group_->kv()->Get(AnnounceKey(group_->name()), absl::ZeroDuration());
  if (absl::IsNotFound(v.status())) return -1;
  if (!v.ok()) return v.status();
  int64_t version = 0;
  if (!absl::SimpleAtoi(*v, &version)) {
    return absl::DataLossError(
        absl::StrCat("KV key '", AnnounceKey(group_->name()), "' holds '", *v, "', not a version"));
  }
  return version;
}

absl::StatusOr<int64_t> WeightSubscriber::AwaitAnnouncedVersion(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  if (segment_ == nullptr) {
    // Copy mode: poll the KV store.
    while (true) {
      TROUPE_ASSIGN_OR_RETURN(int64_t announced, AnnouncedVersion());
      const absl::Duration left = deadline - absl::Now();
      if (announced > version() || left <= absl::ZeroDuration()) return announced;
      absl::SleepFor(std::min(left, absl::Milliseconds(10)));
    }
  }
  Control* control = ControlOf(*segment_);
  while (true) {
    const uint32_t seen = control->seq.load(std::memory_order_acquire);
    const int64_t announced = control->announced_plus_one.load(std::memory_order_acquire) - 1;
    const absl::Duration left = deadline - absl::Now();
    if (announced > version() || left <= absl::ZeroDuration()) return announced;
    const timespec ts = absl::ToTimespec(std::min(left, absl::Milliseconds(100)));
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&control->seq), FUTEX_WAIT, seen, &ts, nullptr,
            0);
  }
}

absl::StatusOr<int64_t> WeightSubscriber::Receive() {
  ScopedSpan span("weights", "receive weights", TraceTrack());
  at::Tensor commit;
  TROUPE_RETURN_IF_ERROR(Catching("Receive", [&] {
    header_.zero_();
    commit = at::zeros({1}, at::kLong);
  }));
  const int64_t buffer = in_place() ? receives_ % 2 : -1;
  if (in_place()) {
    TROUPE_RETURN_IF_ERROR(group_->Broadcast({header_}, 0));
  } else {
    TROUPE_RETURN_IF_ERROR(group_->Broadcast(receive_list_, 0));
  }
  const int64_t* h = header_.data_ptr<int64_t>();
  if (h[0] != kHeaderMagic || h[2] != manifest_hash_ ||
      h[3] != static_cast<int64_t>(receive_list_.size() - 1) || h[1] <= version_.load() ||
      h[4] != buffer) {
    // Out of step with the publisher (a bug, not a race: the layouts matched): leave the group so
    // that the publisher fails at once instead of by timeout.
    absl::Status s = absl::DataLossError(absl::StrCat(
        "Receive in group '", group_->name(), "': unexpected header (magic ", h[0], ", version ",
        h[1], " after ", version_.load(), ", manifest hash ", h[2], " vs ", manifest_hash_,
        ", count ", h[3], " vs ", receive_list_.size() - 1, ", buffer ", h[4], " vs ", buffer,
        "); the targets may be corrupt and the group must be re-created"));
    group_->Destroy().IgnoreError();
    return s;
  }
  const int64_t version = h[1];
  TROUPE_RETURN_IF_ERROR(group_->AllReduce({commit}, ReduceOp::kMax));
  if (buffer >= 0) current_ = static_cast<int>(buffer);
  ++receives_;
  version_.store(version);
  return version;
}

}  // namespace troupe::collective
