// `troupe doctor`: what this machine gives troupe, each line a real probe or measurement.
//
// Probes LibTorch (version, CUDA support, which BLAS library is actually mapped into the process
// and a timed float32 matmul), the CPU and memory available, and CUDA/NCCL. CUDA and NCCL are
// loaded with dlopen so the troupe binary runs on machines without them; any CUDA error counts as
// "no GPU" (with no driver, cudaGetDeviceCount returns error 35, not 100).
//
// Thread-safety: the functions are safe to call from one thread at a time (they run LibTorch ops
// and dlopen libraries).
#ifndef TROUPE_CLI_DOCTOR_H_
#define TROUPE_CLI_DOCTOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/machine.h"

namespace troupe {

struct BlasInfo {
  // Resolved path of the BLAS shared object LibTorch's matmul loaded (from /proc/self/maps),
  // empty if none is mapped.
  std::string library_path;
  // "OpenBLAS (pthread)", "OpenBLAS (serial)", "OpenBLAS (openmp)", "reference BLAS", "MKL",
  // "BLIS", or "unknown".
  std::string name;
  // openblas_get_config() when OpenBLAS is loaded; empty otherwise.
  std::string config;
  bool is_reference() const { return name == "reference BLAS"; }
};

struct MatmulResult {
  int64_t n = 0;         // square matrices n x n, float32
  int iterations = 0;    // timed iterations
  double gflops = 0.0;   // 2 n^3 * iterations / elapsed
  double seconds = 0.0;  // elapsed time of the timed iterations
};

// Runs a float32 n x n matmul in LibTorch, warm-up first, then repeats for about
// `min_seconds`; returns the achieved GFLOP/s. This is the roofline later benchmarks compare to.
MatmulResult MeasureMatmulGflops(int64_t n = 1024, double min_seconds = 0.5);

// Which BLAS the process has mapped. Call after at least one matmul (LibTorch loads BLAS lazily
// through the libblas.so.3 alternative on Debian).
BlasInfo DetectBlas();

// LibTorch's version string and whether it was built with CUDA / sees a CUDA device.
std::string TorchVersion();
bool TorchHasCuda();

// Prints the full report to stdout; returns the process exit code (0, or 1 if a probe that
// troupe needs failed, e.g. the reference BLAS is in use).
int RunDoctor(bool json);

}  // namespace troupe

#endif  // TROUPE_CLI_DOCTOR_H_
