// A minimal worker process for the multi-process transport test: hosts two ProcessCounters
// (<actor_id> and <actor_id>-sleeper, so a long call to one does not hold up the other), serves
// them on 127.0.0.1 (port 0 = any), prints "PORT <n>" on stdout, and runs until its stdin closes
// (so it never outlives the test that started it) or it is killed.
//
// Usage: transport_worker <token> <actor_id>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "runtime/actor_system.h"
#include "runtime/transport/transport_server.h"
#include "tests/transport/test_actors.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <token> <actor_id>\n", argv[0]);
    return 2;
  }
  const std::string token = argv[1], actor_id = argv[2];
  troupe::ActorSystem system({.num_threads = 1});
  auto server =
      troupe::transport::ActorTransportServer::Start({.address = "127.0.0.1:0", .token = token});
  if (!server.ok()) {
    std::fprintf(stderr, "transport_worker: %s\n", server.status().ToString().c_str());
    return 1;
  }
  for (const std::string& id : {actor_id, actor_id + "-sleeper"}) {
    // The sleeper gets a thread of its own so that its long calls never starve the other.
    auto actor =
        system.Spawn<troupe::transport_test::ProcessCounter>({.dedicated_thread = id != actor_id});
    if (!actor.ok()) {
      std::fprintf(stderr, "transport_worker: %s\n", actor.status().ToString().c_str());
      return 1;
    }
    if (absl::Status s = (*server)->Register(id, *actor); !s.ok()) {
      std::fprintf(stderr, "transport_worker: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  std::printf("PORT %d\n", (*server)->port());
  std::fflush(stdout);
  char buf[256];
  while (read(STDIN_FILENO, buf, sizeof(buf)) > 0) {
  }
  (*server)->Shutdown();
  system.Shutdown();
  return 0;
}
