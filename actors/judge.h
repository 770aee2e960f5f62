// Judge: a reward served by a generative model that reads each sample and writes a verdict
// (RLAIF, "LLM as a judge"). It serves the reward role's method, Score, so the RL recipes use it
// wherever they use a RewardServer (job spec: reward.judge; actors.reward.type Judge).
//
// For every sample the judge model is given its template with the sample filled in:
//   {prompt}     the prompt's text as the policy saw it (Sample.prompt_text)
//   {response}   the response text (Sample.response_text; special tokens in it are encoded as
//                plain text, so a response cannot smuggle in the judge's own control tokens)
//   {reference}  the reference answer (Sample.reference_answer), for reference-guided judging
//   {{ and }}    literal braces
// encoded with the judge's tokenizer (its bos first when `add_bos`), and answers greedily (up to
// max_new_tokens, ending at its eos / generation_config stop ids). The reply is parsed as
//   verdicts  {"Y": 1.0, "N": 0.0}: the reply, trimmed of white space, is a verdict label (case
//             insensitive) or starts with one followed by a character that is not a letter or
//             digit ("Yes." is "yes"; "Yesterday" is nothing); the longest matching label wins;
//   score     {"min": 0, "max": 10}: the first number in the reply, which must lie in [min, max].
// With a `marker` (e.g. "Verdict:") the verdict or score is read from the text after the marker's
// last occurrence, so the judge may reason first ("23+58=81|" -> "81=Y" with marker "="); a reply
// without the marker cannot be parsed.
// The sample's reward is
//   weight · value + the verifiers' reward (a RewardServer's, reward/reward_set.h)
// with the judge's value as the component "judge/score". The verifiers' components are kept
// (evaluations count their "correct" as accuracy), so a job rewarded by the judge alone gives its
// verifiers weight 0.
//
// A reply that cannot be parsed, a sample that cannot be judged (no response text, a prompt
// longer than the judge's context) or a verifier that throws is scored as failed, as a
// RewardServer does: reward 0, the reason (with the judge's reply) in Sample.reward_error, counted
// in ScoreReply.failures; never a crash, and the request goes on. The verifiers' components are
// kept when only the judge failed (an evaluation still counts their "correct"); a verifier that
// throws leaves none.
//
// Continuous batching: Score only queues the request (actors/score_queue.h) and returns a future;
// one serving thread runs the judge model's GenerationEngine::Serve, which takes the queued
// requests' samples into free KV-cache slots at every decode step (each sample's verifiers and
// prompt are prepared then). Requests from every rollout worker (the scoring pool sends several at
// once) are therefore decoded together, and a request arriving mid-generation joins the running
// batch instead of waiting for it. A request's future completes when its last sample is judged;
// requests not yet judged when the server stops fail as a whole with UNAVAILABLE. Replicas:
// actors.reward.replicas judges behind the role, round-robin (ScoringPool).
//
// Config: proto::JudgeConfig (proto/actor_config.proto, where every default is). Create refuses,
// naming the field: a template without {response} or with an unknown {placeholder} or an
// unmatched brace, neither or both of verdicts and score, an empty label or one with surrounding
// spaces, a verdict or weight that is not finite, min >= max, max_new_tokens or slots < 1,
// verifiers their RewardServer would refuse, a model directory that does not load; the actor's
// ConfigAs refuses an unknown field or a value of the wrong type.
//
// Thread-safety: Score may be called from any thread; Serve runs on one thread (the actor's
// background task) until `stop` returns true.
#ifndef TROUPE_ACTORS_JUDGE_H_
#define TROUPE_ACTORS_JUDGE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "actors/score_queue.h"
#include "proto/actor_config.pb.h"
#include "proto/rl.pb.h"
#include "reward/reward_set.h"
#include "runtime/actor.h"
#include "runtime/background_task.h"
#include "runtime/future.h"

namespace troupe::models {
class Tokenizer;
}  // namespace troupe::models
namespace troupe::rollout {
class GenerationEngine;
}  // namespace troupe::rollout

namespace troupe::actors {

// The template's pieces: literal text and placeholders, in order.
struct JudgeTemplate {
  enum class Part { kText, kPrompt, kResponse, kReference };
  std::vector<std::pair<Part, std::string>> parts;  // text for kText, "" otherwise
};

// InvalidArgument naming the problem for a template without {response}, with an unknown
// placeholder, or with an unmatched '{' or '}'.
absl::StatusOr<JudgeTemplate> ParseJudgeTemplate(absl::string_view text);

// How a judge's reply becomes a value.
struct VerdictParser {
  std::map<std::string, double> verdicts;  // label -> value; empty = score mode
  double min = 0, max = 0;                 // score mode: the accepted range
  std::string marker;                      // "" = read the reply from its start

  // The value of `reply`, or InvalidArgument saying what was expected (see the file comment).
  absl::StatusOr<double> Parse(absl::string_view reply) const;
};

// Counters since Create.
struct JudgeStats {
  int64_t requests = 0;
  int64_t samples = 0;
  int64_t failures = 0;        // Samples scored as failed (unparseable reply included).
  int64_t parse_failures = 0;  // Replies that were not a verdict / score.
  int64_t max_batch = 0;       // Most samples decoded together (the engine's busiest step).
  int64_t decode_steps = 0;    // Engine steps (one forward over every running sample).
  int64_t tokens = 0;          // Reply tokens generated: tokens / decode_steps = mean batch.
};

// The computation, without the actor (tests).
class JudgeCore {
 public:
  static absl::StatusOr<std::unique_ptr<JudgeCore>> Create(const proto::JudgeConfig& config);
  ~JudgeCore();

  // Queues the request for judging; the future completes (on the serving thread) once every
  // sample is judged.
  Future<proto::ScoreReply> Score(const proto::ScoreRequest& req) { return queue_.Submit(req); }

  // Runs the judge model until `stop()` is true (checked at least every 100 ms while idle).
  // Requests still queued or in flight when it returns fail with UNAVAILABLE, as does every Score
  // after it.
  absl::Status Serve(const std::function<bool()>& stop) ABSL_LOCKS_EXCLUDED(mutex_);

  JudgeStats stats() const ABSL_LOCKS_EXCLUDED(mutex_);

 private:
  struct Judging;  // One request being judged.
  struct Item {
    std::shared_ptr<Judging> request;
    proto::Sample* sample;  // In the request's reply.
  };
  JudgeCore();
  // Appends the request's samples to `prompts` (tag, judge prompt), each prepared and tagged in
  // in_flight_; a sample that cannot be judged fails at once.
  void Accept(ScoreQueue::Taken request,
              std::vector<std::pair<int64_t, std::vector<int32_t>>>& prompts)
      ABSL_LOCKS_EXCLUDED(mutex_);
  // Fills in one sample's verifiers' part and its judge prompt; an error = failed sample.
  absl::StatusOr<std::vector<int32_t>> Prepare(proto::Sample& s) const;
  // The judge's reply for `item`: its value (or the error) goes into the sample.
  void Finish(const Item& item, absl::StatusOr<std::string> reply) ABSL_LOCKS_EXCLUDED(mutex_);
  // Marks `s` failed with `error`.
  void Fail(Judging& j, proto::Sample& s, const std::string& error) ABSL_LOCKS_EXCLUDED(mutex_);
  void CompleteIfDone(Judging& j);

  std::shared_ptr<const models::Tokenizer> tokenizer_;
  std::unique_ptr<rollout::GenerationEngine> engine_;
  std::vector<int32_t> stop_ids_;
  JudgeTemplate template_;
  VerdictParser parser_;
  int64_t max_new_tokens_ = 0;
  bool add_bos_ = false;
  double weight_ = 0;
  std::unique_ptr<reward::RewardSet> verifiers_;  // null = none

  ScoreQueue queue_;
  // The serving thread's: tag -> sample in the engine, and the next tag.
  std::map<int64_t, Item> in_flight_;
  int64_t next_tag_ = 0;
  mutable absl::Mutex mutex_;
  JudgeStats stats_ ABSL_GUARDED_BY(mutex_);
};

class Judge : public Actor {
 public:
  static absl::StatusOr<std::unique_ptr<Judge>> Create(const ActorContext& ctx);
  ~Judge() override;
  Future<proto::ScoreReply> Score(const proto::ScoreRequest& req) { return core_->Score(req); }

 private:
  explicit Judge(std::unique_ptr<JudgeCore> core) : core_(std::move(core)) {}
  std::unique_ptr<JudgeCore> core_;
  std::unique_ptr<BackgroundTask> server_;  // Declared last: stops before core_ goes.
};

}  // namespace troupe::actors

#endif  // TROUPE_ACTORS_JUDGE_H_
