#include "base/dir_archive.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace troupe {
namespace {

namespace fs = std::filesystem;

constexpr absl::string_view kMagic = "TRPWD1\n";
constexpr size_t kMaxNameBytes = 4096;

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Reads fixed-size fields from a buffer; every read is bounds-checked.
class Reader {
 public:
  explicit Reader(absl::string_view data) : data_(data) {}
  bool done() const { return pos_ == data_.size(); }
  size_t pos() const { return pos_; }
  bool U8(uint8_t* v) {
    if (data_.size() - pos_ < 1) return false;
    *v = static_cast<uint8_t>(data_[pos_++]);
    return true;
  }
  bool U32(uint32_t* v) {
    if (data_.size() - pos_ < 4) return false;
    *v = 0;
    for (int i = 0; i < 4; ++i) *v |= uint32_t{static_cast<uint8_t>(data_[pos_ + i])} << (8 * i);
    pos_ += 4;
    return true;
  }
  bool U64(uint64_t* v) {
    if (data_.size() - pos_ < 8) return false;
    *v = 0;
    for (int i = 0; i < 8; ++i) *v |= uint64_t{static_cast<uint8_t>(data_[pos_ + i])} << (8 * i);
    pos_ += 8;
    return true;
  }
  bool Bytes(uint64_t n, absl::string_view* v) {
    if (data_.size() - pos_ < n) return false;
    *v = data_.substr(pos_, n);
    pos_ += n;
    return true;
  }

 private:
  absl::string_view data_;
  size_t pos_ = 0;
};

bool Excluded(const std::string& rel, const std::string& base,
              const std::vector<std::string>& globs) {
  for (const std::string& g : globs) {
    if (::fnmatch(g.c_str(), base.c_str(), 0) == 0) return true;
    if (::fnmatch(g.c_str(), rel.c_str(), FNM_PATHNAME) == 0) return true;
  }
  return false;
}

// Whether `path` (absolute, normalized) is `root` or lies under it.
bool Within(const fs::path& path, const fs::path& root) {
  auto [r, p] = std::mismatch(root.begin(), root.end(), path.begin(), path.end());
  return r == root.end();
}

void AddEntry(std::string* out, char type, const std::string& name, uint32_t mode,
              absl::string_view data) {
  out->push_back(type);
  PutU32(out, static_cast<uint32_t>(name.size()));
  out->append(name);
  PutU32(out, mode);
  PutU64(out, data.size());
  out->append(data.data(), data.size());
}

std::string Mib(int64_t bytes) {
  return absl::StrCat(bytes, " bytes (", (bytes + (1 << 20) - 1) >> 20, " MiB)");
}

}  // namespace

const std::vector<std::string>& DefaultPackExcludes() {
  static const auto* kExcludes = new std::vector<std::string>{".git", "bazel-*", "__pycache__"};
  return *kExcludes;
}

bool IsSafeEntryName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes || name.front() == '/') return false;
  if (name.find('\0') != absl::string_view::npos) return false;
  for (absl::string_view part : absl::StrSplit(name, '/')) {
    if (part.empty() || part == "." || part == "..") return false;
  }
  return true;
}

absl::StatusOr<PackResult> PackDirectory(const std::string& dir, const PackOptions& options) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (ec || !fs::exists(st)) {
    return absl::NotFoundError(absl::StrCat("working directory ", dir, " does not exist"));
  }
  if (!fs::is_directory(st)) {
    return absl::InvalidArgumentError(
        absl::StrCat("working directory ", dir, " is not a directory"));
  }
  const fs::path root = fs::canonical(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot resolve ", dir, ": ", ec.message()));
  std::vector<std::string> globs = options.excludes;
  if (options.use_default_excludes) {
    globs.insert(globs.end(), DefaultPackExcludes().begin(), DefaultPackExcludes().end());
  }

  PackResult result;
  std::string raw;
  int64_t entries = 0;
  fs::recursive_directory_iterator it(root, fs::directory_options::none, ec), end;
  if (ec) return absl::InternalError(absl::StrCat("cannot list ", dir, ": ", ec.message()));
  // Sorted per directory would be nicer; the iterator's order is fine for correctness (a
  // directory is always visited before its contents).
  for (; it != end; it.increment(ec)) {
    if (ec) return absl::InternalError(absl::StrCat("cannot list ", dir, ": ", ec.message()));
    const fs::path& p = it->path();
    const std::string rel = p.lexically_relative(root).generic_string();
    const std::string where = (fs::path(dir) / rel).string();
    if (Excluded(rel, p.filename().string(), globs)) {
      if (it->is_directory(ec) && !it->is_symlink(ec)) it.disable_recursion_pending();
      continue;
    }
    if (++entries > options.max_entries) {
      return absl::ResourceExhaustedError(
          absl::StrCat("working directory ", dir, " holds more than ", options.max_entries,
                       " files, directories and symlinks (the limit; reached at ", where,
                       "); leave some out with --exclude GLOB"));
    }
    struct stat sb;
    if (::lstat(p.c_str(), &sb) != 0) {
      return absl::InternalError(absl::StrCat("cannot stat ", where, ": ", std::strerror(errno)));
    }
    const uint32_t mode = sb.st_mode & 07777;
    if (S_ISLNK(sb.st_mode)) {
      const fs::path target = fs::read_symlink(p, ec);
      if (ec) return absl::InternalError(absl::StrCat("cannot read link ", where));
      const fs::path resolved = fs::weakly_canonical(p.parent_path() / target, ec);
      if (ec || target.is_absolute() || !Within(resolved, root)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "symlink ", where, " -> ", target.string(), " leads outside the working directory ",
            dir, "; exclude it (--exclude) or copy what it points to into the directory"));
      }
      AddEntry(&raw, 'L', rel, 0777, target.string());
    } else if (S_ISDIR(sb.st_mode)) {
      AddEntry(&raw, 'D', rel, mode, "");
    } else if (S_ISREG(sb.st_mode)) {
      result.uncompressed_bytes += sb.st_size;
      if (result.uncompressed_bytes > options.max_uncompressed_bytes) {
        return absl::ResourceExhaustedError(
            absl::StrCat("working directory ", dir, " holds more than ",
                         Mib(options.max_uncompressed_bytes), " of files (limit; reached at ",
                         where, "); leave large files out with --exclude GLOB"));
      }
      std::ifstream in(p, std::ios::binary);
      std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (!in.good() && !in.eof()) {
        return absl::InternalError(absl::StrCat("cannot read ", where));
      }
      AddEntry(&raw, 'F', rel, mode, data);
      ++result.files;
    } else {
      result.skipped.push_back(rel);
    }
  }

  uLongf bound = compressBound(raw.size());
  std::string packed(bound, '\0');
  if (compress2(reinterpret_cast<Bytef*>(packed.data()), &bound,
                reinterpret_cast<const Bytef*>(raw.data()), raw.size(), 6) != Z_OK) {
    return absl::InternalError("working directory: zlib compression failed");
  }
  packed.resize(bound);
  result.archive = std::string(kMagic);
  PutU64(&result.archive, raw.size());
  result.archive += packed;
  if (static_cast<int64_t>(result.archive.size()) > options.max_archive_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("working directory ", dir, " packs to ", Mib(result.archive.size()),
                     " compressed, over the limit of ", Mib(options.max_archive_bytes),
                     "; leave large files out with --exclude GLOB"));
  }
  return result;
}

absl::Status UnpackDirectory(absl::string_view archive, const std::string& dest,
                             const UnpackOptions& options) {
  if (!absl::ConsumePrefix(&archive, kMagic)) {
    return absl::InvalidArgumentError("working directory archive: bad magic (not a troupe pack)");
  }
  Reader header(archive);
  uint64_t raw_size = 0;
  if (!header.U64(&raw_size)) {
    return absl::InvalidArgumentError("working directory archive: truncated header");
  }
  // Entry headers are small: allow them on top of the file data bound.
  const uint64_t raw_limit = static_cast<uint64_t>(options.max_uncompressed_bytes) * 2 + (1 << 20);
  if (raw_size > raw_limit) {
    return absl::ResourceExhaustedError(absl::StrCat("working directory archive unpacks to ",
                                                     raw_size, " bytes, over the limit of ",
                                                     raw_limit, " bytes"));
  }
  std::string raw(raw_size, '\0');
  uLongf got = raw_size;
  const absl::string_view z = archive.substr(8);
  if (uncompress(reinterpret_cast<Bytef*>(raw.data()), &got,
                 reinterpret_cast<const Bytef*>(z.data()), z.size()) != Z_OK ||
      got != raw_size) {
    return absl::InvalidArgumentError(
        "working directory archive: corrupt compressed data or wrong declared size");
  }

  std::error_code ec;
  if (fs::exists(dest, ec) && !fs::is_empty(dest, ec)) {
    return absl::FailedPreconditionError(absl::StrCat("unpack: ", dest, " is not empty"));
  }
  fs::create_directories(dest, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dest, ": ", ec.message()));
  const fs::path root = fs::canonical(dest, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot resolve ", dest, ": ", ec.message()));

  // Validate everything first: nothing is written for a bad archive.
  struct Entry {
    uint8_t type;
    std::string name;
    uint32_t mode;
    absl::string_view data;
  };
  std::vector<Entry> entries;
  Reader r(raw);
  int64_t file_bytes = 0;
  while (!r.done()) {
    const size_t at = r.pos();
    Entry e;
    uint32_t name_len = 0;
    uint64_t data_len = 0;
    absl::string_view name;
    if (!r.U8(&e.type) || !r.U32(&name_len) || name_len > kMaxNameBytes ||
        !r.Bytes(name_len, &name) || !r.U32(&e.mode) || !r.U64(&data_len) ||
        !r.Bytes(data_len, &e.data)) {
      return absl::InvalidArgumentError(
          absl::StrCat("working directory archive: truncated entry at byte ", at));
    }
    if (static_cast<int64_t>(entries.size()) >= options.max_entries) {
      return absl::ResourceExhaustedError(
          absl::StrCat("working directory archive holds more than ", options.max_entries,
                       " entries (files, directories and symlinks; the limit)"));
    }
    e.name = std::string(name);
    if (!IsSafeEntryName(e.name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("working directory archive: unsafe entry name '", absl::CEscape(e.name),
                       "' (absolute, empty, or with '.' / '..' components)"));
    }
    if (e.type != 'D' && e.type != 'F' && e.type != 'L') {
      return absl::InvalidArgumentError(absl::StrCat("working directory archive: entry '", e.name,
                                                     "' has unknown type ", int{e.type}));
    }
    if (e.type == 'L') {
      const fs::path target(std::string(e.data));
      const fs::path lexical = (root / fs::path(e.name).parent_path() / target).lexically_normal();
      if (target.empty() || target.is_absolute() || !Within(lexical, root) ||
          e.data.find('\0') != absl::string_view::npos) {
        return absl::InvalidArgumentError(absl::StrCat("working directory archive: symlink '",
                                                       e.name, "' -> '", absl::CEscape(e.data),
                                                       "' leads outside the working directory"));
      }
    }
    if (e.type == 'F') file_bytes += static_cast<int64_t>(e.data.size());
    if (file_bytes > options.max_uncompressed_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat("working directory archive holds more than ",
                                                       options.max_uncompressed_bytes,
                                                       " bytes of files (the limit)"));
    }
    entries.push_back(std::move(e));
  }

  for (const Entry& e : entries) {
    const fs::path p = root / e.name;
    if (e.type == 'L') continue;  // below, after every file
    // The parent exists as a real directory (no symlinks are made yet).
    fs::create_directories(p.parent_path(), ec);
    if (ec) return absl::InternalError(absl::StrCat("cannot create ", p.parent_path().string()));
    if (e.type == 'D') {
      if (::mkdir(p.c_str(), (e.mode & 0777) | 0700) != 0 && errno != EEXIST) {
        return absl::InternalError(
            absl::StrCat("cannot create ", p.string(), ": ", std::strerror(errno)));
      }
      continue;
    }
    const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                          (e.mode & 0777) | 0600);
    if (fd < 0) {
      return absl::InvalidArgumentError(absl::StrCat("working directory archive: cannot create '",
                                                     e.name, "': ", std::strerror(errno)));
    }
    size_t off = 0;
    while (off < e.data.size()) {
      const ssize_t n = ::write(fd, e.data.data() + off, e.data.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ::close(fd);
        return absl::InternalError(absl::StrCat("cannot write ", p.string()));
      }
      off += static_cast<size_t>(n);
    }
    if (::close(fd) != 0) return absl::InternalError(absl::StrCat("cannot write ", p.string()));
  }
  std::vector<fs::path> links;
  for (const Entry& e : entries) {
    if (e.type != 'L') continue;
    const fs::path p = root / e.name;
    fs::create_directories(p.parent_path(), ec);
    if (::symlink(std::string(e.data).c_str(), p.c_str()) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("working directory archive: cannot create "
                       "symlink '",
                       e.name, "': ", std::strerror(errno)));
    }
    links.push_back(p);
  }
  // Chains of links can leave the root even when each target looks inside it ("a" -> ".",
  // "b" -> "a/.."): resolve them all now and undo any that escapes.
  for (const fs::path& p : links) {
    const fs::path resolved = fs::weakly_canonical(p, ec);
    if (ec || !Within(resolved, root)) {
      for (const fs::path& q : links) fs::remove(q, ec);
      return absl::InvalidArgumentError(absl::StrCat("working directory archive: symlink '",
                                                     p.lexically_relative(root).generic_string(),
                                                     "' resolves outside the working directory"));
    }
  }
  return absl::OkStatus();
}

}  // namespace troupe
