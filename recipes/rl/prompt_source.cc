#include "recipes/rl/prompt_source.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace troupe::recipes {

PromptSource::PromptSource(std::unique_ptr<PromptDataset> dataset) : dataset_(std::move(dataset)) {}

absl::StatusOr<proto::Prompt> PromptSource::Next() {
  int64_t id;
  if (!given_back_.empty()) {
    id = given_back_.front();
    given_back_.pop_front();
  } else {
    id = cursor_++;
  }
  absl::StatusOr<proto::Prompt> p = dataset_->Get(id);
  if (!p.ok()) {
    given_back_.push_front(id);
    return p.status();
  }
  p->set_prompt_id(id);
  return p;
}

absl::StatusOr<std::vector<proto::Prompt>> PromptSource::Next(int64_t n) {
  std::vector<proto::Prompt> out;
  for (int64_t i = 0; i < n; ++i) {
    absl::StatusOr<proto::Prompt> p = Next();
    if (!p.ok()) {
      GiveBack(out);
      return p.status();
    }
    out.push_back(*std::move(p));
  }
  return out;
}

void PromptSource::GiveBack(const std::vector<proto::Prompt>& prompts) {
  for (auto it = prompts.rbegin(); it != prompts.rend(); ++it) {
    given_back_.push_front(it->prompt_id());
  }
}

nlohmann::json PromptSource::State(const std::vector<int64_t>& out) const {
  std::vector<int64_t> again(given_back_.begin(), given_back_.end());
  std::vector<int64_t> sorted_out = out;
  std::sort(sorted_out.begin(), sorted_out.end());
  again.insert(again.begin(), sorted_out.begin(), sorted_out.end());
  nlohmann::json state = {{"cursor", cursor_}, {"again", again}};
  if (nlohmann::json id = dataset_->Identity(); !id.is_null()) state["dataset"] = std::move(id);
  return state;
}

absl::Status PromptSource::Restore(const nlohmann::json& state) {
  if (!state.is_object() || !state.contains("cursor") || !state["cursor"].is_number_integer() ||
      state["cursor"].get<int64_t>() < 0) {
    return absl::InvalidArgumentError("prompt state: `cursor` is missing or not an integer >= 0");
  }
  std::deque<int64_t> again;
  if (state.contains("again")) {
    if (!state["again"].is_array()) {
      return absl::InvalidArgumentError("prompt state: `again` is not a list of prompt ids");
    }
    for (const auto& id : state["again"]) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
          id.get<int64_t>() >= state["cursor"].get<int64_t>()) {
        return absl::InvalidArgumentError(absl::StrCat("prompt state: `again` holds ", id.dump(),
                                                       ", not a prompt id below the cursor"));
      }
      again.push_back(id.get<int64_t>());
    }
  }
  const nlohmann::json id = dataset_->Identity();
  if (state.contains("dataset") && state["dataset"] != id) {
    std::vector<std::string> changes;
    for (const nlohmann::json& op : nlohmann::json::diff(state["dataset"], id)) {
      const nlohmann::json::json_pointer at(op["path"].get<std::string>());
      std::string what = op["path"].get<std::string>();
      // For a file's size or mtime, name the file.
      if (at.parent_pointer().empty() == false && state["dataset"].contains(at.parent_pointer()) &&
          state["dataset"][at.parent_pointer()].is_object() &&
          state["dataset"][at.parent_pointer()].contains("path")) {
        what = absl::StrCat(state["dataset"][at.parent_pointer()]["path"].get<std::string>(), " ",
                            at.back());
      }
      const std::string before =
          state["dataset"].contains(at) ? state["dataset"][at].dump() : "(none)";
      const std::string after = id.contains(at) ? id[at].dump() : "(none)";
      changes.push_back(absl::StrCat(what, ": ", before, " -> ", after));
      if (changes.size() == 4) break;
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "the dataset changed since the checkpoint, so its prompt cursor would draw other "
        "records: ",
        absl::StrJoin(changes, "; ")));
  }
  cursor_ = state["cursor"].get<int64_t>();
  given_back_ = std::move(again);
  return absl::OkStatus();
}

}  // namespace troupe::recipes
