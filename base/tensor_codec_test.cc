#include "base/tensor_codec.h"

#include <algorithm>
#include <random>

#include "gtest/gtest.h"

namespace troupe {
namespace {

proto::Tensor MakeTensor(std::vector<int64_t> shape, proto::DType dtype, uint32_t seed) {
  proto::Tensor t;
  t.set_name("w");
  t.set_dtype(dtype);
  int64_t n = 1;
  for (int64_t d : shape) {
    t.add_shape(d);
    n *= d;
  }
  std::string bytes(n * DTypeSize(dtype), '\0');
  std::mt19937 rng(seed);
  for (char& c : bytes) c = static_cast<char>(rng());
  t.set_data(bytes);
  return t;
}

TEST(TensorProto, SurvivesSerializeAndParse) {
  proto::Tensor t = MakeTensor({3, 5, 7}, proto::BFLOAT16, 1);
  std::string wire;
  ASSERT_TRUE(t.SerializeToString(&wire));
  proto::Tensor back;
  ASSERT_TRUE(back.ParseFromString(wire));
  EXPECT_EQ(back.dtype(), proto::BFLOAT16);
  EXPECT_EQ(std::vector<int64_t>(back.shape().begin(), back.shape().end()),
            (std::vector<int64_t>{3, 5, 7}));
  EXPECT_EQ(back.data(), t.data());
  EXPECT_TRUE(ValidateTensor(back).ok());
}

TEST(TensorProto, ActorSpecSurvivesSerializeAndParse) {
  proto::ActorSpec spec;
  spec.set_type_name("RolloutWorker");
  spec.set_name("rollout-0");
  (*spec.mutable_resources()->mutable_amounts())["CPU"] = 0.5;
  (*spec.mutable_resources()->mutable_amounts())["GPU"] = 1;
  spec.set_max_restarts(-1);
  spec.mutable_placement()->mutable_group_id()->set_id("pg1");
  spec.mutable_placement()->set_bundle_index(2);
  proto::ActorSpec back;
  ASSERT_TRUE(back.ParseFromString(spec.SerializeAsString()));
  EXPECT_EQ(back.type_name(), "RolloutWorker");
  EXPECT_EQ(back.resources().amounts().at("CPU"), 0.5);
  EXPECT_EQ(back.max_restarts(), -1);
  EXPECT_EQ(back.placement().bundle_index(), 2);
}

TEST(TensorCodec, ValidateRejectsDataOfTheWrongSize) {
  proto::Tensor t = MakeTensor({4, 4}, proto::FLOAT32, 2);
  t.mutable_data()->pop_back();
  absl::Status s = ValidateTensor(t);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("63 bytes"), std::string::npos) << s;
}

TEST(TensorCodec, ValidateRejectsNegativeDimensionAndUnknownDtype) {
  proto::Tensor t = MakeTensor({2}, proto::FLOAT32, 3);
  t.set_shape(0, -2);
  EXPECT_EQ(ValidateTensor(t).code(), absl::StatusCode::kInvalidArgument);
  proto::Tensor u = MakeTensor({2}, proto::FLOAT32, 3);
  u.set_dtype(proto::DTYPE_UNSPECIFIED);
  EXPECT_EQ(ValidateTensor(u).code(), absl::StatusCode::kInvalidArgument);
}

TEST(TensorCodec, SplitAndReassembleInShuffledOrderRoundTrips) {
  proto::Tensor t = MakeTensor({1000, 33}, proto::FLOAT32, 4);  // 132000 bytes
  TensorChunks parts = SplitTensor(t, 4096);
  EXPECT_EQ(parts.header.num_chunks(), 33);  // ceil(132000 / 4096)
  EXPECT_EQ(parts.chunks.size(), 33u);
  for (const auto& c : parts.chunks) EXPECT_LE(c.data().size(), 4096u);
  std::mt19937 rng(5);
  std::shuffle(parts.chunks.begin(), parts.chunks.end(), rng);
  TensorAssembler a(parts.header);
  for (const auto& c : parts.chunks) {
    EXPECT_FALSE(a.complete());
    ASSERT_TRUE(a.Add(c).ok());
  }
  EXPECT_TRUE(a.complete());
  absl::StatusOr<proto::Tensor> back = a.Finish();
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->data(), t.data());
  EXPECT_EQ(back->shape_size(), 2);
}

TEST(TensorCodec, AssemblerRejectsOverlapOutOfRangeAndMissingChunks) {
  proto::Tensor t = MakeTensor({100}, proto::INT64, 6);  // 800 bytes
  TensorChunks parts = SplitTensor(t, 300);
  ASSERT_EQ(parts.chunks.size(), 3u);
  TensorAssembler a(parts.header);
  ASSERT_TRUE(a.Add(parts.chunks[0]).ok());
  EXPECT_EQ(a.Add(parts.chunks[0]).code(), absl::StatusCode::kInvalidArgument);  // duplicate
  proto::TensorChunk beyond = parts.chunks[2];
  beyond.set_offset(700);
  EXPECT_EQ(a.Add(beyond).code(), absl::StatusCode::kInvalidArgument);  // past the end
  absl::StatusOr<proto::Tensor> early = a.Finish();
  EXPECT_EQ(early.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(early.status().message().find("300 of 800"), std::string::npos) << early.status();
}

TEST(TensorCodec, EmptyTensorHasNoChunksAndFinishesImmediately) {
  proto::Tensor t = MakeTensor({0, 8}, proto::FLOAT16, 7);
  TensorChunks parts = SplitTensor(t, 64);
  EXPECT_TRUE(parts.chunks.empty());
  TensorAssembler a(parts.header);
  absl::StatusOr<proto::Tensor> back = a.Finish();
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->data().empty());
}

}  // namespace
}  // namespace troupe
