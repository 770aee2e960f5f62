#include "runtime/cluster/embedded/embedded_cluster.h"

#include <stdlib.h>

#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace troupe {

absl::StatusOr<std::unique_ptr<EmbeddedCluster>> EmbeddedCluster::Start(
    EmbeddedClusterOptions options) {
  std::unique_ptr<EmbeddedCluster> ec(new EmbeddedCluster());
  if (options.state_dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/troupe-XXXXXX");
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) == nullptr) {
      return absl::InternalError(absl::StrCat("cannot create a state directory like ", pattern));
    }
    options.state_dir = buf.data();
  }
  ec->state_dir_ = options.state_dir;
  TROUPE_ASSIGN_OR_RETURN(ec->head_,
                          HeadServer::Start({.host = "127.0.0.1",
                                             .port = 0,
                                             .state_dir = options.state_dir,
                                             .heartbeat_interval = options.heartbeat_interval,
                                             .heartbeat_timeout = options.heartbeat_timeout}));
  TROUPE_ASSIGN_OR_RETURN(ec->node_, NodeAgent::Start({.head_address = ec->head_->address(),
                                                       .host = "127.0.0.1",
                                                       .token = ec->head_->token(),
                                                       .resources_json = options.resources_json,
                                                       .state_dir = options.state_dir,
                                                       .worker_binary = options.worker_binary}));
  TROUPE_ASSIGN_OR_RETURN(ec->cluster_, Cluster::Connect({.address = ec->head_->address(),
                                                          .token = ec->head_->token()}));
  if (options.dashboard_port >= 0) {
    TROUPE_ASSIGN_OR_RETURN(ec->dashboard_, dashboard::DashboardServer::Start(
                                                {.host = options.dashboard_host,
                                                 .port = options.dashboard_port,
                                                 .head_address = ec->head_->address(),
                                                 .token = ec->head_->token(),
                                                 .state_dir = options.state_dir,
                                                 .web_dir = options.dashboard_web_dir,
                                                 .troupe_binary = options.troupe_binary}));
  }
  return ec;
}

EmbeddedCluster::~EmbeddedCluster() { Shutdown(); }

void EmbeddedCluster::Shutdown() {
  if (dashboard_ != nullptr) dashboard_->Shutdown();
  cluster_.reset();
  if (node_ != nullptr) node_->Shutdown();
  if (head_ != nullptr) head_->Shutdown();
}

}  // namespace troupe
