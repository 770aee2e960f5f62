"""troupe_proto_library: C++ (and optionally gRPC) code from .proto files with Debian's protoc.

Bazel 4.2.3 offline cannot fetch rules_proto, so generation is a genrule around the system protoc
and grpc_cpp_plugin. Imports are resolved from the workspace root, e.g. `import "proto/core.proto";`
and generated headers are included as `#include "proto/core.pb.h"`.
"""

def troupe_proto_library(name, srcs, deps = [], grpc = False, visibility = None):
    """Generates <name> (a cc_library) from srcs.

    Args:
      name: the cc_library name.
      srcs: .proto files in this package.
      deps: other troupe_proto_library targets whose .proto files srcs import.
      grpc: also run grpc_cpp_plugin (for files that declare services).
      visibility: visibility of the cc_library.
    """
    outs = []
    for src in srcs:
        base = src[:-len(".proto")]
        outs += [base + ".pb.h", base + ".pb.cc"]
        if grpc:
            outs += [base + ".grpc.pb.h", base + ".grpc.pb.cc"]

    dep_protos = [d + "_protos" for d in deps]
    native.filegroup(
        name = name + "_protos",
        srcs = srcs + dep_protos,
        visibility = visibility,
    )

    cmd = "protoc -I. --cpp_out=$(GENDIR)"
    if grpc:
        cmd += " --grpc_out=$(GENDIR) --plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin"
    cmd += " " + " ".join(["$(location %s)" % s for s in srcs])

    native.genrule(
        name = name + "_gen",
        srcs = srcs + dep_protos,
        outs = outs,
        cmd = cmd,
        message = "protoc " + " ".join(srcs),
    )

    lib_deps = ["//third_party:protobuf"] + deps
    if grpc:
        lib_deps.append("//third_party:grpc")
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        deps = lib_deps,
        visibility = visibility,
    )
