#include "runtime/transport/token_checker.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/transport/transport_common.h"

namespace troupe {
namespace transport {

absl::Status ValidateTokenCheckOptions(const TokenCheckOptions& o) {
  if (o.max_failures < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("TokenCheckOptions.max_failures is ", o.max_failures, ", must be >= 1"));
  }
  if (o.failure_window <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("TokenCheckOptions.failure_window is ",
                                                   absl::FormatDuration(o.failure_window),
                                                   ", must be positive"));
  }
  if (o.lockout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TokenCheckOptions.lockout is ", absl::FormatDuration(o.lockout), ", must be >= 0"));
  }
  if (o.max_tracked_peers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("TokenCheckOptions.max_tracked_peers is ",
                                                   o.max_tracked_peers, ", must be >= 1"));
  }
  return absl::OkStatus();
}

TokenChecker::TokenChecker(std::string token, TokenCheckOptions options)
    : token_(std::move(token)), options_(options) {}

absl::Status TokenChecker::Check(absl::string_view peer_host,
                                 std::optional<absl::string_view> token, absl::Time now) {
  if (!token.has_value()) {
    absl::MutexLock lock(&mu_);
    ++stats_.missing;
    return absl::UnauthenticatedError(
        absl::StrCat("missing cluster token (metadata '", kTokenMetadataKey,
                     "'); give it with --token-file or TROUPE_TOKEN"));
  }
  // The right token is admitted before any state is looked at: a throttle never refuses it.
  const bool right = TokenMatches(token_, *token);
  absl::MutexLock lock(&mu_);
  if (right) {
    ++stats_.accepted;
    return absl::OkStatus();
  }
  auto it = peers_.find(peer_host);
  if (it != peers_.end() && it->second.locked_until > now) {
    ++stats_.locked_out;
    it->second.last_failure = now;
    return absl::ResourceExhaustedError(absl::StrCat(
        "too many wrong cluster tokens from ", peer_host,
        "; wrong tokens from there are refused "
        "for ",
        absl::FormatDuration(absl::Ceil(it->second.locked_until - now, absl::Seconds(1))),
        " (the right token is always admitted)"));
  }
  ++stats_.wrong;
  if (it == peers_.end()) {
    if (static_cast<int>(peers_.size()) >= options_.max_tracked_peers) EvictLocked(now);
    it = peers_.try_emplace(std::string(peer_host)).first;
  }
  PeerState& p = it->second;
  if (now - p.window_start >= options_.failure_window) {
    p.window_start = now;
    p.failures = 0;
  }
  p.last_failure = now;
  if (++p.failures >= options_.max_failures) {
    p.locked_until = now + options_.lockout;
    p.failures = 0;
    p.window_start = absl::InfinitePast();
    ++stats_.lockouts;
    return absl::UnauthenticatedError(absl::StrCat("wrong cluster token (", options_.max_failures,
                                                   " wrong tokens from ", peer_host,
                                                   "; wrong tokens from there are now refused for ",
                                                   absl::FormatDuration(options_.lockout), ")"));
  }
  return absl::UnauthenticatedError("wrong cluster token");
}

void TokenChecker::EvictLocked(absl::Time now) {
  for (auto it = peers_.begin(); it != peers_.end();) {
    const PeerState& p = it->second;
    const bool idle = p.locked_until <= now && now - p.window_start >= options_.failure_window;
    if (idle) {
      peers_.erase(it++);
    } else {
      ++it;
    }
  }
  if (static_cast<int>(peers_.size()) < options_.max_tracked_peers) return;
  auto oldest = std::min_element(peers_.begin(), peers_.end(), [](const auto& a, const auto& b) {
    return a.second.last_failure < b.second.last_failure;
  });
  if (oldest != peers_.end()) peers_.erase(oldest);
}

TokenCheckStats TokenChecker::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

std::string PeerHost(absl::string_view peer) {
  const bool ipv4 = absl::StartsWith(peer, "ipv4:");
  const bool ipv6 = absl::StartsWith(peer, "ipv6:");
  if (!ipv4 && !ipv6) return std::string(peer);
  const size_t colon = peer.rfind(':');
  if (colon <= 4) return std::string(peer);
  if (ipv6 && peer[colon - 1] != ']') return std::string(peer);  // no port given
  return std::string(peer.substr(0, colon));
}

std::optional<absl::string_view> CallToken(const grpc::ServerContextBase& ctx) {
  const auto& md = ctx.client_metadata();
  auto it = md.find(kTokenMetadataKey);
  if (it == md.end()) return std::nullopt;
  return absl::string_view(it->second.data(), it->second.size());
}

absl::Status AuthenticateCall(TokenChecker& checker, const grpc::ServerContextBase& ctx) {
  return checker.Check(PeerHost(ctx.peer()), CallToken(ctx), absl::Now());
}

}  // namespace transport
}  // namespace troupe
