// The web dashboard's files (web/), built into the binary that serves them: a genrule runs
// embed_files over //web at build time (see BUILD.bazel), so the dashboard is found however and
// wherever troupe is started. DashboardServer serves them unless told to serve a directory.
#ifndef TROUPE_RUNTIME_DASHBOARD_WEB_FILES_H_
#define TROUPE_RUNTIME_DASHBOARD_WEB_FILES_H_

#include <string_view>

#include "absl/types/span.h"

namespace troupe::dashboard {

struct WebFile {
  std::string_view path;  // relative to web/, e.g. "index.html", "vendor/uplot/uPlot.min.css"
  std::string_view data;
};

// Every file of web/ as it was at build time, sorted by path. Static storage; never empty.
absl::Span<const WebFile> WebFiles();

}  // namespace troupe::dashboard

#endif  // TROUPE_RUNTIME_DASHBOARD_WEB_FILES_H_
