// Histogram: raw values bucketed for metrics.jsonl and TensorBoard (the fields of TensorBoard's
// HistogramProto, so one struct feeds both).
//
// Buckets follow TensorBoard's convention: bucket_limits[i] is bucket i's upper edge, bucket 0
// starts at `min`, bucket i > 0 starts at bucket_limits[i-1]; a bucket holds the values v with
// lower <= v < upper, except the last, which also holds v == its upper edge.
//
// MakeHistogram chooses the buckets:
//   - no values: num = 0 and no buckets;
//   - all values integers spanning at most max_buckets integers (e.g. policy-version staleness
//     0..4): one bucket per integer k in [min, max], upper edge k + 0.5, so every count is exact;
//   - all values equal (not integers): one bucket whose upper edge is the value;
//   - otherwise max_buckets equal-width buckets from min to max (the last edge is exactly max).
//
//   absl::StatusOr<Histogram> h = MakeHistogram({0, 1, 1, 3}, 30);
//   // h->bucket_limits == {0.5, 1.5, 2.5, 3.5}, h->counts == {1, 2, 0, 1}
//
// Thread-safety: plain value type; MakeHistogram is a pure function.
#ifndef TROUPE_BASE_METRICS_HISTOGRAM_H_
#define TROUPE_BASE_METRICS_HISTOGRAM_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace troupe::metrics {

struct Histogram {
  double min = 0;                     // Smallest value (0 when num == 0).
  double max = 0;                     // Largest value (0 when num == 0).
  double num = 0;                     // Number of values.
  double sum = 0;                     // Sum of the values.
  double sum_squares = 0;             // Sum of their squares.
  std::vector<double> bucket_limits;  // Upper edges, strictly increasing.
  std::vector<double> counts;         // counts[i]: values in bucket i; same length as limits.

  bool operator==(const Histogram& other) const;
};

// Buckets `values` as described above. InvalidArgument if max_buckets < 1 or a value is NaN or
// infinite (the message gives its index).
absl::StatusOr<Histogram> MakeHistogram(absl::Span<const double> values, int max_buckets);

}  // namespace troupe::metrics

#endif  // TROUPE_BASE_METRICS_HISTOGRAM_H_
