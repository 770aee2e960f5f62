// The transfer plan as a specification: which backend calls move which elements, in what order.
#include "runtime/collective/transfer_plan.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace troupe::collective::internal {
namespace {

constexpr TransferKind kBroadcast = TransferKind::kBroadcast;
constexpr TransferKind kAllReduce = TransferKind::kAllReduce;

TensorMeta Meta(DType dtype, int64_t numel) { return {dtype, DTypeSize(dtype), numel}; }
TensorMeta Bytes(int64_t n) { return Meta(DType::kUint8, n); }
TensorMeta Floats(int64_t n) { return Meta(DType::kFloat32, n); }

std::string Name(DType d) {
  switch (d) {
    case DType::kUint8:
      return "u8";
    case DType::kInt8:
      return "i8";
    case DType::kInt32:
      return "i32";
    case DType::kInt64:
      return "i64";
    case DType::kFloat16:
      return "f16";
    case DType::kBFloat16:
      return "bf16";
    case DType::kFloat32:
      return "f32";
    case DType::kFloat64:
      return "f64";
    case DType::kOther:
      return "other";
  }
  return "?";
}

// One line per plan: transfers separated by " | ", each "direct <wire> #i[first+count] =bytes"
// or "staged <wire> <piece>@offset ... =bytes", a whole tensor's piece written "#i".
std::string Show(const std::vector<Transfer>& plan) {
  std::vector<std::string> out;
  for (const Transfer& t : plan) {
    std::vector<std::string> pieces;
    for (const Transfer::Piece& p : t.pieces) {
      std::string s = p.whole ? absl::StrCat("#", p.index)
                              : absl::StrCat("#", p.index, "[", p.first, "+", p.count, "]");
      if (t.staged) absl::StrAppend(&s, "@", p.offset);
      pieces.push_back(s);
    }
    out.push_back(absl::StrCat(t.staged ? "staged " : "direct ", Name(t.wire), " ",
                               absl::StrJoin(pieces, " "), " =", t.bytes));
  }
  return absl::StrJoin(out, " | ");
}

// Checks what every plan must satisfy (transfer_plan.h, "Guarantees"): each transfer within a
// chunk; staged pieces aligned, disjoint and inside the transfer; unstaged transfers one slice;
// every tensor's elements covered exactly once, in order; wire bytes conserved.
void ExpectValidPlan(const std::vector<TensorMeta>& tensors, TransferKind kind, int64_t chunk,
                     const std::vector<Transfer>& plan) {
  SCOPED_TRACE(Show(plan));
  std::vector<int64_t> covered(tensors.size(), 0);
  int64_t planned_bytes = 0;
  for (const Transfer& t : plan) {
    EXPECT_LE(t.bytes, chunk);
    EXPECT_FALSE(t.pieces.empty());
    if (!t.staged) {
      EXPECT_EQ(t.pieces.size(), 1u);
    }
    int64_t end = 0;
    for (const Transfer::Piece& p : t.pieces) {
      ASSERT_GE(p.index, 0);
      ASSERT_LT(p.index, static_cast<int>(tensors.size()));
      const TensorMeta& m = tensors[p.index];
      EXPECT_EQ(WireType(m, kind), t.wire);
      const int64_t bytes = p.count * WireElementSize(m, kind);
      planned_bytes += bytes;
      if (p.whole) {
        EXPECT_TRUE(t.staged);
        EXPECT_EQ(p.count, m.numel);
      }
      EXPECT_EQ(p.first, covered[p.index]) << "tensor " << p.index << " out of order or gapped";
      covered[p.index] = p.first + p.count;
      if (t.staged) {
        EXPECT_EQ(p.offset % kStagingAlign, 0);
        EXPECT_GE(p.offset, end) << "overlapping pieces";
        end = p.offset + bytes;
      } else {
        end = bytes;
      }
    }
    EXPECT_EQ(t.bytes, end);
  }
  int64_t tensor_bytes = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(covered[i], tensors[i].numel) << "tensor " << i;
    tensor_bytes += tensors[i].numel * WireElementSize(tensors[i], kind);
  }
  EXPECT_EQ(planned_bytes, tensor_bytes);
}

TEST(TransferPlan, NoTensorsMeansNoTransfers) {
  EXPECT_TRUE(PlanTransfers({}, kBroadcast, 1024).empty());
  EXPECT_TRUE(PlanTransfers({}, kAllReduce, 1024).empty());
}

TEST(TransferPlan, TensorsWithoutElementsAreSkipped) {
  const std::vector<TensorMeta> tensors = {Floats(0), Bytes(5), Meta(DType::kInt64, 0)};
  EXPECT_EQ(RouteOf(tensors[0], kBroadcast, 1024), Route::kSkip);
  EXPECT_EQ(Show(PlanTransfers(tensors, kBroadcast, 1024)), "staged u8 #1@0 =5");
  EXPECT_EQ(Show(PlanTransfers(tensors, kAllReduce, 1024)), "staged u8 #1@0 =5");
  EXPECT_TRUE(PlanTransfers({Floats(0), Floats(0)}, kAllReduce, 1024).empty());
}

TEST(TransferPlan, ATensorOverTheChunkSizeGoesDirectInChunkSizedSlices) {
  // 1000 floats, 256 to a 1 KiB chunk; the last slice takes the rest.
  const std::vector<TensorMeta> tensors = {Floats(1000)};
  for (TransferKind kind : {kBroadcast, kAllReduce}) {
    const std::vector<Transfer> plan = PlanTransfers(tensors, kind, 1024);
    const std::string wire = kind == kBroadcast ? "u8" : "f32";
    EXPECT_EQ(Show(plan), absl::StrCat("direct ", wire, " #0[0+256] =1024 | direct ", wire,
                                       " #0[256+256] =1024 | direct ", wire,
                                       " #0[512+256] =1024 | direct ", wire, " #0[768+232] =928"));
    ExpectValidPlan(tensors, kind, 1024, plan);
  }
}

TEST(TransferPlan, SlicesHoldWholeElementsWhenTheChunkIsNotAMultipleOfTheirSize) {
  const std::vector<TensorMeta> tensors = {Meta(DType::kFloat64, 30)};  // 240 bytes
  const std::vector<Transfer> plan = PlanTransfers(tensors, kAllReduce, 100);
  EXPECT_EQ(Show(plan),
            "direct f64 #0[0+12] =96 | direct f64 #0[12+12] =96 | "
            "direct f64 #0[24+6] =48");
  ExpectValidPlan(tensors, kAllReduce, 100, plan);
}

TEST(TransferPlan, ATensorGoesDirectFromTheSmallerOfAChunkAndOneMebibyte) {
  // With a 1 KiB chunk the threshold is the chunk...
  EXPECT_EQ(RouteOf(Bytes(1024), kBroadcast, 1024), Route::kDirect);
  EXPECT_EQ(RouteOf(Bytes(1023), kBroadcast, 1024), Route::kWhole);
  // ...with a 4 MiB chunk it is kMinDirectBytes.
  const int64_t chunk = int64_t{4} << 20;
  EXPECT_EQ(RouteOf(Floats(kMinDirectBytes / 4), kAllReduce, chunk), Route::kDirect);
  EXPECT_EQ(RouteOf(Floats(kMinDirectBytes / 4 - 1), kAllReduce, chunk), Route::kWhole);
  EXPECT_EQ(Show(PlanTransfers({Floats(kMinDirectBytes / 4)}, kAllReduce, chunk)),
            absl::StrCat("direct f32 #0[0+", kMinDirectBytes / 4, "] =", kMinDirectBytes));
}

TEST(TransferPlan, SmallTensorsShareAStagingBufferAtAlignedOffsets) {
  const std::vector<TensorMeta> tensors = {Bytes(10), Floats(3), Meta(DType::kFloat16, 1)};
  const std::vector<Transfer> plan = PlanTransfers(tensors, kBroadcast, 1024);
  EXPECT_EQ(Show(plan), "staged u8 #0@0 #1@64 #2@128 =130");
  ExpectValidPlan(tensors, kBroadcast, 1024, plan);
}

TEST(TransferPlan, ABucketThatAPieceWouldOverflowIsClosedAndANewOneOpened) {
  // 100 + 28 bytes of alignment + 100 fits 256; a third 100 does not.
  const std::vector<TensorMeta> tensors = {Bytes(100), Bytes(100), Bytes(100)};
  const std::vector<Transfer> plan = PlanTransfers(tensors, kBroadcast, 256);
  EXPECT_EQ(Show(plan), "staged u8 #0@0 #1@128 =228 | staged u8 #2@0 =100");
  ExpectValidPlan(tensors, kBroadcast, 256, plan);
}

TEST(TransferPlan, DirectSlicesTakeTheirTensorsPlaceWhileOpenBucketsComeLast) {
  const std::vector<TensorMeta> tensors = {Bytes(100), Bytes(600), Bytes(100)};
  const std::vector<Transfer> plan = PlanTransfers(tensors, kBroadcast, 256);
  EXPECT_EQ(Show(plan),
            "direct u8 #1[0+256] =256 | direct u8 #1[256+256] =256 | direct u8 #1[512+88] =88 | "
            "staged u8 #0@0 #2@128 =228");
  ExpectValidPlan(tensors, kBroadcast, 256, plan);
}

TEST(TransferPlan, ABroadcastMovesMixedDtypesAsBytesInOneBucket) {
  const std::vector<TensorMeta> tensors = {Meta(DType::kInt64, 3),
                                           Meta(DType::kBFloat16, 5),
                                           {DType::kOther, 16, 2},
                                           Meta(DType::kInt8, 7)};
  const std::vector<Transfer> plan = PlanTransfers(tensors, kBroadcast, 1024);
  EXPECT_EQ(Show(plan), "staged u8 #0@0 #1@64 #2@128 #3@192 =199");
  ExpectValidPlan(tensors, kBroadcast, 1024, plan);
}

TEST(TransferPlan, AnAllReduceKeepsOneBucketPerWireTypeWithBFloat16InFloat32) {
  const std::vector<TensorMeta> tensors = {Floats(3), Meta(DType::kInt64, 2),
                                           Meta(DType::kBFloat16, 4), Floats(1)};
  const std::vector<Transfer> plan = PlanTransfers(tensors, kAllReduce, 1024);
  // The bfloat16 piece takes 4 floats (16 bytes), not 8 bytes.
  EXPECT_EQ(Show(plan), "staged f32 #0@0 #2@64 #3@128 =132 | staged i64 #1@0 =16");
  ExpectValidPlan(tensors, kAllReduce, 1024, plan);
}

TEST(TransferPlan, BFloat16OverAChunkIsReducedInStagedFloat32Slices) {
  const std::vector<TensorMeta> tensors = {Meta(DType::kBFloat16, 100)};  // 400 wire bytes
  EXPECT_EQ(RouteOf(tensors[0], kAllReduce, 128), Route::kSplit);
  const std::vector<Transfer> plan = PlanTransfers(tensors, kAllReduce, 128);
  EXPECT_EQ(Show(plan),
            "staged f32 #0[0+32]@0 =128 | staged f32 #0[32+32]@0 =128 | "
            "staged f32 #0[64+32]@0 =128 | staged f32 #0[96+4]@0 =16");
  ExpectValidPlan(tensors, kAllReduce, 128, plan);
  // A broadcast moves its bytes as they are: direct.
  EXPECT_EQ(RouteOf(tensors[0], kBroadcast, 128), Route::kDirect);
}

TEST(TransferPlan, SplitSlicesShareABucketWithSmallTensorsOfTheirWireType) {
  // 40 bfloat16 = 160 float32 bytes over a 128-byte chunk: slices of 32 and 8 elements; the
  // second (32 bytes) leaves room after it for the small float tensor.
  const std::vector<TensorMeta> tensors = {Meta(DType::kBFloat16, 40), Floats(4)};
  const std::vector<Transfer> plan = PlanTransfers(tensors, kAllReduce, 128);
  EXPECT_EQ(Show(plan), "staged f32 #0[0+32]@0 =128 | staged f32 #0[32+8]@0 #1@64 =80");
  ExpectValidPlan(tensors, kAllReduce, 128, plan);
}

TEST(TransferPlan, ThePlanIsStableAndConservesEveryElement) {
  // A deterministic mix of dtypes and sizes, from empty to several chunks.
  const DType types[] = {DType::kFloat32, DType::kBFloat16, DType::kInt64, DType::kUint8,
                         DType::kFloat16, DType::kFloat64,  DType::kInt8,  DType::kInt32};
  const int64_t sizes[] = {0, 1, 7, 63, 64, 65, 500, 1023, 1024, 4097, 20000};
  std::vector<TensorMeta> tensors;
  for (int i = 0; i < 60; ++i) tensors.push_back(Meta(types[i % 8], sizes[(i * 7) % 11]));
  for (TransferKind kind : {kBroadcast, kAllReduce}) {
    for (int64_t chunk : {64, 100, 1024, 4096, 1 << 20}) {
      SCOPED_TRACE(absl::StrCat(kind == kBroadcast ? "broadcast" : "all-reduce", " chunk ", chunk));
      const std::vector<Transfer> plan = PlanTransfers(tensors, kind, chunk);
      ExpectValidPlan(tensors, kind, chunk, plan);
      EXPECT_EQ(Show(PlanTransfers(tensors, kind, chunk)), Show(plan));
      // Direct slices appear in tensor order, and so do the staged pieces of each wire type.
      std::map<std::pair<bool, DType>, std::pair<int, int64_t>> last;
      for (const Transfer& t : plan) {
        for (const Transfer::Piece& p : t.pieces) {
          const std::pair<bool, DType> stream(t.staged, t.staged ? t.wire : DType::kOther);
          const std::pair<int, int64_t> at(p.index, p.first);
          if (auto it = last.find(stream); it != last.end()) {
            EXPECT_LT(it->second, at);
          }
          last[stream] = at;
        }
      }
    }
  }
}

TEST(TransferPlan, ReduceWireTypesAndSizes) {
  EXPECT_EQ(ReduceWireType(DType::kBFloat16), DType::kFloat32);
  EXPECT_EQ(ReduceWireType(DType::kFloat16), DType::kFloat16);
  EXPECT_EQ(ReduceWireType(DType::kInt8), DType::kInt8);
  EXPECT_EQ(ReduceWireType(DType::kOther), DType::kOther);
  EXPECT_EQ(DTypeSize(DType::kBFloat16), 2);
  EXPECT_EQ(DTypeSize(DType::kInt64), 8);
  EXPECT_EQ(DTypeSize(DType::kOther), 0);
  EXPECT_EQ(AlignStaging(0), 0);
  EXPECT_EQ(AlignStaging(1), 64);
  EXPECT_EQ(AlignStaging(64), 64);
  EXPECT_EQ(AlignStaging(65), 128);
}

}  // namespace
}  // namespace troupe::collective::internal
