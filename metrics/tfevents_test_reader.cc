#include "metrics/tfevents_test_reader.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "metrics/crc32c.h"

namespace troupe::metrics::testing {
namespace {

uint64_t LoadLittleEndian(const std::string& bytes, size_t offset, int width) {
  uint64_t v = 0;
  for (int i = width - 1; i >= 0; --i) {
    v = (v << 8) | static_cast<unsigned char>(bytes[offset + i]);
  }
  return v;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ReadTfRecords(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string bytes = buffer.str();

  std::vector<std::string> records;
  size_t offset = 0;
  while (offset < bytes.size()) {
    const std::string where =
        absl::StrCat(path, ": record ", records.size(), " at byte ", offset, ": ");
    if (bytes.size() - offset < 12) return absl::DataLossError(where + "truncated header");
    const uint64_t length = LoadLittleEndian(bytes, offset, 8);
    const uint32_t length_crc = static_cast<uint32_t>(LoadLittleEndian(bytes, offset + 8, 4));
    if (UnmaskCrc32c(length_crc) != Crc32c(absl::string_view(bytes).substr(offset, 8))) {
      return absl::DataLossError(where + "length CRC mismatch");
    }
    if (bytes.size() - offset - 12 < length + 4) {
      return absl::DataLossError(where + "truncated data");
    }
    std::string data = bytes.substr(offset + 12, length);
    const uint32_t data_crc =
        static_cast<uint32_t>(LoadLittleEndian(bytes, offset + 12 + length, 4));
    if (UnmaskCrc32c(data_crc) != Crc32c(data)) {
      return absl::DataLossError(where + "data CRC mismatch");
    }
    records.push_back(std::move(data));
    offset += 12 + length + 4;
  }
  return records;
}

absl::StatusOr<std::vector<Event>> ReadEvents(const std::string& path) {
  absl::StatusOr<std::vector<std::string>> records = ReadTfRecords(path);
  if (!records.ok()) return records.status();
  std::vector<Event> events;
  for (size_t i = 0; i < records->size(); ++i) {
    Event event;
    if (!event.ParseFromString((*records)[i])) {
      return absl::DataLossError(absl::StrCat(path, ": record ", i, " is not an Event"));
    }
    events.push_back(std::move(event));
  }
  return events;
}

std::vector<std::string> ListEventFiles(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.is_regular_file() &&
        entry.path().filename().string().find("tfevents") != std::string::npos) {
      files.push_back(entry.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace troupe::metrics::testing
