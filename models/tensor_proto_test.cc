#include "models/tensor_proto.h"

#include <ATen/ATen.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe {
namespace models {
namespace {

using ::testing::HasSubstr;

TEST(TensorProto, RoundTripsEverySupportedDtypeBitForBit) {
  at::Tensor base = at::arange(-12, 12, at::kFloat).reshape({2, 3, 4}) * 0.37;
  for (at::ScalarType type : {at::kFloat, at::kHalf, at::kBFloat16, at::kDouble, at::kLong,
                              at::kInt, at::kChar, at::kByte, at::kBool}) {
    at::Tensor t = base.to(type);
    absl::StatusOr<proto::Tensor> p = TensorToProto(t, "w");
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->name(), "w");
    EXPECT_EQ(std::vector<int64_t>(p->shape().begin(), p->shape().end()),
              (std::vector<int64_t>{2, 3, 4}));
    EXPECT_EQ(static_cast<int64_t>(p->data().size()), t.nbytes());
    absl::StatusOr<at::Tensor> back = TensorFromProto(*p);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->scalar_type(), type);
    EXPECT_TRUE(at::equal(*back, t)) << c10::toString(type);
  }
}

TEST(TensorProto, WritesLittleEndianRowMajorBytes) {
  // A transposed (non-contiguous) tensor is serialized in its logical row-major order.
  at::Tensor t = at::tensor({1.0f, 2.0f, 3.0f, 4.0f}).reshape({2, 2}).t();  // [[1,3],[2,4]]
  absl::StatusOr<proto::Tensor> p = TensorToProto(t);
  ASSERT_TRUE(p.ok());
  const unsigned char expected[] = {0, 0, 0x80, 0x3f, 0, 0, 0x40, 0x40,   // 1.0f, 3.0f
                                    0, 0, 0x00, 0x40, 0, 0, 0x80, 0x40};  // 2.0f, 4.0f
  ASSERT_EQ(p->data().size(), sizeof(expected));
  EXPECT_EQ(std::memcmp(p->data().data(), expected, sizeof(expected)), 0);
  EXPECT_EQ(p->dtype(), proto::FLOAT32);
}

TEST(TensorProto, HandlesScalarsAndEmptyTensors) {
  absl::StatusOr<proto::Tensor> scalar = TensorToProto(at::scalar_tensor(7, at::kLong));
  ASSERT_TRUE(scalar.ok());
  EXPECT_EQ(scalar->shape_size(), 0);
  absl::StatusOr<at::Tensor> s = TensorFromProto(*scalar);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->dim(), 0);
  EXPECT_EQ(s->item<int64_t>(), 7);

  absl::StatusOr<proto::Tensor> empty = TensorToProto(at::zeros({0, 5}));
  ASSERT_TRUE(empty.ok());
  absl::StatusOr<at::Tensor> e = TensorFromProto(*empty);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->sizes(), at::IntArrayRef({0, 5}));
}

TEST(TensorProto, RefusesDataOfTheWrongSizeNamingTheTensor) {
  absl::StatusOr<proto::Tensor> p = TensorToProto(at::ones({3, 3}), "layer.weight");
  ASSERT_TRUE(p.ok());
  p->mutable_data()->resize(35);
  absl::StatusOr<at::Tensor> t = TensorFromProto(*p);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("layer.weight"));
}

TEST(TensorProto, RefusesUnspecifiedDtypeAndUnsupportedTensors) {
  proto::Tensor p;
  p.set_name("x");
  p.add_shape(1);
  p.set_data(std::string(4, '\0'));
  EXPECT_THAT(TensorFromProto(p).status().message(), HasSubstr("'x'"));
  EXPECT_FALSE(TensorToProto(at::Tensor(), "u").ok());
  EXPECT_FALSE(TensorToProto(at::zeros({2}, at::kComplexFloat), "c").ok());
}

TEST(TensorProto, MapKeepsOrderAndVersionAndRefusesRepeatedNames) {
  NamedTensors tensors = {{"b", at::ones({2})}, {"a", at::arange(6).reshape({2, 3})}};
  absl::StatusOr<proto::TensorMap> map = TensorMapToProto(tensors, 42);
  ASSERT_TRUE(map.ok());
  EXPECT_EQ(map->version(), 42);
  absl::StatusOr<NamedTensors> back = TensorMapFromProto(*map);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].first, "b");
  EXPECT_EQ((*back)[1].first, "a");
  EXPECT_TRUE(at::equal((*back)[1].second, tensors[1].second));

  *map->add_tensors() = map->tensors(0);
  absl::StatusOr<NamedTensors> dup = TensorMapFromProto(*map);
  EXPECT_THAT(dup.status().message(), HasSubstr("'b'"));
}

}  // namespace
}  // namespace models
}  // namespace troupe
