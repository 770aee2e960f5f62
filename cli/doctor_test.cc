#include "cli/doctor.h"

#include "gtest/gtest.h"

namespace troupe {
namespace {

TEST(Doctor, MatmulMeasurementIsPositiveAndCountsIterations) {
  MatmulResult r = MeasureMatmulGflops(/*n=*/128, /*min_seconds=*/0.05);
  EXPECT_EQ(r.n, 128);
  EXPECT_GE(r.iterations, 1);
  EXPECT_GE(r.seconds, 0.05);
  EXPECT_GT(r.gflops, 0.0);
  // The definition: 2 n^3 flops per iteration.
  EXPECT_NEAR(r.gflops, 2.0 * 128 * 128 * 128 * r.iterations / r.seconds / 1e9, 1e-6 * r.gflops);
}

TEST(Doctor, DetectsTheBlasLibraryMappedAfterAMatmul) {
  MeasureMatmulGflops(64, 0.0);
  BlasInfo blas = DetectBlas();
  ASSERT_FALSE(blas.library_path.empty()) << "no BLAS library mapped after a matmul";
  EXPECT_NE(blas.name, "unknown") << blas.library_path;
  // The install script puts the pthread OpenBLAS in place; the reference BLAS is a regression.
  EXPECT_FALSE(blas.is_reference()) << "LibTorch uses the reference BLAS at " << blas.library_path;
}

}  // namespace
}  // namespace troupe
