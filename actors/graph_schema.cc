// The RL loop's part in the live actor graph (runtime/dashboard/graph_schema.h), by role
// (actors/roles.h), whatever actor type plays it: the calls that carry samples around the loop —
// the rollout role's Generate sends them out, the reward role's Score scores them (a RewardServer,
// a RewardModel, a Judge or a user's type alike), the replay role's Add / Take store them and hand
// them to training, the trainer's Step (and, in PPO, the critic's Update) trains on them — the
// loop's order (rollout → reward → replay → trainer, and the weights back to the rollout
// workers), and the weights the trainer broadcasts to the rollout workers over their collective
// group.
//
// It also registers the transport's sample probes (runtime/transport/sample_probe.h), so that
// the call statistics of those calls count the samples crossing each edge with their policy
// versions (the dashboard's per-edge staleness) and the weight version each side reports (the
// weights edges' version lag): GenerateReply, WorkerStatus and TrainStepReply report the callee's
// weight version; samples are counted on the side of the call that carries them (Generate and Take
// replies, Score / Add / Step requests — never both sides of one call).
#include <utility>

#include "actors/roles.h"
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
  for (const auto& [role, method] :
       {std::pair<const char*, const char*>{roles::kRollout, "Generate"},
        {roles::kReward, "Score"},
        {roles::kReplay, "Add"},
        {roles::kReplay, "Take"},
        {roles::kTrainer, "Step"},
        {roles::kCritic, "Update"}}) {
    s.call_kinds[{role, method}] = "samples";
  }
  s.loop = {roles::kRollout, roles::kReward, roles::kReplay, roles::kTrainer};
  s.weight_flows.push_back({roles::kTrainer, roles::kRollout});
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
