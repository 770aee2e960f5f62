// Where an arithmetic policy is still wrong: greedy exact match and sampled pass@k on the
// held-out problems (and on as many training problems, to tell a generalisation gap from a
// capability gap), broken down by the kind of problem (does the sum overflow to 3 digits; does
// the units column carry; is it a boundary case, tens digits summing to 9, where the hundreds
// digit depends on the units carry), with the kind of each wrong greedy answer (the dropped final
// carry, which one digit is off, other).
//
//   bazel run //bench:arith_errors -- --policy runs/grpo-arith/ckpt/latest
//       --task runs/grpo-arith/sft/task.json [--k 16] [--temperature 1.0]
//
// Output: JSON lines on stdout (one per split and kind); a table on stderr.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "actors/policy_util.h"
#include "models/compute_threads.h"
#include "rollout/generation_engine.h"
#include "tasks/arithmetic/arithmetic_task.h"

namespace {

using troupe::tasks::ArithmeticProblem;
using troupe::tasks::ArithmeticTask;
using troupe::tasks::TaskSplit;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "arith_errors: %s\n", what.c_str());
  std::exit(1);
}

std::string KindOf(const ArithmeticProblem& p) {
  const int64_t sum = p.a + p.b;
  const bool units_carry = p.a % 10 + p.b % 10 >= 10;
  if (p.a / 10 + p.b / 10 == 9) return units_carry ? "boundary, overflows" : "boundary, stays";
  if (sum < 100) return units_carry ? "2 digits, units carry" : "2 digits, no carry";
  return units_carry ? "3 digits, units carry" : "3 digits, no units carry";
}

std::string ErrorOf(const ArithmeticProblem& p, const std::string& got) {
  const std::string sum = std::to_string(p.a + p.b);
  if (got == p.answer) return "";
  if (sum.size() == 3 && got == sum.substr(1)) return "dropped carry";
  if (got.size() == sum.size()) {
    static const char* kPlace[] = {"units", "tens", "hundreds"};
    int diff = 0;
    size_t where = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i] != sum[i]) ++diff, where = got.size() - 1 - i;
    }
    if (diff == 1) return absl::StrCat(kPlace[where], " digit off");
  }
  if (sum.size() == 2 && got.size() == 3) return "carry added";
  return "other";
}

struct Tally {
  int total = 0, greedy = 0, pass = 0;
  double p_correct = 0;
  std::map<std::string, int> errors;
};

}  // namespace

int main(int argc, char** argv) {
  std::string policy_dir, task_file;
  int k = 16;
  double temperature = 1.0;
  int num_train = 500;
  int show = 0;
  CLI::App app{"Where an arithmetic policy is still wrong"};
  app.add_option("--policy", policy_dir, "the policy's HF directory")->required();
  app.add_option("--task", task_file, "task.json (the SFT checkpoint's)")->required();
  app.add_option("--k", k, "samples per problem for pass@k")->check(CLI::PositiveNumber);
  app.add_option("--temperature", temperature, "sampling temperature for pass@k")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--train", num_train, "training problems to check too (0: none)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--show", show, "print this many wrong greedy answers per split");
  CLI11_PARSE(app, argc, argv);
  // `bazel run` starts the program in its runfiles: read the paths from where it was typed.
  if (const char* typed_in = std::getenv("BUILD_WORKING_DIRECTORY"); typed_in != nullptr) {
    if (chdir(typed_in) != 0) Die(std::string("cannot enter ") + typed_in);
  }
  troupe::models::SetComputeThreads(1);

  std::ifstream in(task_file);
  if (!in) Die("cannot read " + task_file);
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<ArithmeticTask> task = ArithmeticTask::FromJson(text.str(), task_file);
  if (!task.ok()) Die(std::string(task.status().message()));
  absl::StatusOr<troupe::actors::PolicyModel> policy = troupe::actors::LoadPolicy(policy_dir);
  if (!policy.ok()) Die(std::string(policy.status().message()));
  policy->model->eval();
  troupe::rollout::GenerationEngineOptions options;
  options.num_slots = 64;
  options.max_seq_len = 16;
  auto engine = troupe::rollout::GenerationEngine::Create(policy->model.ptr(), options);
  if (!engine.ok()) Die(std::string(engine.status().message()));
  const std::optional<int32_t> bos = policy->tokenizer->bos_id();

  std::vector<std::pair<std::string, std::vector<ArithmeticProblem>>> splits = {
      {"heldout", task->Problems(TaskSplit::kHeldout)}};
  if (num_train > 0) {
    std::vector<ArithmeticProblem> train = task->Problems(TaskSplit::kTrain);
    if (static_cast<int>(train.size()) > num_train) train.resize(num_train);
    splits.emplace_back("train", std::move(train));
  }
  for (const auto& [split, problems] : splits) {
    std::vector<std::vector<int32_t>> prompts;
    for (const ArithmeticProblem& p : problems) {
      absl::StatusOr<std::vector<int32_t>> ids = policy->tokenizer->Encode(p.prompt);
      if (!ids.ok()) Die(std::string(ids.status().message()));
      std::vector<int32_t> prompt;
      if (bos.has_value()) prompt.push_back(*bos);
      prompt.insert(prompt.end(), ids->begin(), ids->end());
      prompts.push_back(std::move(prompt));
    }
    auto decode = [&](const troupe::rollout::GeneratedSample& s) {
      std::vector<int32_t> tokens = s.tokens;
      if (s.finish_reason == troupe::rollout::FinishReason::kStop) tokens.pop_back();
      absl::StatusOr<std::string> t = policy->tokenizer->Decode(tokens);
      return t.ok() ? *t : std::string("?");
    };
    troupe::rollout::SamplingParams greedy;
    greedy.temperature = 0;
    greedy.max_new_tokens = 4;
    greedy.stop_token_ids = policy->stop_token_ids;
    auto g = (*engine)->Generate(prompts, greedy);
    if (!g.ok()) Die(std::string(g.status().message()));
    troupe::rollout::SamplingParams sampled = greedy;
    sampled.temperature = temperature;
    sampled.n = k;
    sampled.seed = 7;
    auto s = (*engine)->Generate(prompts, sampled);
    if (!s.ok()) Die(std::string(s.status().message()));

    std::map<std::string, Tally> by_kind;
    for (size_t i = 0; i < problems.size(); ++i) {
      const ArithmeticProblem& p = problems[i];
      const std::string got = decode((*g)[i]);
      if (got != p.answer && show > 0) {
        --show;
        std::fprintf(stderr, "  wrong: %s%s (true %s, %s)\n", p.prompt.c_str(), got.c_str(),
                     p.answer.c_str(), ErrorOf(p, got).c_str());
      }
      int right = 0;
      for (int j = 0; j < k; ++j) right += decode((*s)[i * k + j]) == p.answer;
      for (Tally* t : {&by_kind["all"], &by_kind[KindOf(p)]}) {
        ++t->total;
        t->greedy += got == p.answer;
        t->pass += right > 0;
        t->p_correct += 1.0 * right / k;
        const std::string error = ErrorOf(p, got);
        if (!error.empty()) ++t->errors[error];
      }
    }
    std::fprintf(stderr, "%s (%zu problems, pass@%d at temperature %.2f)\n", split.c_str(),
                 problems.size(), k, temperature);
    std::fprintf(stderr, "  %-26s %6s %8s %8s %8s  wrong greedy answers\n", "kind", "n", "greedy",
                 "pass@k", "p(right)");
    for (const auto& [kind, t] : by_kind) {
      std::string errors;
      for (const auto& [e, n] : t.errors) absl::StrAppend(&errors, e, " ", n, "; ");
      std::fprintf(stderr, "  %-26s %6d %7.1f%% %7.1f%% %7.1f%%  %s\n", kind.c_str(), t.total,
                   100.0 * t.greedy / t.total, 100.0 * t.pass / t.total,
                   100.0 * t.p_correct / t.total, errors.c_str());
      std::printf(
          "{\"bench\": \"arith_errors\", \"metric\": \"greedy_exact_match\", \"value\": %.4f, "
          "\"unit\": \"fraction\", \"split\": \"%s\", \"kind\": \"%s\", \"problems\": %d, "
          "\"pass_at_k\": %.4f, \"k\": %d, \"p_right\": %.4f, \"policy\": \"%s\"}\n",
          1.0 * t.greedy / t.total, split.c_str(), kind.c_str(), t.total, 1.0 * t.pass / t.total, k,
          t.p_correct / t.total, policy_dir.c_str());
    }
  }
  return 0;
}
