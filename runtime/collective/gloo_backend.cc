#include "runtime/collective/gloo_backend.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "runtime/collective/kv_c10d_store.h"

namespace troupe::collective::internal {
namespace {

class GlooOp final : public PendingOp {
 public:
  GlooOp(c10::intrusive_ptr<c10d::Work> work, const char* what)
      : work_(std::move(work)), what_(what) {}
  absl::Status Wait() override {
    return CatchBackendErrors(what_, [&] { work_->wait(); });
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  const char* what_;
};

// Starts c10d work through `start` (which may throw), as a PendingOp named `what`.
template <typename Start>
std::unique_ptr<PendingOp> StartWork(const char* what, Start start) {
  c10::intrusive_ptr<c10d::Work> work;
  absl::Status s = CatchBackendErrors(what, [&] { work = start(); });
  if (!s.ok()) return std::make_unique<CompletedOp>(s);
  return std::make_unique<GlooOp>(std::move(work), what);
}

std::chrono::milliseconds AtLeastOneMs(absl::Duration d) {
  return std::chrono::milliseconds(std::max<int64_t>(1, absl::ToInt64Milliseconds(d)));
}

class GlooBackend final : public CollectiveBackend {
 public:
  explicit GlooBackend(c10::intrusive_ptr<c10d::ProcessGroupGloo> pg) : pg_(std::move(pg)) {}

  std::unique_ptr<PendingOp> StartBroadcast(const at::Tensor& buffer, int root) override {
    return StartWork("gloo broadcast", [&] {
      std::vector<at::Tensor> tensors{buffer};
      c10d::BroadcastOptions opts;
      opts.rootRank = root;
      return pg_->broadcast(tensors, opts);
    });
  }

  std::unique_ptr<PendingOp> StartAllReduce(const at::Tensor& buffer, ReduceOp op) override {
    return StartWork("gloo allreduce", [&] {
      std::vector<at::Tensor> tensors{buffer};
      c10d::AllreduceOptions opts;
      opts.reduceOp = op == ReduceOp::kMin   ? c10d::ReduceOp::MIN
                      : op == ReduceOp::kMax ? c10d::ReduceOp::MAX
                                             : c10d::ReduceOp::SUM;
      return pg_->allreduce(tensors, opts);
    });
  }

  absl::Status Barrier() override {
    return CatchBackendErrors("gloo barrier", [&] { pg_->barrier()->wait(); });
  }

  // c10d runs Gloo sends and receives on the transport's own thread (no queue hop).
  bool point_to_point() const override { return true; }

  std::unique_ptr<PendingOp> StartSend(const at::Tensor& buffer, int dst, int tag) override {
    return StartWork("gloo send", [&] {
      std::vector<at::Tensor> tensors{buffer};
      return pg_->send(tensors, dst, tag);
    });
  }

  std::unique_ptr<PendingOp> StartRecv(const at::Tensor& buffer, int src, int tag) override {
    return StartWork("gloo recv", [&] {
      std::vector<at::Tensor> tensors{buffer};
      return pg_->recv(tensors, src, tag);
    });
  }

 private:
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CollectiveBackend>> CreateGlooBackend(
    KvStore* kv, const GlooBackendOptions& options) {
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
  absl::Status s = CatchBackendErrors("gloo rendezvous", [&] {
    auto store = c10::make_intrusive<KvC10dStore>(kv, options.store_prefix,
                                                  AtLeastOneMs(options.connect_timeout));
    auto pg_options = c10d::ProcessGroupGloo::Options::create(AtLeastOneMs(options.op_timeout));
    pg_options->threads = options.threads;
    pg_options->devices.push_back(
        options.host.empty() ? c10d::ProcessGroupGloo::createDefaultDevice()
                             : c10d::ProcessGroupGloo::createDeviceForHostname(options.host));
    pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, options.rank, options.world_size,
                                                     pg_options);
  });
  if (!s.ok()) return s;
  return std::unique_ptr<CollectiveBackend>(std::make_unique<GlooBackend>(std::move(pg)));
}

}  // namespace troupe::collective::internal
