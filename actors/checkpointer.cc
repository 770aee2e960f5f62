#include "actors/checkpointer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "models/safetensors.h"
#include "models/tensor_proto.h"
#include "nlohmann/json.hpp"
#include "runtime/actor_registry.h"
#include "runtime/atomic_file.h"
#include "runtime/status_macros.h"

namespace troupe::actors {
namespace {

namespace fs = std::filesystem;

void FsyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

std::vector<fs::path> CompleteCheckpoints(const std::string& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_directory() && name.rfind("step_", 0) == 0) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());  // zero-padded step numbers sort in step order
  return out;
}

}  // namespace

absl::StatusOr<std::string> WriteCheckpoint(const std::string& dir, int keep,
                                            const proto::CheckpointRequest& req) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return absl::InternalError(
        absl::StrCat("cannot create checkpoint dir ", dir, ": ", ec.message()));
  const std::string name = absl::StrFormat("step_%08d", req.step());
  const std::string final_path = dir + "/" + name;
  const std::string tmp = absl::StrCat(dir, "/.tmp-", name, "-", ::getpid());
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", tmp, ": ", ec.message()));
  auto fail = [&](absl::Status s) {
    fs::remove_all(tmp, ec);
    return s;
  };
  absl::StatusOr<models::NamedTensors> tensors = models::TensorMapFromProto(req.weights());
  if (!tensors.ok()) return fail(tensors.status());
  if (absl::Status s =
          models::WriteSafetensors(tmp + "/model.safetensors", *tensors,
                                   {{"format", "pt"}, {"step", std::to_string(req.step())}});
      !s.ok()) {
    return fail(s);
  }
  nlohmann::json meta = {{"step", req.step()}, {"weight_version", req.weight_version()}};
  for (const auto& [file, contents] : std::vector<std::pair<std::string, std::string>>{
           {"config.json", req.model_config_json()},
           {"tokenizer.json", req.tokenizer_json()},
           {"trainer_state.pt", req.trainer_state()},
           {"driver_state.json", req.driver_state_json()},
           {"meta.json", meta.dump(2) + "\n"}}) {
    if (absl::Status s = WriteFileAtomically(tmp + "/" + file, contents); !s.ok()) return fail(s);
  }
  FsyncDir(tmp);
  fs::remove_all(final_path, ec);  // a checkpoint of the same step from an earlier attempt
  fs::rename(tmp, final_path, ec);
  if (ec)
    return fail(absl::InternalError(
        absl::StrCat("cannot rename ", tmp, " to ", final_path, ": ", ec.message())));
  FsyncDir(dir);
  std::vector<fs::path> all = CompleteCheckpoints(dir);
  for (size_t i = 0; keep > 0 && i + keep < all.size(); ++i) fs::remove_all(all[i], ec);
  return final_path;
}

absl::StatusOr<std::string> LatestCheckpoint(const std::string& dir) {
  std::vector<fs::path> all = CompleteCheckpoints(dir);
  if (all.empty()) return absl::NotFoundError(absl::StrCat("no complete checkpoint in ", dir));
  return all.back().string();
}

Checkpointer::Checkpointer(const ActorContext& ctx)
    : dir_(ctx.config().value("dir", "checkpoints")), keep_(ctx.config().value("keep", 3)) {}

absl::StatusOr<proto::CheckpointReply> Checkpointer::Save(const proto::CheckpointRequest& req) {
  absl::StatusOr<std::string> path = WriteCheckpoint(dir_, keep_, req);
  if (!path.ok()) {
    std::fprintf(stderr, "checkpointer: step %lld: %s\n", static_cast<long long>(req.step()),
                 path.status().ToString().c_str());
    return path.status();
  }
  proto::CheckpointReply reply;
  reply.set_path(*path);
  return reply;
}

TROUPE_REGISTER_ACTOR(Checkpointer, Save);

}  // namespace troupe::actors
