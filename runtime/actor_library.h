// Actor types from shared libraries: user code that reaches a troupe program without rebuilding
// it, as Ray's C++ workers load user code from a code search path.
//
// A library is built against troupe's headers only and registers its types the usual way:
//
//   // my_reward.cc, built with -shared -fPIC (examples/custom_actor shows the Bazel rule)
//   class MyReward : public troupe::Actor { ... Score(const proto::ScoreRequest&) ... };
//   TROUPE_REGISTER_ACTOR(MyReward, Score);
//
//   TROUPE_ASSIGN_OR_RETURN(std::vector<std::string> types, LoadActorLibrary("libmy_reward.so"));
//
// Its references to troupe (the registry, protobuf messages, ...) resolve against the program
// that loads it, which therefore exports its symbols (linked with -rdynamic, as `troupe` is):
// one registry, one copy of each message type. A library must not link its own copy of troupe's
// libraries.
//
// Thread-safety: loads are serialised; safe to call from any thread.
#ifndef TROUPE_RUNTIME_ACTOR_LIBRARY_H_
#define TROUPE_RUNTIME_ACTOR_LIBRARY_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace troupe {

// Loads the shared library at `path` (dlopen, all symbols bound now) and returns the actor types
// it registered, sorted. Loading the same file again (by resolved path) returns the same types
// without running it twice. Errors name the path: NOT_FOUND for a missing file,
// INVALID_ARGUMENT for a directory, a file dlopen refuses (with its reason, e.g. an undefined
// symbol), a library that registers no actor type, or a registration that fails (a type name
// already taken); the library stays loaded then, but no type of it is used.
absl::StatusOr<std::vector<std::string>> LoadActorLibrary(const std::string& path);

}  // namespace troupe

#endif  // TROUPE_RUNTIME_ACTOR_LIBRARY_H_
