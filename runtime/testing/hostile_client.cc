#include "runtime/testing/hostile_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel_posix.h"
#include "grpcpp/generic/generic_stub.h"

namespace troupe {
namespace testing {
namespace {

constexpr size_t kBlock = size_t{1} << 20;
const char kZeros[kBlock] = {};

void* Tag(intptr_t i) { return reinterpret_cast<void*>(i); }

// Waits for the next event on `cq` (the calls here have one operation in flight at a time).
bool Next(grpc::CompletionQueue& cq) {
  void* tag;
  bool ok = false;
  cq.Next(&tag, &ok);
  return ok;
}

std::unique_ptr<grpc::ClientContext> MakeContext(const Metadata& metadata, absl::Duration timeout) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  for (const auto& [k, v] : metadata) ctx->AddMetadata(k, v);
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  return ctx;
}

void Drain(grpc::CompletionQueue& cq) {
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
}

}  // namespace

grpc::ByteBuffer LargeBytesFieldMessage(int field_number, int64_t bytes) {
  // Key (field number, wire type 2 = length-delimited), then the length as a varint.
  std::string header;
  uint64_t key = (static_cast<uint64_t>(field_number) << 3) | 2;
  for (uint64_t v : {key, static_cast<uint64_t>(bytes)}) {
    while (v >= 0x80) {
      header.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    header.push_back(static_cast<char>(v));
  }
  std::vector<grpc::Slice> slices;
  slices.emplace_back(header);
  for (int64_t left = bytes; left > 0; left -= static_cast<int64_t>(kBlock)) {
    const size_t n = static_cast<size_t>(std::min<int64_t>(left, kBlock));
    slices.emplace_back(kZeros, n, grpc::Slice::STATIC_SLICE);
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

grpc::Status SendRawUnary(grpc::Channel& channel, const std::string& method,
                          const grpc::ByteBuffer& request, const Metadata& metadata,
                          absl::Duration timeout) {
  grpc::GenericStub stub(std::shared_ptr<grpc::Channel>(&channel, [](grpc::Channel*) {}));
  grpc::CompletionQueue cq;
  auto ctx = MakeContext(metadata, timeout);
  grpc::ByteBuffer reply;
  grpc::Status status;
  auto call = stub.PrepareUnaryCall(ctx.get(), method, request, &cq);
  call->StartCall();
  call->Finish(&reply, &status, Tag(1));
  Next(cq);
  Drain(cq);
  return status;
}

grpc::Status SendRawStream(grpc::Channel& channel, const std::string& method,
                           const grpc::ByteBuffer& message, const Metadata& metadata,
                           absl::Duration timeout) {
  grpc::GenericStub stub(std::shared_ptr<grpc::Channel>(&channel, [](grpc::Channel*) {}));
  grpc::CompletionQueue cq;
  auto ctx = MakeContext(metadata, timeout);
  auto call = stub.PrepareCall(ctx.get(), method, &cq);
  call->StartCall(Tag(1));
  if (Next(cq)) {
    call->Write(message, Tag(2));
    if (Next(cq)) {
      call->WritesDone(Tag(3));
      Next(cq);
    }
  }
  grpc::Status status;
  call->Finish(&status, Tag(4));
  Next(cq);
  Drain(cq);
  return status;
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> ChannelFromSource(const std::string& target,
                                                                 const std::string& source_ip) {
  const size_t colon = target.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(target.substr(colon + 1), &port)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ChannelFromSource: '", target, "' is not IPv4:PORT"));
  }
  sockaddr_in src{}, dst{};
  src.sin_family = dst.sin_family = AF_INET;
  dst.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, source_ip.c_str(), &src.sin_addr) != 1 ||
      ::inet_pton(AF_INET, target.substr(0, colon).c_str(), &dst.sin_addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("ChannelFromSource: ", source_ip, " or ", target, " is not IPv4"));
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof(src)) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof(dst)) != 0) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot connect from ", source_ip, " to ", target, ": ", std::strerror(err)));
  }
  // gRPC expects a non-blocking socket and takes ownership of it.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return grpc::CreateInsecureChannelFromFd(target, fd);
}

absl::Status ResetPeakRss(pid_t pid) {
  const std::string path =
      pid == 0 ? std::string("/proc/self/clear_refs") : absl::StrCat("/proc/", pid, "/clear_refs");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0 || ::write(fd, "5", 1) != 1) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    return absl::InternalError(
        absl::StrCat("cannot reset the peak RSS through ", path, ": ", std::strerror(err)));
  }
  ::close(fd);
  return absl::OkStatus();
}

}  // namespace testing
}  // namespace troupe
