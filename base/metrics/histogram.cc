#include "base/metrics/histogram.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace troupe::metrics {
namespace {

// Integers up to 2^53 are exact in a double; beyond that "integral" says nothing useful.
constexpr double kMaxExactInteger = 9007199254740992.0;

bool IsSmallInteger(double v) { return std::fabs(v) <= kMaxExactInteger && v == std::floor(v); }

}  // namespace

bool Histogram::operator==(const Histogram& other) const {
  return min == other.min && max == other.max && num == other.num && sum == other.sum &&
         sum_squares == other.sum_squares && bucket_limits == other.bucket_limits &&
         counts == other.counts;
}

absl::StatusOr<Histogram> MakeHistogram(absl::Span<const double> values, int max_buckets) {
  if (max_buckets < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("histogram max_buckets must be >= 1, got ", max_buckets));
  }
  Histogram h;
  if (values.empty()) return h;
  bool all_integers = true;
  h.min = values[0];
  h.max = values[0];
  for (size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    if (!std::isfinite(v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("histogram value ", i, " is ", v, "; only finite values can be bucketed"));
    }
    h.min = std::min(h.min, v);
    h.max = std::max(h.max, v);
    h.sum += v;
    h.sum_squares += v * v;
    all_integers = all_integers && IsSmallInteger(v);
  }
  h.num = static_cast<double>(values.size());

  if (all_integers && h.max - h.min + 1 <= max_buckets) {
    const int n = static_cast<int>(h.max - h.min) + 1;
    h.counts.assign(n, 0);
    for (int k = 0; k < n; ++k) h.bucket_limits.push_back(h.min + k + 0.5);
    for (double v : values) h.counts[static_cast<int>(v - h.min)] += 1;
    return h;
  }
  if (h.min == h.max) {
    h.bucket_limits = {h.max};
    h.counts = {h.num};
    return h;
  }
  const int n = max_buckets;
  const double width = (h.max - h.min) / n;
  h.counts.assign(n, 0);
  for (int k = 1; k < n; ++k) h.bucket_limits.push_back(h.min + k * width);
  h.bucket_limits.push_back(h.max);
  for (double v : values) {
    int index = static_cast<int>(std::floor((v - h.min) / width));
    index = std::clamp(index, 0, n - 1);
    // Floating-point rounding can put a value next to an edge one bucket off; the edges are the
    // truth, so nudge it to the bucket whose [lower, upper) holds it.
    while (index > 0 && v < h.bucket_limits[index - 1]) --index;
    while (index < n - 1 && v >= h.bucket_limits[index]) ++index;
    h.counts[index] += 1;
  }
  return h;
}

}  // namespace troupe::metrics
