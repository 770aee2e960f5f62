// SampleProbe: what a message says about the RL samples it carries, for the transport server's
// per-edge call statistics (transport_server.h) — injected, so that the runtime knows nothing of
// any application's message types.
//
// The application registers, per protobuf message type, a function that reads a parsed message
// and returns a SampleTally. The server runs the probe of every request it parses and every OK
// reply it sends (when their type has one) and adds the tally to the call's (actor, caller,
// method) totals. A message type carrying samples that another type also carries (a request and
// its reply, say) should be registered on one side only, or the samples count twice.
//
//   static const bool registered = [] {
//     RegisterSampleProbe("troupe.proto.GenerateReply", [](const google::protobuf::Message& m) {
//       const auto& r = static_cast<const proto::GenerateReply&>(m);
//       SampleTally t;  ... count r.groups() ...
//       t.version = r.weight_version();
//       return t;
//     });
//     return true;
//   }();
//
// Thread-safety: registration happens during static initialisation (before any server starts);
// lookups are read-only and run on any thread. Probes must be thread-safe and cheap (they run
// on the transport's threads, once per message: O(samples), no allocation needed).
#ifndef TROUPE_RUNTIME_TRANSPORT_SAMPLE_PROBE_H_
#define TROUPE_RUNTIME_TRANSPORT_SAMPLE_PROBE_H_

#include <cstdint>
#include <functional>
#include <string>

#include "google/protobuf/message.h"

namespace troupe::transport {

// The samples in one message.
struct SampleTally {
  int64_t samples = 0;             // samples carried
  int64_t policy_version_sum = 0;  // sum of their policy (weight) versions
  // The weight version the message reports as its sender's current one (a reply's
  // weight_version: the callee's loaded weights); -1 when it reports none.
  int64_t version = -1;
};

using SampleProbe = std::function<SampleTally(const google::protobuf::Message&)>;

// Makes `probe` the one for messages of full type name `message_type` (replacing an earlier one).
void RegisterSampleProbe(const std::string& message_type, SampleProbe probe);

// The probe registered for `message`'s type, or nullptr.
const SampleProbe* FindSampleProbe(const google::protobuf::Message& message);

}  // namespace troupe::transport

#endif  // TROUPE_RUNTIME_TRANSPORT_SAMPLE_PROBE_H_
