#include "recipes/rl/prompt_source.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

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
  return {{"cursor", cursor_}, {"again", again}};
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
  cursor_ = state["cursor"].get<int64_t>();
  given_back_ = std::move(again);
  return absl::OkStatus();
}

}  // namespace troupe::recipes
