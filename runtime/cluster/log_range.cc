#include "runtime/cluster/log_range.h"

#include <algorithm>
#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace troupe {

absl::StatusOr<LogRange> ReadLogRange(const std::string& path, int64_t offset, int64_t max_bytes) {
  if (offset < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("log offset must be non-negative, got ", offset));
  }
  if (max_bytes < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_bytes must be positive, got ", max_bytes));
  }
  LogRange out;
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return out;
  out.size = static_cast<int64_t>(in.tellg());
  if (out.size < 0) out.size = 0;
  if (offset >= out.size) return out;
  const int64_t n = std::min(max_bytes, out.size - offset);
  out.bytes.resize(static_cast<size_t>(n));
  in.seekg(offset);
  in.read(out.bytes.data(), static_cast<std::streamsize>(n));
  out.bytes.resize(static_cast<size_t>(std::max<std::streamsize>(0, in.gcount())));
  return out;
}

}  // namespace troupe
