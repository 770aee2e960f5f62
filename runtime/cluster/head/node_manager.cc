#include "runtime/cluster/head/node_manager.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/log.h"
#include "base/secure_random.h"
#include "base/status_macros.h"

namespace troupe {
namespace head {
namespace {

using scheduler::ResourceMap;

// Node ids: 64 bits.
constexpr int kIdBytes = 8;

std::shared_ptr<proto::NodeService::Stub> NewStub(const std::string& address) {
  return proto::NodeService::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
}

std::string ResourcesString(const proto::Resources& r) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : ResourceMap(r.amounts().begin(), r.amounts().end())) {
    parts.push_back(absl::StrCat(k, ": ", v));
  }
  return absl::StrCat("{", absl::StrJoin(parts, ", "), "}");
}

}  // namespace

constexpr char NodeManager::kTable[];

NodeManager::NodeManager(StateStore* store, scheduler::ClusterScheduler* scheduler)
    : store_(store), scheduler_(scheduler) {}

void NodeManager::Persist(const Entry& n) {
  absl::Status s = store_->Put(kTable, n.info.id().id(), n.info.SerializeAsString());
  if (!s.ok()) TROUPE_LOG(WARNING) << absl::StrFormat("head: %s", s.ToString().c_str());
}

absl::Status NodeManager::Recover(absl::Time now) {
  TROUPE_ASSIGN_OR_RETURN(auto rows, store_->Scan(kTable));
  for (auto& [id, bytes] : rows) {
    Entry n;
    if (!n.info.ParseFromString(bytes)) {
      return absl::DataLossError(absl::StrCat(store_->path(), ": node ", id, " does not parse"));
    }
    if (n.info.state() == proto::NODE_ALIVE) {
      // Grace: a live node has one heartbeat timeout to show up again.
      n.last_heartbeat = now;
      n.stub = NewStub(n.info.address());
      absl::Status s = scheduler_->AddNode(id, scheduler::ResourceMapFromProto(n.info.total()),
                                           {n.info.labels().begin(), n.info.labels().end()});
      if (!s.ok()) {
        TROUPE_LOG(WARNING) << absl::StrFormat("head: restoring node %s: %s", id.c_str(),
                                               s.ToString().c_str());
      }
    }
    nodes_[id] = std::move(n);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> NodeManager::Register(const proto::RegisterNodeRequest& req,
                                                  absl::Time now) {
  if (req.address().empty()) {
    return absl::InvalidArgumentError("RegisterNode: empty node address");
  }
  std::string id = req.node_id().id();
  if (id.empty()) id = RandomHexOrDie(kIdBytes);
  Entry& n = nodes_[id];
  const bool was_alive = n.info.state() == proto::NODE_ALIVE;
  n.info.mutable_id()->set_id(id);
  n.info.set_address(req.address());
  n.info.set_hostname(req.hostname());
  *n.info.mutable_total() = req.total();
  *n.info.mutable_labels() = req.labels();
  n.info.set_state(proto::NODE_ALIVE);
  n.last_heartbeat = now;
  n.info.set_last_heartbeat_ms(absl::ToUnixMillis(now));
  n.stub = NewStub(req.address());
  if (!was_alive) {
    absl::Status s = scheduler_->AddNode(id, scheduler::ResourceMapFromProto(req.total()),
                                         {req.labels().begin(), req.labels().end()});
    if (!s.ok()) {
      nodes_.erase(id);
      return absl::InvalidArgumentError(
          absl::StrCat("RegisterNode ", req.address(), ": ", s.message()));
    }
  }
  Persist(n);
  TROUPE_LOG(INFO) << absl::StrFormat("head: node %s registered from %s with %s", id.c_str(),
                                      req.address().c_str(), ResourcesString(req.total()).c_str());
  return id;
}

bool NodeManager::Heartbeat(const std::string& node_id, absl::Time now,
                            const proto::NodeUsage* usage) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end() || it->second.info.state() != proto::NODE_ALIVE) return false;
  it->second.last_heartbeat = now;
  it->second.info.set_last_heartbeat_ms(absl::ToUnixMillis(now));
  if (usage != nullptr) *it->second.info.mutable_usage() = *usage;
  return true;
}

std::vector<std::pair<std::string, absl::Duration>> NodeManager::Expired(
    absl::Time now, absl::Duration timeout) const {
  std::vector<std::pair<std::string, absl::Duration>> expired;
  for (const auto& [id, n] : nodes_) {
    if (n.info.state() == proto::NODE_ALIVE && now - n.last_heartbeat > timeout) {
      expired.emplace_back(id, now - n.last_heartbeat);
    }
  }
  return expired;
}

absl::StatusOr<scheduler::NodeRemoval> NodeManager::MarkDead(const std::string& node_id,
                                                             const std::string& why) {
  auto it = nodes_.find(node_id);
  if (it != nodes_.end()) {
    Entry& n = it->second;
    TROUPE_LOG(WARNING) << absl::StrFormat("head: node %s (%s) declared dead: %s", node_id.c_str(),
                                           n.info.address().c_str(), why.c_str());
    n.info.set_state(proto::NODE_DEAD);
    Persist(n);
  }
  return scheduler_->RemoveNode(node_id);
}

bool NodeManager::IsAlive(const std::string& node_id) const {
  auto it = nodes_.find(node_id);
  return it != nodes_.end() && it->second.info.state() == proto::NODE_ALIVE;
}

std::shared_ptr<proto::NodeService::Stub> NodeManager::Stub(const std::string& node_id) const {
  auto it = nodes_.find(node_id);
  return it == nodes_.end() ? nullptr : it->second.stub;
}

void NodeManager::AppendTo(proto::ClusterStatusReply* reply) const {
  std::vector<std::string> ids;
  for (const auto& [id, n] : nodes_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (const std::string& id : ids) {
    proto::NodeInfo* info = reply->add_nodes();
    *info = nodes_.at(id).info;
    absl::StatusOr<scheduler::NodeView> v = scheduler_->GetNode(id);
    if (!v.ok()) continue;
    info->mutable_available()->clear_amounts();
    for (const auto& [k, amount] : v->available)
      (*info->mutable_available()->mutable_amounts())[k] = amount;
  }
}

}  // namespace head
}  // namespace troupe
