#include "models/torch_build.h"

#ifndef TROUPE_TORCH_HAS_CUDA
#error "TROUPE_TORCH_HAS_CUDA is set by models/BUILD.bazel from @libtorch//:config.bzl"
#endif

namespace troupe {
namespace models {

bool LibTorchBuiltWithCuda() { return TROUPE_TORCH_HAS_CUDA != 0; }

}  // namespace models
}  // namespace troupe
