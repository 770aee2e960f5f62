#include "recipes/rl/prompt_source.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace troupe::recipes {

namespace {

// SplitMix64's finalizer: a well-mixed 64-bit hash of x.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Past this many rejected tries a draw keeps the index it has (only reachable with a tiny
// uniform_weight and nearly every prompt down-weighted).
constexpr int kMaxTries = 1 << 16;

}  // namespace

PromptSource::PromptSource(std::unique_ptr<data::PromptDataset> dataset,
                           PromptSamplerOptions sampler)
    : dataset_(std::move(dataset)), sampler_(sampler) {
  if (sampler_.prioritized) uniform_.assign(static_cast<size_t>(dataset_->size()), false);
}

int64_t PromptSource::PickIndex(int64_t id) const {
  const int64_t size = dataset_->size();
  if (!sampler_.prioritized || size <= 0) return id;
  const uint64_t key = Mix(Mix(sampler_.seed) ^ static_cast<uint64_t>(id));
  int64_t index = 0;
  for (int t = 0; t < kMaxTries; ++t) {
    index = static_cast<int64_t>(Mix(key + 2 * t) % static_cast<uint64_t>(size));
    const double u = static_cast<double>(Mix(key + 2 * t + 1) >> 11) * 0x1.0p-53;
    if (!uniform_[index] || u < sampler_.uniform_weight) break;
  }
  return index;
}

int64_t PromptSource::IndexOf(int64_t id) const {
  if (!sampler_.prioritized) return id;
  auto it = index_of_.find(id);
  return it != index_of_.end() ? it->second : PickIndex(id);
}

void PromptSource::Observe(int64_t prompt_id, bool uniform) {
  if (!sampler_.prioritized) return;
  auto it = index_of_.find(prompt_id);
  if (it == index_of_.end()) return;
  const size_t index = static_cast<size_t>(it->second);
  index_of_.erase(it);
  if (uniform_[index] == uniform) return;
  uniform_[index] = uniform;
  down_weighted_ += uniform ? 1 : -1;
}

absl::StatusOr<proto::Prompt> PromptSource::Next() {
  int64_t id, index;
  if (!given_back_.empty()) {
    id = given_back_.front();
    given_back_.pop_front();
    index = IndexOf(id);
  } else {
    id = cursor_++;
    index = PickIndex(id);
  }
  if (sampler_.prioritized) index_of_[id] = index;
  absl::StatusOr<proto::Prompt> p = dataset_->Get(index);
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

int64_t PromptSource::lowest_undrawn_id() const {
  int64_t lowest = cursor_;
  for (int64_t id : given_back_) lowest = std::min(lowest, id);
  return lowest;
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
  if (sampler_.prioritized) {
    std::vector<int64_t> again_index, down;
    for (int64_t id : again) again_index.push_back(IndexOf(id));
    for (size_t i = 0; i < uniform_.size(); ++i) {
      if (uniform_[i]) down.push_back(static_cast<int64_t>(i));
    }
    state["prioritized"] = {{"again_index", again_index}, {"down_weighted", down}};
  }
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
  if (state.contains("prioritized") != sampler_.prioritized) {
    return absl::FailedPreconditionError(
        absl::StrCat("the checkpoint's prompts were drawn with data.sampler.type: ",
                     sampler_.prioritized ? "sequential" : "prioritized", ", this run's is ",
                     sampler_.prioritized ? "prioritized" : "sequential",
                     ": resume with the sampler the run started with"));
  }
  std::vector<bool> uniform;
  absl::flat_hash_map<int64_t, int64_t> index_of;
  if (sampler_.prioritized) {
    const nlohmann::json& pr = state["prioritized"];
    const int64_t size = dataset_->size();
    const auto indices = [&](const char* key) -> absl::StatusOr<std::vector<int64_t>> {
      if (!pr.is_object() || !pr.contains(key) || !pr[key].is_array()) {
        return absl::InvalidArgumentError(
            absl::StrCat("prompt state: `prioritized.", key, "` is missing or not a list"));
      }
      std::vector<int64_t> out;
      for (const auto& i : pr[key]) {
        if (!i.is_number_integer() || i.get<int64_t>() < 0 || i.get<int64_t>() >= size) {
          return absl::InvalidArgumentError(
              absl::StrCat("prompt state: `prioritized.", key, "` holds ", i.dump(),
                           ", not a training prompt index below ", size));
        }
        out.push_back(i.get<int64_t>());
      }
      return out;
    };
    absl::StatusOr<std::vector<int64_t>> again_index = indices("again_index");
    if (!again_index.ok()) return again_index.status();
    absl::StatusOr<std::vector<int64_t>> down = indices("down_weighted");
    if (!down.ok()) return down.status();
    if (again_index->size() != again.size()) {
      return absl::InvalidArgumentError(absl::StrCat("prompt state: `prioritized.again_index` has ",
                                                     again_index->size(), " indices for ",
                                                     again.size(), " prompt ids in `again`"));
    }
    for (size_t i = 0; i < again.size(); ++i) index_of[again[i]] = (*again_index)[i];
    uniform.assign(static_cast<size_t>(size), false);
    for (int64_t i : *down) uniform[static_cast<size_t>(i)] = true;
  }
  cursor_ = state["cursor"].get<int64_t>();
  given_back_ = std::move(again);
  uniform_ = std::move(uniform);
  down_weighted_ = std::count(uniform_.begin(), uniform_.end(), true);
  index_of_ = std::move(index_of);
  return absl::OkStatus();
}

}  // namespace troupe::recipes
