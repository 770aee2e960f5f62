#include "base/metrics/metrics_record.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace troupe::metrics {
namespace {

using Json = nlohmann::json;

// Counts are whole numbers: written as JSON integers.
nlohmann::ordered_json CountToJson(double v) {
  if (v == std::floor(v) && std::fabs(v) < 9.0e15) return static_cast<int64_t>(v);
  return v;
}

absl::StatusOr<double> ScalarFromJson(const std::string& name, const Json& value) {
  if (value.is_number()) return value.get<double>();
  if (value.is_string()) {
    const std::string& s = value.get_ref<const std::string&>();
    if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (s == "Infinity") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity") return -std::numeric_limits<double>::infinity();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("metric \"", name, "\" is ", value.dump(),
                   "; expected a number, \"NaN\", \"Infinity\", \"-Infinity\" or a histogram"));
}

absl::Status NumbersFromJson(const std::string& name, const Json& object, const char* key,
                             std::vector<double>& out) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat("histogram \"", name, "\": \"", key, "\" must be an array of numbers"));
  }
  for (const Json& v : *it) {
    if (!v.is_number()) {
      return absl::InvalidArgumentError(absl::StrCat("histogram \"", name, "\": \"", key,
                                                     "\" holds ", v.dump(), ", not a number"));
    }
    out.push_back(v.get<double>());
  }
  return absl::OkStatus();
}

absl::StatusOr<Histogram> HistogramFromJson(const std::string& name, const Json& object) {
  Histogram h;
  absl::Status status = NumbersFromJson(name, object, "buckets", h.bucket_limits);
  if (status.ok()) status = NumbersFromJson(name, object, "counts", h.counts);
  if (!status.ok()) return status;
  if (h.counts.size() != h.bucket_limits.size()) {
    return absl::InvalidArgumentError(absl::StrCat("histogram \"", name, "\": \"counts\" has ",
                                                   h.counts.size(), " entries, \"buckets\" ",
                                                   h.bucket_limits.size()));
  }
  double total = 0;
  for (double c : h.counts) total += c;
  h.num = total;
  const std::pair<const char*, double*> fields[] = {{"min", &h.min},
                                                    {"max", &h.max},
                                                    {"num", &h.num},
                                                    {"sum", &h.sum},
                                                    {"sum_squares", &h.sum_squares}};
  for (const auto& [key, target] : fields) {
    auto it = object.find(key);
    if (it == object.end()) continue;
    if (!it->is_number()) {
      return absl::InvalidArgumentError(
          absl::StrCat("histogram \"", name, "\": \"", key, "\" must be a number"));
    }
    *target = it->get<double>();
  }
  return h;
}

}  // namespace

nlohmann::ordered_json ScalarToJson(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return v;
}

nlohmann::ordered_json HistogramToJson(const Histogram& h) {
  nlohmann::ordered_json buckets = nlohmann::ordered_json::array();
  nlohmann::ordered_json counts = nlohmann::ordered_json::array();
  for (double limit : h.bucket_limits) buckets.push_back(limit);
  for (double count : h.counts) counts.push_back(CountToJson(count));
  nlohmann::ordered_json out;
  out["buckets"] = std::move(buckets);
  out["counts"] = std::move(counts);
  out["min"] = h.min;
  out["max"] = h.max;
  out["num"] = CountToJson(h.num);
  out["sum"] = h.sum;
  out["sum_squares"] = h.sum_squares;
  return out;
}

std::string EncodeMetricsRecord(const MetricsRecord& record) {
  nlohmann::ordered_json out;
  out["step"] = record.step;
  out["time"] = record.time;
  auto s = record.scalars.begin();
  auto h = record.histograms.begin();
  while (s != record.scalars.end() || h != record.histograms.end()) {
    if (h == record.histograms.end() || (s != record.scalars.end() && s->first <= h->first)) {
      out[s->first] = ScalarToJson(s->second);
      if (h != record.histograms.end() && h->first == s->first) ++h;
      ++s;
    } else {
      out[h->first] = HistogramToJson(h->second);
      ++h;
    }
  }
  // The replace handler never throws (invalid UTF-8 becomes U+FFFD).
  return out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

absl::StatusOr<MetricsRecord> DecodeMetricsRecord(absl::string_view line) {
  Json json = Json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return absl::InvalidArgumentError("not valid JSON");
  if (!json.is_object()) return absl::InvalidArgumentError("not a JSON object");
  MetricsRecord record;
  auto step = json.find("step");
  if (step == json.end() || !step->is_number_integer() ||
      (step->is_number_unsigned() ? step->get<uint64_t>() > INT64_MAX : step->get<int64_t>() < 0)) {
    return absl::InvalidArgumentError("\"step\" must be an integer >= 0");
  }
  record.step = step->get<int64_t>();
  auto time = json.find("time");
  if (time == json.end() || !time->is_number()) {
    return absl::InvalidArgumentError("\"time\" must be a number");
  }
  record.time = time->get<double>();
  for (auto it = json.begin(); it != json.end(); ++it) {
    if (it.key() == "step" || it.key() == "time") continue;
    if (it->is_object()) {
      absl::StatusOr<Histogram> h = HistogramFromJson(it.key(), *it);
      if (!h.ok()) return h.status();
      record.histograms.emplace(it.key(), *std::move(h));
    } else {
      absl::StatusOr<double> v = ScalarFromJson(it.key(), *it);
      if (!v.ok()) return v.status();
      record.scalars.emplace(it.key(), *v);
    }
  }
  return record;
}

}  // namespace troupe::metrics
