// SftExamples: what the SFT recipe (recipes/sft/sft_recipe.h) trains and evaluates on, as text.
//
//   train     (prompt, response) pairs: the model learns the response (and the end-of-sequence
//             token after it) given the prompt; the prompt's tokens carry no loss.
//   held-out  (prompt, reference) pairs: the model answers each prompt greedily and an SftGrader
//             says whether the answer matches the reference.
//
// Prompts are final text: a chat template, if any, is already applied (the recipe adds at most a
// BOS token, when asked). Responses are the text after the prompt, without an end-of-sequence
// token (the recipe appends the tokenizer's).
//
// Implementations: a task's supervised data (tasks/task.h's make_sft_data, e.g.
// tasks/arithmetic/arithmetic_sft.h), dataset records (sft_records.h), and VectorSftExamples below
// for examples in memory.
//
// Thread-safety: implementations are immutable after construction; const methods may be called
// concurrently.
#ifndef TROUPE_DATA_SFT_EXAMPLES_H_
#define TROUPE_DATA_SFT_EXAMPLES_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace troupe::data {

// One training pair.
struct SftExample {
  std::string prompt;    // e.g. "<|im_start|>user\n23+58=<|im_end|>\n<|im_start|>assistant\n"
  std::string response;  // e.g. "81<|im_end|>" (the recipe appends the EOS token)
};

// One held-out problem.
struct SftHeldOut {
  std::string prompt;       // As SftExample::prompt.
  std::string reference;    // What the grader compares a generated response with, e.g. "81".
  std::string data_source;  // The record's data source ("" if none), for a grader that routes.
};

// Whether a generated response (decoded text without its final stop token) is correct for a
// held-out problem. Must be callable from the recipe's thread; may not throw.
using SftGrader = std::function<bool(const std::string& response, const SftHeldOut& problem)>;

// response == problem.reference.
inline SftGrader ExactMatchGrader() {
  return [](const std::string& response, const SftHeldOut& problem) {
    return response == problem.reference;
  };
}

class SftExamples {
 public:
  virtual ~SftExamples() = default;
  // Training pairs; > 0.
  virtual int64_t num_train() const = 0;
  // Training pair `i`, 0 <= i < num_train(); the same pair for the same `i` on every call.
  virtual SftExample Train(int64_t i) const = 0;
  // The held-out split in a fixed order (the recipe evaluates a prefix of it); not empty.
  virtual std::vector<SftHeldOut> HeldOut() const = 0;
  // One line for the log, e.g. "2-digit addition, 7600 train / 500 held-out problems".
  virtual std::string Describe() const = 0;
};

// Examples held in memory (tests, small data sets built by a caller).
class VectorSftExamples final : public SftExamples {
 public:
  VectorSftExamples(std::vector<SftExample> train, std::vector<SftHeldOut> heldout,
                    std::string description)
      : train_(std::move(train)),
        heldout_(std::move(heldout)),
        description_(std::move(description)) {}

  int64_t num_train() const override { return static_cast<int64_t>(train_.size()); }
  SftExample Train(int64_t i) const override { return train_[i]; }
  std::vector<SftHeldOut> HeldOut() const override { return heldout_; }
  std::string Describe() const override { return description_; }

 private:
  std::vector<SftExample> train_;
  std::vector<SftHeldOut> heldout_;
  std::string description_;
};

}  // namespace troupe::data

#endif  // TROUPE_DATA_SFT_EXAMPLES_H_
