// The job spec's checks for jobs submitted to the head (runtime/dashboard/job_spec_checker.h),
// registered at start-up in every program that links this library.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "models/torch_build.h"
#include "recipes/job_spec/job_spec.h"
#include "runtime/dashboard/job_spec_checker.h"

namespace troupe::recipes {
namespace {

// `path` made absolute against `cwd` (unchanged if empty or absolute).
std::string Against(const std::string& cwd, const std::string& path) {
  if (path.empty() || std::filesystem::path(path).is_absolute()) return path;
  return (std::filesystem::path(cwd) / path).lexically_normal().string();
}

// The spec with the paths ValidateFiles and the SFT warm start read made absolute against `cwd`
// (the head cannot change its own working directory for one job).
JobSpec WithFilesAgainst(JobSpec spec, const std::string& cwd) {
  spec.model.config = Against(cwd, spec.model.config);
  if (spec.model.init == ModelInit::kPath)
    spec.model.init_path = Against(cwd, spec.model.init_path);
  spec.model.tokenizer = Against(cwd, spec.model.tokenizer);
  for (std::string& f : spec.data.train_files) f = Against(cwd, f);
  for (std::string& f : spec.data.val_files) f = Against(cwd, f);
  spec.data.chat_template = Against(cwd, spec.data.chat_template);
  for (std::string& f : spec.sft.train_files) f = Against(cwd, f);
  for (std::string& f : spec.data.preference_files) f = Against(cwd, f);
  spec.reward.model = Against(cwd, spec.reward.model);
  spec.reward.judge.model = Against(cwd, spec.reward.judge.model);
  for (ActorGroupSpec* group :
       {&spec.actors.rollout, &spec.actors.reward, &spec.actors.reference, &spec.actors.trainer,
        &spec.actors.critic, &spec.actors.replay_buffer,
        static_cast<ActorGroupSpec*>(&spec.actors.checkpointer)}) {
    group->library = Against(cwd, group->library);
  }
  return spec;
}

// Two FNV-1a 64-bit hashes with different offsets: a 128-bit key against accidental collisions
// (not against a submitter crafting one: the head's state dir is the cluster owner's).
class KeyHasher {
 public:
  void Add(std::string_view bytes) {
    for (unsigned char c : bytes) {
      a_ = (a_ ^ c) * 0x100000001b3ULL;
      b_ = (b_ ^ c) * 0x100000001b3ULL;
    }
    // Length-delimited: "ab"+"c" and "a"+"bc" differ.
    const std::string n = absl::StrCat("|", bytes.size(), "|");
    for (unsigned char c : n) {
      a_ = (a_ ^ c) * 0x100000001b3ULL;
      b_ = (b_ ^ c) * 0x100000001b3ULL;
    }
  }
  // A file's contents (or a marker that it could not be read: the job's own checks say why).
  // Not its path: a working directory unpacks to a new one for every job (the spec's own spelling
  // of the path is in the key already). Only a regular file is read: it is opened non-blocking
  // and checked with fstat first, so a FIFO (with or without a writer) or a device is never
  // waited on or read from (ValidateFiles refuses it, naming the key).
  void AddFile(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
      Add("<unreadable>");
      return;
    }
    struct stat info = {};
    if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
      ::close(fd);
      Add("<not a regular file>");
      return;
    }
    char buf[1 << 16];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ::close(fd);
        Add(n == 0 ? "<eof>" : "<read error>");
        return;
      }
      for (ssize_t i = 0; i < n; ++i) {
        const unsigned char c = static_cast<unsigned char>(buf[i]);
        a_ = (a_ ^ c) * 0x100000001b3ULL;
        b_ = (b_ ^ c) * 0x100000001b3ULL;
      }
    }
  }
  std::string Hex() const { return absl::StrFormat("%016x%016x", a_, b_); }

 private:
  uint64_t a_ = 0xcbf29ce484222325ULL;
  uint64_t b_ = 0x84222325cbf29ce4ULL;
};

// What an SFT warm start depends on: the model, data, reward and sft settings (not sft.dir),
// the seed, and the contents of every file it reads.
std::string SftCacheKey(const JobSpec& spec, const std::string& cwd) {
  JobSpec k;
  k.name = "sft-cache-key";
  k.recipe = spec.recipe;
  k.model = spec.model;
  k.data = spec.data;
  k.reward = spec.reward;
  k.sft = spec.sft;
  k.sft.dir.clear();
  k.trainer.total_steps = 1;
  k.trainer.seed = spec.trainer.seed;
  KeyHasher h;
  h.Add("troupe-sft-cache-v1");
  h.Add(ToYaml(k));
  const JobSpec files = WithFilesAgainst(spec, cwd);
  for (const std::string& f :
       {files.model.config, files.model.tokenizer, files.data.chat_template}) {
    if (!f.empty()) h.AddFile(f);
  }
  for (const auto* list :
       {&files.data.train_files, &files.data.val_files, &files.sft.train_files}) {
    for (const std::string& f : *list) h.AddFile(f);
  }
  return h.Hex();
}

class SpecChecker : public dashboard::JobSpecChecker {
 public:
  absl::StatusOr<std::string> Name(absl::string_view yaml_text, absl::string_view source_name,
                                   const std::vector<std::string>& overrides) const override {
    absl::StatusOr<JobSpec> spec = ParseJobSpec(yaml_text, source_name, overrides);
    if (!spec.ok()) return spec.status();
    return spec->name;
  }

  absl::StatusOr<std::string> Resolve(
      absl::string_view yaml_text, absl::string_view source_name,
      const std::vector<std::string>& overrides, const std::string& cwd,
      const std::vector<std::string>& roots,
      const std::vector<std::map<std::string, double>>& nodes) const override {
    absl::StatusOr<JobSpec> spec = ParseJobSpec(yaml_text, source_name, overrides);
    if (!spec.ok()) return spec.status();
    // Where the job may read and write, checked before any of its files is read.
    if (absl::Status s = CheckPathsWithin(*spec, cwd, roots); !s.ok()) {
      return absl::PermissionDeniedError(s.message());
    }
    if (absl::Status s = ValidateFiles(WithFilesAgainst(*spec, cwd)); !s.ok()) return s;
    if (absl::Status s = CheckDevices(*spec, {.libtorch_cuda = models::LibTorchBuiltWithCuda()});
        !s.ok()) {
      return s;
    }
    if (absl::Status s = CheckResourcesFit(*spec, nodes); !s.ok()) return s;
    return ToYaml(*spec);
  }

  absl::StatusOr<dashboard::JobSpecFacts> Facts(
      absl::string_view yaml_text, absl::string_view source_name,
      const std::vector<std::string>& overrides, const std::string& cwd,
      const std::vector<std::string>& roots) const override {
    absl::StatusOr<JobSpec> spec = ParseJobSpec(yaml_text, source_name, overrides);
    if (!spec.ok()) return spec.status();
    // Where the job may read, checked before any file is read (the SFT cache key below hashes
    // files). The directories the job writes are placed by the job manager from these facts and
    // checked by Resolve; their defaults derive from logging.dir, so they are left out here.
    JobSpec inputs = *spec;
    inputs.logging.dir.clear();
    if (!inputs.locations.contains("actors.checkpointer.dir"))
      inputs.actors.checkpointer.dir.clear();
    if (!inputs.locations.contains("sft.dir")) inputs.sft.dir.clear();
    if (absl::Status s = CheckPathsWithin(inputs, cwd, roots); !s.ok()) {
      return absl::PermissionDeniedError(s.message());
    }
    dashboard::JobSpecFacts facts;
    for (const auto& [kind, group] : ActorGroups(*spec)) {
      if (group->library.empty()) continue;
      const std::string key = absl::StrCat("actors.", kind, ".library");
      facts.native_libraries.push_back(
          absl::StrCat(spec->Where(key), ": ", key, ": ", group->library));
    }
    if (spec->locations.contains("logging.dir")) facts.logging_dir = spec->logging.dir;
    if (spec->model.init == ModelInit::kSft && !spec->locations.contains("sft.dir")) {
      facts.sft_cache_key = SftCacheKey(*spec, cwd);
    }
    return facts;
  }
};

const bool kRegistered = [] {
  dashboard::RegisterJobSpecChecker(std::make_unique<SpecChecker>());
  return true;
}();

}  // namespace
}  // namespace troupe::recipes
