#include "reward/math/labelled_answers.h"

#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace troupe::reward {

absl::StatusOr<std::vector<LabelledAnswer>> LoadLabelledAnswers(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::vector<LabelledAnswer> cases;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || absl::StartsWith(line, "#") || absl::StartsWith(line, "given\t")) continue;
    std::vector<std::string> fields = absl::StrSplit(line, '\t');
    if (fields.size() < 3) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", number, ": expected given, reference, equivalent"));
    }
    if (fields[2] != "0" && fields[2] != "1") {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", number, ": the label must be 0 or 1, not '", fields[2], "'"));
    }
    LabelledAnswer c;
    c.given = fields[0];
    c.reference = fields[1];
    c.equivalent = fields[2] == "1";
    if (fields.size() > 3) c.category = fields[3];
    if (fields.size() > 4) c.note = fields[4];
    c.line = number;
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace troupe::reward
