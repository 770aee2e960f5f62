// The job spec's checks for jobs submitted to the head (runtime/dashboard/job_spec_checker.h),
// registered at start-up in every program that links this library.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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
  // of the path is in the key already).
  void AddFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      Add("<unreadable>");
      return;
    }
    char buf[1 << 16];
    std::string chunk;
    while (in.read(buf, sizeof(buf)) || in.gcount() > 0) {
      chunk.assign(buf, static_cast<size_t>(in.gcount()));
      for (unsigned char c : chunk) {
        a_ = (a_ ^ c) * 0x100000001b3ULL;
        b_ = (b_ ^ c) * 0x100000001b3ULL;
      }
    }
    Add("<eof>");
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
    if (absl::Status s = CheckResourcesFit(*spec, nodes); !s.ok()) return s;
    return ToYaml(*spec);
  }

  absl::StatusOr<dashboard::JobSpecFacts> Facts(absl::string_view yaml_text,
                                                absl::string_view source_name,
                                                const std::vector<std::string>& overrides,
                                                const std::string& cwd) const override {
    absl::StatusOr<JobSpec> spec = ParseJobSpec(yaml_text, source_name, overrides);
    if (!spec.ok()) return spec.status();
    dashboard::JobSpecFacts facts;
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
