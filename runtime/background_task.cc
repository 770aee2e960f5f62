#include "runtime/background_task.h"

#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "runtime/future.h"

namespace troupe {

BackgroundTask::BackgroundTask(std::string actor, std::string name)
    : actor_(std::move(actor)), name_(std::move(name)) {}

std::unique_ptr<BackgroundTask> BackgroundTask::Start(const ActorContext& ctx, std::string name,
                                                      std::function<void(const StopToken&)> work) {
  std::unique_ptr<BackgroundTask> task(new BackgroundTask(ctx.name(), std::move(name)));
  BackgroundTask* self = task.get();
  task->thread_ = std::thread([self, work = std::move(work)]() mutable { self->Run(work); });
  return task;
}

void BackgroundTask::Run(std::function<void(const StopToken&)> work) {
  internal::ScopedBackgroundActor scope(actor_.c_str());
  try {
    work(StopToken(&stop_));
  } catch (...) {
    absl::Status s = internal::ExceptionToStatus(
        std::current_exception(),
        absl::StrCat("background task '", name_, "' of ", actor_).c_str());
    TROUPE_LOG(ERROR) << s.message();
    absl::MutexLock lock(&mu_);
    status_ = std::move(s);
  }
  running_.store(false, std::memory_order_release);
}

void BackgroundTask::Join() {
  if (thread_.joinable()) thread_.join();
}

BackgroundTask::~BackgroundTask() { Stop(); }

absl::Status BackgroundTask::status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

}  // namespace troupe
