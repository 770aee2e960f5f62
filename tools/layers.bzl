"""Who may depend on each layer of troupe: the visibility lists of the BUILD packages.

The layer order (README "Layers"): proto < base < metrics, models/kernels/trainers/rollout/reward,
tasks, data < runtime < actors < recipes < cli. A package's targets are visible to its own layer and the
layers above it, and to tests/, bench/ and examples/, so a dependency that points down the order
builds and one that points up fails to build with "target ... is not visible". tools/check_layers.sh
checks the same order on the whole library graph (transitively) and probes that a misplaced
dependency really fails.

The runtime sits above the libraries but knows no application: models/, trainers/, rollout/,
kernels/ and metrics/ are not visible to it (APP_LIBRARY_USERS); what it needs of them is injected
by the actors (the compute-thread setting, the dashboard's metric schema).
"""

_ABOVE_CLI = [
    "//bench:__subpackages__",
    "//examples:__subpackages__",
    "//tests:__subpackages__",
]

CLI_USERS = ["//cli:__subpackages__"] + _ABOVE_CLI

RECIPES_USERS = ["//recipes:__subpackages__"] + CLI_USERS

# Within recipes/, the building blocks (recipes/rl, recipes/job_spec, recipe.h: RECIPES_USERS)
# sit below the recipes, and recipes/sft (the SFT recipe, and the initial policy whose
# model.init: sft the online recipes run) below recipes/rm and recipes/online, which do not use
# each other. recipes/job_spec's tests link every recipe (their rules and goldens), hence its
# package.
_RECIPE_TESTERS = ["//recipes/job_spec:__pkg__"] + CLI_USERS

RECIPES_SFT_USERS = [
    "//recipes/sft:__subpackages__",
    "//recipes/rm:__subpackages__",
    "//recipes/online:__subpackages__",
] + _RECIPE_TESTERS

# recipes/rm, recipes/online: only themselves and what runs recipes.
def recipe_users(package):
    return ["//recipes/%s:__subpackages__" % package] + _RECIPE_TESTERS

ACTORS_USERS = ["//actors:__subpackages__"] + RECIPES_USERS

RUNTIME_USERS = ["//runtime:__subpackages__"] + ACTORS_USERS

# The libraries between base and the runtime may use each other (trainers use models, tasks use
# reward, ...); tools/check_layers.sh keeps them off the runtime and everything above it.
_LIBRARIES = [
    "//data:__subpackages__",
    "//kernels:__subpackages__",
    "//metrics:__subpackages__",
    "//models:__subpackages__",
    "//reward:__subpackages__",
    "//rollout:__subpackages__",
    "//tasks:__subpackages__",
    "//trainers:__subpackages__",
]

# data/, reward/, tasks/: visible to the runtime too.
LIBRARY_USERS = _LIBRARIES + RUNTIME_USERS

# models/, trainers/, rollout/, kernels/, metrics/: the application's libraries, which the runtime
# must not reach (not even its tests); the actors and everything above use them.
APP_LIBRARY_USERS = _LIBRARIES + ACTORS_USERS

BASE_USERS = ["//base:__subpackages__"] + LIBRARY_USERS
