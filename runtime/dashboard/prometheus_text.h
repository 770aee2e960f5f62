// PrometheusText: builds a page in Prometheus' text exposition format (version 0.0.4), the body
// of the head's /metrics.
//
//   PrometheusText page;
//   page.Family("troupe_actors", "gauge", "Actors by state.");
//   page.Sample("troupe_actors", {{"state", "ALIVE"}}, 7);
//   std::string body = page.Take();
//
// Each family's # HELP / # TYPE lines come once, before its samples; the samples of a family
// must follow its Family() call (the format wants them contiguous). Label values and help text
// are escaped; values print as Prometheus floats (NaN, +Inf, -Inf).
//
// Thread-safety: not thread-safe (one page per request).
#ifndef TROUPE_RUNTIME_DASHBOARD_PROMETHEUS_TEXT_H_
#define TROUPE_RUNTIME_DASHBOARD_PROMETHEUS_TEXT_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace troupe::dashboard {

// Content-Type of the page.
inline constexpr char kPrometheusContentType[] = "text/plain; version=0.0.4; charset=utf-8";

class PrometheusText {
 public:
  using Labels = std::vector<std::pair<std::string, std::string>>;

  // Starts a family: `type` is "gauge", "counter" or "untyped".
  void Family(absl::string_view name, absl::string_view type, absl::string_view help);
  // One sample of the current family (`name` may add a suffix, e.g. "_total" is part of it).
  void Sample(absl::string_view name, const Labels& labels, double value);

  // The page so far; the builder is empty afterwards.
  std::string Take();

 private:
  std::string out_;
};

// A label value with \, " and newline escaped.
std::string EscapeLabelValue(absl::string_view value);

// The value as the text format writes it: shortest round-trip decimal, NaN, +Inf, -Inf.
std::string FormatPrometheusValue(double value);

}  // namespace troupe::dashboard

#endif  // TROUPE_RUNTIME_DASHBOARD_PROMETHEUS_TEXT_H_
