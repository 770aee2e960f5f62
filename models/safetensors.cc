#include "models/safetensors.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <torch/nn/module.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <tuple>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/atomic_file.h"
#include "base/status_macros.h"
#include "models/catch_torch.h"
#include "nlohmann/json.hpp"

namespace troupe {
namespace models {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors is little-endian; a big-endian host needs byte swapping");

// A read-only view of one safetensors file, mapped copy-on-write for its whole lifetime.
class MappedSafetensorsFile {
 public:
  explicit MappedSafetensorsFile(std::string path) : path_(std::move(path)) {}
  MappedSafetensorsFile(const MappedSafetensorsFile&) = delete;
  MappedSafetensorsFile& operator=(const MappedSafetensorsFile&) = delete;
  ~MappedSafetensorsFile() {
    if (base_ != nullptr) ::munmap(base_, size_);
  }

  // Maps the file and validates its header; fills `entries` (sorted by offset).
  absl::Status Map(std::vector<SafetensorsEntry>* entries);

  const std::string& path() const { return path_; }
  const char* buffer() const { return buffer_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  absl::Status Error(absl::string_view why) const {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": ", why));
  }
  absl::Status ParseHeader(absl::string_view header, std::vector<SafetensorsEntry>* entries);

  std::string path_;
  void* base_ = nullptr;
  size_t size_ = 0;
  const char* buffer_ = nullptr;
  int64_t buffer_size_ = 0;
  std::map<std::string, std::string> metadata_;
};

namespace {

using Json = nlohmann::json;

constexpr char kSingleFile[] = "model.safetensors";
constexpr char kIndexFile[] = "model.safetensors.index.json";

struct DTypeName {
  const char* name;
  at::ScalarType type;
};
constexpr DTypeName kDTypes[] = {
    {"F64", at::kDouble}, {"F32", at::kFloat}, {"F16", at::kHalf},  {"BF16", at::kBFloat16},
    {"I64", at::kLong},   {"I32", at::kInt},   {"I16", at::kShort}, {"I8", at::kChar},
    {"U8", at::kByte},    {"BOOL", at::kBool},
};

std::string ShapeString(at::IntArrayRef shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::Status ErrnoStatus(absl::string_view path, absl::string_view what, int err) {
  std::string message = absl::StrCat(path, ": ", what, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(message);
  return absl::InternalError(message);
}

// A JSON integer in [0, INT64_MAX], or nullopt.
std::optional<int64_t> NonNegativeInt(const Json& v) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) {
    int64_t i = v.get<int64_t>();
    if (i < 0) return std::nullopt;
    return i;
  }
  return std::nullopt;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string DirName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Refuses absolute paths and ".." so an index cannot point outside its directory.
bool IsSafeRelativePath(const std::string& name) {
  if (name.empty() || name[0] == '/') return false;
  for (absl::string_view part : absl::StrSplit(name, '/')) {
    if (part == ".." || part.empty()) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<at::ScalarType> ScalarTypeFromSafetensors(absl::string_view dtype) {
  for (const DTypeName& d : kDTypes) {
    if (dtype == d.name) return d.type;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unsupported dtype \"", dtype,
                   "\" (supported: F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL)"));
}

absl::StatusOr<std::string> SafetensorsDTypeName(at::ScalarType type) {
  for (const DTypeName& d : kDTypes) {
    if (type == d.type) return std::string(d.name);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("dtype ", c10::toString(type), " cannot be stored in safetensors"));
}

absl::Status MappedSafetensorsFile::Map(std::vector<SafetensorsEntry>* entries) {
  int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(path_, "cannot open", errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus(path_, "fstat", err);
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return Error("is a directory, not a safetensors file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ < 8) {
    ::close(fd);
    return Error(absl::StrCat("file is ", size_,
                              " bytes, too short for the 8-byte header length (truncated?)"));
  }
  // Copy-on-write: tensors that alias the mapping may be written without touching the file.
  void* base = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  int err = errno;
  ::close(fd);
  if (base == MAP_FAILED) return ErrnoStatus(path_, "mmap", err);
  base_ = base;
  const unsigned char* bytes = static_cast<const unsigned char*>(base_);

  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
  if (header_len > size_ - 8) {
    return Error(absl::StrCat("header length ", header_len, " exceeds the ", size_ - 8,
                              " bytes that follow it (truncated file or not safetensors)"));
  }
  buffer_ = reinterpret_cast<const char*>(bytes) + 8 + header_len;
  buffer_size_ = static_cast<int64_t>(size_ - 8 - header_len);
  return ParseHeader(
      absl::string_view(reinterpret_cast<const char*>(bytes) + 8, static_cast<size_t>(header_len)),
      entries);
}

absl::Status MappedSafetensorsFile::ParseHeader(absl::string_view header,
                                                std::vector<SafetensorsEntry>* entries) {
  Json root;
  try {
    root = Json::parse(header.begin(), header.end());
  } catch (const Json::exception& e) {
    return Error(absl::StrCat("malformed JSON header: ", e.what()));
  }
  if (!root.is_object()) {
    return Error(absl::StrCat("header must be a JSON object, got ", root.type_name()));
  }
  entries->clear();
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string& name = it.key();
    const Json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) return Error("field '__metadata__' must be an object of strings");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) {
          return Error(absl::StrCat("field '__metadata__': value of '", m.key(),
                                    "' must be a string, got ", m.value().dump()));
        }
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string who = absl::StrCat("tensor '", name, "'");
    if (!v.is_object()) return Error(absl::StrCat(who, ": entry must be an object"));
    SafetensorsEntry e;
    e.name = name;
    e.file = path_;

    auto dtype = v.find("dtype");
    if (dtype == v.end() || !dtype->is_string()) {
      return Error(absl::StrCat(who, ": field 'dtype' must be a string"));
    }
    absl::StatusOr<at::ScalarType> type = ScalarTypeFromSafetensors(dtype->get<std::string>());
    if (!type.ok()) {
      return Error(absl::StrCat(who, ": field 'dtype': ", type.status().message()));
    }
    e.dtype = *type;

    auto shape = v.find("shape");
    if (shape == v.end() || !shape->is_array()) {
      return Error(absl::StrCat(who, ": field 'shape' must be a list of non-negative integers"));
    }
    int64_t numel = 1;
    bool overflow = false;
    for (const Json& d : *shape) {
      std::optional<int64_t> dim = NonNegativeInt(d);
      if (!dim.has_value()) {
        return Error(absl::StrCat(
            who, ": field 'shape' must be a list of non-negative integers, got ", shape->dump()));
      }
      e.shape.push_back(*dim);
      if (*dim != 0 && numel > std::numeric_limits<int64_t>::max() / *dim) overflow = true;
      numel *= *dim;
    }
    const int64_t element_size = static_cast<int64_t>(c10::elementSize(e.dtype));
    if (overflow || numel > std::numeric_limits<int64_t>::max() / element_size) {
      return Error(absl::StrCat(who, ": shape ", ShapeString(e.shape), " is too large"));
    }

    auto offsets = v.find("data_offsets");
    std::optional<int64_t> begin, end;
    if (offsets != v.end() && offsets->is_array() && offsets->size() == 2) {
      begin = NonNegativeInt((*offsets)[0]);
      end = NonNegativeInt((*offsets)[1]);
    }
    if (!begin.has_value() || !end.has_value() || *begin > *end) {
      return Error(absl::StrCat(who, ": field 'data_offsets' must be [begin, end] with ",
                                "0 <= begin <= end, got ",
                                offsets == v.end() ? std::string("nothing") : offsets->dump()));
    }
    e.begin = *begin;
    e.end = *end;
    if (e.end > buffer_size_) {
      return Error(absl::StrCat(who, ": data_offsets [", e.begin, ", ", e.end, "] lie outside the ",
                                buffer_size_, "-byte data buffer (truncated file?)"));
    }
    if (e.end - e.begin != numel * element_size) {
      return Error(absl::StrCat(who, ": data_offsets span ", e.end - e.begin, " bytes but dtype ",
                                dtype->get<std::string>(), " and shape ", ShapeString(e.shape),
                                " need ", numel * element_size));
    }
    entries->push_back(std::move(e));
  }

  // The tensors must tile the buffer: sorted by offset, each starts where the previous ended.
  std::sort(entries->begin(), entries->end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
              return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
            });
  int64_t cursor = 0;
  const SafetensorsEntry* previous = nullptr;
  for (const SafetensorsEntry& e : *entries) {
    if (e.begin < cursor) {
      return Error(absl::StrCat("tensor '", e.name, "' (bytes [", e.begin, ", ", e.end,
                                ")) overlaps tensor '", previous->name, "' (bytes [",
                                previous->begin, ", ", previous->end, "))"));
    }
    if (e.begin > cursor) {
      return Error(absl::StrCat("tensor '", e.name, "': ", e.begin - cursor,
                                " unused bytes before it (data_offsets begin at ", e.begin,
                                ", previous data ends at ", cursor, ")"));
    }
    cursor = e.end;
    previous = &e;
  }
  if (cursor != buffer_size_) {
    return Error(absl::StrCat(buffer_size_ - cursor, " trailing bytes after the last tensor (",
                              "data ends at ", cursor, ", buffer is ", buffer_size_, " bytes)"));
  }
  return absl::OkStatus();
}

SafetensorsReader::~SafetensorsReader() = default;

absl::StatusOr<SafetensorsReader> SafetensorsReader::Open(const std::string& path) {
  if (IsDirectory(path)) {
    std::string single = absl::StrCat(path, "/", kSingleFile);
    if (Exists(single)) return OpenFile(single);
    std::string index = absl::StrCat(path, "/", kIndexFile);
    if (Exists(index)) return OpenIndex(index);
    return absl::NotFoundError(
        absl::StrCat(path, ": directory has neither ", kSingleFile, " nor ", kIndexFile));
  }
  if (absl::EndsWith(path, ".json")) return OpenIndex(path);
  return OpenFile(path);
}

absl::StatusOr<SafetensorsReader> SafetensorsReader::OpenFile(const std::string& path) {
  auto file = std::make_shared<MappedSafetensorsFile>(path);
  std::vector<SafetensorsEntry> entries;
  TROUPE_RETURN_IF_ERROR(file->Map(&entries));
  SafetensorsReader reader;
  reader.source_ = path;
  reader.metadata_ = file->metadata();
  reader.files_.push_back(std::move(file));
  for (SafetensorsEntry& e : entries) {
    reader.total_bytes_ += e.end - e.begin;
    reader.names_.push_back(e.name);
    std::string name = e.name;
    reader.entries_.emplace(std::move(name), std::make_pair(std::move(e), size_t{0}));
  }
  std::sort(reader.names_.begin(), reader.names_.end());
  return reader;
}

absl::StatusOr<SafetensorsReader> SafetensorsReader::OpenIndex(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoStatus(path, "cannot open", errno);
  std::ostringstream text;
  text << in.rdbuf();
  auto error = [&path](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", why));
  };
  Json root;
  try {
    root = Json::parse(text.str());
  } catch (const Json::exception& e) {
    return error(absl::StrCat("malformed JSON: ", e.what()));
  }
  if (!root.is_object()) return error("must be a JSON object");
  auto weight_map = root.find("weight_map");
  if (weight_map == root.end() || !weight_map->is_object()) {
    return error("field 'weight_map' must be an object of tensor name -> shard file");
  }
  std::map<std::string, std::string> shard_of;  // tensor -> shard file name
  std::map<std::string, size_t> shards;         // shard file name -> index into files_
  for (auto it = weight_map->begin(); it != weight_map->end(); ++it) {
    if (!it.value().is_string()) {
      return error(absl::StrCat("field 'weight_map': entry '", it.key(), "' must be a file name"));
    }
    std::string shard = it.value().get<std::string>();
    if (!IsSafeRelativePath(shard)) {
      return error(absl::StrCat("field 'weight_map': tensor '", it.key(), "' names shard \"", shard,
                                "\", which is not a relative path inside the checkpoint"));
    }
    shard_of[it.key()] = shard;
    shards.emplace(shard, 0);
  }

  SafetensorsReader reader;
  reader.source_ = path;
  const std::string dir = DirName(path);
  for (auto& [shard, index] : shards) {
    auto file = std::make_shared<MappedSafetensorsFile>(absl::StrCat(dir, "/", shard));
    std::vector<SafetensorsEntry> entries;
    absl::Status mapped = file->Map(&entries);
    if (!mapped.ok()) {
      return absl::Status(mapped.code(), absl::StrCat(path, ": shard: ", mapped.message()));
    }
    index = reader.files_.size();
    if (reader.files_.empty()) reader.metadata_ = file->metadata();
    reader.files_.push_back(std::move(file));
    for (SafetensorsEntry& e : entries) {
      auto listed = shard_of.find(e.name);
      if (listed == shard_of.end()) {
        return error(absl::StrCat("tensor '", e.name, "' in shard '", shard,
                                  "' is not listed in weight_map"));
      }
      if (listed->second != shard) {
        return error(absl::StrCat("tensor '", e.name, "' is in shard '", shard,
                                  "' but weight_map puts it in '", listed->second, "'"));
      }
      reader.total_bytes_ += e.end - e.begin;
      std::string name = e.name;
      reader.entries_.emplace(std::move(name), std::make_pair(std::move(e), index));
    }
  }
  for (const auto& [name, shard] : shard_of) {
    if (reader.entries_.find(name) == reader.entries_.end()) {
      return error(absl::StrCat("weight_map puts tensor '", name, "' in '", shard,
                                "' but that shard has no such tensor"));
    }
    reader.names_.push_back(name);
  }
  return reader;
}

const SafetensorsEntry* SafetensorsReader::Find(absl::string_view name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second.first;
}

absl::StatusOr<at::Tensor> SafetensorsReader::Get(absl::string_view name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat(source_, ": no tensor '", name, "'"));
  }
  const SafetensorsEntry& e = it->second.first;
  const std::shared_ptr<const MappedSafetensorsFile>& file = files_[it->second.second];
  return CatchTorch(
      absl::StrCat(e.file, ": tensor '", name, "'"), [&]() -> absl::StatusOr<at::Tensor> {
        at::TensorOptions options = at::TensorOptions().dtype(e.dtype).device(at::kCPU);
        const int64_t nbytes = e.end - e.begin;
        if (nbytes == 0) return at::empty(e.shape, options);
        char* data = const_cast<char*>(file->buffer()) + e.begin;
        if (reinterpret_cast<uintptr_t>(data) % c10::elementSize(e.dtype) != 0) {
          at::Tensor copy = at::empty(e.shape, options);
          std::memcpy(copy.data_ptr(), data, static_cast<size_t>(nbytes));
          return copy;
        }
        std::shared_ptr<const MappedSafetensorsFile> keep_alive = file;
        return at::from_blob(
            data, e.shape, [keep_alive](void*) {}, options);
      });
}

absl::StatusOr<NamedTensors> SafetensorsReader::GetAll() const {
  NamedTensors out;
  out.reserve(names_.size());
  for (const std::string& name : names_) {
    TROUPE_ASSIGN_OR_RETURN(at::Tensor t, Get(name));
    out.emplace_back(name, std::move(t));
  }
  return out;
}

namespace {

// The dtype `t` is written as.
at::ScalarType WrittenType(const at::Tensor& t, std::optional<at::ScalarType> as_dtype) {
  if (as_dtype.has_value() && at::isFloatingType(t.scalar_type())) return *as_dtype;
  return t.scalar_type();
}

}  // namespace

absl::Status WriteSafetensors(const std::string& path, const NamedTensors& tensors,
                              const std::map<std::string, std::string>& metadata,
                              std::optional<at::ScalarType> as_dtype) {
  auto error = [&path](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", why));
  };
  Json header = Json::object();
  Json meta = Json::object();
  meta["format"] = "pt";
  for (const auto& [key, value] : metadata) meta[key] = value;
  header["__metadata__"] = meta;
  int64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (name.empty()) return error("a tensor has an empty name");
    if (name == "__metadata__") return error("'__metadata__' cannot name a tensor");
    if (header.contains(name)) return error(absl::StrCat("tensor '", name, "' appears twice"));
    if (!tensor.defined()) return error(absl::StrCat("tensor '", name, "' is undefined"));
    const at::ScalarType type = WrittenType(tensor, as_dtype);
    absl::StatusOr<std::string> dtype = SafetensorsDTypeName(type);
    if (!dtype.ok()) {
      return error(absl::StrCat("tensor '", name, "': ", dtype.status().message()));
    }
    const int64_t nbytes = tensor.numel() * static_cast<int64_t>(c10::elementSize(type));
    header[name] = {{"dtype", *dtype},
                    {"shape", std::vector<int64_t>(tensor.sizes().begin(), tensor.sizes().end())},
                    {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string header_text = header.dump();
  // Pad with spaces so the data buffer starts 8-byte aligned (as the reference writer does).
  header_text.append((8 - (header_text.size() % 8)) % 8, ' ');
  char length[8];
  uint64_t n = header_text.size();
  for (int i = 0; i < 8; ++i) length[i] = static_cast<char>((n >> (8 * i)) & 0xff);

  return WriteFileAtomically(path, [&](AtomicFileSink& out) -> absl::Status {
    TROUPE_RETURN_IF_ERROR(out.Append(absl::string_view(length, 8)));
    TROUPE_RETURN_IF_ERROR(out.Append(header_text));
    for (const auto& [name, tensor] : tensors) {
      at::Tensor cpu;
      TROUPE_RETURN_IF_ERROR(CatchTorch(absl::StrCat(path, ": tensor '", name, "'"), [&] {
        cpu = tensor.detach().to(at::kCPU).to(WrittenType(tensor, as_dtype)).contiguous();
        return absl::OkStatus();
      }));
      TROUPE_RETURN_IF_ERROR(out.Append(absl::string_view(static_cast<const char*>(cpu.data_ptr()),
                                                          static_cast<size_t>(cpu.nbytes()))));
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<std::string>> WriteShardedSafetensors(
    const std::string& dir, const NamedTensors& tensors, int64_t max_shard_bytes,
    const std::map<std::string, std::string>& metadata, absl::string_view prefix,
    std::optional<at::ScalarType> as_dtype) {
  if (max_shard_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": max_shard_bytes must be positive, got ", max_shard_bytes));
  }
  // Greedy split in order: start a new shard when the next tensor would overflow this one.
  std::vector<NamedTensors> shards;
  int64_t shard_bytes = 0;
  int64_t total_bytes = 0;
  for (const auto& named : tensors) {
    const at::Tensor& t = named.second;
    const int64_t nbytes =
        t.defined() ? t.numel() * static_cast<int64_t>(c10::elementSize(WrittenType(t, as_dtype)))
                    : 0;
    if (shards.empty() || (shard_bytes > 0 && shard_bytes + nbytes > max_shard_bytes)) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(named);
    shard_bytes += nbytes;
    total_bytes += nbytes;
  }
  if (shards.empty()) shards.emplace_back();

  std::vector<std::string> names;
  Json weight_map = Json::object();
  for (size_t i = 0; i < shards.size(); ++i) {
    std::string name = absl::StrFormat("%s-%05d-of-%05d.safetensors", prefix, i + 1, shards.size());
    TROUPE_RETURN_IF_ERROR(
        WriteSafetensors(absl::StrCat(dir, "/", name), shards[i], metadata, as_dtype));
    for (const auto& named : shards[i]) weight_map[named.first] = name;
    names.push_back(std::move(name));
  }
  Json index = {{"metadata", {{"total_size", total_bytes}}}, {"weight_map", weight_map}};
  TROUPE_RETURN_IF_ERROR(WriteFileAtomically(
      absl::StrCat(dir, "/", prefix, ".safetensors.index.json"), index.dump(2) + "\n"));
  return names;
}

NamedTensors ModuleTensors(const torch::nn::Module& module) {
  NamedTensors out;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    out.emplace_back(item.key(), item.value());
  }
  for (const auto& item : module.named_buffers(/*recurse=*/true)) {
    out.emplace_back(item.key(), item.value());
  }
  return out;
}

namespace {

// Where LoadIntoModule takes tensors from: a description for messages, the names it holds, the
// shape of a name (nullopt if absent) and the tensor itself.
struct TensorSource {
  std::string description;
  std::string where;  // "in the file", "in the tensors"
  const std::vector<std::string>* names;
  std::function<std::optional<at::IntArrayRef>(const std::string&)> shape;
  std::function<absl::StatusOr<at::Tensor>(const std::string&)> get;
};

absl::Status LoadFrom(const TensorSource& from, torch::nn::Module& module,
                      const LoadOptions& options) {
  NamedTensors targets = ModuleTensors(module);
  std::vector<std::string> missing, mismatched, unexpected;
  std::vector<std::pair<at::Tensor, std::string>> plan;  // module tensor, source name
  absl::flat_hash_set<std::string> expected;
  for (const auto& [name, target] : targets) {
    std::string source_name = options.prefix + name;
    std::optional<at::IntArrayRef> shape = from.shape(source_name);
    expected.insert(source_name);
    if (!shape.has_value()) {
      missing.push_back(
          absl::StrCat("'", source_name, "' (module expects ", ShapeString(target.sizes()), ")"));
    } else if (target.sizes() != *shape) {
      mismatched.push_back(absl::StrCat("'", source_name, "' has shape ", ShapeString(*shape), " ",
                                        from.where, " but the module expects ",
                                        ShapeString(target.sizes())));
    } else {
      plan.emplace_back(target, std::move(source_name));
    }
  }
  if (!options.allow_unexpected) {
    for (const std::string& name : *from.names) {
      if (expected.contains(name) || (options.ignore && options.ignore(name))) continue;
      unexpected.push_back(absl::StrCat("'", name, "'"));
    }
  }
  if (!missing.empty() || !mismatched.empty() || !unexpected.empty()) {
    std::vector<std::string> parts;
    auto list = [&parts](absl::string_view what, const std::vector<std::string>& items) {
      if (items.empty()) return;
      constexpr size_t kShown = 8;
      std::vector<std::string> shown(items.begin(), items.begin() + std::min(items.size(), kShown));
      std::string more =
          items.size() > kShown ? absl::StrCat(" and ", items.size() - kShown, " more") : "";
      parts.push_back(
          absl::StrCat(items.size(), " ", what, ": ", absl::StrJoin(shown, ", "), more));
    };
    list("missing tensor(s)", missing);
    list("shape mismatch(es)", mismatched);
    list("unexpected tensor(s) (LoadOptions::allow_unexpected skips them)", unexpected);
    return absl::InvalidArgumentError(absl::StrCat(
        from.description, ": cannot load into the module: ", absl::StrJoin(parts, "; ")));
  }
  at::NoGradGuard no_grad;
  for (auto& [target, name] : plan) {
    TROUPE_ASSIGN_OR_RETURN(at::Tensor source, from.get(name));
    TROUPE_RETURN_IF_ERROR(CatchTorch(absl::StrCat(from.description, ": tensor '", name, "'"), [&] {
      target.copy_(source);
      return absl::OkStatus();
    }));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LoadIntoModule(const SafetensorsReader& reader, torch::nn::Module& module,
                            const LoadOptions& options) {
  TensorSource from;
  from.description = reader.source();
  from.where = "in the file";
  from.names = &reader.names();
  from.shape = [&reader](const std::string& name) -> std::optional<at::IntArrayRef> {
    const SafetensorsEntry* entry = reader.Find(name);
    if (entry == nullptr) return std::nullopt;
    return at::IntArrayRef(entry->shape);
  };
  from.get = [&reader](const std::string& name) { return reader.Get(name); };
  return LoadFrom(from, module, options);
}

absl::Status LoadIntoModule(const NamedTensors& tensors, absl::string_view description,
                            torch::nn::Module& module, const LoadOptions& options) {
  absl::flat_hash_map<std::string, const at::Tensor*> by_name;
  std::vector<std::string> names;
  for (const auto& [name, tensor] : tensors) {
    if (!tensor.defined()) {
      return absl::InvalidArgumentError(
          absl::StrCat(description, ": tensor '", name, "' is undefined"));
    }
    if (!by_name.emplace(name, &tensor).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(description, ": tensor '", name, "' appears twice"));
    }
    names.push_back(name);
  }
  TensorSource from;
  from.description = std::string(description);
  from.where = "in the tensors";
  from.names = &names;
  from.shape = [&by_name](const std::string& name) -> std::optional<at::IntArrayRef> {
    auto it = by_name.find(name);
    if (it == by_name.end()) return std::nullopt;
    return it->second->sizes();
  };
  from.get = [&by_name](const std::string& name) -> absl::StatusOr<at::Tensor> {
    return *by_name.at(name);
  };
  return LoadFrom(from, module, options);
}

absl::Status SaveModule(const torch::nn::Module& module, const std::string& path,
                        const std::map<std::string, std::string>& metadata) {
  return WriteSafetensors(path, ModuleTensors(module), metadata);
}

}  // namespace models
}  // namespace troupe
