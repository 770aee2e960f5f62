#include "base/serial_executor.h"

#include <pthread.h>

#include <utility>

namespace troupe {

SerialExecutor::SerialExecutor(std::string name) : name_(std::move(name)) {
  thread_ = std::thread([this] { Loop(); });
  ::pthread_setname_np(thread_.native_handle(), name_.substr(0, 15).c_str());
}

SerialExecutor::~SerialExecutor() { Shutdown(); }

bool SerialExecutor::Post(absl::AnyInvocable<void() &&> fn) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return false;
  queue_.push_back(std::move(fn));
  ++posted_;
  return true;
}

void SerialExecutor::Drain() {
  absl::MutexLock lock(&mu_);
  const uint64_t target = posted_;
  auto done = [this, target]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ran_ >= target; };
  mu_.Await(absl::Condition(&done));
}

void SerialExecutor::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  absl::MutexLock lock(&join_mu_);
  if (thread_.joinable()) thread_.join();
}

void SerialExecutor::Loop() {
  while (true) {
    absl::AnyInvocable<void() &&> fn;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopping, and everything queued has run
      fn = std::move(queue_.front());
      queue_.pop_front();
    }
    std::move(fn)();
    fn = nullptr;  // destroy what the closure captured before counting it as run
    absl::MutexLock lock(&mu_);
    ++ran_;
  }
}

}  // namespace troupe
