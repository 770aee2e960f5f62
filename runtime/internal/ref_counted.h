// Intrusive reference counting for the actor core's hot-path objects (call states, futures).
//
// One allocation holds both the object and its count, which is what lets a call cost a single
// allocation. RefPtr<T> is the owning pointer; it is thread-safe to copy and destroy RefPtrs to the
// same object from different threads, as with std::shared_ptr.
#ifndef TROUPE_RUNTIME_INTERNAL_REF_COUNTED_H_
#define TROUPE_RUNTIME_INTERNAL_REF_COUNTED_H_

#include <atomic>
#include <cstdint>
#include <utility>

namespace troupe {
namespace internal {

class RefCounted {
 public:
  RefCounted() = default;
  RefCounted(const RefCounted&) = delete;
  RefCounted& operator=(const RefCounted&) = delete;

  void Ref() const { count_.fetch_add(1, std::memory_order_relaxed); }
  void Unref() const {
    if (count_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  int32_t ref_count_for_testing() const { return count_.load(std::memory_order_relaxed); }

 protected:
  virtual ~RefCounted() = default;

 private:
  // Starts at 1: the creator owns the first reference (see RefPtr::Adopt).
  mutable std::atomic<int32_t> count_{1};
};

template <typename T>
class RefPtr {
 public:
  RefPtr() = default;
  RefPtr(std::nullptr_t) {}  // NOLINT: implicit like a pointer
  // Shares `p` (adds a reference).
  explicit RefPtr(T* p) : p_(p) {
    if (p_ != nullptr) p_->Ref();
  }
  RefPtr(const RefPtr& o) : p_(o.p_) {
    if (p_ != nullptr) p_->Ref();
  }
  RefPtr(RefPtr&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  template <typename U>
  RefPtr(RefPtr<U>&& o) noexcept : p_(o.release()) {}  // NOLINT: upcast
  template <typename U>
  RefPtr(const RefPtr<U>& o) : RefPtr(o.get()) {}  // NOLINT: upcast
  ~RefPtr() {
    if (p_ != nullptr) p_->Unref();
  }
  RefPtr& operator=(RefPtr o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }

  T* get() const { return p_; }
  T* operator->() const { return p_; }
  T& operator*() const { return *p_; }
  explicit operator bool() const { return p_ != nullptr; }
  friend bool operator==(const RefPtr& a, std::nullptr_t) { return a.p_ == nullptr; }
  friend bool operator!=(const RefPtr& a, std::nullptr_t) { return a.p_ != nullptr; }
  friend bool operator==(const RefPtr& a, const RefPtr& b) { return a.p_ == b.p_; }

  // Gives up ownership without dropping the reference.
  T* release() { return std::exchange(p_, nullptr); }

  // Takes over the creator's reference of a freshly constructed object.
  static RefPtr Adopt(T* p) {
    RefPtr r;
    r.p_ = p;
    return r;
  }

 private:
  T* p_ = nullptr;
};

template <typename T, typename... Args>
RefPtr<T> MakeRef(Args&&... args) {
  return RefPtr<T>::Adopt(new T(std::forward<Args>(args)...));
}

}  // namespace internal
}  // namespace troupe

#endif  // TROUPE_RUNTIME_INTERNAL_REF_COUNTED_H_
