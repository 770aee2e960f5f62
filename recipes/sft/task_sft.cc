#include "recipes/sft/task_sft.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/atomic_file.h"
#include "base/status_macros.h"

namespace troupe::recipes {

absl::Status ValidateTaskSft(absl::string_view task, const tasks::TaskConfig& config,
                             const SftOptions& options) {
  TROUPE_RETURN_IF_ERROR(ValidateSftOptions(options));
  return tasks::MakeTaskSftData(task, config).status();
}

absl::StatusOr<SftResult> RunTaskSft(absl::string_view task, const tasks::TaskConfig& config,
                                     const SftOptions& options,
                                     const std::function<void(const std::string&)>& log) {
  TROUPE_RETURN_IF_ERROR(ValidateSftOptions(options));
  TROUPE_ASSIGN_OR_RETURN(tasks::TaskSftData data, tasks::MakeTaskSftData(task, config));
  for (const std::string& note : data.notes) log(note);
  SftInputs inputs;
  inputs.examples = std::move(data.examples);
  inputs.tokenizer = std::move(data.tokenizer);
  inputs.grader = std::move(data.grader);
  inputs.add_bos = data.add_bos;
  inputs.skip_special_tokens = data.skip_special_tokens;
  SftOptions sft = options;
  if (sft.max_new_tokens == 0) sft.max_new_tokens = data.max_new_tokens;
  if (sft.max_seq_len == 0) sft.max_seq_len = data.max_seq_len;
  TROUPE_ASSIGN_OR_RETURN(SftResult result, RunSft(inputs, sft, log));
  if (!sft.out_dir.empty()) {
    for (const auto& [name, content] : data.files) {
      TROUPE_RETURN_IF_ERROR(WriteFileAtomically(absl::StrCat(sft.out_dir, "/", name), content));
    }
  }
  return result;
}

}  // namespace troupe::recipes
