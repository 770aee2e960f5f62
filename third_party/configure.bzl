"""Repository rules that locate LibTorch and CUDA/NCCL on the build machine.

libtorch_configure: `$LIBTORCH` (an unpacked libtorch distribution: include/, lib/), else Debian's
  libtorch-dev under /usr. Produces @libtorch//:libtorch and @libtorch//:config.bzl with
  TORCH_HAS_CUDA, so a user with a CUDA LibTorch on a GPU box builds the same tree.
cuda_configure: `$CUDA_HOME`, else /usr/local/cuda, else none (`CUDA_HOME=none` forces none). Produces @local_cuda//:cudart,
  @local_cuda//:nccl and @local_cuda//:defs.bzl with CUDA_FOUND and NVCC (path to nvcc).

Both re-run when the environment variable they read changes.
"""

_DEBIAN_LIBDIR = "/usr/lib/x86_64-linux-gnu"

def _libtorch_configure_impl(ctx):
    root = ctx.os.environ.get("LIBTORCH", "")
    if root:
        root = root.rstrip("/")
        if not ctx.path(root + "/include/torch").exists:
            fail("LIBTORCH=%s does not look like a libtorch distribution (no include/torch)" % root)
        ctx.symlink(root + "/include", "include")
        includes = ["include", "include/torch/csrc/api/include"]
        hdrs = 'glob(["include/**"])'
        libdir = root + "/lib"
        has_cuda = ctx.path(libdir + "/libtorch_cuda.so").exists
        origin = "LIBTORCH=" + root
    else:
        if not ctx.path("/usr/include/torch/csrc/api/include/torch/torch.h").exists:
            # Leave a target that fails loudly only if something actually links LibTorch.
            ctx.file("BUILD.bazel", """
package(default_visibility = ["//visibility:public"])
cc_library(
    name = "libtorch",
    linkopts = ["-l__libtorch_not_found__set_LIBTORCH_or_run_tools_install_deps_sh"],
)
""")
            ctx.file("config.bzl", "TORCH_FOUND = False\nTORCH_HAS_CUDA = False\nTORCH_ORIGIN = 'none'\n")
            return
        # Debian: ATen/, c10/, torch/ live in /usr/include (found by default); the C++ frontend's
        # headers sit under torch/csrc/api/include, which Bazel can only add through a symlink.
        ctx.symlink("/usr/include/torch/csrc/api/include", "api_include")
        includes = ["api_include"]
        hdrs = 'glob(["api_include/**"])'
        libdir = _DEBIAN_LIBDIR
        has_cuda = False
        origin = "debian:" + _DEBIAN_LIBDIR

    libs = ["-ltorch", "-ltorch_cpu", "-lc10"]
    if has_cuda:
        libs = ["-ltorch", "-ltorch_cpu", "-ltorch_cuda", "-lc10", "-lc10_cuda"]
    # push-state/pop-state: LibTorch's libraries must be linked even when nothing references them
    # directly (its operators register themselves), without changing --as-needed for the
    # libraries that follow on the command line.
    linkopts = ["-L" + libdir, "-Wl,-rpath," + libdir, "-Wl,--push-state,--no-as-needed"] + libs + [
        "-Wl,--pop-state",
        "-lprotobuf",
        "-lglog",
        "-lgflags",
        "-pthread",
    ]
    ctx.file("BUILD.bazel", """
package(default_visibility = ["//visibility:public"])

# LibTorch from {origin}.
cc_library(
    name = "libtorch",
    hdrs = {hdrs},
    includes = {includes},
    defines = [
        "USE_C10D_GLOO",
        "USE_DISTRIBUTED",
        "USE_RPC",
        "USE_TENSORPIPE",
    ],
    linkopts = {linkopts},
)
""".format(origin = origin, hdrs = hdrs, includes = repr(includes), linkopts = repr(linkopts)))
    ctx.file("config.bzl", "TORCH_FOUND = True\nTORCH_HAS_CUDA = %s\nTORCH_ORIGIN = %r\n" % (has_cuda, origin))

libtorch_configure = repository_rule(
    implementation = _libtorch_configure_impl,
    environ = ["LIBTORCH"],
    local = True,
)

def _cuda_configure_impl(ctx):
    # CUDA_HOME=none hides CUDA entirely (how CI proves the default build needs none).
    env_home = ctx.os.environ.get("CUDA_HOME", "")
    candidates = []
    if env_home and env_home != "none":
        candidates.append(env_home.rstrip("/"))
    if env_home != "none":
        candidates.append("/usr/local/cuda")
    home = ""
    for c in candidates:
        if ctx.path(c + "/bin/nvcc").exists:
            home = c
            break
    if not home:
        ctx.file("BUILD.bazel", """
package(default_visibility = ["//visibility:public"])
cc_library(name = "cuda_headers")
cc_library(name = "cudart")
cc_library(name = "nccl")
""")
        ctx.file("defs.bzl", "CUDA_FOUND = False\nNVCC = ''\nCUDA_HOME = ''\nNCCL_FOUND = False\n")
        return

    ctx.symlink(home + "/include", "include")
    libdir = home + "/lib64"
    nccl_found = (ctx.path(libdir + "/libnccl.so").exists or
                  ctx.path(_DEBIAN_LIBDIR + "/libnccl.so").exists)
    ctx.file("BUILD.bazel", """
package(default_visibility = ["//visibility:public"])

# CUDA from {home}.
cc_library(
    name = "cuda_headers",
    hdrs = glob(["include/**"]),
    includes = ["include"],
)

cc_library(
    name = "cudart",
    linkopts = ["-L{libdir}", "-Wl,-rpath,{libdir}", "-lcudart"],
    deps = [":cuda_headers"],
)

cc_library(
    name = "nccl",
    linkopts = ["-L{libdir}", "-Wl,-rpath,{libdir}", "-lnccl"],
    deps = [":cuda_headers"],
)
""".format(home = home, libdir = libdir))
    ctx.file("defs.bzl", "CUDA_FOUND = True\nNVCC = %r\nCUDA_HOME = %r\nNCCL_FOUND = %s\n" % (
        home + "/bin/nvcc",
        home,
        nccl_found,
    ))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_HOME"],
    local = True,
)
