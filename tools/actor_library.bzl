"""troupe_actor_library: a shared library of actor types that a troupe program loads at run time.

The library is compiled against troupe's headers only: its references to troupe (the actor
registry, protobuf messages, Abseil) resolve against the program that loads it, which exports its
symbols (`troupe` is linked with -rdynamic). Linking troupe's libraries into it would give it a
second registry and second copies of the message types. See runtime/actor_library.h.
"""

def _headers_only_impl(ctx):
    merged = cc_common.merge_cc_infos(cc_infos = [d[CcInfo] for d in ctx.attr.deps])
    return [CcInfo(compilation_context = merged.compilation_context)]

# The headers (and defines, include paths) of `deps`, without their code or link flags.
headers_only = rule(
    implementation = _headers_only_impl,
    attrs = {"deps": attr.label_list(providers = [CcInfo])},
)

def troupe_actor_library(name, srcs, deps = [], visibility = None, testonly = False):
    """Builds lib<name>.so from srcs, compiled against the headers of deps.

    Args:
      name: the library's name; the file is lib<name>.so.
      srcs: C++ sources that register actor types (TROUPE_REGISTER_ACTOR).
      deps: troupe targets whose headers srcs include (//runtime:actor_system, proto libraries).
      visibility: visibility of the .so target.
      testonly: for libraries used only by tests.
    """
    headers_only(
        name = name + "_headers",
        deps = deps,
        testonly = testonly,
    )
    native.cc_binary(
        name = "lib" + name + ".so",
        srcs = srcs,
        deps = [":" + name + "_headers"],
        linkshared = True,
        visibility = visibility,
        testonly = testonly,
    )
