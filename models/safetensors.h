// Reading and writing the safetensors format (Hugging Face), single-file and sharded, and loading
// such files into / saving them from a torch::nn::Module.
//
// Format: an 8-byte little-endian unsigned header length N; N bytes of JSON
//   {"<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"<key>": "<string>", ...}}
// (optionally padded with spaces); then the byte buffer, in which every tensor occupies
// [begin, end) in row-major little-endian order. The tensors tile the buffer exactly: no overlap,
// no gap, no trailing bytes. A sharded checkpoint is a `model.safetensors.index.json`
//   {"metadata": {"total_size": <bytes>}, "weight_map": {"<name>": "<shard file>", ...}}
// next to its shard files.
//
// Dtypes: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL (the ones LibTorch 1.13 has). Others in the
// spec (U16, U32, U64, F8_*) are refused as unsupported.
//
// Reading maps each file (mmap, copy-on-write) and validates the whole header up front; Get()
// returns a tensor that aliases the mapping (no copy) and keeps it alive. Loading into a module
// therefore copies each weight exactly once, from the page cache into the parameter (converting
// dtype on the way). Writing goes through WriteFileAtomically: temp file, fsync, rename, fsync dir.
//
// Example:
//   TROUPE_ASSIGN_OR_RETURN(SafetensorsReader reader, SafetensorsReader::Open("ckpt/"));
//   TROUPE_RETURN_IF_ERROR(LoadIntoModule(reader, *model));
//   TROUPE_RETURN_IF_ERROR(SaveModule(*model, "out/model.safetensors"));
//
// Every error is InvalidArgument (bad content) or NotFound / Internal (file system) and starts with
// the path of the file at fault; content errors also name the tensor or field.
//
// Thread-safety: a SafetensorsReader is immutable after Open; concurrent Get() calls are safe.
// Tensors returned by Get() alias the mapping: writing into one is visible to later Get() calls of
// the same name in this process (never to the file). The free functions are thread-safe.
#ifndef TROUPE_MODELS_SAFETENSORS_H_
#define TROUPE_MODELS_SAFETENSORS_H_

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace torch {
namespace nn {
class Module;
}  // namespace nn
}  // namespace torch

namespace troupe {
namespace models {

// Named tensors in a fixed order (a state dict). Same alias as in models/tensor_proto.h.
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// "F32" -> at::kFloat etc.; InvalidArgument for unknown or unsupported names.
absl::StatusOr<at::ScalarType> ScalarTypeFromSafetensors(absl::string_view dtype);
// at::kFloat -> "F32" etc.; InvalidArgument for types safetensors cannot hold here.
absl::StatusOr<std::string> SafetensorsDTypeName(at::ScalarType type);

// One mapped file; defined in safetensors.cc.
class MappedSafetensorsFile;

// One tensor's header entry.
struct SafetensorsEntry {
  std::string name;
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> shape;
  // data_offsets: [begin, end) within the byte buffer of `file`.
  int64_t begin = 0;
  int64_t end = 0;
  // Path of the file that holds the tensor.
  std::string file;
};

// A validated, memory-mapped safetensors checkpoint (one file or a sharded index).
class SafetensorsReader {
 public:
  // Opens `path`: a .safetensors file; a .json sharded index; or a directory holding
  // model.safetensors (preferred, as Hugging Face does) or model.safetensors.index.json.
  // NotFound if nothing is there; InvalidArgument naming the file and tensor/field for any
  // malformed header, out-of-range / overlapping / gapped offsets, size that disagrees with
  // dtype * shape, unknown dtype, truncated file, or an index inconsistent with its shards.
  static absl::StatusOr<SafetensorsReader> Open(const std::string& path);

  SafetensorsReader(SafetensorsReader&&) = default;
  SafetensorsReader& operator=(SafetensorsReader&&) = default;
  ~SafetensorsReader();

  // The path given to Open.
  const std::string& source() const { return source_; }
  // All tensor names, sorted.
  const std::vector<std::string>& names() const { return names_; }
  // The entry for `name`, or nullptr.
  const SafetensorsEntry* Find(absl::string_view name) const;
  bool Contains(absl::string_view name) const { return Find(name) != nullptr; }
  // A CPU tensor aliasing the mapped bytes (copied only if the bytes are misaligned for the
  // dtype). NotFound if there is no such tensor.
  absl::StatusOr<at::Tensor> Get(absl::string_view name) const;
  // Every tensor, in names() order, as Get.
  absl::StatusOr<NamedTensors> GetAll() const;
  // The "__metadata__" of the file (of the first shard, for a sharded checkpoint).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Total bytes of tensor data.
  int64_t total_bytes() const { return total_bytes_; }

 private:
  SafetensorsReader() = default;
  static absl::StatusOr<SafetensorsReader> OpenFile(const std::string& path);
  static absl::StatusOr<SafetensorsReader> OpenIndex(const std::string& path);

  std::string source_;
  std::vector<std::shared_ptr<const MappedSafetensorsFile>> files_;
  // name -> (entry, index into files_).
  absl::flat_hash_map<std::string, std::pair<SafetensorsEntry, size_t>> entries_;
  std::vector<std::string> names_;
  std::map<std::string, std::string> metadata_;
  int64_t total_bytes_ = 0;
};

// Writes `tensors` (any device; copied to the CPU one at a time) to `path` atomically, in the given
// order. `metadata` goes into "__metadata__"; "format": "pt" is added unless given (transformers
// requires it). `as_dtype` converts every floating-point tensor to it, one tensor at a time as it
// is written (integer and bool tensors keep theirs). InvalidArgument for an empty or repeated name,
// "__metadata__" as a name, an undefined tensor or an unsupported dtype; file-system errors name
// the path.
absl::Status WriteSafetensors(const std::string& path, const NamedTensors& tensors,
                              const std::map<std::string, std::string>& metadata = {},
                              std::optional<at::ScalarType> as_dtype = std::nullopt);

// Writes `tensors` into `dir` as <prefix>-0000i-of-0000n.safetensors shards of at most
// `max_shard_bytes` tensor bytes each (a larger tensor gets a shard of its own; sizes counted in
// the written dtype), then the index <prefix>.safetensors.index.json, each atomically. Returns the
// shard file names. `as_dtype` as for WriteSafetensors.
absl::StatusOr<std::vector<std::string>> WriteShardedSafetensors(
    const std::string& dir, const NamedTensors& tensors, int64_t max_shard_bytes,
    const std::map<std::string, std::string>& metadata = {}, absl::string_view prefix = "model",
    std::optional<at::ScalarType> as_dtype = std::nullopt);

// The module's parameters then buffers, recursively, with their dotted names.
NamedTensors ModuleTensors(const torch::nn::Module& module);

struct LoadOptions {
  // The name in the file is `prefix` + the module's name (e.g. "model." to load a backbone).
  std::string prefix;
  // Tensors in the file that the module does not have are ignored instead of refused.
  bool allow_unexpected = false;
  // File tensors for which this returns true are skipped silently (e.g. a tied lm_head.weight).
  std::function<bool(const std::string&)> ignore;
};

// Copies every parameter and buffer of `module` from `reader`, converting dtype to the
// parameter's dtype and device. Checks everything before copying anything: InvalidArgument naming
// the file and the tensors if any is missing, has another shape (both shapes given), or is extra
// (unless allowed). Leaves `module` unchanged on error.
absl::Status LoadIntoModule(const SafetensorsReader& reader, torch::nn::Module& module,
                            const LoadOptions& options = {});

// As above, from tensors in memory (e.g. weights received as a proto::TensorMap); `description`
// (e.g. "weights v12 from trainer") starts every error message. Tensors may be on any device and of
// any dtype; InvalidArgument also for an undefined or repeated tensor.
absl::Status LoadIntoModule(const NamedTensors& tensors, absl::string_view description,
                            torch::nn::Module& module, const LoadOptions& options = {});

// WriteSafetensors(path, ModuleTensors(module), metadata).
absl::Status SaveModule(const torch::nn::Module& module, const std::string& path,
                        const std::map<std::string, std::string>& metadata = {});

}  // namespace models
}  // namespace troupe

#endif  // TROUPE_MODELS_SAFETENSORS_H_
