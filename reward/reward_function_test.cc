#include "reward/reward_function.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::reward {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

// A fake verifier: reward = bonus if the response repeats the reference, else 0.
class EchoReward final : public RewardFunction {
 public:
  explicit EchoReward(double bonus) : bonus_(bonus) {}
  RewardOutput Score(const RewardInput& in) const override {
    RewardOutput out;
    out.reward = in.response_text == in.reference_answer ? bonus_ : 0;
    return out;
  }

 private:
  double bonus_;
};

absl::StatusOr<std::unique_ptr<RewardFunction>> MakeEchoReward(const nlohmann::json& config) {
  for (auto it = config.begin(); it != config.end(); ++it) {
    if (it.key() != "bonus") {
      return absl::InvalidArgumentError(
          absl::StrCat("reward config: unknown key '", it.key(), "' (echo_test takes bonus)"));
    }
  }
  return std::unique_ptr<RewardFunction>(new EchoReward(config.value("bonus", 1.0)));
}

TROUPE_REGISTER_REWARD("echo_test", MakeEchoReward);

TEST(RewardFunction, ARegisteredRewardIsFoundByNameWithItsConfig) {
  EXPECT_THAT(RewardNames(), Contains("echo_test"));
  auto f = MakeRewardFunction("echo_test", {{"bonus", 3.0}});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_DOUBLE_EQ((*f)->Score({"81", "81", true}).reward, 3.0);
  EXPECT_DOUBLE_EQ((*f)->Score({"80", "81", true}).reward, 0.0);
  auto defaulted = MakeRewardFunction("echo_test", nullptr);
  ASSERT_TRUE(defaulted.ok()) << defaulted.status();
  EXPECT_DOUBLE_EQ((*defaulted)->Score({"7", "7", true}).reward, 1.0);
}

TEST(RewardFunction, TheTaskKeyOfAServerConfigIsNotPassedToTheFactory) {
  EXPECT_TRUE(MakeRewardFunction("echo_test", {{"task", "echo_test"}, {"bonus", 2}}).ok());
}

TEST(RewardFunction, UnknownNameListsTheRegisteredRewards) {
  auto unknown = MakeRewardFunction("chess", {});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(unknown.status().message()),
              HasSubstr("no reward 'chess' is registered (registered: "));
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("echo_test"));
}

TEST(RewardFunction, BadConfigIsRefused) {
  auto not_object = MakeRewardFunction("echo_test", nlohmann::json::array({1}));
  EXPECT_EQ(not_object.status().code(), absl::StatusCode::kInvalidArgument);
  auto misspelt = MakeRewardFunction("echo_test", {{"bonsu", 2}});
  EXPECT_EQ(misspelt.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(misspelt.status().message()), HasSubstr("bonsu"));
}

TEST(RewardFunctionDeathTest, RegisteringATakenNameAborts) {
  EXPECT_DEATH(RegisterStatically(RewardRegistry(), "echo_test", RewardFactory(MakeEchoReward)),
               HasSubstr("reward 'echo_test' is already registered"));
}

}  // namespace
}  // namespace troupe::reward
