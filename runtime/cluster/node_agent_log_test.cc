// The node agent's ReadWorkerLog with an offset (what the dashboard's Logs page follows): one
// file from a byte offset, bounded by max_bytes, with the file's size; past the end nothing;
// a negative offset refused. A head and a node agent in this process, on 127.0.0.1; the worker
// log files are written by the test where the agent keeps them (<state_dir>/logs).
#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"
#include "proto/cluster.grpc.pb.h"
#include "runtime/cluster/head_server.h"
#include "runtime/cluster/node_agent.h"
#include "runtime/transport/transport_common.h"

namespace troupe {
namespace {

class NodeAgentLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<HeadServer>> head =
        HeadServer::Start({.port = 0, .state_dir = tmp_.Path("log_head")});
    ASSERT_TRUE(head.ok()) << head.status();
    head_ = std::move(*head);
    state_dir_ = tmp_.Path("log_node");
    absl::StatusOr<std::unique_ptr<NodeAgent>> node =
        NodeAgent::Start({.head_address = head_->address(),
                          .token = head_->token(),
                          .state_dir = state_dir_,
                          .worker_binary = "/bin/true"});
    ASSERT_TRUE(node.ok()) << node.status();
    node_ = std::move(*node);
    // Incarnation 0 (older) and 1 (the newest, which is read).
    test::WriteFile(state_dir_ + "/logs/worker-a1-0.out", "old\n");
    test::WriteFile(state_dir_ + "/logs/worker-a1-0.err", "old\n");
    test::WriteFile(state_dir_ + "/logs/worker-a1-1.out", "0123456789");
    test::WriteFile(state_dir_ + "/logs/worker-a1-1.err", "warning\n");
    stub_ = proto::NodeService::NewStub(
        grpc::CreateChannel(node_->address(), grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    if (node_ != nullptr) node_->Shutdown();
  }

  grpc::Status Read(const proto::ReadWorkerLogRequest& req, proto::ReadWorkerLogReply* reply) {
    grpc::ClientContext ctx;
    ctx.AddMetadata(transport::kTokenMetadataKey, head_->token());
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    return stub_->ReadWorkerLog(&ctx, req, reply);
  }

  static proto::ReadWorkerLogRequest At(int64_t offset, int64_t max_bytes,
                                        proto::WorkerLogStream stream = proto::WORKER_LOG_STDOUT) {
    proto::ReadWorkerLogRequest req;
    req.mutable_actor_id()->set_id("a1");
    req.set_offset(offset);
    req.set_max_bytes(max_bytes);
    req.set_stream(stream);
    return req;
  }

  test::TempDir tmp_{"node_agent_log"};  // first: outlives the head and node using it
  std::unique_ptr<HeadServer> head_;
  std::unique_ptr<NodeAgent> node_;
  std::string state_dir_;
  std::unique_ptr<proto::NodeService::Stub> stub_;
};

TEST_F(NodeAgentLogTest, AnOffsetReadsOneFileFromThereUpToMaxBytesWithItsSize) {
  proto::ReadWorkerLogReply reply;
  grpc::Status s = Read(At(3, 4), &reply);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(reply.found());
  EXPECT_EQ(reply.incarnation(), 1);
  EXPECT_EQ(reply.stdout_tail(), "3456");
  EXPECT_EQ(reply.stderr_tail(), "");  // only the stream asked for
  EXPECT_EQ(reply.file_size(), 10);

  reply.Clear();
  s = Read(At(0, 0, proto::WORKER_LOG_STDERR), &reply);  // 0 = the default bound (64 KiB)
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(reply.stderr_tail(), "warning\n");
  EXPECT_EQ(reply.stdout_tail(), "");
  EXPECT_EQ(reply.file_size(), 8);
}

TEST_F(NodeAgentLogTest, AnOffsetAtOrBeyondTheEndReadsNothing) {
  for (int64_t offset : {int64_t{10}, int64_t{11}, int64_t{1} << 40}) {
    proto::ReadWorkerLogReply reply;
    grpc::Status s = Read(At(offset, 100), &reply);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_TRUE(reply.found());
    EXPECT_EQ(reply.stdout_tail(), "") << offset;
    EXPECT_EQ(reply.file_size(), 10);
  }
}

TEST_F(NodeAgentLogTest, ANegativeOffsetIsRefused) {
  proto::ReadWorkerLogReply reply;
  grpc::Status s = Read(At(-1, 100), &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("offset"), std::string::npos) << s.error_message();
}

TEST_F(NodeAgentLogTest, MaxBytesIsCappedAtOneMebibyte) {
  test::WriteFile(state_dir_ + "/logs/worker-a1-1.out", std::string((1 << 20) + 100, 'x'));
  proto::ReadWorkerLogReply reply;
  grpc::Status s = Read(At(0, int64_t{1} << 30), &reply);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(reply.stdout_tail().size(), size_t{1} << 20);
  EXPECT_EQ(reply.file_size(), (1 << 20) + 100);
}

TEST_F(NodeAgentLogTest, WithoutAnOffsetTheTailsOfBothFilesAreRead) {
  proto::ReadWorkerLogRequest req;
  req.mutable_actor_id()->set_id("a1");
  proto::ReadWorkerLogReply reply;
  grpc::Status s = Read(req, &reply);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(reply.stdout_tail(), "0123456789");
  EXPECT_EQ(reply.stderr_tail(), "warning\n");
  EXPECT_EQ(reply.file_size(), 0);
}

TEST_F(NodeAgentLogTest, AnActorThisNodeNeverRanIsNotFound) {
  proto::ReadWorkerLogRequest req = At(0, 10);
  req.mutable_actor_id()->set_id("b2");
  proto::ReadWorkerLogReply reply;
  grpc::Status s = Read(req, &reply);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(reply.found());
}

}  // namespace
}  // namespace troupe
