#include "recipes/rl/prompt_source.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"

namespace troupe::recipes {
namespace {

// Prompt i has text "p<i mod 5>".
class FiveTexts : public PromptDataset {
 public:
  absl::StatusOr<proto::Prompt> Get(int64_t index) const override {
    proto::Prompt p;
    p.set_text("p" + std::to_string(index % 5));
    return p;
  }
  int64_t size() const override { return 5; }
  absl::StatusOr<std::vector<proto::Prompt>> HeldOut() const override {
    return std::vector<proto::Prompt>{};
  }
};

std::vector<int64_t> Draw(PromptSource& s, int n) {
  std::vector<int64_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(s.Next()->prompt_id());
  return ids;
}

TEST(PromptSource, DrawsInOrderAcrossEpochsAndGivenBackPromptsFirst) {
  PromptSource s(std::make_unique<FiveTexts>());
  std::vector<proto::Prompt> first;
  for (int i = 0; i < 3; ++i) first.push_back(*s.Next());
  EXPECT_EQ(first[2].prompt_id(), 2);
  s.GiveBack({first[0], first[2]});
  EXPECT_EQ(s.drawn(), 1);
  EXPECT_EQ(Draw(s, 5), (std::vector<int64_t>{0, 2, 3, 4, 5}));
  absl::StatusOr<proto::Prompt> sixth = s.Next();
  EXPECT_EQ(sixth->prompt_id(), 6);
  EXPECT_EQ(sixth->text(), "p1");  // epoch 2
}

// Fails Get for index 3.
class FailsAtThree : public FiveTexts {
 public:
  absl::StatusOr<proto::Prompt> Get(int64_t index) const override {
    if (index == 3) return absl::DataLossError("prompt 3 is unreadable");
    return FiveTexts::Get(index);
  }
};

TEST(PromptSource, DrawingSeveralIsAllOrNothing) {
  PromptSource s(std::make_unique<FailsAtThree>());
  absl::StatusOr<std::vector<proto::Prompt>> two = s.Next(2);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ((*two)[1].prompt_id(), 1);
  absl::StatusOr<std::vector<proto::Prompt>> bad = s.Next(3);  // 2, then 3 fails
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(s.drawn(), 2);  // prompt 2 was given back
}

TEST(PromptSource, ARestoredSourceDrawsWhatWasOutThenContinues) {
  PromptSource a(std::make_unique<FiveTexts>());
  Draw(a, 6);
  std::vector<proto::Prompt> back = {*a.Next()};  // id 6, given back
  a.GiveBack(back);
  // Ids 4 and 5 were out (generating or being scored) when the checkpoint was taken.
  nlohmann::json state = a.State({5, 4});
  PromptSource b(std::make_unique<FiveTexts>());
  ASSERT_TRUE(b.Restore(state).ok());
  EXPECT_EQ(Draw(b, 4), (std::vector<int64_t>{4, 5, 6, 7}));
}

TEST(PromptSource, RestoreRefusesAMalformedState) {
  PromptSource s(std::make_unique<FiveTexts>());
  EXPECT_FALSE(s.Restore(nlohmann::json::object()).ok());
  EXPECT_FALSE(s.Restore({{"cursor", 3}, {"again", {7}}}).ok());  // not below the cursor
  EXPECT_FALSE(s.Restore({{"cursor", -1}}).ok());
  EXPECT_TRUE(s.Restore({{"cursor", 3}, {"again", {1}}}).ok());
  EXPECT_EQ(s.Next()->prompt_id(), 1);
}

// FiveTexts with an identity, as a file dataset has.
class Identified : public FiveTexts {
 public:
  explicit Identified(int64_t size) : size_(size) {}
  nlohmann::json Identity() const override {
    return {{"train", {{{"path", "t.jsonl"}, {"size", size_}}}}, {"seed", 1}};
  }

 private:
  int64_t size_;
};

TEST(PromptSource, RefusesAStateCheckpointedWithAnotherDatasetNamingTheFile) {
  PromptSource before(std::make_unique<Identified>(100));
  Draw(before, 3);
  const nlohmann::json state = before.State({});
  EXPECT_EQ(state["dataset"]["train"][0]["size"], 100);
  PromptSource same(std::make_unique<Identified>(100));
  EXPECT_TRUE(same.Restore(state).ok());
  EXPECT_EQ(same.Next()->prompt_id(), 3);
  PromptSource changed(std::make_unique<Identified>(120));
  absl::Status s = changed.Restore(state);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("t.jsonl size: 100 -> 120"), absl::string_view::npos) << s;
  // A state without an identity (saved before datasets had one) still restores.
  nlohmann::json old = state;
  old.erase("dataset");
  EXPECT_TRUE(changed.Restore(old).ok());
}

}  // namespace
}  // namespace troupe::recipes
