// How a worker process sets its compute thread pools (ActorSpec.compute_threads), injected by the
// application as its graph schema is (runtime/dashboard/graph_schema.h): the runtime knows the
// setting, not the library whose pools it sizes. troupe's actors register LibTorch's and
// OpenBLAS's (actors/compute_threads_setter.cc, with models/compute_threads.h) at static
// initialisation; a program that registers none cannot honour the setting, and its workers refuse
// a spec that asks for it (runtime/cluster/worker_main.cc).
//
// Example:
//   void SetMyPools(int threads) { ... }
//   static const bool registered = (RegisterComputeThreadsSetter(&SetMyPools), true);
//
// Thread-safety: register at static initialisation (or before any worker starts); the registered
// setter is then read from any thread.
#ifndef TROUPE_RUNTIME_CLUSTER_COMPUTE_THREADS_HOOK_H_
#define TROUPE_RUNTIME_CLUSTER_COMPUTE_THREADS_HOOK_H_

namespace troupe {

// Sets this process's compute thread pools to `threads` (> 0).
using ComputeThreadsSetter = void (*)(int threads);

// Makes `setter` the registered one (a later registration replaces it).
void RegisterComputeThreadsSetter(ComputeThreadsSetter setter);

// The registered setter, or nullptr when nothing registered one.
ComputeThreadsSetter RegisteredComputeThreadsSetter();

}  // namespace troupe

#endif  // TROUPE_RUNTIME_CLUSTER_COMPUTE_THREADS_HOOK_H_
