// Internal to recipes/job_spec: the one-line docs of the spec's keys (job_spec_docs.cc), which
// DescribeSpecKeys joins with what the parser says of each key.
#ifndef TROUPE_RECIPES_JOB_SPEC_KEY_DOCS_H_
#define TROUPE_RECIPES_JOB_SPEC_KEY_DOCS_H_

#include <vector>

namespace troupe::recipes::job_spec_internal {

// A key's doc; `path` spells an actor kind as "<kind>" when the doc is the same for every kind.
// `type` and `default_value` (when set) replace what the parser reports: for keys whose default
// depends on another key, or whose reader takes more forms than its type says.
struct KeyDoc {
  const char* path;
  const char* doc;
  const char* type = nullptr;
  const char* default_value = nullptr;
};

const std::vector<KeyDoc>& KeyDocs();

}  // namespace troupe::recipes::job_spec_internal

#endif  // TROUPE_RECIPES_JOB_SPEC_KEY_DOCS_H_
