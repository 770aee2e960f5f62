"""builtin_reward: the library and the test of one reward built into troupe (reward/builtin/)."""

# What every built-in reward's library uses: its config, the registry it registers with, Abseil
# and JSON.
_REWARD_DEPS = [
    "//base:status_macros",
    "//reward:reward_config",
    "//reward:reward_registry",
    "//third_party:absl",
    "//third_party:nlohmann_json",
]

def builtin_reward(name, deps = []):
    """Declares cc_library <name> and cc_test <name>_test for the reward in <name>.{h,cc}.

    The library registers the reward with TROUPE_REGISTER_REWARD, so it is alwayslink; both
    targets take the package's default visibility. The test (<name>_test.cc, size small) links
    the library, the registry and gtest_main.

    Args:
      name: the reward's file stem and library name ("math" -> math.h, math.cc, math_test.cc).
      deps: what the library needs beyond the registry, its config, Abseil and JSON.
    """
    native.cc_library(
        name = name,
        srcs = [name + ".cc"],
        hdrs = [name + ".h"],
        deps = deps + _REWARD_DEPS,
        alwayslink = True,
    )
    native.cc_test(
        name = name + "_test",
        size = "small",
        srcs = [name + "_test.cc"],
        deps = [
            ":" + name,
            "//reward:reward_registry",
            "//third_party:gtest_main",
        ],
    )
