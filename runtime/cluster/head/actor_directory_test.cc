#include "runtime/cluster/head/actor_directory.h"

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/cluster/head/test_store.h"

namespace troupe {
namespace head {
namespace {

// Records what the directory asks for; runs the scheduler's queue like the coordinator does.
class FakeHost : public ActorDirectory::Host {
 public:
  void StartWorker(const proto::ActorInfo& actor) override { started.push_back(actor); }
  void KillWorker(const proto::ActorInfo& actor, absl::Duration grace) override {
    killed.push_back(actor.id().id());
    graces.push_back(grace);
  }
  void PlacePending() override {
    for (const scheduler::ScheduledItem& item : scheduler->TryPlacePending()) {
      if (item.kind == scheduler::ScheduledItem::Kind::kActor) {
        directory->Launch(item.id, item.placement);
      }
    }
  }
  void Changed() override { ++changes; }

  scheduler::ClusterScheduler* scheduler = nullptr;
  ActorDirectory* directory = nullptr;
  std::vector<proto::ActorInfo> started;
  std::vector<std::string> killed;
  std::vector<absl::Duration> graces;
  int changes = 0;
};

// A directory over a real scheduler and store, with a fake host.
class ActorDirectoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = OpenTestStore(::testing::UnitTest::GetInstance()->current_test_info()->name());
    directory_ = std::make_unique<ActorDirectory>(store_.get(), &scheduler_, &host_);
    host_.scheduler = &scheduler_;
    host_.directory = directory_.get();
  }

  void AddNode(const std::string& id, double cpus) {
    ASSERT_TRUE(scheduler_.AddNode(id, {{"CPU", cpus}}).ok());
  }

  static proto::ActorSpec Spec(const std::string& name = "", int max_restarts = 0) {
    proto::ActorSpec spec;
    spec.set_type_name("Echo");
    spec.set_name(name);
    spec.set_max_restarts(max_restarts);
    (*spec.mutable_resources()->mutable_amounts())["CPU"] = 1;
    return spec;
  }

  absl::StatusOr<proto::ActorInfo> Create(const proto::ActorSpec& spec) {
    return directory_->Create(spec, [](const std::string&) { return false; });
  }

  static proto::GetActorRequest ById(const std::string& id) {
    proto::GetActorRequest req;
    req.mutable_actor_id()->set_id(id);
    return req;
  }

  proto::ActorInfo Info(const std::string& id) { return directory_->Describe(ById(id)).value(); }

  bool Started(const proto::ActorInfo& a, int incarnation) {
    proto::ReportActorStartedRequest req;
    *req.mutable_actor_id() = a.id();
    req.set_address("127.0.0.1:9");
    req.set_pid(42);
    req.set_incarnation(incarnation);
    return directory_->ReportStarted(req);
  }

  void Exited(const proto::ActorInfo& a, int incarnation) {
    proto::ReportWorkerExitRequest req;
    *req.mutable_actor_id() = a.id();
    req.mutable_node_id()->set_id("n1");
    req.set_incarnation(incarnation);
    req.set_reason("exited with code 1");
    directory_->ReportWorkerExit(req);
  }

  std::unique_ptr<StateStore> store_;
  scheduler::ClusterScheduler scheduler_;
  FakeHost host_;
  std::unique_ptr<ActorDirectory> directory_;
};

TEST_F(ActorDirectoryTest, ACreatedActorIsStartedOnItsNodeAndAliveOnceItsWorkerReports) {
  AddNode("n1", 4);
  absl::StatusOr<proto::ActorInfo> a = Create(Spec());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->state(), proto::PENDING);
  EXPECT_EQ(a->node_id().id(), "n1");
  ASSERT_EQ(host_.started.size(), 1u);
  EXPECT_EQ(host_.started[0].incarnation(), 0);
  EXPECT_FALSE(Started(*a, /*incarnation=*/7));  // not the current incarnation
  EXPECT_EQ(Info(a->id().id()).state(), proto::PENDING);
  EXPECT_TRUE(Started(*a, 0));
  proto::ActorInfo alive = Info(a->id().id());
  EXPECT_EQ(alive.state(), proto::ALIVE);
  EXPECT_EQ(alive.address(), "127.0.0.1:9");
  EXPECT_EQ(alive.pid(), 42);
}

TEST_F(ActorDirectoryTest, ACrashedWorkerRestartsUntilMaxRestartsThenTheActorIsDead) {
  AddNode("n1", 4);
  proto::ActorInfo a = Create(Spec("", /*max_restarts=*/1)).value();
  ASSERT_TRUE(Started(a, 0));
  Exited(a, 0);
  proto::ActorInfo restarted = Info(a.id().id());
  EXPECT_EQ(restarted.state(), proto::RESTARTING);
  EXPECT_EQ(restarted.num_restarts(), 1);
  EXPECT_EQ(restarted.incarnation(), 1);
  ASSERT_EQ(host_.started.size(), 2u);
  EXPECT_EQ(host_.started[1].incarnation(), 1);
  Exited(a, 0);  // stale: ignored
  EXPECT_EQ(Info(a.id().id()).num_restarts(), 1);
  ASSERT_TRUE(Started(a, 1));
  Exited(a, 1);
  proto::ActorInfo dead = Info(a.id().id());
  EXPECT_EQ(dead.state(), proto::DEAD);
  EXPECT_TRUE(absl::StrContains(dead.status_message(), "no restarts left"))
      << dead.status_message();
  EXPECT_FALSE(Started(a, dead.incarnation() - 1));
  EXPECT_TRUE(scheduler_.GetNode("n1")->available.at("CPU") == 4);  // resources released
}

TEST_F(ActorDirectoryTest, ANameIsHeldByOneLiveActorAndFreedWhenItDies) {
  AddNode("n1", 4);
  proto::ActorInfo a = Create(Spec("learner")).value();
  EXPECT_EQ(Create(Spec("learner")).status().code(), absl::StatusCode::kAlreadyExists);
  proto::GetActorRequest by_name;
  by_name.set_name("learner");
  EXPECT_EQ(directory_->Describe(by_name)->id().id(), a.id().id());
  ASSERT_TRUE(directory_->Kill(a.id().id(), /*no_restart=*/true).ok());
  EXPECT_EQ(host_.killed, std::vector<std::string>{a.id().id()});
  EXPECT_EQ(Info(a.id().id()).state(), proto::DEAD);
  EXPECT_EQ(directory_->StateOf(by_name).status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<proto::ActorInfo> b = Create(Spec("learner"));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NE(b->id().id(), a.id().id());
  EXPECT_TRUE(directory_->Kill(a.id().id(), true).ok());  // already dead: nothing to do
  EXPECT_EQ(directory_->Kill("nobody", true).code(), absl::StatusCode::kNotFound);
}

TEST_F(ActorDirectoryTest, AGracefulKillGivesTheWorkerItsGraceAndFreesTheResourcesAtOnce) {
  AddNode("n1", 4);
  proto::ActorInfo a = Create(Spec("learner")).value();
  ASSERT_TRUE(directory_->Kill(a.id().id(), /*no_restart=*/true, absl::Seconds(2)).ok());
  ASSERT_EQ(host_.killed, std::vector<std::string>{a.id().id()});
  EXPECT_EQ(host_.graces, std::vector<absl::Duration>{absl::Seconds(2)});
  EXPECT_EQ(Info(a.id().id()).state(), proto::DEAD);
  EXPECT_TRUE(scheduler_.GetNode("n1")->available.at("CPU") == 4);
}

TEST_F(ActorDirectoryTest, BadSpecsAreRefusedAndLeaveNoActorBehind) {
  AddNode("n1", 4);
  proto::ActorSpec spec = Spec();
  spec.clear_type_name();
  EXPECT_EQ(Create(spec).status().code(), absl::StatusCode::kInvalidArgument);
  spec = Spec();
  (*spec.mutable_resources()->mutable_amounts())["CPU"] = -1;
  EXPECT_EQ(Create(spec).status().code(), absl::StatusCode::kInvalidArgument);
  spec = Spec("", /*max_restarts=*/-2);
  EXPECT_EQ(Create(spec).status().code(), absl::StatusCode::kInvalidArgument);
  spec = Spec();
  spec.mutable_placement()->mutable_group_id()->set_id("g");
  EXPECT_EQ(Create(spec).status().code(), absl::StatusCode::kNotFound);
  // The group "exists" for the caller but not for the scheduler: rejected, not queued.
  absl::StatusOr<proto::ActorInfo> rejected =
      directory_->Create(spec, [](const std::string&) { return true; });
  EXPECT_EQ(rejected.status().code(), absl::StatusCode::kInvalidArgument) << rejected.status();
  EXPECT_TRUE(directory_->List("").empty());
  EXPECT_TRUE(store_->Scan(ActorDirectory::kTable)->empty());
}

TEST_F(ActorDirectoryTest, ANodeLostBeforeTheWorkerRanDoesNotCountAsARestart) {
  AddNode("n1", 4);
  proto::ActorInfo a = Create(Spec()).value();  // max_restarts 0, not started yet
  AddNode("n2", 4);
  ASSERT_TRUE(scheduler_.RemoveNode("n1").ok());
  directory_->NodeDied("n1", "no heartbeat");
  proto::ActorInfo moved = Info(a.id().id());
  EXPECT_EQ(moved.state(), proto::PENDING);
  EXPECT_EQ(moved.num_restarts(), 0);
  EXPECT_EQ(moved.incarnation(), 1);
  EXPECT_EQ(moved.node_id().id(), "n2");
  ASSERT_EQ(host_.started.size(), 2u);
  EXPECT_EQ(host_.started[1].node_id().id(), "n2");
}

TEST_F(ActorDirectoryTest, HeartbeatsKillUnwantedWorkersAndTwoMissesMeanTheWorkerIsGone) {
  AddNode("n1", 4);
  proto::ActorInfo a = Create(Spec("", /*max_restarts=*/-1)).value();
  ASSERT_TRUE(Started(a, 0));
  google::protobuf::RepeatedPtrField<proto::RunningWorker> running;
  proto::RunningWorker* mine = running.Add();
  *mine->mutable_actor_id() = a.id();
  mine->mutable_usage()->set_cpu_percent(42.5);
  mine->mutable_usage()->set_rss_bytes(1 << 20);
  proto::RunningWorker* stranger = running.Add();
  stranger->mutable_actor_id()->set_id("stranger");
  std::vector<proto::RunningWorker> kill = directory_->ReconcileNode("n1", running);
  ASSERT_EQ(kill.size(), 1u);
  EXPECT_EQ(kill[0].actor_id().id(), "stranger");
  // The wanted worker's measured usage is the actor's, until its worker exits.
  EXPECT_EQ(Info(a.id().id()).usage().cpu_percent(), 42.5);
  EXPECT_EQ(Info(a.id().id()).usage().rss_bytes(), 1 << 20);
  // On another node the actor's worker is not wanted either.
  EXPECT_EQ(directory_->ReconcileNode("n2", running).size(), 2u);
  const google::protobuf::RepeatedPtrField<proto::RunningWorker> none;
  EXPECT_TRUE(directory_->ReconcileNode("n1", none).empty());
  EXPECT_EQ(Info(a.id().id()).state(), proto::ALIVE);  // one miss: may be just starting
  directory_->ReconcileNode("n1", running);            // seen again: the count restarts
  directory_->ReconcileNode("n1", none);
  EXPECT_EQ(Info(a.id().id()).state(), proto::ALIVE);
  directory_->ReconcileNode("n1", none);
  proto::ActorInfo gone = Info(a.id().id());
  EXPECT_EQ(gone.state(), proto::RESTARTING);
  EXPECT_EQ(gone.num_restarts(), 1);
  EXPECT_FALSE(gone.has_usage());
}

TEST_F(ActorDirectoryTest, AQueuedActorStartsWhenAKillFreesItsResources) {
  AddNode("n1", 1);
  proto::ActorInfo first = Create(Spec()).value();
  proto::ActorInfo second = Create(Spec()).value();
  EXPECT_TRUE(second.node_id().id().empty());
  EXPECT_TRUE(absl::StartsWith(Info(second.id().id()).status_message(), "pending: "))
      << Info(second.id().id()).status_message();
  ASSERT_EQ(host_.started.size(), 1u);
  ASSERT_TRUE(directory_->Kill(first.id().id(), /*no_restart=*/true).ok());
  ASSERT_EQ(host_.started.size(), 2u);
  EXPECT_EQ(host_.started[1].id().id(), second.id().id());
  EXPECT_EQ(Info(second.id().id()).node_id().id(), "n1");
}

TEST_F(ActorDirectoryTest, ANodeRefusingAWorkerKillsTheActorAndAnErrorReplacesIt) {
  AddNode("n1", 4);
  proto::ActorInfo refused = Create(Spec()).value();
  directory_->WorkerStartAnswered(refused.id().id(), 0, absl::InvalidArgumentError("bad type"));
  EXPECT_EQ(Info(refused.id().id()).state(), proto::DEAD);
  proto::ActorInfo retried = Create(Spec()).value();
  directory_->WorkerStartAnswered(retried.id().id(), 0, absl::UnavailableError("node busy"));
  proto::ActorInfo info = Info(retried.id().id());
  EXPECT_EQ(info.state(), proto::PENDING);
  EXPECT_EQ(info.num_restarts(), 0);
  EXPECT_EQ(host_.started.back().id().id(), retried.id().id());
  proto::StartWorkerReply ok;
  ok.set_pid(77);
  directory_->WorkerStartAnswered(retried.id().id(), 5, ok);  // stale incarnation: ignored
  EXPECT_EQ(Info(retried.id().id()).pid(), 0);
  directory_->WorkerStartAnswered(retried.id().id(), 0, ok);
  EXPECT_EQ(Info(retried.id().id()).pid(), 77);
}

TEST_F(ActorDirectoryTest, AfterARestartAnAliveActorWhoseNodeIsGoneCountsAsExited) {
  AddNode("n1", 4);
  proto::ActorInfo a = Create(Spec("survivor", /*max_restarts=*/3)).value();
  ASSERT_TRUE(Started(a, 0));
  // A new head: same store, a scheduler that has not seen n1 again.
  scheduler::ClusterScheduler scheduler;
  FakeHost host;
  ActorDirectory recovered(store_.get(), &scheduler, &host);
  host.scheduler = &scheduler;
  host.directory = &recovered;
  ASSERT_TRUE(recovered.Recover().ok());
  proto::ActorInfo info = recovered.Describe(ById(a.id().id())).value();
  EXPECT_EQ(info.state(), proto::RESTARTING);
  EXPECT_EQ(info.num_restarts(), 1);
  EXPECT_TRUE(info.node_id().id().empty());
  proto::GetActorRequest by_name;
  by_name.set_name("survivor");
  EXPECT_TRUE(recovered.StateOf(by_name).ok());
  // When a node joins, it is placed there.
  ASSERT_TRUE(scheduler.AddNode("n2", {{"CPU", 4}}).ok());
  host.PlacePending();
  ASSERT_EQ(host.started.size(), 1u);
  EXPECT_EQ(host.started[0].node_id().id(), "n2");
}

}  // namespace
}  // namespace head
}  // namespace troupe
