#include "runtime/cluster/timeline_collector.h"

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "proto/cluster.grpc.pb.h"
#include "runtime/transport/transport_common.h"

namespace troupe {

absl::StatusOr<CollectedSpans> CollectClusterSpans(Cluster& cluster, const std::string& job_id,
                                                   const CollectSpansOptions& options) {
  constexpr int64_t kReplyLimit = int64_t{3} << 20;
  if (options.max_reply_bytes <= 0 || options.max_reply_bytes > kReplyLimit ||
      options.max_total_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("span budgets must be max_reply_bytes in (0, 3 MiB] and max_total_bytes > 0; "
                     "got ",
                     options.max_reply_bytes, " and ", options.max_total_bytes));
  }
  absl::StatusOr<std::vector<proto::ActorInfo>> actors = cluster.ListActors(job_id);
  if (!actors.ok()) return actors.status();
  if (actors->empty()) {
    return absl::NotFoundError(job_id.empty()
                                   ? std::string("the cluster has no actors")
                                   : absl::StrCat("the cluster has no actors of job '", job_id,
                                                  "' (see `troupe status` for the jobs)"));
  }
  absl::StatusOr<proto::ClusterStatusReply> status = cluster.Status();
  if (!status.ok()) return status.status();
  // One channel per alive node; replies larger than the budget are refused by gRPC itself.
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(static_cast<int>(kReplyLimit + (64 << 10)));
  std::map<std::string, std::unique_ptr<proto::NodeService::Stub>> nodes;
  for (const proto::NodeInfo& n : status->nodes()) {
    if (n.state() != proto::NODE_ALIVE || n.address().empty()) continue;
    nodes[n.address()] = proto::NodeService::NewStub(
        grpc::CreateCustomChannel(n.address(), grpc::InsecureChannelCredentials(), args));
  }
  CollectedSpans out;
  out.actors = static_cast<int>(actors->size());
  int64_t total = 0;
  for (const proto::ActorInfo& actor : *actors) {
    if (total >= options.max_total_bytes) {
      ++out.actors_left_out;
      continue;
    }
    for (auto& [address, stub] : nodes) {
      grpc::ClientContext ctx;
      ctx.AddMetadata(transport::kTokenMetadataKey, options.token);
      ctx.set_deadline(absl::ToChronoTime(absl::Now() + options.rpc_timeout));
      proto::ReadWorkerSpansRequest req;
      *req.mutable_actor_id() = actor.id();
      req.set_max_bytes(std::min(options.max_reply_bytes, options.max_total_bytes - total));
      proto::ReadWorkerSpansReply reply;
      grpc::Status s = stub->ReadWorkerSpans(&ctx, req, &reply);
      if (!s.ok()) {
        out.errors.push_back(absl::StrCat("node agent at ", address, " (actor ", actor.id().id(),
                                          "): ", transport::FromGrpcStatus(s).ToString()));
        continue;
      }
      total += static_cast<int64_t>(reply.ByteSizeLong());
      for (proto::ProcessTrace& p : *reply.mutable_processes()) {
        ProcessSpans ps;
        ps.pid = p.pid();
        ps.label = absl::StrCat(p.label(), " #", p.incarnation());
        ps.host = p.host();
        ps.lost = p.lost();
        ps.spans.reserve(p.spans_size());
        for (proto::TraceSpan& t : *p.mutable_spans()) {
          ps.spans.push_back(Span{std::move(*t.mutable_category()), std::move(*t.mutable_name()),
                                  std::move(*t.mutable_track()), t.start_us(), t.dur_us()});
        }
        out.processes.push_back(std::move(ps));
      }
    }
  }
  return out;
}

}  // namespace troupe
