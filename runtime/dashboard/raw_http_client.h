// RawHttpClient: a loopback TCP client that speaks HTTP by hand, for what an HTTP client library
// never does: send a request a byte at a time, stall, send nothing, or read a raw response. Used
// by the HTTP server's tests and by bench/http_hostile_bench.
//
// Thread-compatible (one thread per client).
#ifndef TROUPE_RUNTIME_DASHBOARD_RAW_HTTP_CLIENT_H_
#define TROUPE_RUNTIME_DASHBOARD_RAW_HTTP_CLIENT_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace troupe::dashboard {

class RawHttpClient {
 public:
  // Connects to 127.0.0.1:port (blocking) from `source_ip` (another loopback address such as
  // 127.0.0.2 looks like another client host; "" = the kernel's choice); see connected().
  explicit RawHttpClient(int port, const std::string& source_ip = "") {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ >= 0 && !source_ip.empty()) {
      sockaddr_in from{};
      from.sin_family = AF_INET;
      if (::inet_pton(AF_INET, source_ip.c_str(), &from.sin_addr) != 1 ||
          ::bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0) {
        return;  // not connected
      }
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~RawHttpClient() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawHttpClient(const RawHttpClient&) = delete;
  RawHttpClient& operator=(const RawHttpClient&) = delete;

  bool connected() const { return connected_; }

  // Sends all of `data`; false if the connection failed (e.g. the server closed it).
  bool Send(const std::string& data) {
    return connected_ &&
           ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(data.size());
  }

  // Reads until the server closes the connection or `timeout` passes; *closed says which.
  std::string ReadAll(absl::Duration timeout, bool* closed) { return Read("", timeout, closed); }

  // Reads until `text` has arrived, the server closed, or `timeout` passed.
  std::string ReadUntil(const std::string& text, absl::Duration timeout) {
    bool closed = false;
    return Read(text, timeout, &closed);
  }

  // Whether the server has closed the connection (reads and drops what is pending, no wait).
  bool ClosedByServer() {
    bool closed = false;
    Read("", absl::ZeroDuration(), &closed);
    return closed;
  }

 private:
  std::string Read(const std::string& until, absl::Duration timeout, bool* closed) {
    std::string out;
    *closed = false;
    const absl::Time end = absl::Now() + timeout;
    do {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, timeout > absl::ZeroDuration() ? 20 : 0) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) {
        *closed = true;
        break;
      }
      out.append(buf, static_cast<size_t>(n));
      if (!until.empty() && absl::StrContains(out, until)) break;
    } while (absl::Now() < end);
    return out;
  }

  int fd_ = -1;
  bool connected_ = false;
};

}  // namespace troupe::dashboard

#endif  // TROUPE_RUNTIME_DASHBOARD_RAW_HTTP_CLIENT_H_
