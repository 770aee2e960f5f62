// LoadLabelledAnswers: reads a hand-labelled set of answer pairs (testdata/math_equivalence.tsv)
// for the equivalence checker's test and benchmark.
//
// Format: UTF-8 text, one case per line, tab-separated: given, reference, equivalent ("1" or
// "0"), category, note (the last two may be empty). Lines starting with '#' and the header line
// ("given\treference\t...") are skipped; blank lines too.
//
// Thread-safety: pure function.
#ifndef TROUPE_REWARD_MATH_LABELLED_ANSWERS_H_
#define TROUPE_REWARD_MATH_LABELLED_ANSWERS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace troupe::reward {

struct LabelledAnswer {
  std::string given;
  std::string reference;
  bool equivalent = false;
  std::string category;
  std::string note;
  int line = 0;  // 1-based line in the file
};

// The cases of the file at `path`; NOT_FOUND when it cannot be opened, INVALID_ARGUMENT naming
// path:line for a malformed line (fewer than 3 fields, a label other than 0/1).
absl::StatusOr<std::vector<LabelledAnswer>> LoadLabelledAnswers(const std::string& path);

}  // namespace troupe::reward

#endif  // TROUPE_REWARD_MATH_LABELLED_ANSWERS_H_
