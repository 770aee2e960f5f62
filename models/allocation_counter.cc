#include "models/allocation_counter.h"

#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace troupe::models {
namespace {

// Receives the allocator's reports: alloc_size > 0 for an allocation, < 0 for a free. Only the
// blocks allocated while it is installed count (c10 also reports the frees of blocks an earlier
// counter or profiler saw allocated).
class Reporter : public c10::MemoryReportingInfoBase {
 public:
  void reportMemoryUsage(void* ptr, int64_t alloc_size, int64_t /*total_allocated*/,
                         int64_t /*total_reserved*/, c10::Device /*device*/) override {
    absl::MutexLock lock(&mu_);
    if (alloc_size > 0) {
      blocks_[ptr] = alloc_size;
      live_ += alloc_size;
      peak_ = std::max(peak_, live_);
    } else if (auto it = blocks_.find(ptr); it != blocks_.end()) {
      live_ -= it->second;
      blocks_.erase(it);
    }
  }
  bool memoryProfilingEnabled() const override { return true; }

  int64_t live() const {
    absl::MutexLock lock(&mu_);
    return live_;
  }
  int64_t peak() const {
    absl::MutexLock lock(&mu_);
    return peak_;
  }
  void ResetPeak() {
    absl::MutexLock lock(&mu_);
    peak_ = live_;
  }

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<void*, int64_t> blocks_ ABSL_GUARDED_BY(mu_);
  int64_t live_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t peak_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

struct ScopedAllocationCounter::State {
  std::shared_ptr<Reporter> reporter = std::make_shared<Reporter>();
  c10::DebugInfoGuard guard{c10::DebugInfoKind::PROFILER_STATE, reporter};
};

ScopedAllocationCounter::ScopedAllocationCounter() : state_(std::make_unique<State>()) {}
ScopedAllocationCounter::~ScopedAllocationCounter() = default;

int64_t ScopedAllocationCounter::live_bytes() const { return state_->reporter->live(); }
int64_t ScopedAllocationCounter::peak_bytes() const { return state_->reporter->peak(); }
void ScopedAllocationCounter::ResetPeak() { state_->reporter->ResetPeak(); }

}  // namespace troupe::models
