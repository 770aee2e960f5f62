// RunTaskSft: the SFT recipe (sft_recipe.h) on a task's own supervised data, found by the task's
// name (tasks/task.h's make_sft_data; e.g. tasks/arithmetic/arithmetic_sft.h). What the task says
// — its examples, tokenizer, grader, BOS and special-token handling, default lengths, notes and the
// files to keep beside the checkpoint — goes into RunSft as it is; this file names no task.
//
//   RunTaskSft("arithmetic", config, options, log):
//     data = MakeTaskSftData("arithmetic", config)     // params defaulted
//     log each of data.notes
//     RunSft({data.examples, data.tokenizer, data.grader, data.add_bos, ...}, options with
//            max_new_tokens / max_seq_len from data when options leave them 0)
//     write data.files into options.out_dir (when set)
//
// Thread-safety: as RunSft (one at a time per process).
#ifndef TROUPE_RECIPES_SFT_TASK_SFT_H_
#define TROUPE_RECIPES_SFT_TASK_SFT_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "recipes/sft/sft_recipe.h"
#include "tasks/task.h"

namespace troupe::recipes {

// InvalidArgument naming the field (ValidateSftOptions), then the task's own refusal of
// `config`; NOT_FOUND / FAILED_PRECONDITION for a task that is not registered or has no
// supervised data (tasks::MakeTaskSftData).
absl::Status ValidateTaskSft(absl::string_view task, const tasks::TaskConfig& config,
                             const SftOptions& options);

// Runs the recipe as described above; errors as ValidateTaskSft and RunSft, and from writing the
// task's files.
absl::StatusOr<SftResult> RunTaskSft(absl::string_view task, const tasks::TaskConfig& config,
                                     const SftOptions& options,
                                     const std::function<void(const std::string&)>& log);

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_SFT_TASK_SFT_H_
