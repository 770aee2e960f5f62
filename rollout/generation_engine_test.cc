#include "rollout/generation_engine.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/token_logprobs.h"
#include "models/transformer.h"
#include "rollout/sampler.h"

namespace troupe::rollout {
namespace {

using models::CausalLM;
using ::testing::HasSubstr;

models::ModelConfig TinyConfig() {
  models::ModelConfig c;
  c.vocab_size = 37;
  c.hidden_size = 32;
  c.intermediate_size = 64;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.max_position_embeddings = 128;
  // Larger than HF's 0.02 so that logits are far apart (no near-ties for argmax to trip on).
  c.initializer_range = 0.3;
  return c;
}

CausalLM MakeModel(uint64_t seed) {
  absl::StatusOr<CausalLM> model = models::CreateCausalLM(TinyConfig());
  EXPECT_TRUE(model.ok()) << model.status();
  (*model)->InitWeights(seed);
  return *model;
}

std::unique_ptr<GenerationEngine> MakeEngine(const CausalLM& model, int64_t num_slots,
                                             int64_t max_seq_len = 64) {
  GenerationEngineOptions options;
  options.num_slots = num_slots;
  options.max_seq_len = max_seq_len;
  absl::StatusOr<std::unique_ptr<GenerationEngine>> engine =
      GenerationEngine::Create(model.ptr(), options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return std::move(*engine);
}

std::vector<GeneratedSample> Generate(GenerationEngine& engine,
                                      const std::vector<std::vector<int32_t>>& prompts,
                                      const SamplingParams& params,
                                      const GenerationEngine::StepCallback& on_step = nullptr) {
  absl::StatusOr<std::vector<GeneratedSample>> samples = engine.Generate(prompts, params, on_step);
  EXPECT_TRUE(samples.ok()) << samples.status();
  return samples.ok() ? *samples : std::vector<GeneratedSample>();
}

// Prompts of different lengths over ids 3..36 (0..2 are left for stop tokens).
std::vector<std::vector<int32_t>> Prompts(int count) {
  std::vector<std::vector<int32_t>> prompts;
  for (int p = 0; p < count; ++p) {
    std::vector<int32_t> prompt;
    for (int i = 0; i < 2 + (p * 3) % 7; ++i) prompt.push_back(3 + (p * 11 + i * 5) % 34);
    prompts.push_back(prompt);
  }
  return prompts;
}

SamplingParams Greedy(int64_t max_new_tokens) {
  SamplingParams params;
  params.temperature = 0.0;
  params.max_new_tokens = max_new_tokens;
  return params;
}

// Logits [len - 1, V] of a full forward over prompt + tokens, at the positions that predict
// tokens[0], tokens[1], ...: rows prompt.size() - 1 .. end - 1.
at::Tensor FullForwardLogits(CausalLM& model, const std::vector<int32_t>& prompt,
                             const std::vector<int32_t>& tokens) {
  std::vector<int64_t> ids(prompt.begin(), prompt.end());
  ids.insert(ids.end(), tokens.begin(), tokens.end());
  at::NoGradGuard no_grad;
  absl::StatusOr<at::Tensor> logits =
      model->Forward(at::tensor(ids, at::kLong).unsqueeze(0), at::Tensor());
  EXPECT_TRUE(logits.ok()) << logits.status();
  return logits->select(0, 0).narrow(0, prompt.size() - 1, tokens.size());
}

at::Tensor Tokens(const std::vector<int32_t>& tokens) {
  return at::tensor(std::vector<int64_t>(tokens.begin(), tokens.end()), at::kLong);
}

std::vector<std::pair<std::string, at::Tensor>> StateDict(const CausalLM& model) {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (const auto& item : model->named_parameters()) {
    tensors.emplace_back(item.key(), item.value().detach().clone());
  }
  return tensors;
}

TEST(GenerationEngine, GreedyOutputIsTheArgmaxOfFullForwardLogitsAtEveryStep) {
  CausalLM model = MakeModel(1);
  auto engine = MakeEngine(model, 4);
  const auto prompts = Prompts(5);
  std::vector<GeneratedSample> samples = Generate(*engine, prompts, Greedy(12));
  ASSERT_EQ(samples.size(), 5u);
  for (const GeneratedSample& sample : samples) {
    ASSERT_EQ(sample.tokens.size(), 12u);
    at::Tensor logits = FullForwardLogits(model, prompts[sample.prompt_index], sample.tokens);
    EXPECT_TRUE(at::equal(logits.argmax(-1), Tokens(sample.tokens)))
        << "prompt " << sample.prompt_index;
    for (float q : sample.sampling_logprobs) EXPECT_EQ(q, 0.0f);  // greedy: q = 1
  }
}

TEST(GenerationEngine, LogprobsMatchTokenLogProbsOverAFullForwardOfTheSequence) {
  CausalLM model = MakeModel(2);
  auto engine = MakeEngine(model, 3);
  const auto prompts = Prompts(4);
  SamplingParams params;
  params.max_new_tokens = 10;
  params.n = 2;
  params.seed = 5;
  for (const GeneratedSample& s : Generate(*engine, prompts, params)) {
    at::Tensor logits = FullForwardLogits(model, prompts[s.prompt_index], s.tokens);
    at::Tensor expected = kernels::TokenLogProbs(logits, Tokens(s.tokens));
    at::Tensor got = at::tensor(s.logprobs, at::kFloat);
    EXPECT_TRUE(at::allclose(got, expected, 1e-4, 1e-4)) << got << expected;
    // Temperature 1 without filters: the sampling distribution is the policy itself.
    EXPECT_TRUE(at::allclose(at::tensor(s.sampling_logprobs, at::kFloat), got, 1e-5, 1e-5));
  }

  // With temperature and top-k the policy log-prob stays the temperature-1 one, and the sampling
  // log-prob is that of the processed distribution.
  params.temperature = 0.7;
  params.top_k = 5;
  for (const GeneratedSample& s : Generate(*engine, prompts, params)) {
    at::Tensor logits = FullForwardLogits(model, prompts[s.prompt_index], s.tokens);
    at::Tensor tokens = Tokens(s.tokens);
    EXPECT_TRUE(at::allclose(at::tensor(s.logprobs, at::kFloat),
                             kernels::TokenLogProbs(logits, tokens), 1e-4, 1e-4));
    at::Tensor logq = ProcessedLogProbs(logits, params).gather(1, tokens.unsqueeze(1)).squeeze(1);
    EXPECT_TRUE(at::allclose(at::tensor(s.sampling_logprobs, at::kFloat), logq, 1e-4, 1e-4));
  }
}

TEST(GenerationEngine, SameSeedReproducesTheSamplesAndAnotherSeedChangesThem) {
  CausalLM model = MakeModel(3);
  auto engine = MakeEngine(model, 4);
  SamplingParams params;
  params.max_new_tokens = 8;
  params.n = 3;
  params.seed = 11;
  const auto prompts = Prompts(3);
  auto tokens_of = [](const std::vector<GeneratedSample>& samples) {
    std::vector<std::vector<int32_t>> tokens;
    for (const auto& s : samples) tokens.push_back(s.tokens);
    return tokens;
  };
  const auto first = tokens_of(Generate(*engine, prompts, params));
  EXPECT_EQ(tokens_of(Generate(*engine, prompts, params)), first);
  // The draws depend on (seed, prompt, sample, position) only, not on the slot layout.
  auto one_slot = MakeEngine(model, 1);
  EXPECT_EQ(tokens_of(Generate(*one_slot, prompts, params)), first);
  params.seed = 12;
  EXPECT_NE(tokens_of(Generate(*engine, prompts, params)), first);
}

TEST(GenerationEngine, TopKOfOneEqualsGreedy) {
  CausalLM model = MakeModel(4);
  auto engine = MakeEngine(model, 4);
  SamplingParams top1;
  top1.temperature = 1.3;
  top1.top_k = 1;
  top1.max_new_tokens = 10;
  top1.n = 2;
  top1.seed = 3;
  const auto prompts = Prompts(3);
  std::vector<GeneratedSample> sampled = Generate(*engine, prompts, top1);
  std::vector<GeneratedSample> greedy = Generate(*engine, prompts, Greedy(10));
  ASSERT_EQ(sampled.size(), 6u);
  for (const GeneratedSample& s : sampled) {
    EXPECT_EQ(s.tokens, greedy[s.prompt_index].tokens);
  }
}

TEST(GenerationEngine, TopKAndTopPSamplesStayInsideTheFilteredSupport) {
  CausalLM model = MakeModel(5);
  auto engine = MakeEngine(model, 8);
  const auto prompts = Prompts(4);
  SamplingParams params;
  params.temperature = 1.5;  // flattens the distribution so unfiltered draws would leave it
  params.max_new_tokens = 6;
  params.n = 16;
  for (auto [top_k, top_p] : {std::pair<int64_t, double>{3, 1.0}, {0, 0.5}, {4, 0.6}}) {
    params.top_k = top_k;
    params.top_p = top_p;
    int64_t largest_support = 0;
    for (const GeneratedSample& s : Generate(*engine, prompts, params)) {
      at::Tensor logits = FullForwardLogits(model, prompts[s.prompt_index], s.tokens);
      at::Tensor logq = ProcessedLogProbs(logits, params);
      for (size_t t = 0; t < s.tokens.size(); ++t) {
        EXPECT_TRUE(std::isfinite(logq[t][s.tokens[t]].item<float>()))
            << "top_k " << top_k << " top_p " << top_p << ": token " << s.tokens[t]
            << " outside the support at step " << t;
        largest_support = std::max(largest_support, logq[t].isfinite().sum().item<int64_t>());
      }
    }
    // The filters really cut the vocabulary down.
    EXPECT_LT(largest_support, 37);
    if (top_k > 0) {
      EXPECT_LE(largest_support, top_k);
    }
  }
}

TEST(GenerationEngine, StopTokensEndSequencesWithReasonStopAndOthersRunToLength) {
  CausalLM model = MakeModel(6);
  auto engine = MakeEngine(model, 4);
  const auto prompts = Prompts(4);
  std::vector<GeneratedSample> free_run = Generate(*engine, prompts, Greedy(12));
  // Stop on the 4th token greedy generates for prompt 0.
  const int32_t stop = free_run[0].tokens[3];
  SamplingParams params = Greedy(12);
  params.stop_token_ids = {stop};
  std::vector<GeneratedSample> stopped = Generate(*engine, prompts, params);
  for (size_t p = 0; p < prompts.size(); ++p) {
    const std::vector<int32_t>& full = free_run[p].tokens;
    auto first = std::find(full.begin(), full.end(), stop);
    if (first == full.end()) {
      EXPECT_EQ(stopped[p].finish_reason, FinishReason::kLength);
      EXPECT_EQ(stopped[p].tokens, full);
    } else {
      EXPECT_EQ(stopped[p].finish_reason, FinishReason::kStop) << "prompt " << p;
      EXPECT_EQ(stopped[p].tokens, std::vector<int32_t>(full.begin(), first + 1));
    }
  }
  EXPECT_EQ(stopped[0].tokens.size(),
            std::find(free_run[0].tokens.begin(), free_run[0].tokens.end(), stop) -
                free_run[0].tokens.begin() + 1);
  EXPECT_EQ(free_run[0].finish_reason, FinishReason::kLength);
  EXPECT_STREQ(FinishReasonName(FinishReason::kStop), "stop");
}

TEST(GenerationEngine, SequencesEndWithReasonLengthAtMaxSeqLen) {
  CausalLM model = MakeModel(7);
  auto engine = MakeEngine(model, 2, /*max_seq_len=*/8);
  std::vector<GeneratedSample> samples = Generate(*engine, {{3, 4, 5, 6, 7}, {8, 9}}, Greedy(20));
  EXPECT_EQ(samples[0].tokens.size(), 3u);  // 5 + 3 = 8
  EXPECT_EQ(samples[1].tokens.size(), 6u);
  EXPECT_EQ(samples[0].finish_reason, FinishReason::kLength);
}

TEST(GenerationEngine, ReturnsNSamplesPerPromptInPromptThenSampleOrder) {
  CausalLM model = MakeModel(8);
  auto engine = MakeEngine(model, 5);
  SamplingParams params;
  params.max_new_tokens = 10;
  params.n = 4;
  params.seed = 1;
  std::vector<GeneratedSample> samples = Generate(*engine, Prompts(3), params);
  ASSERT_EQ(samples.size(), 12u);
  std::set<std::vector<int32_t>> distinct;
  for (size_t i = 0; i < samples.size(); ++i) {
    EXPECT_EQ(samples[i].prompt_index, static_cast<int64_t>(i / 4));
    EXPECT_EQ(samples[i].sample_index, static_cast<int64_t>(i % 4));
    EXPECT_EQ(samples[i].tokens.size(), 10u);
    EXPECT_EQ(samples[i].logprobs.size(), 10u);
    EXPECT_EQ(samples[i].weight_versions, std::vector<int64_t>(10, 0));
    distinct.insert(samples[i].tokens);
  }
  EXPECT_GT(distinct.size(), 9u);  // samples of one prompt differ from each other
}

TEST(GenerationEngine, ContinuousBatchingMatchesOneAtATimeGreedyGeneration) {
  CausalLM model = MakeModel(9);
  const auto prompts = Prompts(9);
  auto single = MakeEngine(model, 1);
  // Stop tokens make the sequences end at different steps, so slots free up unevenly.
  SamplingParams params = Greedy(14);
  const std::vector<int32_t> free_run = Generate(*single, {prompts[0]}, params)[0].tokens;
  params.stop_token_ids = {free_run[2], free_run[6]};

  std::vector<GeneratedSample> alone;
  int64_t serial_steps = 0;
  for (const std::vector<int32_t>& prompt : prompts) {
    alone.push_back(Generate(*single, {prompt}, params)[0]);
    serial_steps += alone.back().tokens.size();
  }
  auto batched_engine = MakeEngine(model, 3);
  std::vector<GeneratedSample> batched = Generate(*batched_engine, prompts, params);
  ASSERT_EQ(batched.size(), prompts.size());
  std::set<size_t> lengths;
  for (size_t p = 0; p < prompts.size(); ++p) {
    lengths.insert(batched[p].tokens.size());
    EXPECT_EQ(batched[p].tokens, alone[p].tokens) << "prompt " << p;
    EXPECT_EQ(batched[p].finish_reason, alone[p].finish_reason) << "prompt " << p;
    for (size_t t = 0; t < alone[p].logprobs.size(); ++t) {
      EXPECT_NEAR(batched[p].logprobs[t], alone[p].logprobs[t], 1e-4);
    }
  }
  EXPECT_GT(lengths.size(), 1u) << "sequences should end at different steps";
  EXPECT_EQ(batched_engine->stats().max_active_slots, 3);
  // Three slots in flight, refilled as sequences end: far fewer steps than one at a time.
  EXPECT_LT(batched_engine->stats().steps, serial_steps * 2 / 3);
}

// Serve: items that arrive while others are decoding join the running batch at the next step
// boundary, and each gets the output Generate would give it alone.
TEST(GenerationEngine, ServeBatchesItemsArrivingMidGenerationWithTheRunningOnes) {
  CausalLM model = MakeModel(9);
  const auto prompts = Prompts(6);
  SamplingParams params = Greedy(10);
  auto single = MakeEngine(model, 1);
  std::vector<std::vector<int32_t>> alone;
  for (const auto& prompt : prompts) alone.push_back(Generate(*single, {prompt}, params)[0].tokens);

  auto engine = MakeEngine(model, 8);
  // Two waves: items 0-2 first; items 3-5 handed over at the third step boundary, while 0-2 are
  // still decoding (10 tokens each, no stop token).
  int calls = 0;
  int boundaries = 0;
  std::vector<int64_t> order;
  std::map<int64_t, GeneratedSample> done;
  auto source = [&](bool wait) -> std::optional<std::vector<GenerationEngine::ServeItem>> {
    ++calls;
    std::vector<GenerationEngine::ServeItem> items;
    if (wait) {
      if (calls > 1) return std::nullopt;  // The second time idle: stop.
      for (int64_t t = 0; t < 3; ++t) items.push_back({t, prompts[t]});
      return items;
    }
    if (++boundaries == 3) {
      for (int64_t t = 3; t < 6; ++t) items.push_back({t, prompts[t]});
    }
    return items;
  };
  auto sink = [&](int64_t tag, absl::StatusOr<GeneratedSample> result) {
    ASSERT_TRUE(result.ok()) << result.status();
    order.push_back(tag);
    done[tag] = *std::move(result);
  };
  ASSERT_TRUE(engine->Serve(params, source, sink).ok());
  ASSERT_EQ(done.size(), 6u);
  for (int64_t t = 0; t < 6; ++t) {
    EXPECT_EQ(done[t].tokens, alone[t]) << "item " << t;
    EXPECT_EQ(done[t].prompt_index, t);
  }
  // The second wave ran beside the first: six slots at once, and the whole serve took the first
  // wave's 10 steps plus the 2 it had started before the second arrived, not 20.
  EXPECT_EQ(engine->stats().max_active_slots, 6);
  EXPECT_EQ(engine->stats().steps, 12);
  EXPECT_EQ(order.size(), 6u);
}

TEST(GenerationEngine, ServeRefusesABadItemAndServesTheOthers) {
  CausalLM model = MakeModel(9);
  auto engine = MakeEngine(model, 2, /*max_seq_len=*/16);
  bool given = false;
  auto source = [&](bool wait) -> std::optional<std::vector<GenerationEngine::ServeItem>> {
    if (!wait) return std::vector<GenerationEngine::ServeItem>();
    if (given) return std::nullopt;
    given = true;
    return std::vector<GenerationEngine::ServeItem>{
        {7, {3, 4}}, {8, {}}, {9, {3, 99}}, {10, std::vector<int32_t>(16, 5)}, {11, {5, 6, 7}}};
  };
  std::map<int64_t, absl::Status> status;
  auto sink = [&](int64_t tag, absl::StatusOr<GeneratedSample> result) {
    status[tag] = result.status();
    if (result.ok()) {
      EXPECT_EQ(result->tokens.size(), 4u);
    }
  };
  ASSERT_TRUE(engine->Serve(Greedy(4), source, sink).ok());
  ASSERT_EQ(status.size(), 5u);
  EXPECT_TRUE(status[7].ok());
  EXPECT_TRUE(status[11].ok());
  EXPECT_THAT(status[8].message(), HasSubstr("item 8 is empty"));
  EXPECT_THAT(status[9].message(), HasSubstr("outside the vocabulary"));
  EXPECT_THAT(status[10].message(), HasSubstr("no room to generate"));
}

TEST(GenerationEngine, ServeRefusesNAboveOneBeforeAskingForWork) {
  CausalLM model = MakeModel(9);
  auto engine = MakeEngine(model, 2);
  SamplingParams params = Greedy(4);
  params.n = 2;
  bool asked = false;
  absl::Status s = engine->Serve(
      params,
      [&](bool) -> std::optional<std::vector<GenerationEngine::ServeItem>> {
        asked = true;
        return std::nullopt;
      },
      [](int64_t, absl::StatusOr<GeneratedSample>) {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("params.n"));
  EXPECT_FALSE(asked);
}

TEST(GenerationEngine, SampledOutputDoesNotDependOnTheNumberOfSlots) {
  // Draws are keyed by (seed, prompt index, sample index, position), never by slot or step.
  CausalLM model = MakeModel(10);
  const auto prompts = Prompts(5);
  SamplingParams params;
  params.max_new_tokens = 9;
  params.n = 3;
  params.seed = 4;
  params.stop_token_ids = {5, 9};
  auto many = MakeEngine(model, 4);
  auto one = MakeEngine(model, 1);
  std::vector<GeneratedSample> batched = Generate(*many, prompts, params);
  std::vector<GeneratedSample> serial = Generate(*one, prompts, params);
  ASSERT_EQ(batched.size(), serial.size());
  for (size_t i = 0; i < batched.size(); ++i) EXPECT_EQ(batched[i].tokens, serial[i].tokens);
}

TEST(GenerationEngine, ThePromptOfNSamplesIsPrefilledOnceAndEachSamplesAsIfAlone) {
  CausalLM model = MakeModel(12);
  const auto prompts = Prompts(4);
  SamplingParams params;
  params.max_new_tokens = 8;
  params.n = 4;
  params.seed = 6;
  params.stop_token_ids = {4, 7};
  // 16 slots: the 4 samples of every prompt start at the first boundary; 1 slot: one at a time,
  // so nothing can be shared and every sample is prefilled alone.
  auto shared = MakeEngine(model, 16);
  auto alone = MakeEngine(model, 1);
  std::vector<GeneratedSample> a = Generate(*shared, prompts, params);
  std::vector<GeneratedSample> b = Generate(*alone, prompts, params);
  ASSERT_EQ(a.size(), 16u);
  ASSERT_EQ(b.size(), 16u);
  std::set<std::vector<int32_t>> distinct;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].tokens, b[i].tokens) << "sample " << i;
    ASSERT_EQ(a[i].logprobs.size(), b[i].logprobs.size());
    for (size_t t = 0; t < a[i].logprobs.size(); ++t) {
      EXPECT_NEAR(a[i].logprobs[t], b[i].logprobs[t], 1e-4) << "sample " << i << " token " << t;
    }
    distinct.insert(a[i].tokens);
  }
  EXPECT_GT(distinct.size(), 8u);  // the followers drew their own tokens
  int64_t prompt_tokens = 0;
  for (const auto& p : prompts) prompt_tokens += static_cast<int64_t>(p.size());
  EXPECT_EQ(shared->stats().prefill_tokens, prompt_tokens);
  EXPECT_EQ(shared->stats().shared_prefill_tokens, 3 * prompt_tokens);
  EXPECT_EQ(alone->stats().prefill_tokens, 4 * prompt_tokens);
  EXPECT_EQ(alone->stats().shared_prefill_tokens, 0);
}

TEST(GenerationEngine, WeightSwapMidGenerationTagsVersionsAndContinuesWithTheNewWeights) {
  CausalLM model = MakeModel(11);
  CausalLM old_weights = MakeModel(11);
  CausalLM new_weights = MakeModel(12);
  const auto prompts = Prompts(3);
  const int64_t swap_step = 4;
  const int64_t max_new = 10;

  auto engine = MakeEngine(model, 2);  // 3 prompts on 2 slots: prompt 2 starts after the swap
  std::vector<GeneratedSample> samples =
      Generate(*engine, prompts, Greedy(max_new), [&](int64_t step) {
        if (step == swap_step) {
          WeightUpdate update;
          update.version = 7;
          update.tensors = StateDict(new_weights);
          ASSERT_TRUE(engine->UpdateWeights(std::move(update)).ok());
        }
      });
  EXPECT_EQ(engine->weight_version(), 7);
  EXPECT_EQ(engine->stats().weight_updates_applied, 1);
  EXPECT_GT(engine->stats().recomputed_tokens, 0);

  auto old_engine = MakeEngine(old_weights, 1);
  auto new_engine = MakeEngine(new_weights, 1);
  for (size_t p = 0; p < 2; ++p) {
    const GeneratedSample& s = samples[p];
    ASSERT_EQ(s.tokens.size(), static_cast<size_t>(max_new));
    for (int64_t t = 0; t < max_new; ++t) {
      EXPECT_EQ(s.weight_versions[t], t < swap_step ? 0 : 7) << "prompt " << p << " token " << t;
    }
    // Before the swap: the old weights' greedy tokens.
    std::vector<GeneratedSample> before = Generate(*old_engine, {prompts[p]}, Greedy(swap_step));
    EXPECT_EQ(std::vector<int32_t>(s.tokens.begin(), s.tokens.begin() + swap_step),
              before[0].tokens);
    // After: what the new weights generate from prompt + the tokens so far.
    std::vector<int32_t> prefix = prompts[p];
    prefix.insert(prefix.end(), s.tokens.begin(), s.tokens.begin() + swap_step);
    std::vector<GeneratedSample> after =
        Generate(*new_engine, {prefix}, Greedy(max_new - swap_step));
    EXPECT_EQ(std::vector<int32_t>(s.tokens.begin() + swap_step, s.tokens.end()), after[0].tokens);
    for (int64_t t = swap_step; t < max_new; ++t) {
      EXPECT_NEAR(s.logprobs[t], after[0].logprobs[t - swap_step], 1e-4);
    }
  }
  // Prompt 2 ran entirely on the new weights.
  EXPECT_EQ(samples[2].weight_versions, std::vector<int64_t>(max_new, 7));
  EXPECT_EQ(samples[2].tokens, Generate(*new_engine, {prompts[2]}, Greedy(max_new))[0].tokens);
}

// max_weight_version holds a newer update back for the whole call (every token of an evaluation
// comes from one version); the next call without the cap applies it.
TEST(GenerationEngine, MaxWeightVersionHoldsANewerUpdateForTheNextCall) {
  CausalLM model = MakeModel(11);
  CausalLM old_weights = MakeModel(11);
  CausalLM new_weights = MakeModel(12);
  const auto prompts = Prompts(3);
  auto engine = MakeEngine(model, 2);
  SamplingParams capped = Greedy(10);
  capped.max_weight_version = 0;
  std::vector<GeneratedSample> samples = Generate(*engine, prompts, capped, [&](int64_t step) {
    if (step == 3) {
      ASSERT_TRUE(engine->UpdateWeights({7, StateDict(new_weights), false}).ok());
    }
  });
  EXPECT_EQ(engine->weight_version(), 0);
  EXPECT_EQ(engine->stats().weight_updates_applied, 0);
  auto old_engine = MakeEngine(old_weights, 1);
  for (size_t p = 0; p < prompts.size(); ++p) {
    EXPECT_EQ(samples[p].weight_versions, std::vector<int64_t>(10, 0)) << p;
    EXPECT_EQ(samples[p].tokens, Generate(*old_engine, {prompts[p]}, Greedy(10))[0].tokens) << p;
  }
  // A cap at or above the queued version lets it in at the first boundary.
  SamplingParams at_seven = Greedy(10);
  at_seven.max_weight_version = 7;
  samples = Generate(*engine, {prompts[0]}, at_seven);
  EXPECT_EQ(engine->weight_version(), 7);
  EXPECT_EQ(samples[0].weight_versions, std::vector<int64_t>(10, 7));
}

// With versions kept, a call pinned to a version runs on exactly that version: one that was
// queued behind a newer one (the newest no longer wins), and an older one after a newer call.
// Without them the newest queued update wins and the pinned older version is gone (the old
// behaviour, which left a call's version to the moment weights arrived).
TEST(GenerationEngine, KeptVersionsLetAPinnedCallRunOnExactlyItsVersionEvenAnOlderOne) {
  CausalLM model = MakeModel(11);
  const CausalLM v1 = MakeModel(12), v2 = MakeModel(13);
  const auto prompts = Prompts(3);
  SamplingParams pinned_sample = Greedy(6);
  pinned_sample.temperature = 1.0;
  pinned_sample.seed = 5;
  // The reference: each version's samples from an engine that only ever had that version.
  std::map<int64_t, std::vector<GeneratedSample>> alone;
  for (const auto& [version, weights] :
       {std::pair<int64_t, const CausalLM*>{0, nullptr}, {1, &v1}, {2, &v2}}) {
    CausalLM m = MakeModel(11);
    auto e = MakeEngine(m, 2);
    if (weights != nullptr) {
      ASSERT_TRUE(e->UpdateWeights({version, StateDict(*weights)}).ok());
    }
    alone[version] = Generate(*e, prompts, pinned_sample);
  }

  GenerationEngineOptions options;
  options.num_slots = 2;
  options.max_seq_len = 64;
  options.weight_versions_kept = 3;
  absl::StatusOr<std::unique_ptr<GenerationEngine>> made =
      GenerationEngine::Create(model.ptr(), options);
  ASSERT_TRUE(made.ok()) << made.status();
  GenerationEngine& engine = **made;
  ASSERT_TRUE(engine.UpdateWeights({1, StateDict(v1)}).ok());
  ASSERT_TRUE(engine.UpdateWeights({2, StateDict(v2)}).ok());
  for (int64_t version : {1, 2, 1, 0, 2}) {
    SamplingParams p = pinned_sample;
    p.max_weight_version = version;
    std::vector<GeneratedSample> samples = Generate(engine, prompts, p);
    ASSERT_EQ(samples.size(), alone[version].size());
    for (size_t i = 0; i < samples.size(); ++i) {
      EXPECT_EQ(samples[i].weight_versions, std::vector<int64_t>(samples[i].tokens.size(), version))
          << "v" << version << " sample " << i;
      EXPECT_EQ(samples[i].tokens, alone[version][i].tokens) << "v" << version << " sample " << i;
      EXPECT_EQ(samples[i].logprobs, alone[version][i].logprobs) << "v" << version;
    }
    EXPECT_EQ(engine.weight_version(), version);
  }
  // Only the newest three are kept: after v3 arrives v0 is gone, and a call pinned to it finds no
  // kept version at or below it, so the weights in effect stay (v2 here).
  ASSERT_TRUE(engine.UpdateWeights({3, StateDict(v1)}).ok());
  SamplingParams at_zero = pinned_sample;
  at_zero.max_weight_version = 0;
  EXPECT_EQ(Generate(engine, prompts, at_zero)[0].weight_versions[0], 2);
  // Unpinned: the newest.
  EXPECT_EQ(Generate(engine, prompts, pinned_sample)[0].weight_versions[0], 3);
  // The version in effect stays for a call pinned to it even once it is no longer kept (v4..v6
  // pushed v3 out): not switched to the oldest newer one.
  for (int64_t v : {4, 5, 6}) ASSERT_TRUE(engine.UpdateWeights({v, StateDict(v2)}).ok());
  SamplingParams at_three = pinned_sample;
  at_three.max_weight_version = 3;
  at_three.min_weight_version = 3;
  EXPECT_EQ(Generate(engine, prompts, at_three)[0].weight_versions,
            std::vector<int64_t>(Generate(engine, prompts, at_three)[0].tokens.size(), 3));

  // A floor: kept versions below min_weight_version are never used. An engine that never had
  // v1 (it kept its initial v0 and then received v2, as a restarted worker does) runs a call
  // pinned to v1 on v2, not on its initial weights.
  {
    CausalLM m = MakeModel(11);
    auto made_late = GenerationEngine::Create(m.ptr(), options);
    ASSERT_TRUE(made_late.ok()) << made_late.status();
    ASSERT_TRUE((*made_late)->UpdateWeights({2, StateDict(v2)}).ok());
    SamplingParams at_one = pinned_sample;
    at_one.max_weight_version = 1;
    at_one.min_weight_version = 1;
    std::vector<GeneratedSample> late = Generate(**made_late, prompts, at_one);
    EXPECT_EQ(late[0].weight_versions[0], 2);
    EXPECT_EQ(late[0].tokens, alone[2][0].tokens);
    at_one.min_weight_version = -1;  // no floor: the newest at most v1 is the initial v0
    EXPECT_EQ(Generate(**made_late, prompts, at_one)[0].weight_versions[0], 0);
  }

  // Without kept versions, v2 replaced the queued v1: a call pinned to v1 cannot have it.
  CausalLM plain_model = MakeModel(11);
  auto plain = MakeEngine(plain_model, 2);
  ASSERT_TRUE(plain->UpdateWeights({1, StateDict(v1)}).ok());
  ASSERT_TRUE(plain->UpdateWeights({2, StateDict(v2)}).ok());
  SamplingParams at_one = pinned_sample;
  at_one.max_weight_version = 1;
  EXPECT_EQ(Generate(*plain, prompts, at_one)[0].weight_versions[0], 0);
}

// A partial update with versions kept merges over the newest kept version.
TEST(GenerationEngine, KeptPartialUpdatesMergeOverTheNewestKeptVersion) {
  CausalLM model = MakeModel(14);
  GenerationEngineOptions options;
  options.weight_versions_kept = 2;
  absl::StatusOr<std::unique_ptr<GenerationEngine>> made =
      GenerationEngine::Create(model.ptr(), options);
  ASSERT_TRUE(made.ok()) << made.status();
  GenerationEngine& engine = **made;
  const at::Tensor before_embed = model->model->embed_tokens->weight.detach().clone();
  ASSERT_TRUE(engine.UpdateWeights({1, {{"model.norm.weight", at::full({32}, 2.0)}}, true}).ok());
  ASSERT_TRUE(engine.UpdateWeights({2, {{"lm_head.weight", at::zeros({37, 32})}}, true}).ok());
  SamplingParams at_two = Greedy(1);
  at_two.max_weight_version = 2;
  EXPECT_EQ(Generate(engine, Prompts(1), at_two)[0].weight_versions, std::vector<int64_t>{2});
  EXPECT_TRUE(at::equal(model->model->norm->weight.detach(), at::full({32}, 2.0)));
  EXPECT_TRUE(at::equal(model->lm_head->weight.detach(), at::zeros({37, 32})));
  EXPECT_TRUE(at::equal(model->model->embed_tokens->weight.detach(), before_embed));
  SamplingParams at_one = Greedy(1);
  at_one.max_weight_version = 1;
  EXPECT_EQ(Generate(engine, Prompts(1), at_one)[0].weight_versions, std::vector<int64_t>{1});
  EXPECT_FALSE(at::equal(model->lm_head->weight.detach(), at::zeros({37, 32})));
  EXPECT_TRUE(at::equal(model->model->norm->weight.detach(), at::full({32}, 2.0)));
}

TEST(GenerationEngine, UpdateWeightsRejectsBadUpdatesWithAClearStatusAndQueuesNothing) {
  CausalLM model = MakeModel(13);
  auto engine = MakeEngine(model, 2);
  auto status_of = [&](WeightUpdate update) { return engine->UpdateWeights(std::move(update)); };

  WeightUpdate unknown{1, StateDict(model), false};
  unknown.tensors.emplace_back("model.layers.9.mlp.up_proj.weight", at::zeros({64, 32}));
  EXPECT_THAT(std::string(status_of(unknown).message()),
              HasSubstr("unknown tensor 'model.layers.9.mlp.up_proj.weight'"));

  WeightUpdate shape{1, StateDict(model), false};
  shape.tensors[0].second = at::zeros({2, 2});
  EXPECT_THAT(std::string(status_of(shape).message()),
              HasSubstr(absl::StrCat("'", shape.tensors[0].first, "' has shape [2, 2]")));

  WeightUpdate missing{1, StateDict(model), false};
  missing.tensors.pop_back();
  EXPECT_THAT(std::string(status_of(missing).message()), HasSubstr("missing"));

  WeightUpdate twice{1, {}, true};
  twice.tensors = {StateDict(model)[0], StateDict(model)[0]};
  EXPECT_THAT(std::string(status_of(twice).message()), HasSubstr("appears twice"));

  WeightUpdate integer{1, {}, true};
  integer.tensors = {{"model.norm.weight", at::ones({32}, at::kLong)}};
  EXPECT_THAT(std::string(status_of(integer).message()), HasSubstr("floating-point"));

  for (auto* bad : {&unknown, &shape, &missing, &twice, &integer}) {
    EXPECT_EQ(status_of(*bad).code(), absl::StatusCode::kInvalidArgument);
  }
  // Nothing was queued: generation still runs on version 0.
  EXPECT_EQ(Generate(*engine, Prompts(1), Greedy(2))[0].weight_versions,
            (std::vector<int64_t>{0, 0}));

  WeightUpdate good{3, StateDict(model), false};
  EXPECT_TRUE(status_of(good).ok());
  WeightUpdate stale{3, StateDict(model), false};
  EXPECT_THAT(std::string(status_of(stale).message()), HasSubstr("must exceed"));
}

TEST(GenerationEngine, PartialUpdatesChangeOnlyTheNamedTensorsAndMergeWhileQueued) {
  CausalLM model = MakeModel(14);
  auto engine = MakeEngine(model, 1);
  const at::Tensor before_embed = model->model->embed_tokens->weight.detach().clone();
  WeightUpdate first{1, {{"model.norm.weight", at::full({32}, 2.0)}}, true};
  WeightUpdate second{2, {{"lm_head.weight", at::zeros({37, 32})}}, true};
  ASSERT_TRUE(engine->UpdateWeights(std::move(first)).ok());
  ASSERT_TRUE(engine->UpdateWeights(std::move(second)).ok());
  EXPECT_EQ(engine->weight_version(), 0);  // queued, not applied while idle
  std::vector<GeneratedSample> samples = Generate(*engine, Prompts(1), Greedy(1));
  EXPECT_EQ(samples[0].weight_versions, std::vector<int64_t>{2});
  EXPECT_TRUE(at::equal(model->model->norm->weight.detach(), at::full({32}, 2.0)));
  EXPECT_TRUE(at::equal(model->lm_head->weight.detach(), at::zeros({37, 32})));
  EXPECT_TRUE(at::equal(model->model->embed_tokens->weight.detach(), before_embed));
}

TEST(GenerationEngine, ConcurrentUpdatesFromAnotherThreadKeepVersionsMonotonePerSequence) {
  CausalLM model = MakeModel(15);
  const auto weights_a = StateDict(MakeModel(15));
  const auto weights_b = StateDict(MakeModel(16));
  auto engine = MakeEngine(model, 3);
  std::atomic<bool> done{false};
  std::thread updater([&] {
    for (int64_t v = 1; v <= 200 && !done.load(); ++v) {
      WeightUpdate update{v, v % 2 ? weights_b : weights_a, false};
      EXPECT_TRUE(engine->UpdateWeights(std::move(update)).ok());
      std::this_thread::yield();
    }
  });
  SamplingParams params;
  params.max_new_tokens = 20;
  params.n = 2;
  std::vector<GeneratedSample> samples = Generate(*engine, Prompts(6), params);
  done = true;
  updater.join();
  ASSERT_EQ(samples.size(), 12u);
  for (const GeneratedSample& s : samples) {
    ASSERT_EQ(s.weight_versions.size(), s.tokens.size());
    EXPECT_TRUE(std::is_sorted(s.weight_versions.begin(), s.weight_versions.end()));
    EXPECT_LE(s.weight_versions.back(), 200);
  }
}

TEST(GenerationEngine, BadInputGivesAClearStatus) {
  CausalLM model = MakeModel(17);
  auto engine = MakeEngine(model, 2, /*max_seq_len=*/16);
  auto message = [&](const std::vector<std::vector<int32_t>>& prompts,
                     const SamplingParams& params) {
    absl::StatusOr<std::vector<GeneratedSample>> result = engine->Generate(prompts, params);
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(result.status().message());
  };
  SamplingParams ok;
  EXPECT_THAT(message({}, ok), HasSubstr("no prompts"));
  EXPECT_THAT(message({{3, 4}, {}}, ok), HasSubstr("prompt 1 is empty"));
  EXPECT_THAT(message({std::vector<int32_t>(16, 3)}, ok),
              HasSubstr("prompt 0 has 16 tokens; max_seq_len 16"));
  EXPECT_THAT(message({{3, 37}}, ok), HasSubstr("prompt 0 token 1 = 37 is outside"));
  SamplingParams cold;
  cold.temperature = -1;
  EXPECT_THAT(message({{3}}, cold), HasSubstr("temperature"));
  SamplingParams wide;
  wide.top_p = 1.5;
  EXPECT_THAT(message({{3}}, wide), HasSubstr("top_p"));
  SamplingParams narrow;
  narrow.top_p = 0.0;
  EXPECT_THAT(message({{3}}, narrow), HasSubstr("top_p"));
  // The engine still works afterwards.
  EXPECT_EQ(Generate(*engine, {{3, 4}}, Greedy(3))[0].tokens.size(), 3u);

  GenerationEngineOptions no_slots;
  no_slots.num_slots = 0;
  EXPECT_THAT(std::string(GenerationEngine::Create(model.ptr(), no_slots).status().message()),
              HasSubstr("num_slots"));
  EXPECT_FALSE(GenerationEngine::Create(nullptr, {}).ok());
}

}  // namespace
}  // namespace troupe::rollout
