#include "models/compute_threads.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <dlfcn.h>

namespace troupe::models {

bool SetComputeThreads(int threads) {
  if (threads <= 0) return false;
  at::set_num_threads(threads);
  // LibTorch loads BLAS lazily (Debian's libblas.so.3 alternative): make it resolve first.
  (void)at::mm(at::ones({2, 2}), at::ones({2, 2}));
  using SetThreadsFn = void (*)(int);
  auto set_blas_threads =
      reinterpret_cast<SetThreadsFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (set_blas_threads == nullptr) return false;
  set_blas_threads(threads);
  return true;
}

int IntraOpThreads() { return at::get_num_threads(); }

}  // namespace troupe::models
