#include "runtime/dashboard/prometheus_text.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace troupe::dashboard {

std::string EscapeLabelValue(absl::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string FormatPrometheusValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    return absl::StrCat(static_cast<long long>(value));
  }
  // The shortest form that reads back exactly.
  char buf[64];
  for (int precision = 6; precision < 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, value);
    if (std::strtod(buf, nullptr) == value) return buf;
  }
  std::snprintf(buf, sizeof(buf), "%.17g", value);
  return buf;
}

void PrometheusText::Family(absl::string_view name, absl::string_view type,
                            absl::string_view help) {
  std::string escaped;
  for (char c : help) {
    if (c == '\\') {
      escaped += "\\\\";
    } else if (c == '\n') {
      escaped += "\\n";
    } else {
      escaped += c;
    }
  }
  absl::StrAppend(&out_, "# HELP ", name, " ", escaped, "\n# TYPE ", name, " ", type, "\n");
}

void PrometheusText::Sample(absl::string_view name, const Labels& labels, double value) {
  absl::StrAppend(&out_, name);
  if (!labels.empty()) {
    out_ += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      absl::StrAppend(&out_, i == 0 ? "" : ",", labels[i].first, "=\"",
                      EscapeLabelValue(labels[i].second), "\"");
    }
    out_ += '}';
  }
  absl::StrAppend(&out_, " ", FormatPrometheusValue(value), "\n");
}

std::string PrometheusText::Take() {
  std::string out;
  out.swap(out_);
  return out;
}

}  // namespace troupe::dashboard
