// The RL actors' part in the live actor graph (runtime/dashboard/graph_schema.h): the calls that
// carry samples around the loop — RolloutWorker.Generate sends them out, RewardServer.Score
// scores them, ReplayBuffer.Add / Take store them and hand them to training, Trainer.Step (and,
// in PPO, Critic.Update) trains on them — the loop's order (rollout → reward → replay → trainer,
// and the weights back to the rollout workers), and the weights the Trainer broadcasts to the
// RolloutWorkers over their collective group.
//
// It also registers the transport's sample probes (runtime/transport/sample_probe.h), so that
// the call statistics of those calls count the samples crossing each edge with their policy
// versions (the dashboard's per-edge staleness) and the weight version each side reports (the
// weights edges' version lag): GenerateReply, WorkerStatus and TrainStepReply report the callee's
// weight version; samples are counted on the side of the call that carries them (Generate and Take
// replies, Score / Add / Step requests — never both sides of one call).
#include <utility>

#include "google/protobuf/message.h"
#include "proto/rl.pb.h"
#include "runtime/dashboard/graph_schema.h"
#include "runtime/transport/sample_probe.h"

namespace troupe::actors {
namespace {

using transport::SampleTally;

SampleTally TallyGroups(const google::protobuf::RepeatedPtrField<proto::SampleGroup>& groups) {
  SampleTally t;
  for (const proto::SampleGroup& g : groups) {
    for (const proto::Sample& s : g.samples()) {
      ++t.samples;
      t.policy_version_sum += s.policy_version();
    }
  }
  return t;
}

// A probe for message type M whose samples are in its `groups` field.
template <typename M>
void RegisterGroupsProbe() {
  transport::RegisterSampleProbe(M::descriptor()->full_name(),
                                 [](const google::protobuf::Message& m) {
                                   return TallyGroups(static_cast<const M&>(m).groups());
                                 });
}

const bool kRegistered = [] {
  dashboard::GraphSchema s;
  for (const auto& [type, method] :
       {std::pair<const char*, const char*>{"RolloutWorker", "Generate"},
        {"RewardServer", "Score"},
        {"ReplayBuffer", "Add"},
        {"ReplayBuffer", "Take"},
        {"Trainer", "Step"},
        {"Critic", "Update"}}) {
    s.call_kinds[{type, method}] = "samples";
  }
  s.loop = {"RolloutWorker", "RewardServer", "ReplayBuffer", "Trainer"};
  s.weight_flows.push_back({"Trainer", "RolloutWorker"});
  dashboard::RegisterGraphSchema(std::move(s));

  RegisterGroupsProbe<proto::ScoreRequest>();
  RegisterGroupsProbe<proto::ReplayAddRequest>();
  RegisterGroupsProbe<proto::ReplayTakeReply>();
  RegisterGroupsProbe<proto::TrainStepRequest>();
  transport::RegisterSampleProbe(proto::GenerateReply::descriptor()->full_name(),
                                 [](const google::protobuf::Message& m) {
                                   const auto& r = static_cast<const proto::GenerateReply&>(m);
                                   SampleTally t = TallyGroups(r.groups());
                                   t.version = r.weight_version();
                                   return t;
                                 });
  transport::RegisterSampleProbe(
      proto::WorkerStatus::descriptor()->full_name(), [](const google::protobuf::Message& m) {
        SampleTally t;
        t.version = static_cast<const proto::WorkerStatus&>(m).weight_version();
        return t;
      });
  transport::RegisterSampleProbe(
      proto::TrainStepReply::descriptor()->full_name(), [](const google::protobuf::Message& m) {
        SampleTally t;
        t.version = static_cast<const proto::TrainStepReply&>(m).weight_version();
        return t;
      });
  return true;
}();

}  // namespace
}  // namespace troupe::actors
