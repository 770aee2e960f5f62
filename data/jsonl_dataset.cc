#include "data/jsonl_dataset.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/json_parse.h"
#include "base/splitmix64.h"
#include "base/status_macros.h"

namespace troupe::data {
namespace {

constexpr int64_t kReadChunk = int64_t{1} << 20;
constexpr int64_t kLineBlock = 64;
// The gzip ratio bound applies once this much has been inflated (a small file may compress very
// well and is harmless).
constexpr int64_t kRatioCheckBytes = int64_t{16} << 20;

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

std::string Errno() { return std::strerror(errno); }

std::string Mib(int64_t bytes) {
  if (bytes % (int64_t{1} << 20) == 0) return absl::StrCat(bytes >> 20, " MiB");
  return absl::StrCat(bytes, " bytes");
}

// Makes `dir` (and missing parents, 0700) or checks the one there: a real directory (not a
// symlink), this user's, that no one else may write to. FAILED_PRECONDITION naming it otherwise:
// a cache someone else can write could hand this run a poisoned dataset, or turn a file written
// there into a write through a symlink.
absl::Status PrivateCacheDirectory(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path path = fs::absolute(dir);
  fs::path at;
  for (const fs::path& part : path) {
    at /= part;
    if (::mkdir(at.c_str(), 0700) != 0 && errno != EEXIST) {
      return absl::InternalError(
          absl::StrCat("cannot create the data cache ", at.string(), ": ", Errno()));
    }
  }
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    return absl::InternalError(absl::StrCat("data cache ", dir, ": ", Errno()));
  }
  const std::string why =
      S_ISLNK(st.st_mode)    ? "is a symlink"
      : !S_ISDIR(st.st_mode) ? "is not a directory"
      : st.st_uid != ::geteuid()
          ? absl::StrCat("belongs to uid ", st.st_uid, ", not to you (uid ", ::geteuid(), ")")
      : (st.st_mode & 022) != 0
          ? absl::StrFormat("is writable by others (mode %04o)", st.st_mode & 07777)
          : "";
  if (!why.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "data cache ", dir, " ", why,
        ": .gz datasets are decompressed only into a directory of your own that no one else can "
        "write (set TROUPE_DATA_CACHE to one, or remove it)"));
  }
  return absl::OkStatus();
}

// An fd of the cache file at `path` if it can be trusted: a regular file (not followed through a
// symlink), this user's, writable by no one else. -1 otherwise (absent or untrusted: it is then
// decompressed again and replaced).
int OpenTrustedCacheFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid() ||
      (st.st_mode & 022) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Decompresses `gz` into `cache_dir` once (keyed by path, size and mtime) and returns an open fd
// of the decompressed file. Streaming, bounded as it goes (see JsonlOptions): a line over
// max_line_bytes, more than max_gzip_bytes, or a ratio over max_gzip_ratio stops it at once.
absl::StatusOr<int> DecompressToCache(const std::string& gz, const FileIdentity& id,
                                      const JsonlOptions& options) {
  namespace fs = std::filesystem;
  const std::string& cache_dir = options.cache_dir;
  if (cache_dir.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(gz, ": a gzip'd file needs a cache directory to decompress into"));
  }
  TROUPE_RETURN_IF_ERROR(PrivateCacheDirectory(cache_dir));
  std::error_code ec;
  const std::string absolute = fs::absolute(gz, ec).string();
  uint64_t h =
      SplitMix64(static_cast<uint64_t>(id.size) ^ SplitMix64(static_cast<uint64_t>(id.mtime_ns)));
  for (char c : absolute) h = SplitMix64(h ^ static_cast<unsigned char>(c));
  const std::string leaf = fs::path(gz).filename().string();
  const std::string target =
      (fs::path(cache_dir) / absl::StrFormat("%016x-%s.jsonl", h, leaf.substr(0, 64))).string();
  if (const int fd = OpenTrustedCacheFile(target); fd >= 0) return fd;
  gzFile in = gzopen(gz.c_str(), "rb");
  if (in == nullptr) return absl::NotFoundError(absl::StrCat(gz, ": cannot open (", Errno(), ")"));
  gzbuffer(in, 1 << 17);
  // A fresh name, created here (never through a symlink, never an existing file).
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = absl::StrFormat(
      "%s.tmp-%d-%016x", target, ::getpid(),
      SplitMix64(static_cast<uint64_t>(absl::ToUnixNanos(absl::Now())) ^ ++counter));
  const int out = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (out < 0) {
    gzclose(in);
    return absl::InternalError(absl::StrCat("cannot write ", tmp, ": ", Errno()));
  }
  std::vector<char> buf(kReadChunk);
  absl::Status status;
  int64_t total = 0, line = 1, line_length = 0;
  while (status.ok()) {
    const int n = gzread(in, buf.data(), static_cast<unsigned>(buf.size()));
    if (n < 0) {
      int code = 0;
      const char* msg = gzerror(in, &code);
      status = absl::InvalidArgumentError(absl::StrCat(gz, ": not gzip data (", msg, ")"));
      break;
    }
    if (n == 0) break;
    total += n;
    // The line bound, as Index applies it, before the rest is inflated.
    for (const char* p = buf.data(); p < buf.data() + n;) {
      const char* nl = static_cast<const char*>(std::memchr(p, '\n', buf.data() + n - p));
      line_length += (nl == nullptr ? buf.data() + n : nl) - p;
      if (line_length > options.max_line_bytes) {
        status = absl::InvalidArgumentError(
            absl::StrCat(gz, ":", line, ": line longer than ", Mib(options.max_line_bytes)));
        break;
      }
      if (nl == nullptr) break;
      ++line;
      line_length = 0;
      p = nl + 1;
    }
    if (!status.ok()) break;
    const int64_t consumed = std::max<int64_t>(1, static_cast<int64_t>(gzoffset(in)));
    if (total > options.max_gzip_bytes) {
      status = absl::InvalidArgumentError(absl::StrCat(
          gz, ": decompresses to more than ", Mib(options.max_gzip_bytes),
          " (the limit for a .gz dataset); decompress it yourself and name the .jsonl"));
    } else if (total > kRatioCheckBytes && total > options.max_gzip_ratio * consumed) {
      status = absl::InvalidArgumentError(absl::StrCat(
          gz, ": decompresses to more than ", options.max_gzip_ratio,
          " times its compressed size (", total, " bytes from the first ", consumed,
          "): refused as a possible gzip bomb; decompress it yourself and name the .jsonl"));
    }
    for (int done = 0; status.ok() && done < n;) {
      const ssize_t w = ::write(out, buf.data() + done, static_cast<size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        status = absl::InternalError(absl::StrCat("cannot write ", tmp, ": ", Errno()));
        break;
      }
      done += static_cast<int>(w);
    }
  }
  gzclose(in);
  if (status.ok() && std::rename(tmp.c_str(), target.c_str()) != 0) {
    status = absl::InternalError(absl::StrCat("cannot rename ", tmp, ": ", Errno()));
  }
  if (!status.ok()) {
    ::close(out);
    ::unlink(tmp.c_str());
    return status;
  }
  return out;
}

}  // namespace

absl::StatusOr<Record> ParseRecord(absl::string_view line, absl::string_view where,
                                   const RecordKeys& keys) {
  absl::StatusOr<nlohmann::json> parsed = ParseJson(line);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", parsed.status().message()));
  }
  return ToPromptRecord(*parsed, where, keys);
}

absl::StatusOr<std::unique_ptr<JsonlDataset>> JsonlDataset::Open(
    const std::vector<std::string>& files, const JsonlOptions& options) {
  if (files.empty()) return absl::InvalidArgumentError("no dataset files given");
  std::unique_ptr<JsonlDataset> ds(new JsonlDataset());
  ds->max_line_bytes_ = options.max_line_bytes;
  for (const std::string& name : files) {
    struct stat st;
    if (::stat(name.c_str(), &st) != 0) {
      return absl::NotFoundError(absl::StrCat(name, ": cannot read (", Errno(), ")"));
    }
    if (S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": is a directory, not a JSONL file"));
    }
    FileIdentity id{name, static_cast<int64_t>(st.st_size),
                    static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
    File file;
    file.name = name;
    file.first_record = ds->size();
    if (absl::EndsWith(name, ".gz")) {
      TROUPE_ASSIGN_OR_RETURN(file.fd, DecompressToCache(name, id, options));
    } else {
      file.fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
      if (file.fd < 0) {
        return absl::NotFoundError(absl::StrCat(name, ": cannot read (", Errno(), ")"));
      }
    }
    ds->identity_.push_back(id);
    ds->files_.push_back(std::move(file));
    TROUPE_RETURN_IF_ERROR(ds->Index(ds->files_.back(), options));
  }
  return ds;
}

JsonlDataset::~JsonlDataset() {
  for (File& f : files_) {
    if (f.fd >= 0) ::close(f.fd);
  }
}

absl::Status JsonlDataset::Index(File& file, const JsonlOptions& options) {
  std::vector<char> buf(kReadChunk);
  int64_t pos = 0;         // file offset of buf[0]
  int64_t line_start = 0;  // offset of the current line
  int64_t line = 1;
  bool content = false;  // the current line has a non-space byte
  auto end_line = [&](int64_t end) -> absl::Status {
    if (end - line_start > max_line_bytes_) {
      return absl::InvalidArgumentError(
          absl::StrCat(file.name, ":", line, ": line longer than ", Mib(max_line_bytes_)));
    }
    if (content) {
      const int64_t n = size() - file.first_record;
      if (n % kLineBlock == 0) file.block_lines.push_back(line);
      offsets_.push_back(static_cast<uint64_t>(line_start));
    }
    return absl::OkStatus();
  };
  while (true) {
    const ssize_t got = ::pread(file.fd, buf.data(), buf.size(), pos);
    if (got < 0) return absl::InternalError(absl::StrCat(file.name, ": read error: ", Errno()));
    if (got == 0) break;
    const char* p = buf.data();
    const char* end = p + got;
    while (p < end) {
      const char* nl = static_cast<const char*>(std::memchr(p, '\n', end - p));
      const char* stop = nl == nullptr ? end : nl;
      for (const char* q = p; !content && q < stop; ++q) content = !IsSpace(*q);
      if (nl == nullptr) {
        const int64_t length = pos + got - line_start;
        if (length > max_line_bytes_) {
          return absl::InvalidArgumentError(
              absl::StrCat(file.name, ":", line, ": line longer than ", Mib(max_line_bytes_)));
        }
        break;
      }
      const int64_t nl_offset = pos + (nl - buf.data());
      TROUPE_RETURN_IF_ERROR(end_line(nl_offset));
      line_start = nl_offset + 1;
      ++line;
      content = false;
      p = nl + 1;
    }
    pos += got;
  }
  TROUPE_RETURN_IF_ERROR(end_line(pos));  // a last line without a newline
  bytes_ += pos;
  (void)options;
  return absl::OkStatus();
}

const JsonlDataset::File& JsonlDataset::FileOf(int64_t index) const {
  auto it = std::upper_bound(files_.begin(), files_.end(), index,
                             [](int64_t i, const File& f) { return i < f.first_record; });
  return *(it - 1);
}

std::string JsonlDataset::Where(int64_t index) const {
  if (index < 0 || index >= size()) return absl::StrCat("record ", index);
  const File& f = FileOf(index);
  const int64_t local = index - f.first_record;
  const int64_t block = local / kLineBlock;
  int64_t line = f.block_lines[block];
  const int64_t from = static_cast<int64_t>(offsets_[f.first_record + block * kLineBlock]);
  const int64_t to = static_cast<int64_t>(offsets_[index]);
  char buf[16384];
  for (int64_t pos = from; pos < to;) {
    const ssize_t got =
        ::pread(f.fd, buf, static_cast<size_t>(std::min<int64_t>(sizeof(buf), to - pos)), pos);
    if (got <= 0) break;
    line += std::count(buf, buf + got, '\n');
    pos += got;
  }
  return absl::StrCat(f.name, ":", line);
}

absl::StatusOr<std::string> JsonlDataset::Line(int64_t index) const {
  if (index < 0 || index >= size()) {
    return absl::OutOfRangeError(
        absl::StrCat("record ", index, " of a dataset of ", size(), " records"));
  }
  const File& f = FileOf(index);
  int64_t pos = static_cast<int64_t>(offsets_[index]);
  std::string out;
  char buf[8192];
  while (true) {
    const ssize_t got = ::pread(f.fd, buf, sizeof(buf), pos);
    if (got < 0) return absl::InternalError(absl::StrCat(f.name, ": read error: ", Errno()));
    if (got == 0) break;
    const char* nl = static_cast<const char*>(std::memchr(buf, '\n', static_cast<size_t>(got)));
    out.append(buf, nl == nullptr ? static_cast<size_t>(got) : static_cast<size_t>(nl - buf));
    if (static_cast<int64_t>(out.size()) > max_line_bytes_) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(index), ": line longer than ", Mib(max_line_bytes_)));
    }
    if (nl != nullptr) break;
    pos += got;
  }
  if (!out.empty() && out.back() == '\r') out.pop_back();
  return out;
}

absl::StatusOr<Record> JsonlDataset::Read(int64_t index, const RecordKeys& keys) const {
  TROUPE_ASSIGN_OR_RETURN(std::string line, Line(index));
  return ParseRecord(line, Where(index), keys);
}

absl::Status JsonlDataset::Validate(const RecordKeys& keys,
                                    const std::function<void(int64_t, int64_t)>& progress,
                                    int max_errors) const {
  std::vector<std::string> errors;
  int64_t count = 0;
  for (int64_t i = 0; i < size(); ++i) {
    if (progress && i > 0 && i % 65536 == 0) progress(i, size());
    absl::StatusOr<std::string> line = Line(i);
    absl::Status s = line.status();
    if (s.ok()) {
      // The location is computed only for a bad record.
      absl::StatusOr<Record> r = ParseRecord(*line, "", keys);
      if (!r.ok()) s = absl::InvalidArgumentError(absl::StrCat(Where(i), r.status().message()));
    }
    if (s.ok()) continue;
    ++count;
    if (static_cast<int>(errors.size()) < max_errors) errors.emplace_back(s.message());
  }
  if (progress) progress(size(), size());
  if (count == 0) return absl::OkStatus();
  if (count > static_cast<int64_t>(errors.size())) {
    errors.push_back(absl::StrCat("... ", count, " bad records in all"));
  }
  return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
}

// ------------------------------------------------------------------------------------------------

ShuffledOrder::ShuffledOrder(int64_t n, uint64_t seed, bool shuffle)
    : n_(n), seed_(seed), shuffle_(shuffle) {
  while ((uint64_t{1} << (2 * half_bits_)) < static_cast<uint64_t>(std::max<int64_t>(n, 1))) {
    ++half_bits_;
  }
}

uint64_t ShuffledOrder::Permute(uint64_t x, uint64_t epoch) const {
  const uint64_t mask = (uint64_t{1} << half_bits_) - 1;
  uint64_t left = x >> half_bits_, right = x & mask;
  const uint64_t key = SplitMix64(seed_ * 0x9e3779b97f4a7c15ULL ^ SplitMix64(epoch));
  for (uint64_t round = 0; round < 4; ++round) {
    const uint64_t f = SplitMix64(key + round * 0x632be59bd9b4e019ULL + right) & mask;
    const uint64_t next = left ^ f;
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

int64_t ShuffledOrder::RecordAt(int64_t i) const {
  if (n_ <= 0) return 0;
  const uint64_t epoch = static_cast<uint64_t>(i / n_);
  uint64_t pos = static_cast<uint64_t>(i % n_);
  if (!shuffle_) return static_cast<int64_t>(pos);
  // Cycle walking: the permutation of the power-of-4 domain, restricted to [0, n).
  do {
    pos = Permute(pos, epoch);
  } while (pos >= static_cast<uint64_t>(n_));
  return static_cast<int64_t>(pos);
}

}  // namespace troupe::data
