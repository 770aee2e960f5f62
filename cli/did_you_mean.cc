#include "cli/did_you_mean.h"

#include <algorithm>
#include <vector>

namespace troupe {

int EditDistance(std::string_view a, std::string_view b) {
  const size_t n = a.size();
  const size_t m = b.size();
  // d[i][j]: the distance between a's first i and b's first j characters.
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1, 0));
  for (size_t i = 0; i <= n; ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= m; ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

std::optional<std::string> DidYouMean(std::string_view typed,
                                      absl::Span<const std::string> candidates) {
  const int length = static_cast<int>(typed.size());
  const int threshold = std::min(std::max(2, length / 3), length - 1);
  std::optional<std::string> best;
  int best_distance = threshold + 1;
  for (const std::string& candidate : candidates) {
    const int distance = EditDistance(typed, candidate);
    if (distance == 0) return std::nullopt;
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  return best;
}

}  // namespace troupe
