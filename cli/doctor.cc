#include "cli/doctor.h"

#include <dlfcn.h>
#include <sched.h>
#include <sys/utsname.h>
#include <torch/torch.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>
#include <caf/config.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/version.h"
#include "google/protobuf/stubs/common.h"
#include "nlohmann/json.hpp"

namespace troupe {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

MatmulResult MeasureMatmulGflops(int64_t n, double min_seconds) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  torch::Tensor a = torch::randn({n, n});
  torch::Tensor b = torch::randn({n, n});
  torch::Tensor c = torch::mm(a, b);  // warm-up: loads BLAS, spins up its threads
  MatmulResult r;
  r.n = n;
  const auto start = Clock::now();
  double elapsed = 0.0;
  do {
    torch::mm_out(c, a, b);
    ++r.iterations;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < min_seconds && r.iterations < 10000);
  r.seconds = elapsed;
  r.gflops = 2.0 * n * n * n * r.iterations / elapsed / 1e9;
  return r;
}

BlasInfo DetectBlas() {
  BlasInfo info;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = line.substr(slash);
    const bool blas = absl::StrContains(path, "libblas") ||
                      absl::StrContains(path, "libopenblas") ||
                      absl::StrContains(path, "libmkl_") || absl::StrContains(path, "libblis");
    if (!blas) continue;
    char resolved[4096];
    info.library_path = realpath(path.c_str(), resolved) != nullptr ? resolved : path;
    break;
  }
  const std::string& p = info.library_path;
  if (p.empty()) {
    info.name = "unknown";
  } else if (absl::StrContains(p, "openblas-pthread")) {
    info.name = "OpenBLAS (pthread)";
  } else if (absl::StrContains(p, "openblas-openmp")) {
    info.name = "OpenBLAS (openmp)";
  } else if (absl::StrContains(p, "openblas-serial")) {
    info.name = "OpenBLAS (serial)";
  } else if (absl::StrContains(p, "openblas")) {
    info.name = "OpenBLAS";
  } else if (absl::StrContains(p, "mkl")) {
    info.name = "MKL";
  } else if (absl::StrContains(p, "blis")) {
    info.name = "BLIS";
  } else if (absl::StrContains(p, "/blas/")) {
    info.name = "reference BLAS";
  } else {
    info.name = "unknown";
  }
  using ConfigFn = char* (*)();
  if (auto fn = reinterpret_cast<ConfigFn>(dlsym(RTLD_DEFAULT, "openblas_get_config"))) {
    info.config = fn();
  }
  return info;
}

std::string TorchVersion() { return TORCH_VERSION; }

bool TorchHasCuda() { return torch::cuda::is_available(); }

int RunDoctor(bool json) {
  int exit_code = 0;
  nlohmann::json j;
  std::vector<std::pair<std::string, std::string>> lines;
  auto add = [&lines](const std::string& k, const std::string& v) { lines.emplace_back(k, v); };

  struct utsname un {};
  uname(&un);
  add("troupe",
      absl::StrCat(kTroupeVersion, " (", un.sysname, " ", un.release, " ", un.machine, ")"));
  j["troupe_version"] = kTroupeVersion;

  // CPU and memory.
  const int hw = static_cast<int>(std::thread::hardware_concurrency());
  const int usable = UsableCpus();
  add("cpu", absl::StrCat(usable, " usable of ", hw, " logical CPUs, ", CpuModel()));
  j["cpus"] = usable;
  const int64_t total = TotalMemoryBytes();
  const int64_t avail = AvailableMemoryBytes();
  add("memory", absl::StrFormat("%.1f GiB total, %.1f GiB available", total / 1073741824.0,
                                avail / 1073741824.0));
  j["memory_bytes"] = total;
  j["memory_available_bytes"] = avail;

  // LibTorch, BLAS and a matmul roofline.
  const bool torch_cuda = TorchHasCuda();
  add("libtorch", absl::StrCat(TorchVersion(), ", ", at::get_num_threads(), " intra-op threads, ",
                               torch_cuda ? "CUDA available" : "no CUDA (CPU build or no device)"));
  j["libtorch_version"] = TorchVersion();
  j["libtorch_cuda"] = torch_cuda;
  const MatmulResult mm = MeasureMatmulGflops();
  const BlasInfo blas = DetectBlas();
  std::string blas_line = absl::StrCat(
      blas.name, " (", blas.library_path.empty() ? "not mapped" : blas.library_path, ")");
  if (!blas.config.empty()) absl::StrAppend(&blas_line, " ", blas.config);
  add("blas", blas_line);
  if (blas.is_reference()) {
    add("WARN",
        "LibTorch is using the reference BLAS (~8x slower): run tools/install_deps.sh "
        "(installs libopenblas0-pthread)");
    exit_code = 1;
  }
  j["blas"] = blas.name;
  j["blas_library"] = blas.library_path;
  add("matmul", absl::StrFormat("%.1f GFLOP/s (float32 %dx%d, %d iterations in %.2f s)", mm.gflops,
                                mm.n, mm.n, mm.iterations, mm.seconds));
  j["matmul_gflops"] = mm.gflops;

  // CUDA and NCCL.
  const GpuProbe gpu = ProbeGpus();
  if (gpu.runtime_loaded) {
    add("cuda",
        absl::StrFormat("runtime %d.%d (%s), driver %s", gpu.runtime_version / 1000,
                        (gpu.runtime_version % 1000) / 10, gpu.runtime_path,
                        gpu.driver_version == 0 ? "none" : absl::StrCat(gpu.driver_version)));
  } else {
    add("cuda", gpu.error);
  }
  add("gpus", gpu.device_count > 0 ? absl::StrCat(gpu.device_count, " responding")
                                   : absl::StrCat("0 (", gpu.error, ")"));
  add("nccl", gpu.nccl_loaded ? absl::StrFormat("%d.%d.%d (%s)", gpu.nccl_version / 10000,
                                                (gpu.nccl_version / 100) % 100,
                                                gpu.nccl_version % 100, gpu.nccl_path)
                              : "not found");
  j["cuda_runtime_version"] = gpu.runtime_version;
  j["cuda_driver_version"] = gpu.driver_version;
  j["gpus"] = gpu.device_count;
  j["gpu_error"] = gpu.error;
  j["nccl_version"] = gpu.nccl_version;

  // The libraries troupe itself is built on.
  add("libraries",
      absl::StrCat("CAF ", CAF_MAJOR_VERSION, ".", CAF_MINOR_VERSION, ".", CAF_PATCH_VERSION,
                   ", gRPC ", grpc::Version(), ", protobuf ",
                   google::protobuf::internal::VersionString(GOOGLE_PROTOBUF_VERSION)));

  if (json) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    for (const auto& [k, v] : lines) std::printf("%-10s %s\n", k.c_str(), v.c_str());
  }
  return exit_code;
}

}  // namespace troupe
