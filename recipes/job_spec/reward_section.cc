// The reward section: the registered rewards that score the job's samples, a trained reward model
// or a generative judge, and DAPO's overlong shaping.
#include <algorithm>

#include "absl/strings/match.h"
#include "recipes/job_spec/sections.h"
#include "reward/reward_function.h"

namespace troupe::recipes::job_spec_internal {
namespace {

void WalkJudge(Section& r, JudgeSpec& j) {
  Section judge = r.Sub("judge", {.write_if = !j.model.empty()});
  judge.String("model", &j.model,
               {.doc = "a generative judge's model directory (a causal LM with tokenizer.json, "
                       "e.g. recipe sft's output) that reads every sample and replies with a "
                       "verdict, served by the Judge actor with continuous batching; added to the "
                       "rewards above (weight them 0 to use it alone)"});
  judge.String("template", &j.template_text,
               {.doc = "the judge's prompt: {prompt} (the policy's prompt text), {response}, "
                       "{reference} (the reference answer) filled in per sample; {{ and }} for "
                       "braces"});
  judge.Json("verdicts", &j.verdicts,
             {.doc = "label: reward, e.g. {Y: 1, N: 0}; the reply (trimmed, any case) must start "
                     "with a label; a reply that does not is a counted failure (reward 0, "
                     "Sample.reward_error)",
              .write_if = !j.score});
  Section score = judge.Sub("score", {.write_if = j.score});
  const bool min = score.Double("min", &j.score_min, AtLeast(-kInf),
                                {.doc = "score mode: the lowest score accepted (the reply's first "
                                        "number)"}) != nullptr;
  const bool max = score.Double("max", &j.score_max, AtLeast(-kInf),
                                {.doc = "score mode: the highest score accepted"}) != nullptr;
  if (score.reading()) j.score = min || max;
  score.Finish();
  judge.String("marker", &j.marker,
               {.doc = "read the verdict (or score) after the last occurrence of this text in the "
                       "reply, so the judge may reason first (\"Verdict:\"); a reply without it is "
                       "a counted failure; \"\" = the reply's start",
                .write_if = !j.marker.empty()});
  judge.Int("max_new_tokens", &j.max_new_tokens, Positive(),
            {.doc = "the most tokens of a judge's reply (greedy)"});
  judge.Int("slots", &j.slots, Positive(),
            {.doc = "samples the judge decodes together (KV-cache slots)"});
  judge.Bool("add_bos", &j.add_bos,
             {.doc = "put the judge tokenizer's bos before every judge prompt"});
  judge.Double("weight", &j.weight, AtLeast(-kInf),
               {.doc = "the judge value's weight in the reward"});
  judge.Finish();
}

// reward.judge's keys together (each key's own type was checked when read).
void CheckJudge(const JobSpec& s, Context& ctx) {
  const JudgeSpec& j = s.reward.judge;
  if (j.model.empty()) {
    for (const auto& [key, where] : ctx.locs) {
      if (absl::StartsWith(key, "reward.judge.")) {
        ctx.Add(key, "configures reward.judge.model, which is not set");
        return;
      }
    }
    return;
  }
  if (!s.reward.model.empty()) {
    ctx.Add("reward.judge.model",
            "the reward role runs one actor: a reward model (reward.model) or a judge, not both");
  }
  if (j.template_text.empty()) {
    ctx.Add("reward.judge.template",
            "the judge needs its prompt template, e.g. \"{prompt}{response}|\" ({prompt}, "
            "{response}, {reference} are filled in per sample)");
  }
  if (j.score == !j.verdicts.empty()) {
    ctx.Add(
        j.score ? "reward.judge.score" : "reward.judge.verdicts",
        "give exactly one of verdicts (label: value, e.g. {Y: 1, N: 0}) and score ({min, max})");
  }
  for (auto it = j.verdicts.begin(); it != j.verdicts.end(); ++it) {
    if (!it.value().is_number()) {
      ctx.Add(absl::StrCat("reward.judge.verdicts.", it.key()),
              absl::StrCat("expected the verdict's reward (a number), got ", it.value().dump()));
    }
  }
  if (j.score && !(j.score_min < j.score_max)) {
    ctx.Add("reward.judge.score",
            absl::StrCat("min (", j.score_min, ") must be below max (", j.score_max, ")"));
  }
}

}  // namespace

void WalkReward(Section& top, JobSpec& spec) {
  RewardSpec& reward = spec.reward;
  const bool rewarded = !reward.names.empty() || !reward.config.empty() ||
                        reward.overlong_buffer.enable || !reward.model.empty() ||
                        !reward.judge.model.empty();
  Section r = top.Sub("reward", {.write_if = rewarded});
  r.NameList("name", &reward.names,
             {.doc = "registered reward(s) scoring every sample, summed with reward.weights; [] = "
                     "the task's own, or per record by data_source",
              .write_if = !reward.names.empty()});
  r.NumberList("weights", &reward.weights,
               {.doc = "one weight per reward.name", .write_if = !reward.weights.empty()});
  r.Json("config", &reward.config, {.doc = "reward name -> that reward's config map"});
  r.String("model", &reward.model,
           {.doc = "a trained reward model's directory (recipe rm's output) scoring every sample, "
                   "served by the RewardModel actor; added to the rewards above (weight them 0 to "
                   "use it alone)",
            .write_if = !reward.model.empty()});
  r.Double("model_weight", &reward.model_weight, NonNegative(),
           {.doc = "the reward model score's weight",
            .read_if = !reward.model.empty(),
            .unread_why = "weighs reward.model's score, and no reward.model is set"});
  WalkJudge(r, reward.judge);
  OverlongBufferSpec& o = reward.overlong_buffer;
  Section overlong = r.Sub("overlong_buffer", {.write_if = o.enable});
  overlong.Bool("enable", &o.enable,
                {.doc = "DAPO's overlong reward shaping: responses longer than "
                        "data.max_response_length - len lose up to penalty_factor, linearly "
                        "(reward/overlong)"});
  overlong.Int("len", &o.len, Positive(),
               {.doc = "the shaped tail of the response length, in tokens"});
  overlong.Double("penalty_factor", &o.penalty_factor, NonNegative(),
                  {.doc = "the penalty at the maximum length"});
  overlong.Finish();
  r.Finish();
}

void CheckRewardRules(const JobSpec& s, Context& ctx) {
  const RewardSpec& r = s.reward;
  const std::vector<std::string> registered = reward::RewardNames();
  for (const std::string& name : r.names) {
    if (std::find(registered.begin(), registered.end(), name) != registered.end()) continue;
    std::string message = absl::StrCat("unknown reward ", Quote(name));
    const std::string close = Closest(name, registered);
    if (!close.empty()) absl::StrAppend(&message, " (did you mean ", Quote(close), "?)");
    absl::StrAppend(&message, "; registered rewards: ", absl::StrJoin(registered, ", "));
    ctx.Add("reward.name", message);
  }
  for (size_t i = 0; i < r.names.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (r.names[i] == r.names[j]) {
        ctx.Add("reward.name", absl::StrCat(r.names[i], " is named twice"));
      }
    }
  }
  if (!r.weights.empty() && r.weights.size() != r.names.size()) {
    ctx.Add("reward.weights", absl::StrCat(r.weights.size(), " weights for ", r.names.size(),
                                           " reward names; give one per name"));
  }
  for (const auto& [name, value] : r.config.items()) {
    if (std::find(r.names.begin(), r.names.end(), name) == r.names.end() &&
        !(r.names.empty() &&
          std::find(registered.begin(), registered.end(), name) != registered.end())) {
      ctx.Add("reward.config",
              absl::StrCat("config for ", Quote(name), ", which is not ",
                           r.names.empty() ? "a registered reward" : "in reward.name"));
    } else if (!value.is_object()) {
      ctx.Add("reward.config", absl::StrCat("the config of ", name, " must be a map"));
    }
  }
  CheckJudge(s, ctx);
  const OverlongBufferSpec& o = r.overlong_buffer;
  if (o.enable && (o.len <= 0 || o.len >= s.data.max_response_length)) {
    ctx.Add(
        "reward.overlong_buffer.len",
        absl::StrCat("must be in [1, data.max_response_length) = [1, ", s.data.max_response_length,
                     ") when overlong_buffer is enabled, got ", o.len));
  }
}

}  // namespace troupe::recipes::job_spec_internal
