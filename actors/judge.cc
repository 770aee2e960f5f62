#include "actors/judge.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "actors/policy_util.h"
#include "actors/reward_server.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "models/tokenizers/tokenizer.h"
#include "rollout/generation_engine.h"
#include "runtime/actor_registry.h"

namespace troupe::actors {
namespace {

absl::Status ConfigError(const std::string& what) {
  return absl::InvalidArgumentError("judge config: " + what);
}

// A reply as it appears in an error message: quoted, control characters escaped, at most 40
// characters.
std::string Quoted(absl::string_view reply) {
  std::string out;
  for (char c : reply.substr(0, 40)) {
    if (std::isprint(static_cast<unsigned char>(c))) {
      out += c;
    } else {
      out += absl::StrFormat("\\x%02x", static_cast<unsigned char>(c));
    }
  }
  return absl::StrCat("'", out, reply.size() > 40 ? "...'" : "'");
}

}  // namespace

absl::StatusOr<JudgeTemplate> ParseJudgeTemplate(absl::string_view text) {
  JudgeTemplate t;
  std::string literal;
  bool has_response = false;
  auto flush = [&] {
    if (!literal.empty()) t.parts.emplace_back(JudgeTemplate::Part::kText, std::move(literal));
    literal.clear();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '}') {
      if (i + 1 < text.size() && text[i + 1] == '}') {
        literal += '}';
        ++i;
        continue;
      }
      return absl::InvalidArgumentError(
          absl::StrCat("template: unmatched '}' at character ", i, " (write }} for a brace)"));
    }
    if (c != '{') {
      literal += c;
      continue;
    }
    if (i + 1 < text.size() && text[i + 1] == '{') {
      literal += '{';
      ++i;
      continue;
    }
    const size_t close = text.find('}', i);
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("template: unmatched '{' at character ", i, " (write {{ for a brace)"));
    }
    const absl::string_view name = text.substr(i + 1, close - i - 1);
    JudgeTemplate::Part part;
    if (name == "prompt") {
      part = JudgeTemplate::Part::kPrompt;
    } else if (name == "response") {
      part = JudgeTemplate::Part::kResponse;
      has_response = true;
    } else if (name == "reference") {
      part = JudgeTemplate::Part::kReference;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("template: unknown placeholder {", name,
                       "} (placeholders: {prompt}, {response}, {reference})"));
    }
    flush();
    t.parts.emplace_back(part, "");
    i = close;
  }
  flush();
  if (!has_response) {
    return absl::InvalidArgumentError(
        "template: has no {response}: the judge would never see what it judges");
  }
  return t;
}

absl::StatusOr<double> VerdictParser::Parse(absl::string_view reply) const {
  absl::string_view text = reply;
  if (!marker.empty()) {
    const size_t at = reply.rfind(marker);
    if (at == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("cannot parse the judge's reply ",
                                                     Quoted(reply), ": it has no ", Quoted(marker),
                                                     " before its verdict"));
    }
    text = reply.substr(at + marker.size());
  }
  text = absl::StripAsciiWhitespace(text);
  if (verdicts.empty()) {
    // Score mode: the first number in the reply.
    size_t i = 0;
    while (i < text.size() && !std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    if (i < text.size()) {
      size_t begin = i;
      if (begin > 0 && (text[begin - 1] == '-' || text[begin - 1] == '+')) --begin;
      const std::string number(text.substr(begin));
      char* end = nullptr;
      const double value = std::strtod(number.c_str(), &end);
      if (end != number.c_str() && std::isfinite(value)) {
        if (value < min || value > max) {
          return absl::InvalidArgumentError(absl::StrCat("the judge's score ", value,
                                                         " is outside [", min, ", ", max, "] in ",
                                                         Quoted(reply)));
        }
        return value;
      }
    }
    return absl::InvalidArgumentError(absl::StrCat("cannot parse the judge's reply ", Quoted(reply),
                                                   ": expected a score in [", min, ", ", max, "]"));
  }
  const std::string lower = absl::AsciiStrToLower(text);
  const std::pair<const std::string, double>* best = nullptr;
  for (const auto& entry : verdicts) {
    const std::string label = absl::AsciiStrToLower(entry.first);
    if (lower.compare(0, label.size(), label) != 0) continue;
    if (lower.size() > label.size() &&
        std::isalnum(static_cast<unsigned char>(lower[label.size()]))) {
      continue;
    }
    if (best == nullptr || entry.first.size() > best->first.size()) best = &entry;
  }
  if (best != nullptr) return best->second;
  std::vector<std::string> labels;
  for (const auto& entry : verdicts) labels.push_back(entry.first);
  return absl::InvalidArgumentError(absl::StrCat("cannot parse the judge's reply ", Quoted(reply),
                                                 ": expected a verdict (",
                                                 absl::StrJoin(labels, ", "), ")"));
}

// One request being judged.
struct JudgeCore::Judging {
  ScoreQueue::Taken request;
  int64_t remaining = 0;  // Samples not yet judged; -1 once answered.
};

JudgeCore::JudgeCore() : queue_("the judge") {}
JudgeCore::~JudgeCore() = default;

absl::StatusOr<std::unique_ptr<JudgeCore>> JudgeCore::Create(const proto::JudgeConfig& config) {
  std::unique_ptr<JudgeCore> core(new JudgeCore());
  if (config.model_dir().empty()) {
    return ConfigError("model_dir: expected the judge model's directory");
  }
  if (!config.has_template_()) {
    return ConfigError("template: expected the judge's prompt template (a string)");
  }
  absl::StatusOr<JudgeTemplate> tmpl = ParseJudgeTemplate(config.template_());
  if (!tmpl.ok()) return ConfigError(std::string(tmpl.status().message()));
  core->template_ = *std::move(tmpl);
  if (config.verdicts().empty() != config.has_score()) {
    return ConfigError("give exactly one of verdicts (label -> value) and score ({min, max})");
  }
  for (const auto& [label, value] : config.verdicts()) {
    if (label.empty() || absl::StripAsciiWhitespace(label) != label) {
      return ConfigError(absl::StrCat("verdicts: label \"", label,
                                      "\" must be non-empty, without surrounding spaces"));
    }
    if (!std::isfinite(value)) {
      return ConfigError(
          absl::StrCat("verdicts.", label, ": expected a finite number, got ", value));
    }
    core->parser_.verdicts[label] = value;
  }
  if (config.has_score()) {
    core->parser_.min = config.score().min();
    core->parser_.max = config.score().max();
    if (!(core->parser_.min < core->parser_.max)) {
      return ConfigError(absl::StrCat("score: min (", core->parser_.min, ") must be below max (",
                                      core->parser_.max, ")"));
    }
  }
  core->parser_.marker = config.marker();
  if (config.slots() < 1) {
    return ConfigError(absl::StrCat("slots: expected an integer >= 1, got ", config.slots()));
  }
  if (config.max_new_tokens() < 1) {
    return ConfigError(
        absl::StrCat("max_new_tokens: expected an integer >= 1, got ", config.max_new_tokens()));
  }
  core->max_new_tokens_ = config.max_new_tokens();
  if (!std::isfinite(config.weight())) {
    return ConfigError(absl::StrCat("weight: expected a finite number, got ", config.weight()));
  }
  core->weight_ = config.weight();
  core->add_bos_ = config.add_bos();
  if (config.has_verifiers()) {
    absl::StatusOr<std::unique_ptr<reward::RewardSet>> verifiers =
        MakeRewardSet(config.verifiers());
    if (!verifiers.ok()) {
      return absl::Status(verifiers.status().code(),
                          absl::StrCat("judge config: verifiers: ", verifiers.status().message()));
    }
    core->verifiers_ = *std::move(verifiers);
  }
  const std::string& dir = config.model_dir();
  absl::StatusOr<PolicyModel> judge = LoadPolicy(dir);
  if (!judge.ok()) {
    return absl::Status(judge.status().code(),
                        absl::StrCat("judge model ", dir, ": ", judge.status().message()));
  }
  if (core->add_bos_ && !judge->tokenizer->bos_id().has_value()) {
    return ConfigError(absl::StrCat("add_bos: the judge's tokenizer (", dir,
                                    ") has no bos token; set add_bos false"));
  }
  judge->model->eval();
  rollout::GenerationEngineOptions options;
  options.num_slots = config.slots();
  options.max_seq_len = judge->model->config().max_position_embeddings;
  TROUPE_ASSIGN_OR_RETURN(core->engine_,
                          rollout::GenerationEngine::Create(judge->model.ptr(), options));
  core->stop_ids_ = judge->stop_token_ids;
  core->tokenizer_ = std::move(judge->tokenizer);
  return core;
}

absl::StatusOr<std::vector<int32_t>> JudgeCore::Prepare(proto::Sample& s) const {
  s.set_reward(0);
  s.mutable_reward_components()->clear();
  if (verifiers_ != nullptr) {
    TROUPE_ASSIGN_OR_RETURN(reward::RewardInput in, RewardInputOf(s));
    try {
      reward::RewardOutput out = verifiers_->Score(in);
      s.set_reward(static_cast<float>(out.reward));
      for (const auto& [k, v] : out.components) {
        (*s.mutable_reward_components())[k] = static_cast<float>(v);
      }
    } catch (const std::exception& e) {
      s.set_reward(0);
      s.mutable_reward_components()->clear();
      return absl::InternalError(e.what());
    }
  }
  if (s.response_text().empty()) {
    return absl::InvalidArgumentError("the judge cannot judge an empty response");
  }
  std::vector<int32_t> ids;
  if (add_bos_) ids.push_back(*tokenizer_->bos_id());
  for (const auto& [part, text] : template_.parts) {
    models::EncodeOptions options;
    absl::string_view piece = text;
    switch (part) {
      case JudgeTemplate::Part::kText:
        break;
      case JudgeTemplate::Part::kPrompt:
        piece = s.prompt_text();
        break;
      case JudgeTemplate::Part::kResponse:
        piece = s.response_text();
        options.match_special_tokens = false;  // the policy's text: never a control token
        break;
      case JudgeTemplate::Part::kReference:
        piece = s.reference_answer();
        break;
    }
    absl::StatusOr<std::vector<int32_t>> encoded = tokenizer_->Encode(piece, options);
    if (!encoded.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the judge's tokenizer cannot encode ", Quoted(piece), ": ", encoded.status().message()));
    }
    ids.insert(ids.end(), encoded->begin(), encoded->end());
  }
  if (static_cast<int64_t>(ids.size()) + max_new_tokens_ > engine_->options().max_seq_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the judge's prompt has ", ids.size(), " tokens; with max_new_tokens ", max_new_tokens_,
        " that exceeds the judge model's context (", engine_->options().max_seq_len, ")"));
  }
  return ids;
}

void JudgeCore::Accept(ScoreQueue::Taken request,
                       std::vector<std::pair<int64_t, std::vector<int32_t>>>& prompts) {
  auto judging = std::make_shared<Judging>();
  judging->request = std::move(request);
  std::vector<proto::Sample*> samples;
  for (proto::SampleGroup& g : *judging->request->reply().mutable_groups()) {
    for (proto::Sample& s : *g.mutable_samples()) samples.push_back(&s);
  }
  {
    absl::MutexLock lock(&mutex_);
    ++stats_.requests;
    stats_.samples += static_cast<int64_t>(samples.size());
  }
  judging->remaining = static_cast<int64_t>(samples.size());
  for (proto::Sample* sample : samples) {
    absl::StatusOr<std::vector<int32_t>> ids = Prepare(*sample);
    if (!ids.ok()) {
      Fail(*judging, *sample, std::string(ids.status().message()));
      continue;
    }
    const int64_t tag = next_tag_++;
    in_flight_[tag] = {judging, sample};
    prompts.emplace_back(tag, *std::move(ids));
  }
  CompleteIfDone(*judging);
}

void JudgeCore::Fail(Judging& j, proto::Sample& s, const std::string& error) {
  s.set_reward(0);
  s.mutable_reward_components()->erase("judge/score");
  s.set_reward_error(error);
  proto::ScoreReply& reply = j.request->reply();
  reply.set_failures(reply.failures() + 1);
  --j.remaining;
  {
    absl::MutexLock lock(&mutex_);
    ++stats_.failures;
  }
  TROUPE_LOG(WARNING) << absl::StrFormat("judge: prompt %lld sample %d scored as failed: %s",
                                         static_cast<long long>(s.prompt_id()), s.sample_index(),
                                         error.c_str());
}

void JudgeCore::CompleteIfDone(Judging& j) {
  if (j.remaining == 0) {
    j.remaining = -1;  // answered
    queue_.Complete(j.request);
  }
}

void JudgeCore::Finish(const Item& item, absl::StatusOr<std::string> reply) {
  absl::StatusOr<double> value =
      reply.ok() ? parser_.Parse(*reply) : absl::StatusOr<double>(reply.status());
  Judging& j = *item.request;
  if (j.remaining <= 0) return;  // the request was already answered
  proto::Sample& s = *item.sample;
  if (!value.ok()) {
    if (reply.ok()) {
      absl::MutexLock lock(&mutex_);
      ++stats_.parse_failures;
    }
    Fail(j, s, std::string(value.status().message()));
  } else {
    s.set_reward(static_cast<float>(s.reward() + weight_ * *value));
    (*s.mutable_reward_components())["judge/score"] = static_cast<float>(*value);
    --j.remaining;
  }
  CompleteIfDone(j);
}

absl::Status JudgeCore::Serve(const std::function<bool()>& stop) {
  rollout::SamplingParams params;
  params.temperature = 0;
  params.max_new_tokens = max_new_tokens_;
  params.stop_token_ids = stop_ids_;
  // Every request queued by now, its samples prepared; with `wait`, the queue is waited on (an
  // empty list after a poll without work).
  auto source = [&](bool wait) -> std::optional<std::vector<rollout::GenerationEngine::ServeItem>> {
    std::vector<std::pair<int64_t, std::vector<int32_t>>> prompts;
    for (ScoreQueue::Taken& request : queue_.Take(wait, stop)) Accept(std::move(request), prompts);
    if (stop()) return std::nullopt;
    std::vector<rollout::GenerationEngine::ServeItem> items;
    items.reserve(prompts.size());
    for (auto& [tag, ids] : prompts) items.push_back({tag, std::move(ids)});
    return items;
  };
  auto sink = [&](int64_t tag, absl::StatusOr<rollout::GeneratedSample> result) {
    auto it = in_flight_.find(tag);
    if (it == in_flight_.end()) return;
    const Item item = it->second;
    in_flight_.erase(it);
    if (!result.ok()) {
      Finish(item, result.status());
      return;
    }
    std::vector<int32_t> tokens = result->tokens;
    if (result->finish_reason == rollout::FinishReason::kStop && !tokens.empty()) tokens.pop_back();
    Finish(item,
           tokenizer_->Decode(tokens, {.skip_special_tokens = true, .replace_invalid_utf8 = true}));
  };
  absl::Status status;
  while (!stop()) {
    status = engine_->Serve(params, source, sink);
    {
      absl::MutexLock lock(&mutex_);
      stats_.max_batch = std::max(stats_.max_batch, engine_->stats().max_active_slots);
      stats_.decode_steps = engine_->stats().steps;
      stats_.tokens = engine_->stats().generated_tokens;
    }
    if (status.ok()) break;
    TROUPE_LOG(ERROR) << "judge: the judge model failed (its samples scored as failed): " << status;
  }
  // Stopped: a request not yet judged fails as a whole (UNAVAILABLE, which the scoring pool
  // retries on another replica) instead of coming back with samples nobody judged.
  queue_.Close();
  in_flight_.clear();
  const JudgeStats st = stats();
  TROUPE_LOG(INFO) << absl::StrFormat(
      "judge: served %d requests, %d samples (%d scored as failed, %d replies not a verdict); "
      "%d reply tokens in %d decode steps (mean batch %.1f, max %d)",
      st.requests, st.samples, st.failures, st.parse_failures, st.tokens, st.decode_steps,
      st.decode_steps > 0 ? 1.0 * st.tokens / st.decode_steps : 0.0, st.max_batch);
  return status;
}

JudgeStats JudgeCore::stats() const {
  absl::MutexLock lock(&mutex_);
  return stats_;
}

absl::StatusOr<std::unique_ptr<Judge>> Judge::Create(const ActorContext& ctx) {
  TROUPE_ASSIGN_OR_RETURN(const proto::JudgeConfig config, ctx.ConfigAs<proto::JudgeConfig>());
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<JudgeCore> core, JudgeCore::Create(config));
  std::unique_ptr<Judge> judge(new Judge(std::move(core)));
  JudgeCore* serving = judge->core_.get();
  judge->server_ =
      BackgroundTask::Start(ctx, "judge server", [serving](const BackgroundTask::StopToken& stop) {
        absl::Status s = serving->Serve([&stop] { return stop.stop_requested(); });
        if (!s.ok()) TROUPE_LOG(ERROR) << "judge server stopped: " << s;
      });
  return judge;
}

Judge::~Judge() {
  if (server_ != nullptr) server_->Stop();
}

TROUPE_REGISTER_ACTOR(Judge, Score);

}  // namespace troupe::actors
