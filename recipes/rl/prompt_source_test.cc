#include "recipes/rl/prompt_source.h"

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace troupe::recipes {
namespace {

// Prompt i has text "p<i mod 5>".
class FiveTexts : public data::PromptDataset {
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
  EXPECT_EQ(s.lowest_undrawn_id(), 3);
  s.GiveBack({first[2]});
  EXPECT_EQ(s.lowest_undrawn_id(), 2);
  s.GiveBack({first[0]});
  EXPECT_EQ(s.lowest_undrawn_id(), 0);
  EXPECT_EQ(s.drawn(), 1);
  EXPECT_EQ(Draw(s, 5), (std::vector<int64_t>{0, 2, 3, 4, 5}));
  EXPECT_EQ(s.lowest_undrawn_id(), 6);
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

// Prompt i of `n` has text "p<i>".
class Numbered : public data::PromptDataset {
 public:
  explicit Numbered(int64_t n) : n_(n) {}
  absl::StatusOr<proto::Prompt> Get(int64_t index) const override {
    if (index < 0 || index >= n_) return absl::OutOfRangeError("no such prompt");
    proto::Prompt p;
    p.set_text("p" + std::to_string(index));
    return p;
  }
  int64_t size() const override { return n_; }
  absl::StatusOr<std::vector<proto::Prompt>> HeldOut() const override {
    return std::vector<proto::Prompt>{};
  }

 private:
  int64_t n_;
};

int IndexOfText(const proto::Prompt& p) { return std::stoi(p.text().substr(1)); }

PromptSource Prioritized(int64_t n, double weight, uint64_t seed = 7) {
  return PromptSource(std::make_unique<Numbered>(n),
                      {.prioritized = true, .uniform_weight = weight, .seed = seed});
}

TEST(PromptSourcePrioritized, DrawsAtRandomAndTheSameWayForTheSameSeed) {
  PromptSource a = Prioritized(50, 0.1), b = Prioritized(50, 0.1), c = Prioritized(50, 0.1, 8);
  std::vector<int> ia, ib, ic;
  for (int i = 0; i < 200; ++i) {
    proto::Prompt p = *a.Next();
    EXPECT_EQ(p.prompt_id(), i);  // ids are still the draw count
    ia.push_back(IndexOfText(p));
    ib.push_back(IndexOfText(*b.Next()));
    ic.push_back(IndexOfText(*c.Next()));
  }
  EXPECT_EQ(ia, ib);
  EXPECT_NE(ia, ic);
  // Not in order, and (200 draws of 50) nearly every prompt is drawn.
  EXPECT_NE(std::vector<int>(ia.begin(), ia.begin() + 5), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_GE(std::set<int>(ia.begin(), ia.end()).size(), 45u);
}

TEST(PromptSourcePrioritized, PromptsWhoseLastGroupWasUniformAreDrawnWeightTimesAsOften) {
  constexpr int kN = 100;
  PromptSource s = Prioritized(kN, 0.2);
  // Observe every prompt once: those with an index >= 10 had a uniform group.
  std::set<int> seen;
  for (int i = 0; seen.size() < kN && i < 100000; ++i) {
    proto::Prompt p = *s.Next();
    const int index = IndexOfText(p);
    seen.insert(index);
    s.Observe(p.prompt_id(), /*uniform=*/index >= 10);
  }
  ASSERT_EQ(seen.size(), static_cast<size_t>(kN));
  EXPECT_EQ(s.down_weighted(), 90);
  // Each of the 10 weighs 1 and each of the 90 weighs 0.2: P(one of the 10) = 10 / 28.
  constexpr int kDraws = 40000;
  int low = 0;
  std::vector<proto::Prompt> drawn;
  for (int i = 0; i < kDraws; ++i) {
    proto::Prompt p = *s.Next();
    low += IndexOfText(p) < 10;
    drawn.push_back(p);
  }
  EXPECT_NEAR(static_cast<double>(low) / kDraws, 10.0 / 28.0, 0.015);
  // A mixed group lifts its prompt back to weight 1; an unknown id changes nothing.
  for (const proto::Prompt& p : drawn) {
    if (IndexOfText(p) == 50) {
      s.Observe(p.prompt_id(), false);
      break;
    }
  }
  EXPECT_EQ(s.down_weighted(), 89);
  s.Observe(123456789, true);
  EXPECT_EQ(s.down_weighted(), 89);
}

TEST(PromptSourcePrioritized, AGivenBackPromptIsTheSamePromptAgain) {
  PromptSource s = Prioritized(1000, 0.1);
  std::vector<proto::Prompt> first = *s.Next(3);
  s.GiveBack({first[1]});
  proto::Prompt again = *s.Next();
  EXPECT_EQ(again.prompt_id(), first[1].prompt_id());
  EXPECT_EQ(again.text(), first[1].text());
}

TEST(PromptSourcePrioritized, ARestoredSourceDrawsWhatWasOutThenWhatTheFirstWouldHave) {
  PromptSource a = Prioritized(40, 0.1);
  std::vector<proto::Prompt> out;
  for (int i = 0; i < 60; ++i) {
    proto::Prompt p = *a.Next();
    if (i % 7 == 3) {
      out.push_back(p);  // still generating at the checkpoint
    } else {
      a.Observe(p.prompt_id(), IndexOfText(p) % 3 != 0);
    }
  }
  std::vector<int64_t> out_ids;
  for (const proto::Prompt& p : out) out_ids.push_back(p.prompt_id());
  const nlohmann::json state = a.State(out_ids);
  ASSERT_GT(a.down_weighted(), 0);
  EXPECT_EQ(state["prioritized"]["down_weighted"].size(), static_cast<size_t>(a.down_weighted()));

  PromptSource b = Prioritized(40, 0.1);
  ASSERT_TRUE(b.Restore(state).ok()) << b.Restore(state);
  EXPECT_EQ(b.down_weighted(), a.down_weighted());
  for (const proto::Prompt& p : out) {  // the out prompts, the same ones, first
    proto::Prompt q = *b.Next();
    EXPECT_EQ(q.prompt_id(), p.prompt_id());
    EXPECT_EQ(q.text(), p.text());
  }
  for (int i = 0; i < 100; ++i) {  // then the same draws as the uninterrupted source
    proto::Prompt pa = *a.Next(), pb = *b.Next();
    EXPECT_EQ(pa.prompt_id(), pb.prompt_id());
    EXPECT_EQ(pa.text(), pb.text());
    a.Observe(pa.prompt_id(), i % 2 == 0);
    b.Observe(pb.prompt_id(), i % 2 == 0);
  }
}

TEST(PromptSourcePrioritized, RestoreRefusesAnotherSamplerOrABadState) {
  PromptSource a = Prioritized(10, 0.1);
  a.Observe(a.Next()->prompt_id(), true);
  const nlohmann::json state = a.State({});

  PromptSource sequential(std::make_unique<Numbered>(10));
  absl::Status s = sequential.Restore(state);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("data.sampler.type: prioritized"), absl::string_view::npos) << s;
  PromptSource b = Prioritized(10, 0.1);
  EXPECT_EQ(b.Restore({{"cursor", 0}}).code(), absl::StatusCode::kFailedPrecondition);

  nlohmann::json bad = state;
  bad["prioritized"]["down_weighted"] = {10};  // past the dataset
  s = b.Restore(bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("prioritized.down_weighted"), absl::string_view::npos) << s;
  bad = state;
  bad["again"] = {0};  // an id with no index
  s = b.Restore(bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("again_index"), absl::string_view::npos) << s;
  EXPECT_EQ(b.down_weighted(), 0);  // nothing was restored
}

}  // namespace
}  // namespace troupe::recipes
