// Tools for tests and benchmarks that play a hostile gRPC client: large request bodies that cost
// the sender almost no memory, raw calls with chosen metadata, a chosen source address, and the
// memory (RSS) of a process, so a test can check that a server refuses such calls without
// buffering them.
//
// Example:
//   grpc::ByteBuffer body = LargeBytesFieldMessage(/*field_number=*/1, int64_t{60} << 20);
//   ResetPeakRss(0);
//   grpc::Status s = SendRawUnary(*channel, "/troupe.proto.ActorTransport/Ping", body,
//                                 {{"x-troupe-token", "wrong"}}, absl::Seconds(10));
//   int64_t grown = ReadProcessMemory(0)->peak_rss_bytes - before.rss_bytes;
//
// Thread-safety: the functions are thread-safe.
#ifndef TROUPE_RUNTIME_TESTING_HOSTILE_CLIENT_H_
#define TROUPE_RUNTIME_TESTING_HOSTILE_CLIENT_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/process_stats.h"
#include "grpcpp/grpcpp.h"

namespace troupe {
namespace testing {

using Metadata = std::vector<std::pair<std::string, std::string>>;

// A serialized protobuf message whose only field, `field_number` (of type bytes or string), holds
// `bytes` zero bytes. Every 1 MiB piece references the same static block, so the sender's memory
// stays at ~1 MiB however large the message.
grpc::ByteBuffer LargeBytesFieldMessage(int field_number, int64_t bytes);

// Calls unary `method` (full name, "/pkg.Service/Method") on `channel` with `request` and
// `metadata`; returns the call's status (DEADLINE_EXCEEDED after `timeout`).
grpc::Status SendRawUnary(grpc::Channel& channel, const std::string& method,
                          const grpc::ByteBuffer& request, const Metadata& metadata,
                          absl::Duration timeout);

// Opens streaming `method`, writes `message` once, half-closes and returns the stream's status.
grpc::Status SendRawStream(grpc::Channel& channel, const std::string& method,
                           const grpc::ByteBuffer& message, const Metadata& metadata,
                           absl::Duration timeout);

// An insecure channel to `target` ("127.0.0.1:PORT") whose TCP connection leaves from
// `source_ip` (e.g. "127.0.0.2", any 127/8 address works on Linux loopback), so a server sees a
// different caller host. The channel uses that one connection and does not reconnect.
// UNAVAILABLE naming the addresses if the connection fails.
absl::StatusOr<std::shared_ptr<grpc::Channel>> ChannelFromSource(const std::string& target,
                                                                 const std::string& source_ip);

// Resident memory of process `pid` (0: this process): base/process_stats.h.
using ::troupe::ProcessMemory;
using ::troupe::ReadProcessMemory;

// Resets process `pid`'s VmHWM to its current VmRSS (writes 5 to /proc/<pid>/clear_refs).
absl::Status ResetPeakRss(pid_t pid);

}  // namespace testing
}  // namespace troupe

#endif  // TROUPE_RUNTIME_TESTING_HOSTILE_CLIENT_H_
