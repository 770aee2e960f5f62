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

// CUDA runtime entry points we call through dlsym; signatures from cuda_runtime_api.h, with the
// enum return type as int so no CUDA header is needed.
using CudaGetDeviceCountFn = int (*)(int*);
using CudaVersionFn = int (*)(int*);
using CudaGetErrorStringFn = const char* (*)(int);
using NcclGetVersionFn = int (*)(int*);

void* OpenFirst(const std::vector<std::string>& candidates, std::string* path) {
  for (const std::string& c : candidates) {
    if (void* h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      *path = c;
      return h;
    }
  }
  return nullptr;
}

std::vector<std::string> CudaLibCandidates(const std::vector<std::string>& names) {
  std::vector<std::string> dirs;
  if (const char* home = std::getenv("CUDA_HOME"); home != nullptr && *home != '\0') {
    dirs.push_back(absl::StrCat(home, "/lib64/"));
  }
  dirs.push_back("/usr/local/cuda/lib64/");
  dirs.push_back("");  // the loader's own search path
  std::vector<std::string> out;
  for (const std::string& d : dirs) {
    for (const std::string& n : names) out.push_back(d + n);
  }
  return out;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Value in kB of a /proc/meminfo field, or -1.
int64_t MeminfoKb(const std::string& meminfo, const std::string& key) {
  size_t pos = meminfo.find(key + ":");
  if (pos == std::string::npos) return -1;
  return std::strtoll(meminfo.c_str() + pos + key.size() + 1, nullptr, 10);
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, "model name")) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown";
}

int AffinityCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return -1;
  return CPU_COUNT(&set);
}

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

GpuProbe ProbeGpus() {
  GpuProbe g;
  void* rt = OpenFirst(CudaLibCandidates({"libcudart.so", "libcudart.so.13", "libcudart.so.12"}),
                       &g.runtime_path);
  if (rt == nullptr) {
    g.error = "libcudart not found (no CUDA toolkit)";
  } else {
    g.runtime_loaded = true;
    auto count_fn = reinterpret_cast<CudaGetDeviceCountFn>(dlsym(rt, "cudaGetDeviceCount"));
    auto rt_ver = reinterpret_cast<CudaVersionFn>(dlsym(rt, "cudaRuntimeGetVersion"));
    auto drv_ver = reinterpret_cast<CudaVersionFn>(dlsym(rt, "cudaDriverGetVersion"));
    auto err_str = reinterpret_cast<CudaGetErrorStringFn>(dlsym(rt, "cudaGetErrorString"));
    if (rt_ver != nullptr) rt_ver(&g.runtime_version);
    if (drv_ver != nullptr) drv_ver(&g.driver_version);
    if (count_fn == nullptr) {
      g.error = "libcudart has no cudaGetDeviceCount";
    } else {
      int n = 0;
      const int rc = count_fn(&n);
      if (rc != 0) {
        // Any error means "no usable GPU": 35 (insufficient driver) is what a machine without a
        // driver returns, 100 (no device) one with a driver and no card.
        g.error = absl::StrCat("cudaGetDeviceCount returned ", rc, " (",
                               err_str != nullptr ? err_str(rc) : "unknown error", ")");
      } else {
        g.device_count = n;
      }
    }
    // Device names through torch would need a CUDA LibTorch; the runtime's property struct
    // layout varies by version, so names come from torch when it has CUDA.
    if (g.device_count > 0 && torch::cuda::is_available()) {
      for (int i = 0; i < g.device_count; ++i) g.device_names.push_back(absl::StrCat("cuda:", i));
    }
  }
  void* nccl = OpenFirst(CudaLibCandidates({"libnccl.so.2", "libnccl.so"}), &g.nccl_path);
  if (nccl != nullptr) {
    g.nccl_loaded = true;
    if (auto ver = reinterpret_cast<NcclGetVersionFn>(dlsym(nccl, "ncclGetVersion"))) {
      ver(&g.nccl_version);
    }
  }
  return g;
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
  const int affinity = AffinityCpus();
  add("cpu", absl::StrCat(affinity, " usable of ", hw, " logical CPUs, ", CpuModel()));
  j["cpus"] = affinity;
  const std::string meminfo = ReadFile("/proc/meminfo");
  const int64_t total_kb = MeminfoKb(meminfo, "MemTotal");
  const int64_t avail_kb = MeminfoKb(meminfo, "MemAvailable");
  add("memory", absl::StrFormat("%.1f GiB total, %.1f GiB available", total_kb / 1048576.0,
                                avail_kb / 1048576.0));
  j["memory_bytes"] = total_kb * 1024;
  j["memory_available_bytes"] = avail_kb * 1024;

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
