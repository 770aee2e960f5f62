// Setup shared by the SFT recipe's tests (sft_recipe_test, task_sft_test): scratch paths,
// file reading, the tiny model and schedule every test run starts from, and capturing the
// recipe's log lines.
//
// Example:
//   SftOptions options = TinySftOptions();
//   options.model.num_hidden_layers = 2;  // then the test's own schedule: steps, eval_every, ...
//   options.out_dir = TempDir("my_ckpt");
//   std::vector<std::string> lines;
//   absl::StatusOr<SftResult> result = RunSft(inputs, options, CollectLines(&lines));
//
// Test-only; the functions are thread-safe.
#ifndef TROUPE_RECIPES_SFT_SFT_TEST_UTIL_H_
#define TROUPE_RECIPES_SFT_SFT_TEST_UTIL_H_

#include <functional>
#include <string>
#include <vector>

#include "recipes/sft/sft_recipe.h"

namespace troupe::recipes {

// The whole content of the file at `path` ("" if it cannot be read).
std::string ReadAll(const std::string& path);

// "$TEST_TMPDIR/<name>_<pid>" (else "/tmp/<name>_<pid>"); not created.
std::string TempDir(const std::string& name);

// The options the tests share: a tiny decoder (hidden 32, MLP 64, 4 attention heads over 2
// key/value heads, 64 positions) trained on one thread in batches of 32 at learning rate 1e-2.
// The rest is SftOptions' defaults: the caller sets the layers, the vocabulary if it wants one,
// and the schedule (steps, warm-up, evaluation and logging intervals, seed).
SftOptions TinySftOptions();

// A log function for RunSft / RunTaskSft that appends each line to `*lines`, or drops the
// lines when `lines` is null. `*lines` must outlive the run.
std::function<void(const std::string&)> CollectLines(std::vector<std::string>* lines);

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_SFT_SFT_TEST_UTIL_H_
