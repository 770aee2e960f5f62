#include "models/hf_checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/atomic_file.h"
#include "base/file_util.h"
#include "base/status_macros.h"

namespace troupe {
namespace models {
namespace {

namespace fs = std::filesystem;

const char* DTypeName(at::ScalarType type) {
  switch (type) {
    case at::kFloat:
      return "float32";
    case at::kHalf:
      return "float16";
    case at::kBFloat16:
      return "bfloat16";
    default:
      return nullptr;
  }
}

void FsyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

// The file's text, or "" when it does not exist.
absl::StatusOr<std::string> OptionalFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (absl::IsNotFound(text.status())) return std::string();
  return text;
}

}  // namespace

absl::Status WriteHfModelFiles(const std::string& dir, const NamedTensors& weights,
                               const HfModelFiles& files, const HfSaveOptions& options) {
  std::optional<at::ScalarType> saved = options.dtype;
  int64_t total_bytes = 0;
  for (const auto& [name, tensor] : weights) {
    if (!tensor.defined()) continue;  // WriteSafetensors names it
    const bool floating = at::isFloatingType(tensor.scalar_type());
    if (!saved.has_value() && floating) saved = tensor.scalar_type();
    const at::ScalarType written =
        floating && options.dtype.has_value() ? *options.dtype : tensor.scalar_type();
    total_bytes += tensor.numel() * static_cast<int64_t>(c10::elementSize(written));
  }
  ModelConfig config = files.config;
  const char* dtype_name = saved.has_value() ? DTypeName(*saved) : config.torch_dtype.c_str();
  if (dtype_name == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(dir, ": cannot save weights as ",
                                                   c10::toString(*saved),
                                                   " (float32, float16 or bfloat16)"));
  }
  if (options.max_shard_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": max_shard_bytes must be positive, got ", options.max_shard_bytes));
  }
  config.torch_dtype = dtype_name;
  TROUPE_RETURN_IF_ERROR(config.Validate(absl::StrCat(dir, "/config.json")));
  if (files.generation.has_value()) {
    TROUPE_RETURN_IF_ERROR(CheckGenerationConfigIds(*files.generation, config,
                                                    absl::StrCat(dir, "/generation_config.json")));
  }

  if (total_bytes > options.max_shard_bytes) {
    TROUPE_RETURN_IF_ERROR(WriteShardedSafetensors(dir, weights, options.max_shard_bytes,
                                                   options.metadata, "model", options.dtype)
                               .status());
  } else {
    TROUPE_RETURN_IF_ERROR(WriteSafetensors(absl::StrCat(dir, "/model.safetensors"), weights,
                                            options.metadata, options.dtype));
  }
  TROUPE_RETURN_IF_ERROR(WriteFileAtomically(absl::StrCat(dir, "/config.json"), config.ToJson()));
  if (files.generation.has_value()) {
    TROUPE_RETURN_IF_ERROR(WriteFileAtomically(absl::StrCat(dir, "/generation_config.json"),
                                               files.generation->ToJson()));
  }
  if (!files.tokenizer_json.empty()) {
    TROUPE_RETURN_IF_ERROR(
        WriteFileAtomically(absl::StrCat(dir, "/tokenizer.json"), files.tokenizer_json));
  }
  if (!files.tokenizer_config_json.empty()) {
    TROUPE_RETURN_IF_ERROR(WriteFileAtomically(absl::StrCat(dir, "/tokenizer_config.json"),
                                               files.tokenizer_config_json));
  }
  return absl::OkStatus();
}

absl::Status SaveHfCheckpoint(const std::string& dir, const torch::nn::Module& model,
                              const HfModelFiles& files, const HfSaveOptions& options) {
  std::string target = dir;
  while (target.size() > 1 && target.back() == '/') target.pop_back();
  const std::string tmp = absl::StrCat(target, ".tmp-", ::getpid());
  const std::string old = absl::StrCat(target, ".old-", ::getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  if (!fs::create_directory(tmp, ec) || ec) {
    return absl::InternalError(
        absl::StrCat(tmp, ": cannot create the scratch directory: ", ec.message()));
  }
  auto fail = [&](absl::Status s) {
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
    return s;
  };
  if (absl::Status s = WriteHfModelFiles(tmp, ModuleTensors(model), files, options); !s.ok()) {
    return fail(s);
  }
  FsyncDir(tmp);
  const bool replacing = fs::exists(target, ec);
  if (replacing) {
    fs::remove_all(old, ec);
    fs::rename(target, old, ec);
    if (ec) {
      return fail(absl::InternalError(
          absl::StrCat("cannot move the earlier ", target, " aside: ", ec.message())));
    }
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    const std::string why = ec.message();
    if (replacing) fs::rename(old, target, ec);
    return fail(
        absl::InternalError(absl::StrCat("cannot rename ", tmp, " to ", target, ": ", why)));
  }
  FsyncDir(fs::path(target).parent_path().empty() ? "." : fs::path(target).parent_path().string());
  if (replacing) fs::remove_all(old, ec);
  return absl::OkStatus();
}

absl::StatusOr<HfCheckpoint> LoadHfCheckpoint(const std::string& dir, at::ScalarType dtype) {
  HfCheckpoint out;
  TROUPE_ASSIGN_OR_RETURN(out.files.config, LoadModelConfig(absl::StrCat(dir, "/config.json")));
  const std::string generation_path = absl::StrCat(dir, "/generation_config.json");
  absl::StatusOr<GenerationConfig> generation = LoadGenerationConfig(generation_path);
  if (generation.ok()) {
    TROUPE_RETURN_IF_ERROR(
        CheckGenerationConfigIds(*generation, out.files.config, generation_path));
    out.files.generation = *std::move(generation);
  } else if (!absl::IsNotFound(generation.status())) {
    return generation.status();
  }
  TROUPE_ASSIGN_OR_RETURN(out.files.tokenizer_json,
                          OptionalFile(absl::StrCat(dir, "/tokenizer.json")));
  TROUPE_ASSIGN_OR_RETURN(out.files.tokenizer_config_json,
                          OptionalFile(absl::StrCat(dir, "/tokenizer_config.json")));
  TROUPE_ASSIGN_OR_RETURN(out.model, LoadCausalLM(dir, dtype));
  return out;
}

}  // namespace models
}  // namespace troupe
