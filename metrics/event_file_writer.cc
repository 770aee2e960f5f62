#include "metrics/event_file_writer.h"

#include <limits.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "metrics/crc32c.h"

namespace troupe::metrics {
namespace {

// Protobuf wire types.
constexpr int kVarint = 0;
constexpr int kFixed64 = 1;
constexpr int kLengthDelimited = 2;
constexpr int kFixed32 = 5;

// Field numbers (tensorflow/core/util/event.proto, tensorflow/core/framework/summary.proto).
constexpr int kEventWallTime = 1;
constexpr int kEventStep = 2;
constexpr int kEventFileVersion = 3;
constexpr int kEventSummary = 5;
constexpr int kEventSessionLog = 7;
constexpr int kSummaryValue = 1;
constexpr int kValueTag = 1;
constexpr int kValueSimpleValue = 2;
constexpr int kValueHisto = 5;
constexpr int kHistoMin = 1;
constexpr int kHistoMax = 2;
constexpr int kHistoNum = 3;
constexpr int kHistoSum = 4;
constexpr int kHistoSumSquares = 5;
constexpr int kHistoBucketLimit = 6;
constexpr int kHistoBucket = 7;
constexpr int kSessionLogStatus = 1;
constexpr uint64_t kSessionLogStart = 1;

constexpr char kFileVersion[] = "brain.Event:2";

void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void PutLittleEndian(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

void PutTag(std::string& out, int field, int wire_type) {
  PutVarint(out, (static_cast<uint64_t>(field) << 3) | wire_type);
}

uint64_t DoubleBits(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return bits;
}

void PutDoubleValue(std::string& out, double v) { PutLittleEndian(out, DoubleBits(v), 8); }

// A proto3 `double` field outside a oneof: omitted when its bits are zero (as protobuf does, so
// -0.0 is still written).
void PutDoubleField(std::string& out, int field, double v) {
  if (DoubleBits(v) == 0) return;
  PutTag(out, field, kFixed64);
  PutDoubleValue(out, v);
}

void PutBytesField(std::string& out, int field, const std::string& bytes) {
  PutTag(out, field, kLengthDelimited);
  PutVarint(out, bytes.size());
  out += bytes;
}

// A packed `repeated double`: omitted when empty.
void PutPackedDoubles(std::string& out, int field, const std::vector<double>& values) {
  if (values.empty()) return;
  PutTag(out, field, kLengthDelimited);
  PutVarint(out, 8 * values.size());
  for (double v : values) PutDoubleValue(out, v);
}

std::string EncodeHistogram(const Histogram& h) {
  std::string out;
  PutDoubleField(out, kHistoMin, h.min);
  PutDoubleField(out, kHistoMax, h.max);
  PutDoubleField(out, kHistoNum, h.num);
  PutDoubleField(out, kHistoSum, h.sum);
  PutDoubleField(out, kHistoSumSquares, h.sum_squares);
  PutPackedDoubles(out, kHistoBucketLimit, h.bucket_limits);
  PutPackedDoubles(out, kHistoBucket, h.counts);
  return out;
}

// Event header fields (wall_time, step); the caller appends the `what` member.
std::string EventHeader(int64_t step, absl::Time wall_time) {
  std::string out;
  PutDoubleField(out, kEventWallTime, absl::ToDoubleSeconds(wall_time - absl::UnixEpoch()));
  if (step != 0) {
    PutTag(out, kEventStep, kVarint);
    PutVarint(out, static_cast<uint64_t>(step));
  }
  return out;
}

std::string Hostname() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  std::string host(name);
  for (char& c : host) {
    if (c == '/') c = '_';
  }
  return host;
}

absl::Status MakeDirectories(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot create directory ", dir, ": ", error.message()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<EventFileWriter>> EventFileWriter::Create(const std::string& dir,
                                                                         absl::Time now) {
  TROUPE_RETURN_IF_ERROR(MakeDirectories(dir));
  const std::string base =
      absl::StrFormat("%s/events.out.tfevents.%010d.%s", dir, absl::ToUnixSeconds(now), Hostname());
  std::unique_ptr<AppendFile> file;
  for (int attempt = 0; file == nullptr; ++attempt) {
    const std::string path = attempt == 0 ? base : absl::StrCat(base, ".", attempt);
    absl::StatusOr<std::unique_ptr<AppendFile>> opened = AppendFile::Open(path, true);
    if (opened.ok()) {
      file = *std::move(opened);
    } else if (!absl::IsAlreadyExists(opened.status()) || attempt >= 1000) {
      return opened.status();
    }
  }
  std::unique_ptr<EventFileWriter> writer(new EventFileWriter(std::move(file)));
  std::string event = EventHeader(0, now);
  PutBytesField(event, kEventFileVersion, kFileVersion);
  TROUPE_RETURN_IF_ERROR(writer->WriteRecord(event));
  return writer;
}

absl::Status EventFileWriter::WriteSummary(int64_t step, absl::Time wall_time,
                                           const std::map<std::string, double>& scalars,
                                           const std::map<std::string, Histogram>& histograms) {
  if (step < 0) {
    return absl::InvalidArgumentError(absl::StrCat("event step must be >= 0, got ", step));
  }
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    if (tag.empty()) return absl::InvalidArgumentError("event summary tag is empty");
    std::string encoded;
    PutBytesField(encoded, kValueTag, tag);
    PutTag(encoded, kValueSimpleValue, kFixed32);
    const float f = static_cast<float>(value);
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof(bits));
    PutLittleEndian(encoded, bits, 4);
    PutBytesField(summary, kSummaryValue, encoded);
  }
  for (const auto& [tag, histogram] : histograms) {
    if (tag.empty()) return absl::InvalidArgumentError("event summary tag is empty");
    if (histogram.num == 0) continue;
    std::string encoded;
    PutBytesField(encoded, kValueTag, tag);
    PutBytesField(encoded, kValueHisto, EncodeHistogram(histogram));
    PutBytesField(summary, kSummaryValue, encoded);
  }
  std::string event = EventHeader(step, wall_time);
  PutBytesField(event, kEventSummary, summary);
  return WriteRecord(event);
}

absl::Status EventFileWriter::WriteSessionStart(int64_t step, absl::Time wall_time) {
  if (step < 0) {
    return absl::InvalidArgumentError(absl::StrCat("event step must be >= 0, got ", step));
  }
  std::string session_log;
  PutTag(session_log, kSessionLogStatus, kVarint);
  PutVarint(session_log, kSessionLogStart);
  std::string event = EventHeader(step, wall_time);
  PutBytesField(event, kEventSessionLog, session_log);
  return WriteRecord(event);
}

absl::Status EventFileWriter::WriteRecord(const std::string& event) {
  std::string record;
  record.reserve(event.size() + 16);
  PutLittleEndian(record, event.size(), 8);
  PutLittleEndian(record, MaskCrc32c(Crc32c(record)), 4);
  record += event;
  PutLittleEndian(record, MaskCrc32c(Crc32c(event)), 4);
  return file_->Append(record);
}

}  // namespace troupe::metrics
