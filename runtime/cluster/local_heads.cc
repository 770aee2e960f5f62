#include "runtime/cluster/local_heads.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "absl/hash/hash.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "base/atomic_file.h"
#include "base/file_util.h"
#include "base/secret_file.h"

namespace troupe {
namespace {

constexpr size_t kMaxEntryBytes = 4096;  // a path

struct HostPort {
  std::string host;
  int port = -1;
};

// "http://h:p/", "h:p", "[v6]:p" -> {h, p}; port -1 if there is none.
HostPort Split(absl::string_view address) {
  address = absl::StripAsciiWhitespace(address);
  if (size_t scheme = address.find("://"); scheme != absl::string_view::npos) {
    address.remove_prefix(scheme + 3);
  }
  if (size_t slash = address.find('/'); slash != absl::string_view::npos) {
    address = address.substr(0, slash);
  }
  HostPort hp;
  size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) {
    hp.host = std::string(address);
    return hp;
  }
  int port = -1;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &port)) port = -1;
  hp.port = port;
  absl::string_view host = address.substr(0, colon);
  if (absl::ConsumePrefix(&host, "[")) absl::ConsumeSuffix(&host, "]");
  hp.host = absl::AsciiStrToLower(host);
  return hp;
}

bool IsThisMachine(const std::string& host) {
  if (host == "localhost" || host == "0.0.0.0" || host == "::" || host == "::1" ||
      absl::StartsWith(host, "127.")) {
    return true;
  }
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) == 0 && host == absl::AsciiStrToLower(name)) {
    return true;
  }
  struct ifaddrs* addrs = nullptr;
  if (::getifaddrs(&addrs) != 0) return false;
  bool found = false;
  for (struct ifaddrs* a = addrs; a != nullptr && !found; a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    char text[INET6_ADDRSTRLEN] = {};
    if (a->ifa_addr->sa_family == AF_INET) {
      ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text,
                  sizeof(text));
    } else if (a->ifa_addr->sa_family == AF_INET6) {
      ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr, text,
                  sizeof(text));
    } else {
      continue;
    }
    found = host == text;
  }
  ::freeifaddrs(addrs);
  return found;
}

std::string EntryPath(const std::string& absolute_state_dir) {
  return absl::StrFormat("%s/%016x", LocalHeadsDirectory(),
                         absl::Hash<std::string>{}(absolute_state_dir));
}

std::string Absolute(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec);
  return ec ? path : p.lexically_normal().string();
}

std::string FirstLine(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path, kMaxEntryBytes);
  if (!text.ok()) return "";
  absl::string_view line = *text;
  if (size_t nl = line.find('\n'); nl != absl::string_view::npos) line = line.substr(0, nl);
  return std::string(absl::StripAsciiWhitespace(line));
}

}  // namespace

std::string LocalHeadsDirectory() {
  if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg != nullptr && *xdg == '/') {
    return absl::StrCat(xdg, "/troupe-heads");
  }
  return absl::StrCat("/tmp/troupe-heads-", ::geteuid());
}

absl::Status RegisterLocalHead(const std::string& state_dir) {
  const std::string dir = LocalHeadsDirectory();
  if (absl::Status s = CreatePrivateDirectory(dir); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("local head registry: ", s.message()));
  }
  const std::string absolute = Absolute(state_dir);
  if (absl::Status s = WriteFileAtomically(EntryPath(absolute), absolute + "\n"); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("local head registry: ", s.message()));
  }
  return absl::OkStatus();
}

void UnregisterLocalHead(const std::string& state_dir) {
  std::error_code ec;
  std::filesystem::remove(EntryPath(Absolute(state_dir)), ec);
}

std::optional<std::string> FindLocalHeadStateDir(absl::string_view address) {
  const std::string dir = LocalHeadsDirectory();
  // Only a registry that is the user's own and private is read (CreatePrivateDirectory checks
  // the owner; it creates nothing that was not already there but the directory itself).
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return std::nullopt;
  if (!CreatePrivateDirectory(dir).ok()) return std::nullopt;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (!entry.is_regular_file(ec)) continue;
    const std::string state_dir = FirstLine(entry.path().string());
    if (state_dir.empty() || !std::filesystem::is_directory(state_dir, ec)) {
      std::filesystem::remove(entry.path(), ec);  // the state directory is gone
      continue;
    }
    for (const char* file : {"/head.address", "/dashboard.address"}) {
      const std::string registered = FirstLine(state_dir + file);
      if (!registered.empty() && SameLocalEndpoint(registered, address)) return state_dir;
    }
  }
  return std::nullopt;
}

bool SameLocalEndpoint(absl::string_view a, absl::string_view b) {
  const HostPort x = Split(a);
  const HostPort y = Split(b);
  if (x.port < 0 || x.port != y.port) return false;
  if (x.host == y.host) return true;
  return IsThisMachine(x.host) && IsThisMachine(y.host);
}

}  // namespace troupe
