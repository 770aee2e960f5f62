#include "runtime/dashboard/head_api.h"

#include <grpcpp/grpcpp.h>

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "proto/cluster.grpc.pb.h"
#include "runtime/cluster/cluster_client.h"
#include "runtime/transport/transport_common.h"

namespace troupe::dashboard {
namespace {

class GrpcHeadApi final : public HeadApi {
 public:
  GrpcHeadApi(std::unique_ptr<Cluster> cluster, std::string token)
      : cluster_(std::move(cluster)), token_(std::move(token)) {}

  absl::StatusOr<proto::ClusterStatusReply> Status() override { return cluster_->Status(); }

  absl::Status KillActor(const std::string& actor_id) override {
    return cluster_->KillById(actor_id, /*no_restart=*/true);
  }

  absl::Status KvPut(const std::string& key, const std::string& value) override {
    return cluster_->KvPut(key, value);
  }

  absl::StatusOr<std::string> KvGet(const std::string& key) override {
    return cluster_->KvGet(key);
  }

  absl::StatusOr<std::vector<std::string>> KvList(const std::string& prefix) override {
    return cluster_->KvList(prefix);
  }

  absl::StatusOr<WorkerLog> ReadWorkerLog(const std::string& node_address,
                                          const std::string& actor_id, int64_t max_bytes) override {
    proto::ReadWorkerLogRequest req;
    req.mutable_actor_id()->set_id(actor_id);
    req.set_max_bytes(max_bytes);
    absl::StatusOr<proto::ReadWorkerLogReply> r = CallReadWorkerLog(node_address, req);
    if (!r.ok()) return r.status();
    const proto::ReadWorkerLogReply& reply = *r;
    WorkerLog log;
    log.found = reply.found();
    log.stdout_tail = reply.stdout_tail();
    log.stderr_tail = reply.stderr_tail();
    log.stdout_path = reply.stdout_path();
    log.stderr_path = reply.stderr_path();
    return log;
  }

  absl::StatusOr<WorkerLogRange> ReadWorkerLogRange(const std::string& node_address,
                                                    const std::string& actor_id,
                                                    WorkerLogStream stream, int64_t offset,
                                                    int64_t max_bytes) override {
    proto::ReadWorkerLogRequest req;
    req.mutable_actor_id()->set_id(actor_id);
    req.set_max_bytes(max_bytes);
    req.set_offset(offset);
    const bool err = stream == WorkerLogStream::kStderr;
    req.set_stream(err ? proto::WORKER_LOG_STDERR : proto::WORKER_LOG_STDOUT);
    absl::StatusOr<proto::ReadWorkerLogReply> r = CallReadWorkerLog(node_address, req);
    if (!r.ok()) return r.status();
    const proto::ReadWorkerLogReply& reply = *r;
    WorkerLogRange range;
    range.found = reply.found();
    range.bytes = err ? reply.stderr_tail() : reply.stdout_tail();
    range.file_size = reply.file_size();
    range.path = err ? reply.stderr_path() : reply.stdout_path();
    return range;
  }

 private:
  // NodeService.ReadWorkerLog on the node agent at `address` (5 s deadline); errors name it.
  absl::StatusOr<proto::ReadWorkerLogReply> CallReadWorkerLog(
      const std::string& address, const proto::ReadWorkerLogRequest& req) {
    std::shared_ptr<proto::NodeService::Stub> stub = Stub(address);
    grpc::ClientContext ctx;
    ctx.AddMetadata(transport::kTokenMetadataKey, token_);
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    proto::ReadWorkerLogReply reply;
    grpc::Status s = stub->ReadWorkerLog(&ctx, req, &reply);
    if (!s.ok()) {
      absl::Status st = transport::FromGrpcStatus(s);
      return absl::Status(st.code(), absl::StrCat("node agent at ", address, ": ", st.message()));
    }
    return reply;
  }

  std::shared_ptr<proto::NodeService::Stub> Stub(const std::string& address) {
    absl::MutexLock lock(&mu_);
    std::shared_ptr<proto::NodeService::Stub>& stub = stubs_[address];
    if (stub == nullptr) {
      stub = proto::NodeService::NewStub(
          grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    }
    return stub;
  }

  const std::unique_ptr<Cluster> cluster_;
  const std::string token_;
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<proto::NodeService::Stub>> stubs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<HeadApi>> ConnectHeadApi(const std::string& head_address,
                                                        const std::string& token) {
  absl::StatusOr<std::unique_ptr<Cluster>> cluster =
      Cluster::Connect({.address = head_address, .token = token, .rpc_timeout = absl::Seconds(5)});
  if (!cluster.ok()) return cluster.status();
  return std::unique_ptr<HeadApi>(new GrpcHeadApi(std::move(*cluster), token));
}

}  // namespace troupe::dashboard
