// Prints docs/metrics.md, the reference of every metric (MetricCatalogMarkdown):
//   bazel run //metrics:metric_docs > docs/metrics.md
#include <cstdio>
#include <string>

#include "metrics/metric_catalog.h"

int main() {
  const std::string markdown = troupe::metrics::MetricCatalogMarkdown();
  std::fwrite(markdown.data(), 1, markdown.size(), stdout);
  return 0;
}
