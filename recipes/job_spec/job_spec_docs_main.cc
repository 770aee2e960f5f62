// Prints docs/job_spec.md, the reference of every job spec key (SpecKeysMarkdown):
//   bazel run //recipes/job_spec:job_spec_docs > docs/job_spec.md
#include <cstdio>

#include "recipes/job_spec/job_spec.h"

int main() {
  const std::string markdown = troupe::recipes::SpecKeysMarkdown();
  std::fwrite(markdown.data(), 1, markdown.size(), stdout);
  return 0;
}
