// Tests for trainers/advantage_estimators.h. Every expected value comes from a plain-loop
// reference over std::vector<double> written below from the papers' formulas (leave-one-out
// means computed directly, returns summed forwards), never from the code under test.
#include "trainers/advantage_estimators.h"

#include <ATen/ATen.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::trainers {
namespace {

using Rows = std::vector<std::vector<double>>;

constexpr double kTol = 1e-12;

at::Tensor ToTensor(const Rows& rows) {
  std::vector<double> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  return at::tensor(flat, at::kDouble)
      .reshape({static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size())});
}

Rows FromTensor(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kDouble).contiguous();
  Rows rows(c.size(0), std::vector<double>(c.size(1)));
  for (int64_t b = 0; b < c.size(0); ++b)
    for (int64_t t2 = 0; t2 < c.size(1); ++t2) rows[b][t2] = c[b][t2].item<double>();
  return rows;
}

// B = 6, G = 3, T = 5: row 1 has an all-zero mask, row 2 starts late, row 3 has a hole (masked
// tool output inside the response), the second group has equal rewards. NaN sits on masked
// positions of the KL penalty and must not leak.
struct Case {
  int64_t group_size = 3;
  std::vector<double> rewards = {1.0, 0.0, 0.25, 0.5, 0.5, 0.5};
  Rows mask = {{1, 1, 1, 0, 0}, {0, 0, 0, 0, 0}, {0, 1, 1, 1, 1},
               {1, 0, 1, 1, 0}, {1, 1, 0, 0, 0}, {1, 1, 1, 1, 1}};
  Rows kl = {{0.01, 0.02, -0.03, NAN, 5}, {NAN, 1, 2, 3, 4},     {9, 0.05, 0.0, 0.02, 0.01},
             {0.04, NAN, 0.03, -0.01, 7}, {0.02, 0.01, 8, 8, 8}, {0.01, 0.01, 0.01, 0.01, 0.01}};
};

AdvantageInputs Inputs(const Case& c, bool with_kl) {
  return {.rewards = at::tensor(c.rewards, at::kDouble),
          .group_size = c.group_size,
          .mask = ToTensor(c.mask),
          .kl_penalty = with_kl ? ToTensor(c.kl) : at::Tensor()};
}

// ---- Independent references -------------------------------------------------------------------

std::vector<double> RefScores(const Case& c, bool with_kl) {
  std::vector<double> s = c.rewards;
  if (!with_kl) return s;
  for (size_t b = 0; b < s.size(); ++b)
    for (size_t t = 0; t < c.mask[b].size(); ++t)
      if (c.mask[b][t] != 0) s[b] -= c.kl[b][t];
  return s;
}

Rows RefBroadcast(const Case& c, const std::vector<double>& per_row) {
  Rows out = c.mask;
  for (size_t b = 0; b < out.size(); ++b)
    for (size_t t = 0; t < out[b].size(); ++t) out[b][t] = c.mask[b][t] != 0 ? per_row[b] : 0.0;
  return out;
}

double GroupMean(const std::vector<double>& s, size_t i, size_t g) {
  const size_t start = i / g * g;
  double sum = 0;
  for (size_t j = start; j < start + g; ++j) sum += s[j];
  return sum / g;
}

Rows RefGrpo(const Case& c, bool norm, double eps, bool with_kl) {
  const std::vector<double> s = RefScores(c, with_kl);
  const size_t g = c.group_size;
  std::vector<double> a(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const double mean = GroupMean(s, i, g);
    double var = 0;
    for (size_t j = i / g * g; j < i / g * g + g; ++j) var += (s[j] - mean) * (s[j] - mean);
    const double std = std::sqrt(var / (g - 1));
    a[i] = norm ? (s[i] - mean) / (std + eps) : s[i] - mean;
  }
  return RefBroadcast(c, a);
}

Rows RefRloo(const Case& c) {
  const std::vector<double> s = RefScores(c, false);
  const size_t g = c.group_size;
  std::vector<double> a(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    double others = 0;
    for (size_t j = i / g * g; j < i / g * g + g; ++j)
      if (j != i) others += s[j];
    a[i] = s[i] - others / (g - 1);
  }
  return RefBroadcast(c, a);
}

Rows RefWhiten(const Case& c, const Rows& x) {
  double n = 0, sum = 0;
  for (size_t b = 0; b < x.size(); ++b)
    for (size_t t = 0; t < x[b].size(); ++t)
      if (c.mask[b][t] != 0) n += 1, sum += x[b][t];
  const double mean = sum / n;
  double var = 0;
  for (size_t b = 0; b < x.size(); ++b)
    for (size_t t = 0; t < x[b].size(); ++t)
      if (c.mask[b][t] != 0) var += (x[b][t] - mean) * (x[b][t] - mean);
  var /= n - 1;
  Rows out = x;
  for (size_t b = 0; b < x.size(); ++b)
    for (size_t t = 0; t < x[b].size(); ++t)
      out[b][t] = c.mask[b][t] != 0 ? (x[b][t] - mean) / std::sqrt(var + 1e-8) : 0.0;
  return out;
}

// R_t = Σ_{unmasked u ≥ t} γ^{#unmasked in [t, u)} ρ_u, summed forwards from t.
Rows RefReinforcePlusPlus(const Case& c, double gamma, bool with_kl) {
  Rows returns = c.mask;
  for (size_t b = 0; b < c.mask.size(); ++b) {
    const size_t len = c.mask[b].size();
    int last = -1;
    for (size_t t = 0; t < len; ++t)
      if (c.mask[b][t] != 0) last = static_cast<int>(t);
    for (size_t t = 0; t < len; ++t) {
      returns[b][t] = 0;
      if (c.mask[b][t] == 0) continue;
      double discount = 1;
      for (size_t u = t; u < len; ++u) {
        if (c.mask[b][u] == 0) continue;
        double rho =
            (with_kl ? -c.kl[b][u] : 0.0) + (static_cast<int>(u) == last ? c.rewards[b] : 0.0);
        returns[b][t] += discount * rho;
        discount *= gamma;
      }
    }
  }
  return RefWhiten(c, returns);
}

Rows RefReinforcePlusPlusBaseline(const Case& c) {
  std::vector<double> centered(c.rewards.size());
  for (size_t i = 0; i < centered.size(); ++i)
    centered[i] = c.rewards[i] - (c.group_size == 1 ? 0.0 : GroupMean(c.rewards, i, c.group_size));
  return RefWhiten(c, RefBroadcast(c, centered));
}

void ExpectRowsNear(const at::Tensor& actual, const Rows& expected, double tol = kTol) {
  ASSERT_EQ(actual.dim(), 2);
  const Rows got = FromTensor(actual);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t b = 0; b < got.size(); ++b) {
    ASSERT_EQ(got[b].size(), expected[b].size());
    for (size_t t = 0; t < got[b].size(); ++t)
      EXPECT_NEAR(got[b][t], expected[b][t], tol) << "at [" << b << ", " << t << "]";
  }
}

// ---- Registry
// -------------------------------------------------------------------------------------

TEST(AdvantageEstimatorRegistry, FindsEveryBuiltInEstimatorByNameWithADescription) {
  EXPECT_THAT(AdvantageEstimatorNames(),
              testing::ElementsAre("gae", "grpo", "reinforce_plus_plus",
                                   "reinforce_plus_plus_baseline", "rloo"));
  for (const std::string& name : AdvantageEstimatorNames()) {
    auto estimator = FindAdvantageEstimator(name);
    ASSERT_TRUE(estimator.ok()) << estimator.status();
    EXPECT_FALSE((*estimator)->description().empty()) << name;
  }
  EXPECT_TRUE((*FindAdvantageEstimator("grpo"))->needs_groups());
  EXPECT_TRUE((*FindAdvantageEstimator("rloo"))->needs_groups());
  EXPECT_EQ((*FindAdvantageEstimator("rloo"))->min_group_size(), 2);
  EXPECT_FALSE((*FindAdvantageEstimator("reinforce_plus_plus"))->needs_groups());
  EXPECT_FALSE((*FindAdvantageEstimator("reinforce_plus_plus_baseline"))->needs_groups());
  EXPECT_FALSE((*FindAdvantageEstimator("gae"))->needs_groups());
  EXPECT_TRUE((*FindAdvantageEstimator("gae"))->needs_values());
  EXPECT_FALSE((*FindAdvantageEstimator("grpo"))->needs_values());
}

// The traits each entry carries (the header's table): what trainers/algorithm_check.h checks.
TEST(AdvantageEstimatorRegistry, EveryBuiltInEstimatorCarriesItsTraits) {
  struct Row {
    const char* name;
    int64_t min_group_size;
    bool reads_gamma, reads_lambda, needs_critic;
  };
  for (const Row& row : {Row{"grpo", 2, false, false, false}, Row{"rloo", 2, false, false, false},
                         Row{"reinforce_plus_plus", 1, true, false, false},
                         Row{"reinforce_plus_plus_baseline", 1, false, false, false},
                         Row{"gae", 1, true, true, true}}) {
    const AdvantageEstimatorTraits t = (*FindAdvantageEstimator(row.name))->traits();
    EXPECT_EQ(t.min_group_size, row.min_group_size) << row.name;
    EXPECT_EQ(t.reads_gamma, row.reads_gamma) << row.name;
    EXPECT_EQ(t.reads_lambda, row.reads_lambda) << row.name;
    EXPECT_EQ(t.needs_critic, row.needs_critic) << row.name;
  }
}

TEST(AdvantageEstimatorRegistry, UnknownNameIsNotFoundListingEveryRegisteredName) {
  auto missing = FindAdvantageEstimator("gae_without_critic");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  const std::string message(missing.status().message());
  EXPECT_THAT(message, testing::HasSubstr("gae_without_critic"));
  for (const std::string& name : AdvantageEstimatorNames())
    EXPECT_THAT(message, testing::HasSubstr(name));
  auto via_compute = ComputeAdvantages("nope", Inputs(Case(), false), {});
  EXPECT_EQ(via_compute.status().code(), absl::StatusCode::kNotFound);
}

// ---- Estimators -------------------------------------------------------------------------------

TEST(GrpoEstimator, NormalisesByGroupStdOrOnlyCentresAndZeroesMaskedAndEqualGroups) {
  const Case c;
  auto adv = ComputeAdvantages("grpo", Inputs(c, false), {});
  ASSERT_TRUE(adv.ok()) << adv.status();
  EXPECT_FALSE(adv->requires_grad());
  EXPECT_EQ(adv->scalar_type(), at::kDouble);
  ExpectRowsNear(*adv, RefGrpo(c, /*norm=*/true, 1e-6, false));
  // The equal-reward group gives exact zeros, as does the all-zero-mask row.
  for (int64_t b = 3; b < 6; ++b) EXPECT_EQ(adv->select(0, b).abs().sum().item<double>(), 0.0);
  EXPECT_EQ(adv->select(0, 1).abs().sum().item<double>(), 0.0);

  auto centred = ComputeAdvantages("grpo", Inputs(c, false), {.norm_adv_by_std = false});
  ASSERT_TRUE(centred.ok()) << centred.status();
  ExpectRowsNear(*centred, RefGrpo(c, /*norm=*/false, 0, false));
}

TEST(GrpoEstimator, SubtractsTheSummedKlPenaltyOfEachSequenceFromItsReward) {
  const Case c;
  auto adv = ComputeAdvantages("grpo", Inputs(c, true), {.eps = 1e-3});
  ASSERT_TRUE(adv.ok()) << adv.status();
  ExpectRowsNear(*adv, RefGrpo(c, true, 1e-3, true));
}

TEST(RlooEstimator, UsesTheLeaveOneOutMeanAndRefusesGroupsOfOne) {
  const Case c;
  auto adv = ComputeAdvantages("rloo", Inputs(c, false), {});
  ASSERT_TRUE(adv.ok()) << adv.status();
  ExpectRowsNear(*adv, RefRloo(c));
  // Row 0: 1 - (0 + 0.25) / 2 = 0.875 on its three tokens.
  EXPECT_NEAR((*adv)[0][0].item<double>(), 0.875, kTol);
  for (int64_t b = 3; b < 6; ++b) EXPECT_EQ(adv->select(0, b).abs().sum().item<double>(), 0.0);

  AdvantageInputs single = Inputs(c, false);
  single.group_size = 1;
  auto refused = ComputeAdvantages("rloo", single, {});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.status().message()), testing::HasSubstr("group_size 1"));
  EXPECT_FALSE(ComputeAdvantages("grpo", single, {}).ok());
}

TEST(ReinforcePlusPlusEstimator, DiscountsRewardMinusKlOverUnmaskedTokensThenWhitens) {
  const Case c;
  auto adv = ComputeAdvantages("reinforce_plus_plus", Inputs(c, true), {.gamma = 0.9});
  ASSERT_TRUE(adv.ok()) << adv.status();
  ExpectRowsNear(*adv, RefReinforcePlusPlus(c, 0.9, true));
  EXPECT_EQ(adv->select(0, 1).abs().sum().item<double>(), 0.0);
  EXPECT_EQ((*adv)[3][1].item<double>(), 0.0);  // The hole stays 0.

  auto plain = ComputeAdvantages("reinforce_plus_plus", Inputs(c, false), {});
  ASSERT_TRUE(plain.ok()) << plain.status();
  ExpectRowsNear(*plain, RefReinforcePlusPlus(c, 1.0, false));
}

TEST(ReinforcePlusPlusEstimator, ReturnsMatchAHandComputedRowBeforeWhitening) {
  // One row, γ = 0.5, reward 1 at the last unmasked token (t = 3), KL 0.1 per unmasked token, a
  // hole at t = 1 and padding at t = 4:
  //   R_3 = 1 - 0.1 = 0.9,  R_2 = -0.1 + 0.5·0.9 = 0.35,  R_0 = -0.1 + 0.5·0.35 = 0.075.
  // Then whitened over those three tokens.
  const double r[] = {0.075, 0.35, 0.9};
  const double mean = (r[0] + r[1] + r[2]) / 3;
  double var = 0;
  for (double x : r) var += (x - mean) * (x - mean);
  var /= 2;
  auto adv = ComputeAdvantages("reinforce_plus_plus",
                               {.rewards = at::tensor({1.0}, at::kDouble),
                                .mask = ToTensor({{1, 0, 1, 1, 0}}),
                                .kl_penalty = ToTensor({{0.1, 0.1, 0.1, 0.1, 0.1}})},
                               {.gamma = 0.5});
  ASSERT_TRUE(adv.ok()) << adv.status();
  const double s = std::sqrt(var + 1e-8);
  ExpectRowsNear(*adv, {{(r[0] - mean) / s, 0, (r[1] - mean) / s, (r[2] - mean) / s, 0}});
}

TEST(ReinforcePlusPlusBaselineEstimator, CentresInGroupsThenWhitensOverTheBatch) {
  Case c;
  auto adv = ComputeAdvantages("reinforce_plus_plus_baseline", Inputs(c, false), {});
  ASSERT_TRUE(adv.ok()) << adv.status();
  ExpectRowsNear(*adv, RefReinforcePlusPlusBaseline(c));

  // G = 1 is allowed: no baseline, whitening alone.
  c.group_size = 1;
  auto single = ComputeAdvantages("reinforce_plus_plus_baseline", Inputs(c, false), {});
  ASSERT_TRUE(single.ok()) << single.status();
  ExpectRowsNear(*single, RefReinforcePlusPlusBaseline(c));
}

// ---- GAE --------------------------------------------------------------------------------------

// The critic's values of Case(): NaN on masked positions (ignored).
Rows CaseValues() {
  return {{0.3, -0.1, 0.6, NAN, NAN}, {NAN, NAN, NAN, NAN, NAN},   {NAN, 0.2, 0.4, -0.5, 0.1},
          {0.7, NAN, 0.05, 0.9, NAN}, {-0.2, 0.35, NAN, NAN, NAN}, {0.1, 0.2, 0.3, 0.4, 0.5}};
}

AdvantageInputs GaeInputs(const Case& c, bool with_kl) {
  AdvantageInputs in = Inputs(c, with_kl);
  in.values = ToTensor(CaseValues());
  return in;
}

// GAE before whitening, summed forwards: over row b's unmasked positions p_0 < p_1 < ... < p_{n-1}
// with token rewards ρ (the reward on p_{n-1}, minus the KL on each) and V (0 past the end),
//   δ_k = ρ_k + γ V_{k+1} - V_k,   A_k = Σ_{l ≥ 0} (γλ)^l δ_{k+l}.
// Returns {A, A + V}.
std::pair<Rows, Rows> RefGae(const Case& c, double gamma, double lambda, bool with_kl) {
  const Rows v = CaseValues();
  Rows adv = c.mask, ret = c.mask;
  for (size_t b = 0; b < c.mask.size(); ++b) {
    std::vector<size_t> pos;
    for (size_t t = 0; t < c.mask[b].size(); ++t) {
      adv[b][t] = ret[b][t] = 0;
      if (c.mask[b][t] != 0) pos.push_back(t);
    }
    const size_t n = pos.size();
    std::vector<double> delta(n);
    for (size_t k = 0; k < n; ++k) {
      const double rho = (k + 1 == n ? c.rewards[b] : 0.0) - (with_kl ? c.kl[b][pos[k]] : 0.0);
      const double next = k + 1 < n ? v[b][pos[k + 1]] : 0.0;
      delta[k] = rho + gamma * next - v[b][pos[k]];
    }
    for (size_t k = 0; k < n; ++k) {
      double a = 0, w = 1;
      for (size_t l = k; l < n; ++l, w *= gamma * lambda) a += w * delta[l];
      adv[b][pos[k]] = a;
      ret[b][pos[k]] = a + v[b][pos[k]];
    }
  }
  return {adv, ret};
}

TEST(GaeEstimator, MatchesALoopReferenceOverHolesAndPaddingThenWhitens) {
  const Case c;  // Row 3 has a hole at t = 1, rows 0 and 4 padding, row 2 a late start.
  for (bool with_kl : {false, true}) {
    auto adv = ComputeAdvantages("gae", GaeInputs(c, with_kl), {.gamma = 0.9, .lambda = 0.8});
    ASSERT_TRUE(adv.ok()) << adv.status();
    EXPECT_FALSE(adv->requires_grad());
    ExpectRowsNear(*adv, RefWhiten(c, RefGae(c, 0.9, 0.8, with_kl).first), 1e-10);
    EXPECT_EQ((*adv)[3][1].item<double>(), 0.0);  // The hole stays 0.
    EXPECT_EQ(adv->select(0, 1).abs().sum().item<double>(), 0.0);
  }
}

TEST(GaeEstimator, RowZeroByHandBeforeWhitening) {
  // One row, mask {1, 1, 0}, V = {0.5, 0.25}, reward 1, γ = 0.9, λ = 0.8:
  //   δ_1 = 1 + 0 - 0.25 = 0.75,  δ_0 = 0 + 0.9·0.25 - 0.5 = -0.275,
  //   A_1 = 0.75,  A_0 = -0.275 + 0.72·0.75 = 0.265;  returns A + V = {0.765, 1.0}.
  auto returns = GaeReturns({.rewards = at::tensor({1.0}, at::kDouble),
                             .mask = ToTensor({{1, 1, 0}}),
                             .values = ToTensor({{0.5, 0.25, 7.0}})},
                            {.gamma = 0.9, .lambda = 0.8});
  ASSERT_TRUE(returns.ok()) << returns.status();
  ExpectRowsNear(*returns, {{0.765, 1.0, 0.0}});
}

TEST(GaeEstimator, ReturnsAreAdvantagesPlusValuesBeforeWhitening) {
  const Case c;
  for (bool with_kl : {false, true}) {
    auto returns = GaeReturns(GaeInputs(c, with_kl), {.gamma = 0.9, .lambda = 0.8});
    ASSERT_TRUE(returns.ok()) << returns.status();
    ExpectRowsNear(*returns, RefGae(c, 0.9, 0.8, with_kl).second, 1e-12);
  }
}

TEST(GaeEstimator, SubtractsTheKlPenaltyPerToken) {
  // λ = 0, V = 0: A_t = δ_t = ρ_t, so the penalty shows token by token.
  auto returns = GaeReturns({.rewards = at::tensor({1.0}, at::kDouble),
                             .mask = ToTensor({{1, 1, 1}}),
                             .kl_penalty = ToTensor({{0.1, 0.2, 0.3}}),
                             .values = ToTensor({{0.0, 0.0, 0.0}})},
                            {.gamma = 1.0, .lambda = 0.0});
  ASSERT_TRUE(returns.ok()) << returns.status();
  ExpectRowsNear(*returns, {{-0.1, -0.2, 0.7}});
}

TEST(GaeEstimator, RefusesMissingMisshapedOrNonFiniteValuesAndLambdaOutOfRange) {
  const Case c;
  const auto code = [](const absl::StatusOr<at::Tensor>& s) { return s.status().code(); };
  const auto message = [](const absl::StatusOr<at::Tensor>& s) {
    return std::string(s.status().message());
  };
  auto missing = ComputeAdvantages("gae", Inputs(c, false), {});
  EXPECT_EQ(code(missing), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(message(missing), testing::HasSubstr("values"));
  EXPECT_EQ(code(GaeReturns(Inputs(c, false), {})), absl::StatusCode::kInvalidArgument);

  AdvantageInputs shape = GaeInputs(c, false);
  shape.values = at::zeros({6, 4}, at::kDouble);
  EXPECT_EQ(code(ComputeAdvantages("gae", shape, {})), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(message(ComputeAdvantages("gae", shape, {})), testing::HasSubstr("values"));
  AdvantageInputs integer = GaeInputs(c, false);
  integer.values = at::zeros({6, 5}, at::kLong);
  EXPECT_EQ(code(ComputeAdvantages("gae", integer, {})), absl::StatusCode::kInvalidArgument);

  AdvantageInputs inf = GaeInputs(c, false);
  inf.values[5][2] = INFINITY;  // Unmasked.
  EXPECT_EQ(code(ComputeAdvantages("gae", inf, {})), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(message(ComputeAdvantages("gae", inf, {})), testing::HasSubstr("values"));
  EXPECT_EQ(code(GaeReturns(inf, {})), absl::StatusCode::kInvalidArgument);

  for (double lambda : {-0.1, 1.5, static_cast<double>(NAN)}) {
    auto bad = ComputeAdvantages("gae", GaeInputs(c, false), {.lambda = lambda});
    EXPECT_EQ(code(bad), absl::StatusCode::kInvalidArgument) << lambda;
    EXPECT_THAT(message(bad), testing::HasSubstr("lambda")) << lambda;
  }
  // The other estimators ignore `values`, even when missing.
  EXPECT_TRUE(ComputeAdvantages("reinforce_plus_plus", Inputs(c, false), {}).ok());
}

TEST(AdvantageEstimators, GiveZerosNotNanForConstantValuesAndEmptyMasks) {
  Case c;
  c.rewards = {0.1, 0.1, 0.1, 0.1, 0.1, 0.1};  // Under γ = 1 every return is 0.1 as well.
  for (const std::string& name : AdvantageEstimatorNames()) {
    if (name == "gae") continue;  // Needs values; covered by its own tests.
    auto adv = ComputeAdvantages(name, Inputs(c, false), {});
    ASSERT_TRUE(adv.ok()) << name << ": " << adv.status();
    EXPECT_EQ(adv->abs().sum().item<double>(), 0.0) << name;
  }
  // One unmasked token per row with equal rewards: every return is equal, whitening gives 0.
  Case one_token = c;
  one_token.mask = Rows(6, {0, 0, 1, 0, 0});
  auto rpp = ComputeAdvantages("reinforce_plus_plus", Inputs(one_token, false), {});
  ASSERT_TRUE(rpp.ok()) << rpp.status();
  EXPECT_EQ(rpp->abs().sum().item<double>(), 0.0);
  // No unmasked token at all.
  Case empty = c;
  empty.rewards = {1, 0, 2, 3, 1, 0};
  empty.mask = Rows(6, std::vector<double>(5, 0.0));
  for (const std::string& name : AdvantageEstimatorNames()) {
    AdvantageInputs in = Inputs(empty, true);
    in.values = at::ones({6, 5}, at::kDouble);
    auto adv = ComputeAdvantages(name, in, {});
    ASSERT_TRUE(adv.ok()) << name << ": " << adv.status();
    EXPECT_EQ(adv->abs().sum().item<double>(), 0.0) << name;
    EXPECT_FALSE(adv->isnan().any().item<bool>()) << name;
  }
}

TEST(AdvantageEstimators, ReturnFloat32ForFloat32RewardsOnTheMaskDevice) {
  const Case c;
  AdvantageInputs in = Inputs(c, false);
  in.rewards = in.rewards.to(at::kFloat);
  in.mask = in.mask.to(at::kBool);
  auto adv = ComputeAdvantages("rloo", in, {});
  ASSERT_TRUE(adv.ok()) << adv.status();
  EXPECT_EQ(adv->scalar_type(), at::kFloat);
  ExpectRowsNear(*adv, RefRloo(c), 1e-6);
}

TEST(AdvantageEstimators, RejectBadShapesGroupSplitsRewardsAndOptionsNamingTheField) {
  const Case c;
  const auto message = [](const absl::StatusOr<at::Tensor>& s) {
    return std::string(s.status().message());
  };
  AdvantageInputs uneven = Inputs(c, false);
  uneven.group_size = 4;
  EXPECT_THAT(message(ComputeAdvantages("grpo", uneven, {})), testing::HasSubstr("groups of 4"));
  AdvantageInputs bad_mask = Inputs(c, false);
  bad_mask.mask = at::ones({5, 5});
  EXPECT_THAT(message(ComputeAdvantages("grpo", bad_mask, {})), testing::HasSubstr("mask"));
  AdvantageInputs bad_kl = Inputs(c, true);
  bad_kl.kl_penalty = at::ones({6, 4}, at::kDouble);
  EXPECT_THAT(message(ComputeAdvantages("reinforce_plus_plus", bad_kl, {})),
              testing::HasSubstr("kl_penalty"));
  AdvantageInputs nan_reward = Inputs(c, false);
  nan_reward.rewards[2] = NAN;
  EXPECT_THAT(message(ComputeAdvantages("rloo", nan_reward, {})), testing::HasSubstr("rewards"));
  AdvantageInputs nan_kl = Inputs(c, true);
  nan_kl.kl_penalty[0][0] = NAN;  // An unmasked position this time.
  EXPECT_THAT(message(ComputeAdvantages("reinforce_plus_plus", nan_kl, {})),
              testing::HasSubstr("kl_penalty"));
  EXPECT_THAT(message(ComputeAdvantages("reinforce_plus_plus", Inputs(c, false), {.gamma = 1.5})),
              testing::HasSubstr("gamma"));
}

}  // namespace
}  // namespace troupe::trainers
