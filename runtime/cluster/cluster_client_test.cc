#include "runtime/cluster/cluster_client.h"

#include <string>

#include "gtest/gtest.h"

namespace troupe {
namespace {

TEST(ActorStateFromProto, MapsEachHeadStateToTheRuntimeState) {
  EXPECT_EQ(ActorStateFromProto(proto::PENDING), ActorState::kPending);
  EXPECT_EQ(ActorStateFromProto(proto::ALIVE), ActorState::kAlive);
  EXPECT_EQ(ActorStateFromProto(proto::RESTARTING), ActorState::kRestarting);
  EXPECT_EQ(ActorStateFromProto(proto::DEAD), ActorState::kDead);
}

TEST(ActorStateFromProto, UnspecifiedOrUnknownReadsAsPending) {
  EXPECT_EQ(ActorStateFromProto(proto::ACTOR_STATE_UNSPECIFIED), ActorState::kPending);
  EXPECT_EQ(ActorStateFromProto(static_cast<proto::ActorState>(99)), ActorState::kPending);
}

TEST(ActorStateName, NamesHeadStatesAsTheRuntimeDoes) {
  EXPECT_STREQ(ActorStateName(proto::PENDING), "PENDING");
  EXPECT_STREQ(ActorStateName(proto::ALIVE), "ALIVE");
  EXPECT_STREQ(ActorStateName(proto::RESTARTING), "RESTARTING");
  EXPECT_STREQ(ActorStateName(proto::DEAD), "DEAD");
  EXPECT_STREQ(ActorStateName(proto::ACTOR_STATE_UNSPECIFIED), "PENDING");
  EXPECT_STREQ(ActorStateName(proto::DEAD), ActorStateName(ActorState::kDead));
}

}  // namespace
}  // namespace troupe
