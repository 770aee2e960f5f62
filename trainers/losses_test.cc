// Tests for trainers/losses.h. Expected values come from each paper's formula evaluated by hand
// (or with scalar std:: math below), never from the same tensor expression as the code under test.
#include "trainers/losses.h"

#include <ATen/ATen.h>

#include <cmath>
#include <initializer_list>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::trainers {
namespace {

constexpr double kTol = 1e-12;

at::Tensor Vec(std::vector<double> v) { return at::tensor(v, at::kDouble); }

at::Tensor Mat(std::initializer_list<std::initializer_list<double>> rows) {
  std::vector<double> flat;
  int64_t cols = 0;
  for (const auto& r : rows) {
    cols = static_cast<int64_t>(r.size());
    flat.insert(flat.end(), r.begin(), r.end());
  }
  return at::tensor(flat, at::kDouble).reshape({static_cast<int64_t>(rows.size()), cols});
}

at::Tensor Leaf(const at::Tensor& t) { return t.clone().set_requires_grad(true); }

double At(const at::Tensor& t, int64_t i) { return t.reshape({-1})[i].item<double>(); }
double At(const at::Tensor& t, int64_t i, int64_t j) { return t[i][j].item<double>(); }

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// ----------------------------------------------------------------------------------------------
// SFT
// ----------------------------------------------------------------------------------------------

TEST(MaskedTokenCrossEntropy, AveragesNegativeLogProbOverUnmaskedTokensOnly) {
  // Padding carries -inf, which must not poison the value or the gradient.
  at::Tensor logp =
      Leaf(Mat({{std::log(0.5), std::log(0.25), -INFINITY}, {std::log(0.2), -INFINITY, 0.0}}));
  at::Tensor mask = Mat({{1, 1, 0}, {1, 0, 0}});
  auto out = MaskedTokenCrossEntropy(logp, mask);
  ASSERT_TRUE(out.ok()) << out.status();
  const double expected = -(std::log(0.5) + std::log(0.25) + std::log(0.2)) / 3.0;
  EXPECT_NEAR(out->loss.item<double>(), expected, kTol);
  EXPECT_EQ(out->num_tokens, 3);
  out->loss.backward();
  const double grads[2][3] = {{-1.0 / 3, -1.0 / 3, 0}, {-1.0 / 3, 0, 0}};
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_NEAR(At(logp.grad(), i, j), grads[i][j], kTol);
}

TEST(MaskedTokenCrossEntropy, MatchesHandCrossEntropyOfLogits) {
  // Logits {1,2,3} target 2 and {0,0,ln 2} target 0; CE = -(z_y - log Σ e^z).
  at::Tensor logits =
      at::tensor({1.0, 2.0, 3.0, 0.0, 0.0, std::log(2.0)}, at::kDouble).reshape({1, 2, 3});
  at::Tensor targets = at::tensor({2, 0}, at::kLong).reshape({1, 2});
  at::Tensor logp = at::log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1);
  auto out = MaskedTokenCrossEntropy(logp, at::ones({1, 2}, at::kBool));
  ASSERT_TRUE(out.ok()) << out.status();
  const double ce0 = -(3.0 - std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)));
  const double ce1 = -(0.0 - std::log(1.0 + 1.0 + 2.0));
  EXPECT_NEAR(out->loss.item<double>(), (ce0 + ce1) / 2, kTol);
}

TEST(MaskedTokenCrossEntropy, GivesZeroNotNanForAnEmptyMask) {
  at::Tensor logp = Leaf(Mat({{-1.0, -2.0}}));
  auto out = MaskedTokenCrossEntropy(logp, at::zeros({1, 2}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->loss.item<double>(), 0.0);
  EXPECT_EQ(out->num_tokens, 0);
  out->loss.backward();
  EXPECT_EQ(logp.grad().abs().sum().item<double>(), 0.0);
}

TEST(MaskedTokenCrossEntropy, RejectsAMaskOfTheWrongShapeNamingIt) {
  auto out = MaskedTokenCrossEntropy(Mat({{-1.0, -2.0}}), at::ones({2, 2}));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.status().message()), testing::HasSubstr("mask"));
}

// ----------------------------------------------------------------------------------------------
// Packing
// ----------------------------------------------------------------------------------------------

std::vector<int64_t> Row(const at::Tensor& t, int64_t r) {
  at::Tensor row = t[r].to(at::kLong).contiguous();
  return std::vector<int64_t>(row.data_ptr<int64_t>(), row.data_ptr<int64_t>() + row.numel());
}

TEST(PackSequences, PacksFirstFitDecreasingWithPerSequencePositionsTargetsAndMasks) {
  // Lengths 5, 3, 2, 4 into rows of 8. Decreasing order A(5) D(4) B(3) C(2):
  // A -> row 0; D does not fit row 0 (9 > 8) -> row 1; B -> row 0 @5; C -> row 1 @4.
  std::vector<SequenceToPack> seqs = {
      {{1, 2, 3, 4, 5}, {0, 0, 1, 1, 1}},  // A: first two tokens are prompt.
      {{6, 7, 8}, {0, 1, 1}},              // B
      {{9, 10}, {}},                       // C: all trained.
      {{11, 12, 13, 14}, {}},              // D
  };
  auto packed = PackSequences(seqs, {.row_length = 8, .pad_token_id = -1});
  ASSERT_TRUE(packed.ok()) << packed.status();
  ASSERT_EQ(packed->input_ids.size(0), 2);
  ASSERT_EQ(packed->input_ids.size(1), 8);
  using V = std::vector<int64_t>;
  EXPECT_EQ(Row(packed->input_ids, 0), (V{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(Row(packed->input_ids, 1), (V{11, 12, 13, 14, 9, 10, -1, -1}));
  EXPECT_EQ(Row(packed->target_ids, 0), (V{2, 3, 4, 5, -1, 7, 8, -1}));
  EXPECT_EQ(Row(packed->target_ids, 1), (V{12, 13, 14, -1, 10, -1, -1, -1}));
  EXPECT_EQ(Row(packed->position_ids, 0), (V{0, 1, 2, 3, 4, 0, 1, 2}));
  EXPECT_EQ(Row(packed->position_ids, 1), (V{0, 1, 2, 3, 0, 1, 0, 0}));
  EXPECT_EQ(Row(packed->segment_ids, 0), (V{1, 1, 1, 1, 1, 2, 2, 2}));
  EXPECT_EQ(Row(packed->segment_ids, 1), (V{1, 1, 1, 1, 2, 2, 0, 0}));
  // loss_mask[j] = train_mask[j+1]; the last token of each sequence has no target.
  EXPECT_EQ(Row(packed->loss_mask, 0), (V{0, 1, 1, 1, 0, 1, 1, 0}));
  EXPECT_EQ(Row(packed->loss_mask, 1), (V{1, 1, 1, 0, 1, 0, 0, 0}));
  using P = std::pair<int64_t, int64_t>;
  EXPECT_THAT(packed->placement, testing::ElementsAre(P{0, 0}, P{0, 5}, P{1, 4}, P{1, 0}));
}

TEST(PackSequences, RejectsSequencesLongerThanARowOrEmptyOrWithAMismatchedMask) {
  std::vector<SequenceToPack> too_long = {{{1, 2, 3}, {}}};
  auto a = PackSequences(too_long, {.row_length = 2});
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(a.status().message()), testing::HasSubstr("sequences[0]"));
  std::vector<SequenceToPack> empty = {{{1}, {}}, {{}, {}}};
  EXPECT_THAT(std::string(PackSequences(empty, {.row_length = 4}).status().message()),
              testing::HasSubstr("sequences[1] is empty"));
  std::vector<SequenceToPack> bad_mask = {{{1, 2}, {1}}};
  EXPECT_THAT(std::string(PackSequences(bad_mask, {.row_length = 4}).status().message()),
              testing::HasSubstr("train_mask"));
  EXPECT_FALSE(PackSequences(bad_mask, {.row_length = 0}).ok());
}

TEST(BlockDiagonalCausalMask, LetsTokensSeeOnlyEarlierTokensOfTheirOwnSequence) {
  at::Tensor segments = at::tensor({1, 1, 1, 1, 2, 2, 0, 0}, at::kLong).reshape({1, 8});
  auto mask = BlockDiagonalCausalMask(segments);
  ASSERT_TRUE(mask.ok()) << mask.status();
  ASSERT_EQ(mask->sizes(), at::IntArrayRef({1, 8, 8}));
  const auto allowed = [&](int q, int k) { return (*mask)[0][q][k].item<bool>(); };
  EXPECT_TRUE(allowed(3, 0));   // Same sequence, earlier key.
  EXPECT_FALSE(allowed(0, 3));  // Causal.
  EXPECT_TRUE(allowed(5, 4));   // Second sequence sees its own first token...
  EXPECT_FALSE(allowed(4, 3));  // ...but not the first sequence.
  EXPECT_TRUE(allowed(6, 6));   // Padding sees itself only, so softmax rows are never empty.
  EXPECT_FALSE(allowed(6, 5));
  EXPECT_FALSE(allowed(7, 6));
  // Each row count: tokens of sequence 1 see 1..4 keys, sequence 2 sees 1..2, padding 1.
  at::Tensor per_query = mask->sum(-1).reshape({-1});
  EXPECT_EQ(Row(per_query.unsqueeze(0), 0), (std::vector<int64_t>{1, 2, 3, 4, 1, 2, 1, 1}));
}

// ----------------------------------------------------------------------------------------------
// GRPO
// ----------------------------------------------------------------------------------------------

TEST(GroupNormalizedAdvantages, NormalisesEachGroupByItsMeanAndStd) {
  at::Tensor rewards = Vec({1, 0, 0, 1, 0.5, 0.5, 0.5, 0.5});
  auto adv = GroupNormalizedAdvantages(rewards, 4, {});
  ASSERT_TRUE(adv.ok()) << adv.status();
  // Group 1: mean 0.5, Bessel std sqrt((4 * 0.25) / 3).
  const double std1 = std::sqrt(1.0 / 3.0);
  const double a = 0.5 / (std1 + 1e-6);
  const double expected[] = {a, -a, -a, a, 0, 0, 0, 0};
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(At(*adv, i), expected[i], kTol) << i;
  EXPECT_FALSE(adv->requires_grad());
}

TEST(GroupNormalizedAdvantages, GivesExactZerosForAGroupOfEqualRewards) {
  // 0.1 is not representable and mean(0.1, 0.1, 0.1) need not round back to 0.1 in float32.
  at::Tensor rewards = at::full({3}, 0.1f, at::kFloat);
  for (bool scale : {true, false}) {
    auto adv = GroupNormalizedAdvantages(rewards, 3, {.scale_by_std = scale});
    ASSERT_TRUE(adv.ok()) << adv.status();
    for (int i = 0; i < 3; ++i) EXPECT_EQ(At(*adv, i), 0.0);
  }
  auto single = GroupNormalizedAdvantages(Vec({3.0, -1.0}), 1, {});
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(At(*single, 0), 0.0);
  EXPECT_EQ(At(*single, 1), 0.0);
}

TEST(GroupNormalizedAdvantages, DrGrpoOnlySubtractsTheMeanAndBiasedStdIsAvailable) {
  at::Tensor rewards = Vec({1, 0, 0, 1});
  auto dr = GroupNormalizedAdvantages(rewards, 2, {.scale_by_std = false});
  ASSERT_TRUE(dr.ok());
  EXPECT_NEAR(At(*dr, 0), 0.5, kTol);
  EXPECT_NEAR(At(*dr, 1), -0.5, kTol);
  auto biased = GroupNormalizedAdvantages(rewards, 2, {.unbiased_std = false, .eps = 0.0});
  ASSERT_TRUE(biased.ok());
  EXPECT_NEAR(At(*biased, 0), 1.0, kTol);  // Population std 0.5.
  EXPECT_NEAR(At(*biased, 3), 1.0, kTol);
  EXPECT_FALSE(GroupNormalizedAdvantages(Vec({1, 2, 3}), 2, {}).ok());
}

// One sequence with advantage +1, one with -1; ratios 0.5, 0.9, 1.1, 1.5 in each.
struct ClipCase {
  at::Tensor logp, old_logp, advantages, mask;
  std::vector<double> ratios = {0.5, 0.9, 1.1, 1.5};
};

ClipCase MakeClipCase() {
  ClipCase c;
  const std::vector<double> old = {-1.0, -2.0, -0.5, -3.0};
  std::vector<double> old2, cur2;
  for (int s = 0; s < 2; ++s)
    for (int t = 0; t < 4; ++t) {
      old2.push_back(old[t]);
      cur2.push_back(old[t] + std::log(c.ratios[t]));
    }
  c.old_logp = at::tensor(old2, at::kDouble).reshape({2, 4});
  c.logp = Leaf(at::tensor(cur2, at::kDouble).reshape({2, 4}));
  c.advantages = Vec({1.0, -1.0});
  c.mask = at::ones({2, 4}, at::kBool);
  return c;
}

TEST(ClippedPolicyLoss, ClipsAtOneMinusEpsLowAndOnePlusEpsHighPerAdvantageSign) {
  ClipCase c = MakeClipCase();
  PolicyLossOptions options{.clip_eps_low = 0.2, .clip_eps_high = 0.28};
  auto out = ClippedPolicyLoss(
      {.logp = c.logp, .old_logp = c.old_logp, .advantages = c.advantages, .mask = c.mask},
      options);
  ASSERT_TRUE(out.ok()) << out.status();
  // A=+1: min(r, clip(r, 0.8, 1.28)) = 0.5, 0.9, 1.1, 1.28 (last clipped).
  // A=-1: min(-r, -clip(r)) = -0.8 (clipped), -0.9, -1.1, -1.5.
  const double objective = 0.5 + 0.9 + 1.1 + 1.28 - 0.8 - 0.9 - 1.1 - 1.5;
  EXPECT_NEAR(out->loss.item<double>(), -objective / 8.0, kTol);
  EXPECT_NEAR(out->pg_loss, -objective / 8.0, kTol);
  EXPECT_NEAR(out->clip_fraction, 2.0 / 8.0, kTol);
  EXPECT_NEAR(out->clip_fraction_high, 1.0 / 8.0, kTol);
  EXPECT_NEAR(out->clip_fraction_low, 1.0 / 8.0, kTol);
  EXPECT_NEAR(out->ratio_mean, 1.0, kTol);
  EXPECT_NEAR(out->ratio_max, 1.5, kTol);
  double approx_kl = 0;
  for (double r : c.ratios) approx_kl += 2 * (r - std::log(r) - 1);
  EXPECT_NEAR(out->approx_kl, approx_kl / 8, kTol);
  EXPECT_EQ(out->num_tokens, 8);

  // d loss / d logp_t = -A r_t / N where the unclipped branch is active, else 0.
  out->loss.backward();
  const double advantages[] = {1.0, -1.0};
  const bool clipped[2][4] = {{false, false, false, true}, {true, false, false, false}};
  for (int s = 0; s < 2; ++s)
    for (int t = 0; t < 4; ++t) {
      const double expected = clipped[s][t] ? 0.0 : -advantages[s] * c.ratios[t] / 8.0;
      EXPECT_NEAR(At(c.logp.grad(), s, t), expected, kTol) << s << "," << t;
    }
}

TEST(ClippedPolicyLoss, GradientIncludesTheK3KlTermForGrpo) {
  // Ratio 1 (logp == old), A = +1, β = 0.1, k3 to the reference.
  at::Tensor logp = Leaf(Mat({{-1.0, -2.0, -0.3}}));
  at::Tensor ref = Mat({{-1.5, -1.0, -0.3}});
  const double beta = 0.1;
  auto out = ClippedPolicyLoss({.logp = logp,
                                .old_logp = logp.detach(),
                                .ref_logp = ref,
                                .advantages = Vec({1.0}),
                                .mask = at::ones({1, 3})},
                               {.kl_coef = beta, .kl_estimator = KlEstimator::kK3});
  ASSERT_TRUE(out.ok()) << out.status();
  const double lp[] = {-1.0, -2.0, -0.3};
  const double rf[] = {-1.5, -1.0, -0.3};
  double kl = 0;
  for (int t = 0; t < 3; ++t) kl += std::exp(rf[t] - lp[t]) - (rf[t] - lp[t]) - 1;
  EXPECT_NEAR(out->kl_loss, kl / 3, kTol);
  EXPECT_NEAR(out->loss.item<double>(), (-3.0 + beta * kl) / 3, kTol);
  out->loss.backward();
  // d/dlogp [-r A + β(exp(ref - logp) - (ref - logp) - 1)] / N = (-A + β(1 - exp(ref - logp))) / N.
  for (int t = 0; t < 3; ++t) {
    EXPECT_NEAR(At(logp.grad(), 0, t), (-1.0 + beta * (1.0 - std::exp(rf[t] - lp[t]))) / 3, kTol);
  }
}

TEST(ClippedPolicyLoss, TakesPerTokenPpoAdvantagesAndDrGrpoNormalisation) {
  // Ratio 1.5 on both tokens; A = (+1, -1). Token 0 is clipped to 1.2, token 1 is not.
  // Dr. GRPO: Σ / (B · L) with the constant L = 4, not the 2 tokens present.
  at::Tensor old = Mat({{-1.0, -2.0, 0.0}});
  at::Tensor logp = Leaf(old + std::log(1.5));
  auto out = ClippedPolicyLoss(
      {.logp = logp,
       .old_logp = old,
       .advantages = Mat({{1.0, -1.0, 5.0}}),
       .mask = Mat({{1, 1, 0}})},
      {.aggregation = LossAggregation::kSequenceSumNormalized, .normalizer_length = 4});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NEAR(out->loss.item<double>(), -(1.2 - 1.5) / 4, kTol);
  out->loss.backward();
  EXPECT_NEAR(At(logp.grad(), 0, 0), 0.0, kTol);
  EXPECT_NEAR(At(logp.grad(), 0, 1), 1.5 / 4, kTol);  // -A·r / (B·L) with A = -1.
  EXPECT_EQ(At(logp.grad(), 0, 2), 0.0);
}

TEST(KlPenalty, ComputesK1K2AndK3PerToken) {
  at::Tensor logp = Mat({{-1.0, -2.0}});
  at::Tensor ref = Mat({{-1.5, -1.0}});  // r = ref - logp = {-0.5, 1.0}
  auto k1 = KlPenalty(logp, ref, KlEstimator::kK1);
  auto k2 = KlPenalty(logp, ref, KlEstimator::kK2);
  auto k3 = KlPenalty(logp, ref, KlEstimator::kK3);
  ASSERT_TRUE(k1.ok() && k2.ok() && k3.ok());
  EXPECT_NEAR(At(*k1, 0, 0), 0.5, kTol);
  EXPECT_NEAR(At(*k1, 0, 1), -1.0, kTol);
  EXPECT_NEAR(At(*k2, 0, 0), 0.125, kTol);
  EXPECT_NEAR(At(*k2, 0, 1), 0.5, kTol);
  EXPECT_NEAR(At(*k3, 0, 0), std::exp(-0.5) + 0.5 - 1.0, kTol);
  EXPECT_NEAR(At(*k3, 0, 1), std::exp(1.0) - 1.0 - 1.0, kTol);
}

TEST(AggregateLoss, ImplementsTokenSequenceAndDrGrpoNormalisation) {
  at::Tensor per_token = Mat({{1, 2, 3, 0}, {4, 0, 0, 0}, {9, 9, 9, 9}});
  at::Tensor mask = Mat({{1, 1, 1, 0}, {1, 0, 0, 0}, {0, 0, 0, 0}});
  auto token = AggregateLoss(per_token, mask, LossAggregation::kTokenMean);
  auto seq = AggregateLoss(per_token, mask, LossAggregation::kSequenceMean);
  auto dr_t = AggregateLoss(per_token, mask, LossAggregation::kSequenceSumNormalized);
  auto dr_c = AggregateLoss(per_token, mask, LossAggregation::kSequenceSumNormalized, 10);
  ASSERT_TRUE(token.ok() && seq.ok() && dr_t.ok() && dr_c.ok());
  EXPECT_NEAR(token->item<double>(), (1 + 2 + 3 + 4) / 4.0, kTol);
  EXPECT_NEAR(seq->item<double>(), ((1 + 2 + 3) / 3.0 + 4.0) / 2.0, kTol);  // Empty row skipped.
  EXPECT_NEAR(dr_t->item<double>(), 10.0 / (3 * 4), kTol);
  EXPECT_NEAR(dr_c->item<double>(), 10.0 / (3 * 10), kTol);
  for (auto mode : {LossAggregation::kTokenMean, LossAggregation::kSequenceMean,
                    LossAggregation::kSequenceSumNormalized}) {
    auto empty = AggregateLoss(per_token, at::zeros_like(mask), mode);
    ASSERT_TRUE(empty.ok());
    EXPECT_EQ(empty->item<double>(), 0.0);
  }
}

TEST(ClippedPolicyLoss, SequenceMeanAggregationWeighsSequencesEqually) {
  // Ratio 1 everywhere: per-token objective = A. Sequence 0 has 3 tokens, sequence 1 has 1.
  at::Tensor logp = Leaf(Mat({{-1, -1, -1}, {-1, -1, -1}}));
  at::Tensor mask = Mat({{1, 1, 1}, {1, 0, 0}});
  auto out = ClippedPolicyLoss(
      {.logp = logp, .old_logp = logp.detach(), .advantages = Vec({1.0, 3.0}), .mask = mask},
      {.aggregation = LossAggregation::kSequenceMean});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NEAR(out->loss.item<double>(), -(1.0 + 3.0) / 2, kTol);
  out->loss.backward();
  EXPECT_NEAR(At(logp.grad(), 0, 0), -1.0 / (2 * 3), kTol);
  EXPECT_NEAR(At(logp.grad(), 1, 0), -3.0 / (2 * 1), kTol);
  EXPECT_EQ(At(logp.grad(), 1, 1), 0.0);
}

TEST(ClippedPolicyLoss, ReportsEntropyAndSubtractsTheBonus) {
  at::Tensor logp = Leaf(Mat({{-1, -1}}));
  at::Tensor entropy = Leaf(Mat({{2.0, 4.0}}));
  auto out = ClippedPolicyLoss({.logp = logp,
                                .old_logp = logp.detach(),
                                .advantages = Vec({0.0}),
                                .mask = at::ones({1, 2}),
                                .entropy = entropy},
                               {.entropy_coef = 0.01});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NEAR(out->entropy, 3.0, kTol);
  EXPECT_NEAR(out->loss.item<double>(), -0.01 * 3.0, kTol);
}

TEST(ClippedPolicyLoss, RejectsMissingAnchorAndMissingReferenceForKl) {
  at::Tensor logp = Mat({{-1, -1}});
  auto no_anchor =
      ClippedPolicyLoss({.logp = logp, .advantages = Vec({1}), .mask = at::ones({1, 2})}, {});
  EXPECT_THAT(std::string(no_anchor.status().message()), testing::HasSubstr("behaviour_logp"));
  auto no_ref = ClippedPolicyLoss(
      {.logp = logp, .old_logp = logp, .advantages = Vec({1}), .mask = at::ones({1, 2})},
      {.kl_coef = 0.1});
  EXPECT_THAT(std::string(no_ref.status().message()), testing::HasSubstr("ref_logp"));
  auto bad_adv = ClippedPolicyLoss(
      {.logp = logp, .old_logp = logp, .advantages = Vec({1, 2}), .mask = at::ones({1, 2})}, {});
  EXPECT_THAT(std::string(bad_adv.status().message()), testing::HasSubstr("advantages"));
}

// ----------------------------------------------------------------------------------------------
// Off-policy correction
// ----------------------------------------------------------------------------------------------

TEST(TruncatedImportanceWeights, TruncatesAtTheCapAndCarriesNoGradient) {
  at::Tensor current = Leaf(Vec({-1.0, -1.0, -1.0}));
  at::Tensor behaviour = Leaf(Vec({-1.5, -0.5, -3.0}));
  auto w = TruncatedImportanceWeights(current, behaviour, 2.0);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_NEAR(At(*w, 0), std::exp(0.5), kTol);
  EXPECT_NEAR(At(*w, 1), std::exp(-0.5), kTol);
  EXPECT_NEAR(At(*w, 2), 2.0, kTol);  // exp(2) = 7.39 truncated.
  EXPECT_FALSE(w->requires_grad());
  EXPECT_FALSE(TruncatedImportanceWeights(current, behaviour, 0.0).ok());
}

TEST(ClippedPolicyLoss, DecoupledRatioUsesProximalLogpAndATruncatedDetachedBehaviourWeight) {
  // π_prox/π_behav = e^0.5 (kept) and e^2 (truncated to 2); ratio π_θ/π_prox = 1.
  at::Tensor logp = Leaf(Mat({{-1.0, -1.0}}));
  at::Tensor proximal = Mat({{-1.0, -1.0}});
  at::Tensor behaviour = Leaf(Mat({{-1.5, -3.0}}));
  const double w[] = {std::exp(0.5), 2.0};
  auto out = ClippedPolicyLoss({.logp = logp,
                                .old_logp = proximal,
                                .behaviour_logp = behaviour,
                                .advantages = Vec({1.0}),
                                .mask = at::ones({1, 2})},
                               {.importance_weight_cap = 2.0});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NEAR(out->loss.item<double>(), -(w[0] + w[1]) / 2, kTol);
  EXPECT_NEAR(out->importance_weight_mean, (w[0] + w[1]) / 2, kTol);
  EXPECT_NEAR(out->importance_capped_fraction, 0.5, kTol);
  out->loss.backward();
  // The weight is a constant: d/dlogp (-w·r·A / N) = -w·r·A / N with r = 1.
  EXPECT_NEAR(At(logp.grad(), 0, 0), -w[0] / 2, kTol);
  EXPECT_NEAR(At(logp.grad(), 0, 1), -w[1] / 2, kTol);
  EXPECT_FALSE(behaviour.grad().defined());

  // kMask drops the over-cap token instead (AReaL), keeping it in the denominator.
  auto masked = ClippedPolicyLoss({.logp = logp.detach(),
                                   .old_logp = proximal,
                                   .behaviour_logp = behaviour,
                                   .advantages = Vec({1.0}),
                                   .mask = at::ones({1, 2})},
                                  {.off_policy_correction = OffPolicyCorrection::kMask});
  ASSERT_TRUE(masked.ok()) << masked.status();
  EXPECT_NEAR(masked->loss.item<double>(), -w[0] / 2, kTol);
}

TEST(ClippedPolicyLoss, ClipsAgainstTheBehaviourPolicyWhenNoProximalLogpIsGiven) {
  // Ratio π_θ/π_behav = e^0.5 ≈ 1.65 > 1.2 with A > 0: clipped, no extra weight.
  at::Tensor logp = Leaf(Mat({{-1.0}}));
  auto out = ClippedPolicyLoss({.logp = logp,
                                .behaviour_logp = Mat({{-1.5}}),
                                .advantages = Vec({2.0}),
                                .mask = at::ones({1, 1})},
                               {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NEAR(out->loss.item<double>(), -1.2 * 2.0, kTol);
  EXPECT_EQ(out->importance_weight_mean, 1.0);
  out->loss.backward();
  EXPECT_EQ(At(logp.grad(), 0, 0), 0.0);
}

// ----------------------------------------------------------------------------------------------
// PPO
// ----------------------------------------------------------------------------------------------

TEST(ComputeGae, MatchesAHandComputedThreeStepExample) {
  // γ = 0.9, λ = 0.8, rewards (0, 0, 1), values (0.5, 0.6, 0.7); a padding step with garbage.
  //   δ2 = 1 - 0.7 = 0.3                  A2 = 0.3
  //   δ1 = 0.9·0.7 - 0.6 = 0.03           A1 = 0.03 + 0.72·0.3   = 0.246
  //   δ0 = 0.9·0.6 - 0.5 = 0.04           A0 = 0.04 + 0.72·0.246 = 0.21712
  at::Tensor rewards = Mat({{0, 0, 1, 5}});
  at::Tensor values = Mat({{0.5, 0.6, 0.7, 100}});
  at::Tensor mask = Mat({{1, 1, 1, 0}});
  auto gae = ComputeGae(rewards, values, mask, 0.9, 0.8);
  ASSERT_TRUE(gae.ok()) << gae.status();
  const double adv[] = {0.21712, 0.246, 0.3, 0.0};
  const double ret[] = {0.71712, 0.846, 1.0, 0.0};
  for (int t = 0; t < 4; ++t) {
    EXPECT_NEAR(At(gae->advantages, 0, t), adv[t], 1e-12) << t;
    EXPECT_NEAR(At(gae->returns, 0, t), ret[t], 1e-12) << t;
  }
}

TEST(ComputeGae, SkipsMaskedPositionsInsideASequence) {
  // Middle step masked (e.g. tool output): t=0 bootstraps from t=2.
  //   A2 = 0.3;  δ0 = 0.9·0.7 - 0.5 = 0.13;  A0 = 0.13 + 0.72·0.3 = 0.346
  auto gae = ComputeGae(Mat({{0, 7, 1}}), Mat({{0.5, 0.6, 0.7}}), Mat({{1, 0, 1}}), 0.9, 0.8);
  ASSERT_TRUE(gae.ok()) << gae.status();
  EXPECT_NEAR(At(gae->advantages, 0, 0), 0.346, 1e-12);
  EXPECT_EQ(At(gae->advantages, 0, 1), 0.0);
  EXPECT_NEAR(At(gae->advantages, 0, 2), 0.3, 1e-12);
  EXPECT_FALSE(ComputeGae(Mat({{0}}), Mat({{0}}), Mat({{1}}), 1.5, 0.5).ok());
}

TEST(WhitenAdvantages, CentresAndScalesOverUnmaskedTokens) {
  // {1, 2, 3}: mean 2, Bessel std 1.
  auto w = WhitenAdvantages(Mat({{1, 2, 3, 100}}), Mat({{1, 1, 1, 0}}), true, 0.0);
  ASSERT_TRUE(w.ok()) << w.status();
  const double expected[] = {-1, 0, 1, 0};
  for (int t = 0; t < 4; ++t) EXPECT_NEAR(At(*w, 0, t), expected[t], kTol);
  auto scaled = WhitenAdvantages(Mat({{1, 2, 3, 100}}), Mat({{1, 1, 1, 0}}), false, 0.0);
  ASSERT_TRUE(scaled.ok());
  EXPECT_NEAR(At(*scaled, 0, 2), 3.0, kTol);
}

TEST(ClippedValueLoss, TakesTheLargerOfClippedAndUnclippedSquaredErrorTimesHalf) {
  // c = 0.2.
  //  t0: V=1.0 V_old=0.5 R=2.0: V_clip=0.7, (1-2)²=1 < (0.7-2)²=1.69 -> 1.69 (clipped, no grad)
  //  t1: V=2.0 V_old=2.5 R=3.0: V_clip=2.3, (2-3)²=1 > (2.3-3)²=0.49 -> 1    (unclipped)
  //  t2: V=0.0 V_old=0.1 R=0.0: within the range -> 0
  at::Tensor values = Leaf(Mat({{1.0, 2.0, 0.0, 9.0}}));
  auto out = ClippedValueLoss(values, Mat({{0.5, 2.5, 0.1, 0}}), Mat({{2.0, 3.0, 0.0, 0}}),
                              Mat({{1, 1, 1, 0}}), {.clip_range = 0.2});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NEAR(out->loss.item<double>(), 0.5 * (1.69 + 1.0 + 0.0) / 3, 1e-12);
  EXPECT_NEAR(out->clip_fraction, 1.0 / 3, kTol);
  out->loss.backward();
  EXPECT_NEAR(At(values.grad(), 0, 0), 0.0, kTol);
  EXPECT_NEAR(At(values.grad(), 0, 1), (2.0 - 3.0) / 3, kTol);  // 0.5·2(V-R)/N
  EXPECT_NEAR(At(values.grad(), 0, 2), 0.0, kTol);
  EXPECT_EQ(At(values.grad(), 0, 3), 0.0);
}

// ----------------------------------------------------------------------------------------------
// Preference losses
// ----------------------------------------------------------------------------------------------

// Pair 0: h = (-1 - -1.2) - (-2 - -1.5) = 0.7.  Pair 1: h = (-3 - -2) - (-1 - -2) = -2.
PreferenceLogps MakePairs() {
  return {.policy_chosen = Leaf(Vec({-1.0, -3.0})),
          .policy_rejected = Leaf(Vec({-2.0, -1.0})),
          .reference_chosen = Vec({-1.2, -2.0}),
          .reference_rejected = Vec({-1.5, -2.0})};
}

TEST(DpoLoss, MatchesMinusLogSigmoidOfBetaTimesTheLogRatioMargin) {
  PreferenceLogps pairs = MakePairs();
  const double beta = 0.5;
  const double h[] = {0.7, -2.0};
  auto out = DpoLoss(pairs, {.beta = beta});
  ASSERT_TRUE(out.ok()) << out.status();
  const double expected =
      (std::log1p(std::exp(-beta * h[0])) + std::log1p(std::exp(-beta * h[1]))) / 2;
  EXPECT_NEAR(out->loss.item<double>(), expected, kTol);
  EXPECT_NEAR(out->chosen_reward, (0.5 * 0.2 + 0.5 * -1.0) / 2, kTol);
  EXPECT_NEAR(out->rejected_reward, (0.5 * -0.5 + 0.5 * 1.0) / 2, kTol);
  EXPECT_NEAR(out->reward_accuracy, 0.5, kTol);
  EXPECT_NEAR(out->reward_margin, beta * (h[0] + h[1]) / 2, kTol);
  // dL/d log π_c = -β σ(-βh) / B, dL/d log π_r = +β σ(-βh) / B.
  out->loss.backward();
  for (int i = 0; i < 2; ++i) {
    const double g = -beta * Sigmoid(-beta * h[i]) / 2;
    EXPECT_NEAR(At(pairs.policy_chosen.grad(), i), g, kTol);
    EXPECT_NEAR(At(pairs.policy_rejected.grad(), i), -g, kTol);
  }
}

TEST(DpoLoss, LabelSmoothingMixesInTheFlippedLabel) {
  PreferenceLogps pairs = MakePairs();
  const double beta = 0.5, eps = 0.1;
  const double h[] = {0.7, -2.0};
  auto out = DpoLoss(pairs, {.beta = beta, .label_smoothing = eps});
  ASSERT_TRUE(out.ok()) << out.status();
  double expected = 0;
  for (double hi : h) {
    expected +=
        (1 - eps) * std::log1p(std::exp(-beta * hi)) + eps * std::log1p(std::exp(beta * hi));
  }
  EXPECT_NEAR(out->loss.item<double>(), expected / 2, kTol);
  out->loss.backward();
  for (int i = 0; i < 2; ++i) {
    const double g =
        (-(1 - eps) * beta * Sigmoid(-beta * h[i]) + eps * beta * Sigmoid(beta * h[i])) / 2;
    EXPECT_NEAR(At(pairs.policy_chosen.grad(), i), g, kTol);
  }
  EXPECT_FALSE(DpoLoss(MakePairs(), {.beta = 0.5, .label_smoothing = 0.5}).ok());
}

TEST(IpoLoss, RegressesTheMarginToHalfInverseBeta) {
  PreferenceLogps pairs = MakePairs();
  auto out = IpoLoss(pairs, 0.5);  // 1/(2β) = 1.
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NEAR(out->loss.item<double>(), ((0.7 - 1) * (0.7 - 1) + (-2 - 1) * (-2 - 1)) / 2, kTol);
  out->loss.backward();
  EXPECT_NEAR(At(pairs.policy_chosen.grad(), 0), 2 * (0.7 - 1) / 2, kTol);
  EXPECT_NEAR(At(pairs.policy_rejected.grad(), 1), -2 * (-2.0 - 1) / 2, kTol);
}

TEST(KtoLoss, UsesTheClampedMismatchedPairKlAsReferencePoint) {
  // r = (0.5, -0.5, -1.0); z_ref = mean(0.4, 0.2) = 0.3; β = 0.5, λ_D = 1, λ_U = 1.5.
  at::Tensor kl_policy = Leaf(Vec({-2.0, -1.0}));
  KtoInputs in{.policy_logps = Leaf(Vec({-1.0, -2.0, -3.0})),
               .reference_logps = Vec({-1.5, -1.5, -2.0}),
               .desirable = Vec({1, 0, 1}),
               .kl_policy_logps = kl_policy,
               .kl_reference_logps = Vec({-2.4, -1.2})};
  KtoOptions options{.beta = 0.5, .desirable_weight = 1.0, .undesirable_weight = 1.5};
  auto out = KtoLoss(in, options);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NEAR(out->z_ref, 0.3, kTol);
  const double expected =
      ((1 - Sigmoid(0.5 * (0.5 - 0.3))) + 1.5 * (1 - Sigmoid(0.5 * (0.3 + 0.5))) +
       (1 - Sigmoid(0.5 * (-1.0 - 0.3)))) /
      3;
  EXPECT_NEAR(out->loss.item<double>(), expected, kTol);
  EXPECT_NEAR(out->desirable_reward, 0.5 * (0.5 - 1.0) / 2, kTol);
  EXPECT_NEAR(out->undesirable_reward, 0.5 * -0.5, kTol);
  out->loss.backward();
  EXPECT_FALSE(kl_policy.grad().defined());  // No gradient through z_ref.
  // d/dr [λ_D(1 - σ(β(r - z)))] = -λ_D β σ(1-σ) / B for the first (desirable) sample.
  const double s = Sigmoid(0.5 * 0.2);
  EXPECT_NEAR(At(in.policy_logps.grad(), 0), -0.5 * s * (1 - s) / 3, kTol);

  // The same z_ref passed in gives the same loss; a negative one is clamped at 0.
  KtoInputs given = in;
  given.kl_policy_logps = at::Tensor();
  given.kl_reference_logps = at::Tensor();
  given.z_ref = 0.3;
  auto same = KtoLoss(given, options);
  ASSERT_TRUE(same.ok());
  EXPECT_NEAR(same->loss.item<double>(), expected, kTol);
  given.z_ref = -0.2;
  auto clamped = KtoLoss(given, options);
  ASSERT_TRUE(clamped.ok());
  EXPECT_EQ(clamped->z_ref, 0.0);
}

TEST(KtoLoss, ClampsANegativeKlEstimateAndRequiresExactlyOneReferenceSource) {
  auto z = KtoReferencePoint(Vec({-3.0}), Vec({-1.0}));
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(*z, 0.0);
  KtoInputs neither{
      .policy_logps = Vec({-1.0}), .reference_logps = Vec({-1.0}), .desirable = Vec({1})};
  EXPECT_FALSE(KtoLoss(neither, {}).ok());
  KtoInputs both = neither;
  both.z_ref = 0.1;
  both.kl_policy_logps = Vec({-1.0});
  both.kl_reference_logps = Vec({-1.0});
  EXPECT_FALSE(KtoLoss(both, {}).ok());
}

TEST(ClippedPolicyLoss, PromotesBfloat16InputsToFloat32) {
  at::Tensor logp = Mat({{-1.0, -2.0}}).to(at::kBFloat16);
  auto out = ClippedPolicyLoss(
      {.logp = logp, .old_logp = logp, .advantages = Vec({1.0}), .mask = at::ones({1, 2})}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->loss.scalar_type(), at::kFloat);
  EXPECT_FLOAT_EQ(out->loss.item<float>(), -1.0f);
}

// ----------------------------------------------------------------------------------------------
// GSPO (sequence-level ratio)
// ----------------------------------------------------------------------------------------------

// Five sequences; row 4 has an empty mask. The mean log ratio d_i of each row is set so that, with
// ε = 0.2 / 0.28: row 0 (s = 1.5, A > 0) is clipped high, row 1 (s = 0.5, A < 0) clipped low, row 2
// (s = 1.1) is inside the range, row 3 (s = 1.5, A < 0) is outside it but unclipped (pessimistic
// branch). Per-token log ratios spread around d_i (offsets sum to 0), so token-level clipping
// would decide differently.
struct GspoCase {
  std::vector<std::vector<double>> logp, anchor, mask;
  std::vector<double> advantages = {1.0, -1.0, 0.5, -2.0, 3.0};
  std::vector<double> seq_ratio = {1.5, 0.5, 1.1, 1.5, 1.0};
};

GspoCase MakeGspoCase() {
  GspoCase c;
  c.mask = {{1, 1, 1, 0}, {1, 1, 0, 0}, {1, 1, 1, 1}, {1, 0, 0, 0}, {0, 0, 0, 0}};
  const std::vector<std::vector<double>> offsets = {
      {0.3, -0.1, -0.2, 0}, {0.2, -0.2, 0, 0}, {0.3, -0.1, -0.2, 0.0}, {0, 0, 0, 0}, {0, 0, 0, 0}};
  const double anchor_row[] = {-1.0, -2.0, -0.5, -3.0};
  for (int b = 0; b < 5; ++b) {
    c.logp.emplace_back();
    c.anchor.emplace_back();
    for (int t = 0; t < 4; ++t) {
      const bool on = c.mask[b][t] != 0;
      c.anchor[b].push_back(on ? anchor_row[t] : 7.0);  // Garbage on padding.
      c.logp[b].push_back(on ? anchor_row[t] + std::log(c.seq_ratio[b]) + offsets[b][t]
                             : -INFINITY);
    }
  }
  return c;
}

at::Tensor FromRows(const std::vector<std::vector<double>>& rows) {
  std::vector<double> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  return at::tensor(flat, at::kDouble)
      .reshape({static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size())});
}

// The GSPO loss by loops: s_i = exp(mean_t (logp - anchor)), per-token objective
// min(s_i A_i, clip(s_i) A_i) on every unmasked token, aggregated.
double ReferenceGspoLoss(const std::vector<std::vector<double>>& logp, const GspoCase& c,
                         double eps_low, double eps_high, LossAggregation aggregation) {
  double token_sum = 0, tokens = 0, seq_sum = 0, seqs = 0;
  for (size_t b = 0; b < logp.size(); ++b) {
    double len = 0, log_ratio = 0;
    for (size_t t = 0; t < logp[b].size(); ++t) {
      if (c.mask[b][t] == 0) continue;
      len += 1;
      log_ratio += logp[b][t] - c.anchor[b][t];
    }
    if (len == 0) continue;
    const double s = std::exp(log_ratio / len);
    const double a = c.advantages[b];
    const double clipped = std::min(std::max(s, 1 - eps_low), 1 + eps_high);
    const double objective = std::min(s * a, clipped * a);
    token_sum += len * objective;
    tokens += len;
    seq_sum += objective;
    seqs += 1;
  }
  switch (aggregation) {
    case LossAggregation::kTokenMean:
      return -token_sum / tokens;
    case LossAggregation::kSequenceMean:
      return -seq_sum / seqs;
    case LossAggregation::kSequenceSumNormalized:
      return -token_sum / (logp.size() * logp[0].size());
  }
  return 0;
}

TEST(ClippedPolicyLoss, GspoClipsTheSequenceRatioAndMatchesALoopReferenceAndItsGradient) {
  const double eps_low = 0.2, eps_high = 0.28;
  for (LossAggregation aggregation : {LossAggregation::kTokenMean, LossAggregation::kSequenceMean,
                                      LossAggregation::kSequenceSumNormalized}) {
    SCOPED_TRACE(static_cast<int>(aggregation));
    const GspoCase c = MakeGspoCase();
    at::Tensor logp = Leaf(FromRows(c.logp));
    auto out = ClippedPolicyLoss({.logp = logp,
                                  .old_logp = FromRows(c.anchor),
                                  .advantages = Vec(c.advantages),
                                  .mask = FromRows(c.mask)},
                                 {.clip_eps_low = eps_low,
                                  .clip_eps_high = eps_high,
                                  .ratio_level = PolicyRatioLevel::kSequence,
                                  .aggregation = aggregation});
    ASSERT_TRUE(out.ok()) << out.status();
    const double expected = ReferenceGspoLoss(c.logp, c, eps_low, eps_high, aggregation);
    EXPECT_NEAR(out->loss.item<double>(), expected, kTol);
    EXPECT_NEAR(out->pg_loss, expected, kTol);
    out->loss.backward();

    // Gradient against central finite differences of the reference (the sequence ratio is a
    // function of every token of its sequence) and against the hand formula
    // -A_i s_i · (aggregation weight of a token of row i) on unclipped rows, 0 on clipped ones.
    const double n_tokens = 10, n_seqs = 4, cells = 20;
    const double lengths[] = {3, 2, 4, 1, 0};
    const bool clipped[] = {true, true, false, false, false};
    for (int b = 0; b < 5; ++b)
      for (int t = 0; t < 4; ++t) {
        const double grad = At(logp.grad(), b, t);
        if (c.mask[b][t] == 0) {
          EXPECT_EQ(grad, 0.0) << b << "," << t;
          continue;
        }
        const double h = 1e-5;
        auto plus = c.logp, minus = c.logp;
        plus[b][t] += h;
        minus[b][t] -= h;
        const double numeric = (ReferenceGspoLoss(plus, c, eps_low, eps_high, aggregation) -
                                ReferenceGspoLoss(minus, c, eps_low, eps_high, aggregation)) /
                               (2 * h);
        EXPECT_NEAR(grad, numeric, 1e-8) << b << "," << t;
        const double weight = aggregation == LossAggregation::kTokenMean ? 1 / n_tokens
                              : aggregation == LossAggregation::kSequenceMean
                                  ? 1 / (n_seqs * lengths[b])
                                  : 1 / cells;
        const double hand = clipped[b] ? 0.0 : -c.advantages[b] * c.seq_ratio[b] * weight;
        EXPECT_NEAR(grad, hand, 1e-12) << b << "," << t;
      }

    // Diagnostics count every token of a clipped sequence; ratio statistics use s_i; approx_kl
    // stays per token.
    EXPECT_NEAR(out->clip_fraction_high, 3 / n_tokens, kTol);
    EXPECT_NEAR(out->clip_fraction_low, 2 / n_tokens, kTol);
    EXPECT_NEAR(out->clip_fraction, 5 / n_tokens, kTol);
    EXPECT_NEAR(out->ratio_mean, (3 * 1.5 + 2 * 0.5 + 4 * 1.1 + 1 * 1.5) / n_tokens, kTol);
    EXPECT_NEAR(out->ratio_max, 1.5, kTol);
    double approx_kl = 0;
    for (int b = 0; b < 5; ++b)
      for (int t = 0; t < 4; ++t) {
        if (c.mask[b][t] == 0) continue;
        const double lr = c.logp[b][t] - c.anchor[b][t];
        approx_kl += std::exp(lr) - lr - 1;
      }
    EXPECT_NEAR(out->approx_kl, approx_kl / n_tokens, kTol);
    EXPECT_EQ(out->num_tokens, 10);
  }
}

TEST(ClippedPolicyLoss, GspoDiffersFromTokenLevelClippingOnTheSameInputs) {
  // Row 2 has s = 1.1 (inside the range) but its first token has ratio 1.1·e^0.3 ≈ 1.48, which the
  // token level clips: the two levels must not agree.
  const GspoCase c = MakeGspoCase();
  PolicyLossInputs in{.logp = FromRows(c.logp),
                      .old_logp = FromRows(c.anchor),
                      .advantages = Vec(c.advantages),
                      .mask = FromRows(c.mask)};
  auto token = ClippedPolicyLoss(in, {});
  auto sequence = ClippedPolicyLoss(in, {.ratio_level = PolicyRatioLevel::kSequence});
  ASSERT_TRUE(token.ok() && sequence.ok());
  EXPECT_GT(std::abs(token->loss.item<double>() - sequence->loss.item<double>()), 1e-3);
  EXPECT_NEAR(sequence->loss.item<double>(),
              ReferenceGspoLoss(c.logp, c, 0.2, 0.2, LossAggregation::kTokenMean), kTol);
}

TEST(ClippedPolicyLoss, GspoComposesPerTokenWithTheOffPolicyWeightAndTheKlTerm) {
  // s = exp(mean(0.15, -0.05)) = e^0.05, inside [0.8, 1.2]; π_prox/π_behav = e^0.5 and e^2 → 2.
  const double proximal[] = {-1.0, -2.0};
  const double offset[] = {0.15, -0.05};
  const double behaviour[] = {-1.5, -4.0};
  const double ref[] = {-1.2, -1.8};
  const double w[] = {std::exp(0.5), 2.0};
  const double beta = 0.1, s = std::exp(0.05), a = 1.5;
  double lp[2];
  for (int t = 0; t < 2; ++t) lp[t] = proximal[t] + offset[t];
  at::Tensor logp = Leaf(Mat({{lp[0], lp[1]}}));
  auto out = ClippedPolicyLoss({.logp = logp,
                                .old_logp = Mat({{proximal[0], proximal[1]}}),
                                .behaviour_logp = Mat({{behaviour[0], behaviour[1]}}),
                                .ref_logp = Mat({{ref[0], ref[1]}}),
                                .advantages = Vec({a}),
                                .mask = at::ones({1, 2})},
                               {.ratio_level = PolicyRatioLevel::kSequence, .kl_coef = beta});
  ASSERT_TRUE(out.ok()) << out.status();
  double loss = 0;
  for (int t = 0; t < 2; ++t) {
    const double r = ref[t] - lp[t];
    loss += (-w[t] * s * a + beta * (std::exp(r) - r - 1)) / 2;
  }
  EXPECT_NEAR(out->loss.item<double>(), loss, kTol);
  EXPECT_NEAR(out->importance_weight_mean, (w[0] + w[1]) / 2, kTol);
  out->loss.backward();
  // Token form: ∂ρ_t/∂logp_t = s, so each token's gradient carries its own weight w_t.
  for (int t = 0; t < 2; ++t) {
    const double expected = (-w[t] * s * a + beta * (1 - std::exp(ref[t] - lp[t]))) / 2;
    EXPECT_NEAR(At(logp.grad(), 0, t), expected, kTol) << t;
  }
}

}  // namespace
}  // namespace troupe::trainers
