#include "cli/doctor.h"

#include <dlfcn.h>

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

TEST(Doctor, GpuProbeTreatsAnyCudaErrorAsNoGpu) {
  GpuProbe g = ProbeGpus();
  if (g.device_count == 0) {
    // Either no runtime at all or an error from cudaGetDeviceCount: both must be explained.
    EXPECT_FALSE(g.error.empty());
  } else {
    EXPECT_TRUE(g.error.empty()) << g.error;
    EXPECT_TRUE(g.runtime_loaded);
  }
  if (g.nccl_loaded) EXPECT_GT(g.nccl_version, 0);
}

}  // namespace
}  // namespace troupe
