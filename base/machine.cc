#include "base/machine.h"

#include <dlfcn.h>
#include <sched.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace troupe {
namespace {

// CUDA runtime entry points called through dlsym; signatures from cuda_runtime_api.h with the
// enum return type as int, so no CUDA header is needed.
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

int64_t MeminfoBytes(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, key + ":")) {
      return std::strtoll(line.c_str() + key.size() + 1, nullptr, 10) * 1024;
    }
  }
  return 0;
}

}  // namespace

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

int UsableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

int64_t TotalMemoryBytes() { return MeminfoBytes("MemTotal"); }
int64_t AvailableMemoryBytes() { return MeminfoBytes("MemAvailable"); }

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

}  // namespace troupe
