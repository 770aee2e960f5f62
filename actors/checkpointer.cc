#include "actors/checkpointer.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/atomic_file.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "models/generation_config.h"
#include "models/hf_checkpoint.h"
#include "models/model_config.h"
#include "models/safetensors.h"
#include "models/tensor_proto.h"
#include "nlohmann/json.hpp"
#include "runtime/actor_registry.h"

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

// The pid a scratch entry (".tmp-step_N-PID", ".old-step_N-PID") was made by; -1 if the name is
// not one of those.
pid_t ScratchOwner(const std::string& name) {
  if (name.rfind(".tmp-step_", 0) != 0 && name.rfind(".old-step_", 0) != 0) return -1;
  const size_t dash = name.rfind('-');
  if (dash == std::string::npos || dash + 1 >= name.size()) return -1;
  pid_t pid = 0;
  for (size_t i = dash + 1; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    pid = pid * 10 + (name[i] - '0');
  }
  return pid;
}

bool ProcessExists(pid_t pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

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
  models::HfModelFiles files;
  absl::StatusOr<models::ModelConfig> config =
      models::ParseModelConfig(req.model_config_json(), name + "/config.json");
  if (!config.ok()) return fail(config.status());
  files.config = *std::move(config);
  if (!req.generation_config_json().empty()) {
    absl::StatusOr<models::GenerationConfig> generation = models::ParseGenerationConfig(
        req.generation_config_json(), name + "/generation_config.json");
    if (!generation.ok()) return fail(generation.status());
    files.generation = *std::move(generation);
  }
  files.tokenizer_json = req.tokenizer_json();
  files.tokenizer_config_json = req.tokenizer_config_json();
  models::HfSaveOptions hf_options;
  hf_options.metadata = {{"format", "pt"}, {"step", std::to_string(req.step())}};
  if (absl::Status s = models::WriteHfModelFiles(tmp, *tensors, files, hf_options); !s.ok()) {
    return fail(s);
  }
  nlohmann::json meta = {{"step", req.step()}, {"weight_version", req.weight_version()}};
  for (const auto& [file, contents] : std::vector<std::pair<std::string, std::string>>{
           {"trainer_state.pt", req.trainer_state()},
           {"driver_state.json", req.driver_state_json()},
           {"meta.json", meta.dump(2) + "\n"}}) {
    if (absl::Status s = WriteFileAtomically(tmp + "/" + file, contents); !s.ok()) return fail(s);
  }
  if (!req.replay_state().empty()) {
    if (absl::Status s = WriteFileAtomically(tmp + "/replay_buffer.pb", req.replay_state());
        !s.ok()) {
      return fail(s);
    }
  }
  FsyncDir(tmp);
  // A checkpoint of the same step from an earlier attempt (a retry after the checkpointer died
  // between writing and replying) is moved aside, not deleted first: some complete copy of the
  // step is on disk at every moment.
  const std::string old = absl::StrCat(dir, "/.old-", name, "-", ::getpid());
  const bool replacing = fs::exists(final_path, ec);
  if (replacing) {
    fs::remove_all(old, ec);
    fs::rename(final_path, old, ec);
    if (ec)
      return fail(absl::InternalError(
          absl::StrCat("cannot move the earlier ", final_path, " aside: ", ec.message())));
  }
  fs::rename(tmp, final_path, ec);
  if (ec) {
    const std::string why = ec.message();
    if (replacing) fs::rename(old, final_path, ec);
    return fail(
        absl::InternalError(absl::StrCat("cannot rename ", tmp, " to ", final_path, ": ", why)));
  }
  FsyncDir(dir);
  if (replacing) fs::remove_all(old, ec);
  std::vector<fs::path> all = CompleteCheckpoints(dir);
  for (size_t i = 0; keep > 0 && i + keep < all.size(); ++i) fs::remove_all(all[i], ec);
  // <dir>/latest: a relative symlink to the newest complete checkpoint (a retried older step
  // leaves it where it was), replaced by a rename so it always points at a complete one.
  const fs::path link = fs::path(dir) / "latest";
  const fs::path scratch = fs::path(dir) / absl::StrCat(".latest-", ::getpid());
  fs::remove(scratch, ec);
  fs::create_symlink(all.back().filename(), scratch, ec);
  if (!ec) fs::rename(scratch, link, ec);
  if (ec) {
    fs::remove(scratch, ec);
    return absl::InternalError(absl::StrCat("wrote ", final_path, " but cannot point ",
                                            link.string(), " at it: ", ec.message()));
  }
  return final_path;
}

AbandonedScratch RecoverAbandonedScratch(const std::string& dir) {
  AbandonedScratch done;
  std::error_code ec;
  std::vector<fs::path> abandoned;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const pid_t owner = ScratchOwner(e.path().filename().string());
    if (owner >= 0 && !ProcessExists(owner)) abandoned.push_back(e.path());
  }
  std::sort(abandoned.begin(), abandoned.end());  // the same choice among copies every time
  // First the copies moved aside whose step has no other: ".old-step_N-PID" -> "step_N".
  for (fs::path& p : abandoned) {
    const std::string name = p.filename().string();
    if (name.rfind(".old-", 0) != 0) continue;
    const std::string step = name.substr(5, name.rfind('-') - 5);  // "step_N"
    const fs::path final_path = p.parent_path() / step;
    if (fs::exists(final_path, ec)) continue;
    std::error_code mv;
    fs::rename(p, final_path, mv);
    if (mv) continue;  // left as it is; removed below like other scratch
    TROUPE_LOG(WARNING) << absl::StrFormat(
        "checkpointer: %s was left only as %s by a writer killed between its renames; restored",
        final_path.string().c_str(), name.c_str());
    ++done.restored;
    p.clear();
  }
  if (done.restored > 0) FsyncDir(dir);
  for (const fs::path& p : abandoned) {
    if (p.empty()) continue;
    std::error_code rm;
    fs::remove_all(p, rm);
    if (!rm) ++done.removed;
  }
  return done;
}

absl::StatusOr<std::string> LatestCheckpoint(const std::string& dir) {
  std::vector<fs::path> all = CompleteCheckpoints(dir);
  if (all.empty()) return absl::NotFoundError(absl::StrCat("no complete checkpoint in ", dir));
  return all.back().string();
}

absl::StatusOr<std::unique_ptr<Checkpointer>> Checkpointer::Create(const ActorContext& ctx) {
  TROUPE_ASSIGN_OR_RETURN(proto::CheckpointerConfig config,
                          ctx.ConfigAs<proto::CheckpointerConfig>());
  return std::make_unique<Checkpointer>(config);
}

Checkpointer::Checkpointer(const proto::CheckpointerConfig& config)
    : dir_(config.dir()), keep_(config.keep()) {
  // A checkpointer killed mid-write (this actor's previous instance, say) leaves its scratch
  // directory behind, and between the renames of a retried step its only copy of that step;
  // nothing else would ever put them right.
  if (const AbandonedScratch s = RecoverAbandonedScratch(dir_); s.removed > 0) {
    TROUPE_LOG(INFO) << absl::StrFormat(
        "checkpointer: removed %d unfinished checkpoint(s) of dead writers in %s", s.removed,
        dir_.c_str());
  }
}

absl::StatusOr<proto::CheckpointReply> Checkpointer::Save(const proto::CheckpointRequest& req) {
  absl::StatusOr<std::string> path = WriteCheckpoint(dir_, keep_, req);
  if (!path.ok()) {
    TROUPE_LOG(WARNING) << absl::StrFormat("checkpointer: step %lld: %s",
                                           static_cast<long long>(req.step()),
                                           path.status().ToString().c_str());
    return path.status();
  }
  proto::CheckpointReply reply;
  reply.set_path(*path);
  return reply;
}

TROUPE_REGISTER_ACTOR(Checkpointer, Save);

}  // namespace troupe::actors
