// What this machine offers: CPUs, memory and GPUs, probed without LibTorch or a CUDA link.
//
// CUDA and NCCL are loaded with dlopen, so binaries run where they are absent; any CUDA error
// counts as "no GPU" (with no driver, cudaGetDeviceCount returns error 35, not 100). Used by the
// node agent (resources it registers) and by `troupe doctor`.
//
// Thread-safety: the functions are thread-safe.
#ifndef TROUPE_BASE_MACHINE_H_
#define TROUPE_BASE_MACHINE_H_

#include <cstdint>
#include <string>

namespace troupe {

struct GpuProbe {
  bool runtime_loaded = false;  // libcudart could be dlopened
  std::string runtime_path;     // which libcudart
  int runtime_version = 0;      // cudaRuntimeGetVersion, e.g. 13000
  int driver_version = 0;       // cudaDriverGetVersion (0 = no driver)
  int device_count = 0;         // devices that respond; 0 on any error
  std::string error;            // e.g. "cudaGetDeviceCount returned 35 (...)"
  bool nccl_loaded = false;
  std::string nccl_path;
  int nccl_version = 0;  // ncclGetVersion, e.g. 22809
};

// Probes libcudart and libnccl ($CUDA_HOME/lib64, /usr/local/cuda/lib64, then the loader's path).
GpuProbe ProbeGpus();

// CPUs this process may run on (sched_getaffinity), at least 1.
int UsableCpus();

// MemTotal / MemAvailable from /proc/meminfo, in bytes (0 if unreadable).
int64_t TotalMemoryBytes();
int64_t AvailableMemoryBytes();

// "model name" of the first CPU in /proc/cpuinfo, or "unknown".
std::string CpuModel();

}  // namespace troupe

#endif  // TROUPE_BASE_MACHINE_H_
