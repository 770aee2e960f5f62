#include "base/trace/span_recorder.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace troupe {
namespace {

constexpr char kMagic[8] = {'T', 'R', 'S', 'P', 'A', 'N', 'S', '1'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kDefaultCapacity = 16384;

// The header at the start of the region (kHeaderBytes, the rest zero).
struct Header {
  char magic[8];
  uint32_t version;
  uint32_t capacity;
  std::atomic<uint64_t> next;  // spans ever claimed
  int64_t pid;
  char label[256];
  char host[64];
};
static_assert(sizeof(Header) <= SpanRecorder::kHeaderBytes);
static_assert(offsetof(Header, next) == 16);

struct Slot {
  std::atomic<uint64_t> seq;  // span number + 1 once complete; 0 while written
  int64_t start_us;
  int64_t dur_us;
  char category[16];
  char name[48];
  char track[40];
};
static_assert(sizeof(Slot) == SpanRecorder::kSlotBytes);
static_assert(std::atomic<uint64_t>::is_always_lock_free);

// Copies `s` into a NUL-terminated field of N bytes (cut to N - 1).
template <size_t N>
void CopyField(char (&field)[N], absl::string_view s) {
  const size_t n = std::min(s.size(), N - 1);
  std::memcpy(field, s.data(), n);
  field[n] = '\0';
}

template <size_t N>
std::string ReadField(const char (&field)[N]) {
  return std::string(field, strnlen(field, N));
}

Header* HeaderOf(char* region) { return reinterpret_cast<Header*>(region); }
Slot* SlotsOf(char* region) { return reinterpret_cast<Slot*>(region + SpanRecorder::kHeaderBytes); }

std::string HostName() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) return "";
  return host;
}

}  // namespace

int64_t WallMicros() { return absl::GetCurrentTimeNanos() / 1000; }

absl::StatusOr<std::unique_ptr<SpanRecorder>> SpanRecorder::Create(Options options) {
  if (options.capacity < 1 || options.capacity > kMaxCapacity) {
    return absl::InvalidArgumentError(absl::StrCat("span recorder capacity ", options.capacity,
                                                   " is not in [1, ", kMaxCapacity, "]"));
  }
  std::unique_ptr<SpanRecorder> r(new SpanRecorder());
  r->capacity_ = options.capacity;
  r->file_ = options.file;
  r->region_bytes_ = kHeaderBytes + size_t{options.capacity} * kSlotBytes;
  if (options.file.empty()) {
    r->heap_ = std::make_unique<char[]>(r->region_bytes_);  // zeroed
    r->region_ = r->heap_.get();
  } else {
    const int fd = ::open(options.file.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
      return absl::InternalError(
          absl::StrCat("cannot create the span file ", options.file, ": ", std::strerror(errno)));
    }
    if (::ftruncate(fd, static_cast<off_t>(r->region_bytes_)) != 0) {
      const int e = errno;
      ::close(fd);
      return absl::InternalError(
          absl::StrCat("cannot size the span file ", options.file, ": ", std::strerror(e)));
    }
    void* p = ::mmap(nullptr, r->region_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const int e = errno;
    ::close(fd);
    if (p == MAP_FAILED) {
      return absl::InternalError(
          absl::StrCat("cannot map the span file ", options.file, ": ", std::strerror(e)));
    }
    r->region_ = static_cast<char*>(p);  // a new file's pages read as zero
    r->mapped_ = true;
  }
  Header* h = new (r->region_) Header();
  std::memcpy(h->magic, kMagic, sizeof(kMagic));
  h->version = kVersion;
  h->capacity = options.capacity;
  h->next.store(0, std::memory_order_relaxed);
  h->pid = static_cast<int64_t>(::getpid());
  CopyField(h->label, options.label);
  CopyField(h->host, HostName());
  return r;
}

SpanRecorder::~SpanRecorder() {
  if (mapped_) ::munmap(region_, region_bytes_);
}

void SpanRecorder::Record(absl::string_view category, absl::string_view name,
                          absl::string_view track, int64_t start_us, int64_t dur_us) {
  const uint64_t n = HeaderOf(region_)->next.fetch_add(1, std::memory_order_relaxed);
  Slot& s = SlotsOf(region_)[n % capacity_];
  s.seq.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s.start_us = start_us;
  s.dur_us = std::max<int64_t>(0, dur_us);
  CopyField(s.category, category);
  CopyField(s.name, name);
  CopyField(s.track, track);
  s.seq.store(n + 1, std::memory_order_release);
}

uint64_t SpanRecorder::recorded() const {
  return HeaderOf(region_)->next.load(std::memory_order_relaxed);
}

ProcessSpans SpanRecorder::Snapshot() const {
  const Header* h = HeaderOf(region_);
  ProcessSpans out;
  out.pid = h->pid;
  out.label = ReadField(h->label);
  out.host = ReadField(h->host);
  const uint64_t end = h->next.load(std::memory_order_acquire);
  const uint64_t begin = end > capacity_ ? end - capacity_ : 0;
  out.lost = begin;
  out.spans.reserve(end - begin);
  Slot* slots = SlotsOf(region_);
  for (uint64_t n = begin; n < end; ++n) {
    Slot& s = slots[n % capacity_];
    if (s.seq.load(std::memory_order_acquire) != n + 1) continue;  // being written
    Span span{ReadField(s.category), ReadField(s.name), ReadField(s.track), s.start_us, s.dur_us};
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.seq.load(std::memory_order_relaxed) != n + 1) continue;  // overwritten meanwhile
    out.spans.push_back(std::move(span));
  }
  return out;
}

absl::StatusOr<ProcessSpans> ParseSpanFile(absl::string_view bytes) {
  if (bytes.size() < SpanRecorder::kHeaderBytes ||
      std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return absl::InvalidArgumentError("not a troupe span file (no TRSPANS1 header)");
  }
  uint32_t version = 0, capacity = 0;
  uint64_t next = 0;
  std::memcpy(&version, bytes.data() + 8, 4);
  std::memcpy(&capacity, bytes.data() + 12, 4);
  std::memcpy(&next, bytes.data() + 16, 8);
  if (version != kVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("span file version ", version, " is not ", kVersion));
  }
  if (capacity < 1 || capacity > SpanRecorder::kMaxCapacity ||
      bytes.size() != SpanRecorder::kHeaderBytes + size_t{capacity} * SpanRecorder::kSlotBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("span file of ", bytes.size(), " bytes does not hold ", capacity, " spans"));
  }
  ProcessSpans out;
  char label[sizeof(Header::label)], host[sizeof(Header::host)];
  std::memcpy(&out.pid, bytes.data() + offsetof(Header, pid), sizeof(out.pid));
  std::memcpy(label, bytes.data() + offsetof(Header, label), sizeof(label));
  std::memcpy(host, bytes.data() + offsetof(Header, host), sizeof(host));
  out.label = ReadField(label);
  out.host = ReadField(host);
  const uint64_t begin = next > capacity ? next - capacity : 0;
  out.lost = begin;
  out.spans.reserve(next - begin);
  for (uint64_t n = begin; n < next; ++n) {
    const char* slot = bytes.data() + SpanRecorder::kHeaderBytes + (n % capacity) * sizeof(Slot);
    uint64_t seq = 0;
    Span span;
    char category[sizeof(Slot::category)], name[sizeof(Slot::name)], track[sizeof(Slot::track)];
    std::memcpy(&seq, slot + offsetof(Slot, seq), sizeof(seq));
    if (seq != n + 1) continue;
    std::memcpy(&span.start_us, slot + offsetof(Slot, start_us), sizeof(int64_t));
    std::memcpy(&span.dur_us, slot + offsetof(Slot, dur_us), sizeof(int64_t));
    std::memcpy(category, slot + offsetof(Slot, category), sizeof(category));
    std::memcpy(name, slot + offsetof(Slot, name), sizeof(name));
    std::memcpy(track, slot + offsetof(Slot, track), sizeof(track));
    span.category = ReadField(category);
    span.name = ReadField(name);
    span.track = ReadField(track);
    span.dur_us = std::max<int64_t>(0, span.dur_us);
    out.spans.push_back(std::move(span));
  }
  return out;
}

absl::StatusOr<uint32_t> SpanCapacityFromEnv() {
  const char* env = std::getenv("TROUPE_TIMELINE_SPANS");
  if (env == nullptr || *env == '\0') return kDefaultCapacity;
  uint32_t n = 0;
  if (!absl::SimpleAtoi(env, &n) || n > SpanRecorder::kMaxCapacity) {
    return absl::InvalidArgumentError(absl::StrCat("TROUPE_TIMELINE_SPANS='", env,
                                                   "' is not a whole number in [0, ",
                                                   SpanRecorder::kMaxCapacity, "]"));
  }
  return n;
}

namespace {

absl::Mutex global_mu;
std::atomic<SpanRecorder*> global_recorder{nullptr};
std::atomic<bool> global_initialized{false};
// Every recorder ever installed (a replaced one stays alive: a thread may still record into it).
std::vector<std::unique_ptr<SpanRecorder>>& GlobalRecorders() {
  static auto* recorders = new std::vector<std::unique_ptr<SpanRecorder>>();
  return *recorders;
}

void InstallLocked(std::unique_ptr<SpanRecorder> r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(global_mu) {
  global_recorder.store(r.get(), std::memory_order_release);
  if (r != nullptr) GlobalRecorders().push_back(std::move(r));
  global_initialized.store(true, std::memory_order_release);
}

}  // namespace

SpanRecorder* GlobalSpans() {
  if (global_initialized.load(std::memory_order_acquire)) {
    return global_recorder.load(std::memory_order_acquire);
  }
  absl::MutexLock lock(&global_mu);
  if (!global_initialized.load(std::memory_order_relaxed)) {
    absl::StatusOr<uint32_t> capacity = SpanCapacityFromEnv();
    std::unique_ptr<SpanRecorder> r;
    if (capacity.ok() && *capacity > 0) {
      absl::StatusOr<std::unique_ptr<SpanRecorder>> made =
          SpanRecorder::Create({.capacity = *capacity});
      if (made.ok()) r = *std::move(made);
    }
    InstallLocked(std::move(r));
  }
  return global_recorder.load(std::memory_order_acquire);
}

absl::Status InitGlobalSpans(SpanRecorder::Options options) {
  std::unique_ptr<SpanRecorder> r;
  if (options.capacity > 0) {
    absl::StatusOr<std::unique_ptr<SpanRecorder>> made = SpanRecorder::Create(std::move(options));
    if (!made.ok()) return made.status();
    r = *std::move(made);
  }
  absl::MutexLock lock(&global_mu);
  InstallLocked(std::move(r));
  return absl::OkStatus();
}

ScopedSpan::ScopedSpan(absl::string_view category, absl::string_view name, absl::string_view track)
    : recorder_(GlobalSpans()) {
  if (recorder_ == nullptr) return;
  category_ = std::string(category);
  name_ = std::string(name);
  track_ = std::string(track);
  start_us_ = WallMicros();
}

ScopedSpan::~ScopedSpan() {
  if (recorder_ != nullptr) {
    recorder_->Record(category_, name_, track_, start_us_, WallMicros() - start_us_);
  }
}

}  // namespace troupe
