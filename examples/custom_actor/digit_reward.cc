// DigitCreditReward: a reward server for the arithmetic task that gives partial credit, built as
// a shared library (libdigit_reward.so) that a GRPO job loads with
//
//   actors:
//     reward: {type: DigitCreditReward, library:
//     bazel-bin/examples/custom_actor/libdigit_reward.so}
//
// No troupe source is edited and the troupe binary is not rebuilt: the job's workers load the
// library (runtime/actor_library.h) and run this type in the reward role, which it can fill
// because it serves RewardServer's method: Score(ScoreRequest) -> ScoreReply.
//
// Reward of a sample: 1 for the exact answer (stopped, equal to the reference); otherwise
// `partial_weight` times the share of the reference's digits that the response has right at the
// same place (counted from the last digit), 0 for a response that is not all digits.
// reward_components: "correct" (0/1, what the recipe reports as reward/correct) and
// "digit_credit". config: {"partial_weight": 0.5}, in [0, 1).
#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "proto/rl.pb.h"
#include "runtime/actor.h"
#include "runtime/actor_registry.h"

namespace digit_reward {

class DigitCreditReward : public troupe::Actor {
 public:
  explicit DigitCreditReward(const troupe::ActorContext& ctx)
      : partial_weight_(ctx.config().value("partial_weight", 0.5)) {
    if (!(partial_weight_ >= 0 && partial_weight_ < 1)) {
      throw std::invalid_argument("partial_weight must be in [0, 1)");
    }
    std::fprintf(stderr, "DigitCreditReward %s: partial credit weight %g\n", ctx.name().c_str(),
                 partial_weight_);
  }

  absl::StatusOr<troupe::proto::ScoreReply> Score(const troupe::proto::ScoreRequest& req) {
    troupe::proto::ScoreReply reply;
    *reply.mutable_groups() = req.groups();
    for (troupe::proto::SampleGroup& g : *reply.mutable_groups()) {
      for (troupe::proto::Sample& s : *g.mutable_samples()) {
        const bool correct =
            s.finish_reason() == "stop" && s.response_text() == s.reference_answer();
        const double credit = DigitCredit(s.response_text(), s.reference_answer());
        s.set_reward(static_cast<float>(correct ? 1.0 : partial_weight_ * credit));
        (*s.mutable_reward_components())["correct"] = correct ? 1.0f : 0.0f;
        (*s.mutable_reward_components())["digit_credit"] = static_cast<float>(credit);
      }
    }
    return reply;
  }

 private:
  // The share of `reference`'s digits that `response` has at the same place from the right.
  static double DigitCredit(const std::string& response, const std::string& reference) {
    if (reference.empty() || response.empty()) return 0;
    for (char c : response) {
      if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return 0;
    }
    int right = 0;
    const size_t n = std::min(response.size(), reference.size());
    for (size_t i = 1; i <= n; ++i) {
      right += response[response.size() - i] == reference[reference.size() - i];
    }
    return static_cast<double>(right) / std::max(response.size(), reference.size());
  }

  const double partial_weight_;
};

TROUPE_REGISTER_ACTOR(DigitCreditReward, Score);

}  // namespace digit_reward
