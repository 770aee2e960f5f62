// What the LibTorch this program links was built with, for the checks that refuse what the build
// cannot run (a GPU reservation for a model actor, recipes/job_spec) without compiling or linking
// LibTorch themselves: the answer comes from @libtorch's configuration (third_party/configure.bzl,
// TORCH_HAS_CUDA: whether the distribution has libtorch_cuda, which the build then links).
//
// Thread-safety: pure functions.
#ifndef TROUPE_MODELS_TORCH_BUILD_H_
#define TROUPE_MODELS_TORCH_BUILD_H_

namespace troupe {
namespace models {

// Whether the linked LibTorch has CUDA (Debian's libtorch-dev has not; a $LIBTORCH distribution
// with libtorch_cuda has). Says nothing of whether a GPU is present: the node agents count those.
bool LibTorchBuiltWithCuda();

}  // namespace models
}  // namespace troupe

#endif  // TROUPE_MODELS_TORCH_BUILD_H_
