// FakeHeadApi: an in-memory HeadApi for the dashboard's tests — a cluster status the test edits,
// a KV map, kills that make actors DEAD, and canned worker logs per (node address, actor).
#ifndef TROUPE_RUNTIME_DASHBOARD_FAKE_HEAD_API_H_
#define TROUPE_RUNTIME_DASHBOARD_FAKE_HEAD_API_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "runtime/dashboard/head_api.h"

namespace troupe::dashboard {

class FakeHeadApi : public HeadApi {
 public:
  // Shared state, so a test can keep a pointer after handing the fake to a server.
  struct State {
    absl::Mutex mu;
    proto::ClusterStatusReply status ABSL_GUARDED_BY(mu);
    std::map<std::string, std::string> kv ABSL_GUARDED_BY(mu);
    std::vector<std::string> killed ABSL_GUARDED_BY(mu);
    std::map<std::pair<std::string, std::string>, WorkerLog> logs ABSL_GUARDED_BY(mu);
  };

  explicit FakeHeadApi(std::shared_ptr<State> state) : state_(std::move(state)) {}

  static void AddNode(State& s, const std::string& id, const std::string& address,
                      std::map<std::string, double> total, std::map<std::string, double> available,
                      bool alive = true) {
    absl::MutexLock lock(&s.mu);
    proto::NodeInfo* n = s.status.add_nodes();
    n->mutable_id()->set_id(id);
    n->set_address(address);
    n->set_hostname("host-" + id);
    n->set_state(alive ? proto::NODE_ALIVE : proto::NODE_DEAD);
    n->set_last_heartbeat_ms(1000);
    for (const auto& [k, v] : total) (*n->mutable_total()->mutable_amounts())[k] = v;
    for (const auto& [k, v] : available) (*n->mutable_available()->mutable_amounts())[k] = v;
  }

  static void AddActor(State& s, const std::string& id, const std::string& type,
                       const std::string& name, const std::string& job, proto::ActorState state,
                       const std::string& node, const std::string& role = "") {
    absl::MutexLock lock(&s.mu);
    proto::ActorInfo* a = s.status.add_actors();
    a->mutable_id()->set_id(id);
    a->mutable_spec()->set_type_name(type);
    a->mutable_spec()->set_role(role);
    a->mutable_spec()->set_name(name);
    a->mutable_spec()->mutable_job_id()->set_id(job);
    (*a->mutable_spec()->mutable_resources()->mutable_amounts())["CPU"] = 0.5;
    a->set_state(state);
    a->mutable_node_id()->set_id(node);
    a->set_pid(state == proto::ALIVE ? 4242 : 0);
    a->set_address(state == proto::ALIVE ? "127.0.0.1:7000" : "");
    a->set_start_time_ms(absl::ToUnixMillis(absl::Now()) - 10000);
  }

  absl::StatusOr<proto::ClusterStatusReply> Status() override {
    absl::MutexLock lock(&state_->mu);
    return state_->status;
  }

  absl::Status KillActor(const std::string& actor_id) override {
    absl::MutexLock lock(&state_->mu);
    state_->killed.push_back(actor_id);
    for (proto::ActorInfo& a : *state_->status.mutable_actors()) {
      if (a.id().id() == actor_id) {
        a.set_state(proto::DEAD);
        a.set_status_message("killed");
        a.clear_node_id();
      }
    }
    return absl::OkStatus();
  }

  absl::Status KvPut(const std::string& key, const std::string& value) override {
    absl::MutexLock lock(&state_->mu);
    state_->kv[key] = value;
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> KvGet(const std::string& key) override {
    absl::MutexLock lock(&state_->mu);
    auto it = state_->kv.find(key);
    if (it == state_->kv.end()) return absl::NotFoundError(absl::StrCat("no key ", key));
    return it->second;
  }

  absl::StatusOr<std::vector<std::string>> KvList(const std::string& prefix) override {
    absl::MutexLock lock(&state_->mu);
    std::vector<std::string> out;
    for (auto it = state_->kv.lower_bound(prefix);
         it != state_->kv.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
      out.push_back(it->first);
    }
    return out;
  }

  absl::StatusOr<WorkerLog> ReadWorkerLog(const std::string& node_address,
                                          const std::string& actor_id, int64_t) override {
    absl::MutexLock lock(&state_->mu);
    auto it = state_->logs.find({node_address, actor_id});
    if (it == state_->logs.end()) return WorkerLog{};
    return it->second;
  }

  // Reads the canned log's stdout_tail or stderr_tail as if it were the whole file.
  absl::StatusOr<WorkerLogRange> ReadWorkerLogRange(const std::string& node_address,
                                                    const std::string& actor_id,
                                                    WorkerLogStream stream, int64_t offset,
                                                    int64_t max_bytes) override {
    absl::MutexLock lock(&state_->mu);
    auto it = state_->logs.find({node_address, actor_id});
    if (it == state_->logs.end()) return WorkerLogRange{};
    const bool err = stream == WorkerLogStream::kStderr;
    const std::string& file = err ? it->second.stderr_tail : it->second.stdout_tail;
    WorkerLogRange range;
    range.found = it->second.found;
    range.file_size = static_cast<int64_t>(file.size());
    range.path = err ? it->second.stderr_path : it->second.stdout_path;
    if (offset < range.file_size) {
      range.bytes = file.substr(static_cast<size_t>(offset), static_cast<size_t>(max_bytes));
    }
    return range;
  }

 private:
  std::shared_ptr<State> state_;
};

}  // namespace troupe::dashboard

#endif  // TROUPE_RUNTIME_DASHBOARD_FAKE_HEAD_API_H_
