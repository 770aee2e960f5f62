#include "runtime/transport/sample_probe.h"

#include <utility>

#include "absl/container/flat_hash_map.h"

namespace troupe::transport {
namespace {

absl::flat_hash_map<std::string, SampleProbe>& Probes() {
  static auto* probes = new absl::flat_hash_map<std::string, SampleProbe>();
  return *probes;
}

}  // namespace

void RegisterSampleProbe(const std::string& message_type, SampleProbe probe) {
  Probes()[message_type] = std::move(probe);
}

const SampleProbe* FindSampleProbe(const google::protobuf::Message& message) {
  const auto& probes = Probes();
  if (probes.empty()) return nullptr;
  auto it = probes.find(message.GetDescriptor()->full_name());
  return it == probes.end() ? nullptr : &it->second;
}

}  // namespace troupe::transport
