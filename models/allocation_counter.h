// ScopedAllocationCounter: the bytes LibTorch allocates and frees on the calling thread while it
// lives, through c10's memory-profiling hook (every CPU allocation and free of the default
// allocator is reported to it).
//
//   live_bytes   allocated minus freed since the counter started: after a forward with autograd,
//                what the graph keeps for the backward pass (plus the outputs held)
//   peak_bytes   the highest live_bytes reached
//
// Only blocks allocated while the counter lives count: freeing an older one changes nothing.
// The hook is LibTorch's profiler's slot: a counter replaces a profiler's memory reporting on the
// thread while it lives, and an inner counter hides its outer one until it ends.
//
// Example (what a training forward keeps):
//   ScopedAllocationCounter counter;
//   TROUPE_ASSIGN_OR_RETURN(at::Tensor logits, model->Forward(ids, mask));
//   int64_t kept = counter.live_bytes();
//
// Thread-safety: counts the allocations of the thread that created it (and of the threads LibTorch
// runs its work on with that thread's state, e.g. a CPU backward pass); the counts may be read
// from any thread. Destroy it on the thread that created it.
#ifndef TROUPE_MODELS_ALLOCATION_COUNTER_H_
#define TROUPE_MODELS_ALLOCATION_COUNTER_H_

#include <cstdint>
#include <memory>

namespace troupe::models {

class ScopedAllocationCounter {
 public:
  ScopedAllocationCounter();
  ~ScopedAllocationCounter();
  ScopedAllocationCounter(const ScopedAllocationCounter&) = delete;
  ScopedAllocationCounter& operator=(const ScopedAllocationCounter&) = delete;

  int64_t live_bytes() const;
  int64_t peak_bytes() const;
  // Restarts the peak from the current live bytes.
  void ResetPeak();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace troupe::models

#endif  // TROUPE_MODELS_ALLOCATION_COUNTER_H_
