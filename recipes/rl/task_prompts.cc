#include "recipes/rl/task_prompts.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "recipes/rl/chat_prompts.h"
#include "recipes/rl/job_data.h"

namespace troupe::recipes {
namespace {

data::Record TaskRecord(const std::string& task, const tasks::TaskProblem& problem,
                        absl::string_view split, int64_t i) {
  return {.where = absl::StrCat("task ", task, " ", split, " problem ", i),
          .data_source = task,
          .prompt = problem.prompt,
          .ground_truth = problem.reference_answer,
          .extra_info_json = ""};
}

// A task's training problems as records, made on demand (a task may have millions).
class TaskRecords : public data::PromptRecordSource {
 public:
  TaskRecords(std::string task, std::unique_ptr<tasks::TaskProblems> problems)
      : task_(std::move(task)), problems_(std::move(problems)) {}
  int64_t size() const override { return problems_->num_train(); }
  absl::StatusOr<data::Record> Read(int64_t index) const override {
    return TaskRecord(task_, problems_->Train(index), "training", index);
  }
  nlohmann::json Identity() const override { return {{"task", task_}}; }
  const tasks::TaskProblems& problems() const { return *problems_; }

 private:
  std::string task_;
  std::unique_ptr<tasks::TaskProblems> problems_;
};

}  // namespace

tasks::TaskConfig TaskConfigOf(const JobSpec& spec) {
  tasks::TaskConfig config;
  config.params = spec.data.task_params;
  config.heldout_size = spec.data.heldout_size;
  config.seed = static_cast<uint64_t>(spec.data.seed);
  return config;
}

absl::StatusOr<std::unique_ptr<data::PromptDataset>> MakeTaskPrompts(
    const JobSpec& spec, std::shared_ptr<const models::Tokenizer> tokenizer) {
  absl::StatusOr<std::unique_ptr<tasks::TaskProblems>> problems =
      tasks::MakeTaskProblems(spec.data.task, TaskConfigOf(spec));
  if (absl::IsNotFound(problems.status()) || absl::IsFailedPrecondition(problems.status())) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.task: the RL recipes cannot run it: ", problems.status().message()));
  }
  if (!problems.ok()) return problems.status();
  std::vector<data::Record> heldout;
  for (const tasks::TaskProblem& problem : (*problems)->HeldOut()) {
    heldout.push_back(
        TaskRecord(spec.data.task, problem, "held-out", static_cast<int64_t>(heldout.size())));
  }
  data::RecordPromptsOptions options = RecordPromptsOptionsOf(spec);
  options.shuffle = false;  // the task's own order
  options.heldout_size = static_cast<int64_t>(heldout.size());
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<data::RecordPrompts> prompts,
                          data::RecordPrompts::Create(
                              std::make_unique<TaskRecords>(spec.data.task, std::move(*problems)),
                              data::InMemoryPromptRecords(std::move(heldout), nullptr),
                              std::move(tokenizer), std::move(options)));
  return std::unique_ptr<data::PromptDataset>(std::move(prompts));
}

absl::StatusOr<std::unique_ptr<data::PromptDataset>> MakeJobPrompts(
    const JobSpec& spec, std::shared_ptr<const models::Tokenizer> tokenizer,
    const std::function<void(const std::string&)>& log) {
  if (spec.data.train_files.empty()) return MakeTaskPrompts(spec, std::move(tokenizer));
  auto say = [&](const std::string& line) {
    if (log) log(line);
  };
  TROUPE_ASSIGN_OR_RETURN(JobChatTemplate chat, LoadJobChatTemplate(spec));
  if (chat.renderer) say(absl::StrCat("data: chat messages rendered with ", chat.source));
  const data::RecordKeys keys = RecordKeysOf(spec);
  TROUPE_ASSIGN_OR_RETURN(
      std::unique_ptr<data::PromptRecordSource> train,
      data::OpenPromptRecords(spec.data.train_files, keys, data::DataCacheDir()));
  std::unique_ptr<data::PromptRecordSource> val;
  if (!spec.data.val_files.empty()) {
    TROUPE_ASSIGN_OR_RETURN(
        val, data::OpenPromptRecords(spec.data.val_files, keys, data::DataCacheDir()));
  }
  data::RecordPromptsOptions options = RecordPromptsOptionsOf(spec);
  options.renderer = std::move(chat.renderer);
  const int64_t records = train->size();
  TROUPE_ASSIGN_OR_RETURN(
      std::unique_ptr<data::RecordPrompts> prompts,
      data::RecordPrompts::Create(std::move(train), std::move(val), std::move(tokenizer), options));
  if (spec.data.filter_overlong_prompts || DatasetBytes(spec) <= kFullScanBytes) {
    say(absl::StrCat("data: checking ", records, " training records of data.train_files",
                     spec.data.filter_overlong_prompts ? " (and filtering overlong prompts)" : ""));
    TROUPE_RETURN_IF_ERROR(prompts->Scan([&](int64_t done, int64_t total) {
      if (done < total) say(absl::StrFormat("data: %d/%d records scanned", done, total));
    }));
  } else {
    say(absl::StrCat("data: ", records,
                     " training records, more than a pre-run scan reads: "
                     "each is checked when drawn"));
  }
  if (spec.data.filter_overlong_prompts) {
    say(absl::StrCat("data: filtered ", prompts->filtered(), " of ", records,
                     " training prompts longer than data.max_prompt_length = ",
                     spec.data.max_prompt_length, " tokens; ", prompts->size(), " remain"));
    if (!spec.data.val_files.empty()) {
      TROUPE_ASSIGN_OR_RETURN(std::vector<proto::Prompt> heldout, prompts->HeldOut());
      say(absl::StrCat("data: filtered ", prompts->heldout_filtered(),
                       " overlong held-out prompts; ", heldout.size(), " remain"));
    }
  }
  return std::unique_ptr<data::PromptDataset>(std::move(prompts));
}

}  // namespace troupe::recipes
