#include "actors/judge.h"

#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "actors/tiny_policy.h"
#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::actors {
namespace {

using ::testing::HasSubstr;

constexpr char kJudgeAlphabet[] = "0123456789+=|YN";
// The char tokenizer's ids: <pad> 0, <bos> 1, <eos> 2, then the alphabet from 3.
int32_t Id(char c) { return 3 + static_cast<int32_t>(std::string(kJudgeAlphabet).find(c)); }
constexpr int32_t kEos = 2;

// This binary's temporary directory (removed when it exits).
std::string TmpDir() {
  static test::TempDir dir("judge_test");
  return dir.path();
}

// A judge whose reply depends only on the last character it reads (actors/tiny_policy.h's bigram
// policy): after '1' it says "Y", after '7' it babbles "++++" (no verdict), after anything else
// "N"; Y and N are followed by eos. With the template "{prompt}{response}" the verdict is therefore
// a function of the response's last digit, which the tests below pick.
const std::string& BigramJudgeDir() {
  static const std::string dir = [] {
    const std::string d = TmpDir() + "/judge_test_bigram";
    std::filesystem::remove_all(d);
    const absl::Status s = WriteBigramPolicy(
        d, kJudgeAlphabet, {{'1', 'Y'}, {'7', '+'}, {'+', '+'}, {'Y', '\0'}, {'N', '\0'}}, 'N');
    EXPECT_TRUE(s.ok()) << s;
    return d;
  }();
  return dir;
}

nlohmann::json JudgeConfig() {
  return {{"model_dir", BigramJudgeDir()},
          {"template", "{prompt}{response}"},
          {"verdicts", {{"Y", 1.0}, {"N", 0.0}}},
          {"max_new_tokens", 4},
          {"slots", 16}};
}

// The config as the actor reads it from the JSON it is spawned with (ActorContext::ConfigAs), then
// the core it makes.
absl::StatusOr<std::unique_ptr<JudgeCore>> MakeJudge(const nlohmann::json& config) {
  const ActorContext ctx(nullptr, "judge-0", "Judge", "judge-0", config, 0, nullptr);
  absl::StatusOr<proto::JudgeConfig> typed = ctx.ConfigAs<proto::JudgeConfig>();
  if (!typed.ok()) return typed.status();
  return JudgeCore::Create(*typed);
}

proto::Sample MakeSample(int64_t prompt_id, int index, const std::string& prompt,
                         const std::string& response, const std::string& answer = "") {
  proto::Sample s;
  s.set_prompt_id(prompt_id);
  s.set_sample_index(index);
  s.set_prompt_text(prompt);
  s.set_response_text(response);
  s.set_reference_answer(answer);
  s.set_finish_reason("stop");
  return s;
}

proto::ScoreRequest Request(int64_t prompt_id, const std::vector<std::string>& responses,
                            const std::string& answer = "") {
  proto::ScoreRequest req;
  proto::SampleGroup* g = req.add_groups();
  g->set_prompt_id(prompt_id);
  for (size_t i = 0; i < responses.size(); ++i) {
    *g->add_samples() = MakeSample(prompt_id, static_cast<int>(i), "23+58=", responses[i], answer);
  }
  return req;
}

// Runs a core's server on a thread for the test's lifetime.
class Server {
 public:
  explicit Server(JudgeCore& core)
      : thread_([this, &core] { status_ = core.Serve([this] { return stop_.load(); }); }) {}
  ~Server() { (void)Stop(); }
  absl::Status Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    return status_;
  }

 private:
  std::atomic<bool> stop_{false};
  absl::Status status_;
  std::thread thread_;
};

TEST(JudgeTemplate, SplitsTextAndPlaceholdersAndUnescapesBraces) {
  absl::StatusOr<JudgeTemplate> t =
      ParseJudgeTemplate("Q: {prompt} A: {response} {{ok}} {reference}");
  ASSERT_TRUE(t.ok()) << t.status();
  using P = JudgeTemplate::Part;
  const std::vector<std::pair<P, std::string>> want = {{P::kText, "Q: "},    {P::kPrompt, ""},
                                                       {P::kText, " A: "},   {P::kResponse, ""},
                                                       {P::kText, " {ok} "}, {P::kReference, ""}};
  EXPECT_EQ(t->parts, want);
}

TEST(JudgeTemplate, RefusesWhatItCannotFill) {
  EXPECT_THAT(ParseJudgeTemplate("{prompt} is it right?").status().message(),
              HasSubstr("has no {response}"));
  EXPECT_THAT(ParseJudgeTemplate("{response} {answer}").status().message(),
              HasSubstr("unknown placeholder {answer}"));
  EXPECT_THAT(ParseJudgeTemplate("{response} {oops").status().message(),
              HasSubstr("unmatched '{' at character 11"));
  EXPECT_THAT(ParseJudgeTemplate("{response} }").status().message(),
              HasSubstr("unmatched '}' at character 11"));
}

TEST(VerdictParser, ReadsALabelAtTheStartOfTheReplyAndNothingElse) {
  VerdictParser p;
  p.verdicts = {{"yes", 1.0}, {"no", -1.0}, {"no doubt", 0.5}};
  EXPECT_EQ(*p.Parse("yes"), 1.0);
  EXPECT_EQ(*p.Parse("  Yes.\n"), 1.0);
  EXPECT_EQ(*p.Parse("NO, it is wrong"), -1.0);
  EXPECT_EQ(*p.Parse("no doubt about it"), 0.5);  // the longest label wins
  for (const char* bad : {"", "yesterday", "nope", "I think yes", "\x01yes"}) {
    absl::StatusOr<double> v = p.Parse(bad);
    EXPECT_FALSE(v.ok()) << bad;
    EXPECT_THAT(v.status().message(), HasSubstr("expected a verdict (no, no doubt, yes)"));
  }
  EXPECT_THAT(p.Parse(std::string(60, 'x')).status().message(), HasSubstr("xxx...'"));
}

TEST(VerdictParser, WithAMarkerReadsTheVerdictAfterItsLastOccurrence) {
  VerdictParser p;
  p.verdicts = {{"Y", 1.0}, {"N", 0.0}};
  p.marker = "=";
  EXPECT_EQ(*p.Parse("81=Y"), 1.0);
  EXPECT_EQ(*p.Parse("1=2=N"), 0.0);
  EXPECT_THAT(p.Parse("Y").status().message(), HasSubstr("it has no '=' before its verdict"));
  EXPECT_THAT(p.Parse("81=").status().message(), HasSubstr("expected a verdict (N, Y)"));
  VerdictParser score;
  score.min = 1;
  score.max = 5;
  score.marker = "Score:";
  EXPECT_EQ(*score.Parse("7 apples, 2 pears. Score: 4"), 4.0);
}

TEST(VerdictParser, ScoreModeReadsTheFirstNumberInRange) {
  VerdictParser p;
  p.min = 0;
  p.max = 10;
  EXPECT_EQ(*p.Parse("7"), 7.0);
  EXPECT_EQ(*p.Parse("Score: 8.5/10"), 8.5);
  EXPECT_EQ(*p.Parse(" 0 "), 0.0);
  EXPECT_THAT(p.Parse("11").status().message(), HasSubstr("outside [0, 10]"));
  EXPECT_THAT(p.Parse("score -3").status().message(), HasSubstr("outside [0, 10]"));
  EXPECT_THAT(p.Parse("great").status().message(), HasSubstr("expected a score in [0, 10]"));
}

TEST(JudgeCore, ScoresEachSampleByTheModelsVerdictAndCountsUnparseableReplies) {
  absl::StatusOr<std::unique_ptr<JudgeCore>> core = MakeJudge(JudgeConfig());
  ASSERT_TRUE(core.ok()) << core.status();
  Server server(**core);
  // Replies: "81" -> Y, "82" -> N, "87" -> "++++" (no verdict), "" -> not judged.
  absl::StatusOr<proto::ScoreReply> reply =
      (*core)->Score(Request(5, {"81", "82", "87", ""})).Get(absl::Seconds(30));
  ASSERT_TRUE(reply.ok()) << reply.status();
  ASSERT_EQ(reply->groups_size(), 1);
  const auto& s = reply->groups(0).samples();
  ASSERT_EQ(s.size(), 4);
  EXPECT_EQ(s[0].reward(), 1.0f);
  EXPECT_EQ(s[0].reward_components().at("judge/score"), 1.0f);
  EXPECT_EQ(s[1].reward(), 0.0f);
  EXPECT_EQ(s[1].reward_components().at("judge/score"), 0.0f);
  EXPECT_TRUE(s[1].reward_error().empty());
  EXPECT_EQ(s[2].reward(), 0.0f);
  EXPECT_TRUE(s[2].reward_components().empty());
  EXPECT_THAT(s[2].reward_error(), HasSubstr("cannot parse the judge's reply '++++'"));
  EXPECT_THAT(s[3].reward_error(), HasSubstr("empty response"));
  EXPECT_EQ(reply->failures(), 2);
  const JudgeStats stats = (*core)->stats();
  EXPECT_EQ(stats.requests, 1);
  EXPECT_EQ(stats.samples, 4);
  EXPECT_EQ(stats.failures, 2);
  EXPECT_EQ(stats.parse_failures, 1);
}

TEST(JudgeCore, AddsTheWeightedVerdictToTheVerifiersAndKeepsTheirComponents) {
  // The same samples scored with the judge weighted 0 (the verifiers alone) and 2.
  auto score = [](double weight) {
    nlohmann::json config = JudgeConfig();
    config["weight"] = weight;
    config["verifiers"] = {{"task", "arithmetic"}};
    absl::StatusOr<std::unique_ptr<JudgeCore>> core = MakeJudge(config);
    EXPECT_TRUE(core.ok()) << core.status();
    Server server(**core);
    absl::StatusOr<proto::ScoreReply> reply =
        (*core)->Score(Request(1, {"81", "71", "80"}, /*answer=*/"81")).Get(absl::Seconds(30));
    EXPECT_TRUE(reply.ok()) << reply.status();
    return *reply;
  };
  const proto::ScoreReply alone = score(0);
  const proto::ScoreReply both = score(2);
  // "81": correct, the judge says Y; "71": wrong, Y (the bigram judge is fooled); "80": wrong, N.
  const float verdict[] = {1, 1, 0};
  for (int i = 0; i < 3; ++i) {
    const proto::Sample& a = alone.groups(0).samples(i);
    const proto::Sample& b = both.groups(0).samples(i);
    EXPECT_EQ(b.reward_components().at("correct"), i == 0 ? 1.0f : 0.0f);
    EXPECT_EQ(b.reward_components().at("judge/score"), verdict[i]);
    EXPECT_FLOAT_EQ(b.reward(), a.reward() + 2 * verdict[i]) << "sample " << i;
  }
}

TEST(JudgeCore, AReplyItCannotParseKeepsTheVerifiersVerdictForEvaluations) {
  nlohmann::json config = JudgeConfig();
  config["verifiers"] = {{"task", "arithmetic"}};
  absl::StatusOr<std::unique_ptr<JudgeCore>> core = MakeJudge(config);
  ASSERT_TRUE(core.ok()) << core.status();
  Server server(**core);
  // "27" is right, and the judge babbles after a 7.
  absl::StatusOr<proto::ScoreReply> reply =
      (*core)->Score(Request(1, {"27"}, /*answer=*/"27")).Get(absl::Seconds(30));
  ASSERT_TRUE(reply.ok()) << reply.status();
  const proto::Sample& s = reply->groups(0).samples(0);
  EXPECT_EQ(reply->failures(), 1);
  EXPECT_EQ(s.reward(), 0.0f);
  EXPECT_THAT(s.reward_error(), HasSubstr("cannot parse the judge's reply"));
  EXPECT_EQ(s.reward_components().at("correct"), 1.0f);
  EXPECT_EQ(s.reward_components().count("judge/score"), 0u);
}

TEST(JudgeCore, BatchesTheSamplesOfRequestsFromManyCallersTogether) {
  absl::StatusOr<std::unique_ptr<JudgeCore>> core = MakeJudge(JudgeConfig());
  ASSERT_TRUE(core.ok()) << core.status();
  // Four callers (rollout workers) send 3 samples each before the server runs: one batch of 12.
  std::vector<Future<proto::ScoreReply>> futures;
  for (int w = 0; w < 4; ++w) futures.push_back((*core)->Score(Request(w, {"11", "12", "21"})));
  Server server(**core);
  for (int w = 0; w < 4; ++w) {
    absl::StatusOr<proto::ScoreReply> reply = std::move(futures[w]).Get(absl::Seconds(30));
    ASSERT_TRUE(reply.ok()) << reply.status();
    EXPECT_EQ(reply->groups(0).prompt_id(), w);
    const auto& s = reply->groups(0).samples();
    EXPECT_EQ(s[0].reward(), 1.0f);
    EXPECT_EQ(s[1].reward(), 0.0f);
    EXPECT_EQ(s[2].reward(), 1.0f);
  }
  EXPECT_TRUE(server.Stop().ok());
  EXPECT_EQ((*core)->stats().max_batch, 12);
  // Every reply is a verdict and its eos: 24 tokens in 2 steps of the whole batch.
  EXPECT_EQ((*core)->stats().tokens, 24);
  EXPECT_EQ((*core)->stats().decode_steps, 2);
  // Stopped: a later request fails at once instead of waiting for a server that is gone.
  absl::StatusOr<proto::ScoreReply> late = (*core)->Score(Request(9, {"1"})).Get(absl::Seconds(5));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kUnavailable);
}

TEST(JudgeCore, ARequestStillQueuedWhenTheServerStopsFailsAsAWhole) {
  absl::StatusOr<std::unique_ptr<JudgeCore>> core = MakeJudge(JudgeConfig());
  ASSERT_TRUE(core.ok()) << core.status();
  Future<proto::ScoreReply> queued = (*core)->Score(Request(1, {"1", "2"}));
  // A server told to stop before it starts judges nothing.
  EXPECT_TRUE((*core)->Serve([] { return true; }).ok());
  absl::StatusOr<proto::ScoreReply> reply = std::move(queued).Get(absl::Seconds(5));
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kUnavailable);
}

TEST(JudgeCore, RefusesBadConfigsNamingTheKey) {
  auto error = [](nlohmann::json config) {
    absl::StatusOr<std::unique_ptr<JudgeCore>> core = MakeJudge(config);
    return core.ok() ? std::string("OK") : std::string(core.status().message());
  };
  nlohmann::json c = JudgeConfig();
  c["temperature"] = 0.5;
  EXPECT_THAT(error(c),
              HasSubstr("config of actor judge-0 (Judge): temperature: Cannot find field"));
  c = JudgeConfig();
  c["score"] = {{"min", 0}, {"max", 10}};
  EXPECT_THAT(error(c), HasSubstr("exactly one of verdicts"));
  c = JudgeConfig();
  c.erase("verdicts");
  c["score"] = {{"min", 5}, {"max", 5}};
  EXPECT_THAT(error(c), HasSubstr("score: min (5) must be below max (5)"));
  c = JudgeConfig();
  c["verdicts"] = {{"Y", "good"}};
  EXPECT_THAT(error(c), HasSubstr("(verdicts[0].value): invalid value \"good\""));
  c = JudgeConfig();
  c["verdicts"] = {{"Y", "Infinity"}};  // protobuf's JSON spelling of a double's infinity
  EXPECT_THAT(error(c), HasSubstr("verdicts.Y: expected a finite number"));
  c = JudgeConfig();
  c["verdicts"] = {{" Y", 1}};
  EXPECT_THAT(error(c), HasSubstr("label \" Y\" must be non-empty, without surrounding spaces"));
  c = JudgeConfig();
  c["template"] = "{prompt}";
  EXPECT_THAT(error(c), HasSubstr("template: has no {response}"));
  c = JudgeConfig();
  c["slots"] = 0;
  EXPECT_THAT(error(c), HasSubstr("slots: expected an integer >= 1"));
  c = JudgeConfig();
  c["verifiers"] = {{"task", "poetry"}};
  EXPECT_THAT(error(c), HasSubstr("judge config: verifiers: "));
  c = JudgeConfig();
  c["model_dir"] = TmpDir() + "/no_such_judge";
  EXPECT_THAT(error(c), HasSubstr("no_such_judge"));
}

TEST(JudgeCore, RefusesAPromptLongerThanTheJudgesContextAsAFailedSample) {
  absl::StatusOr<std::unique_ptr<JudgeCore>> core = MakeJudge(JudgeConfig());
  ASSERT_TRUE(core.ok()) << core.status();
  Server server(**core);
  absl::StatusOr<proto::ScoreReply> reply =
      (*core)->Score(Request(1, {std::string(100, '1'), "1"})).Get(absl::Seconds(30));
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_THAT(reply->groups(0).samples(0).reward_error(),
              HasSubstr("exceeds the judge model's context (64)"));
  EXPECT_EQ(reply->groups(0).samples(1).reward(), 1.0f);
  EXPECT_EQ(reply->failures(), 1);
}

}  // namespace
}  // namespace troupe::actors
