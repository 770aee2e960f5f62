// A driver for the KeywordReward example: spawns two reward replicas, scores batches on both at
// once, shows an error reported by a method and a constructor, kills a replica and keeps going.
//
//   bazel run //examples/custom_actor:custom_actor_demo
#include <cstdio>
#include <vector>

#include "examples/custom_actor/keyword_reward.h"
#include "runtime/actor_system.h"

using troupe::examples::KeywordReward;
using troupe::examples::ScoreReply;
using troupe::examples::ScoreRequest;
using troupe::examples::StatsRequest;

int main() {
  troupe::ActorSystem system;
  const nlohmann::json config = {{"keywords", {"because", "answer"}}, {"length_penalty", 0.01}};

  std::vector<troupe::ActorHandle<KeywordReward>> replicas;
  for (int i = 0; i < 2; ++i) {
    auto h = system.Spawn<KeywordReward>(
        {.name = "reward-" + std::to_string(i), .max_restarts = 1, .config = config});
    if (!h.ok()) {
      std::fprintf(stderr, "spawn failed: %s\n", h.status().ToString().c_str());
      return 1;
    }
    replicas.push_back(*h);
  }

  const std::vector<std::vector<std::string>> batches = {
      {"the answer is 4 because 2+2=4", "4"},
      {"I think so", "because I said so, and that is the answer"},
      {"answer: 7", "seven, because 3+4 is seven"},
  };
  std::vector<troupe::Future<ScoreReply>> pending;
  for (size_t b = 0; b < batches.size(); ++b) {
    ScoreRequest req;
    for (const auto& c : batches[b]) req.add_completions(c);
    pending.push_back(replicas[b % replicas.size()].Call(&KeywordReward::Score, req));
  }
  auto all = troupe::WhenAll(std::move(pending)).Get(absl::Seconds(10));
  if (!all.ok()) return 1;
  for (size_t b = 0; b < all->size(); ++b) {
    const absl::StatusOr<ScoreReply>& r = (*all)[b];
    if (!r.ok()) {
      std::printf("batch %zu failed: %s\n", b, r.status().ToString().c_str());
      continue;
    }
    for (int i = 0; i < r->scores_size(); ++i) {
      std::printf("  %+.2f  %s\n", r->scores(i), batches[b][i].c_str());
    }
  }

  // Errors are statuses, never crashes.
  auto empty = replicas[0].Call(&KeywordReward::Score, ScoreRequest()).Get();
  std::printf("empty batch       -> %s\n", empty.status().ToString().c_str());
  auto bad = system.Spawn<KeywordReward>({.name = "misconfigured", .config = {{"keywords", 3}}});
  auto bad_call = bad->Call(&KeywordReward::Score, ScoreRequest()).Get(absl::Seconds(5));
  std::printf("bad config        -> %s\n", bad_call.status().ToString().c_str());

  // Kill one replica with restart allowed: the same handle reaches the new instance.
  (void)system.Kill(replicas[1], /*no_restart=*/false);
  ScoreRequest req;
  req.add_completions("because");
  auto again = replicas[1].Call(&KeywordReward::Score, req).Get(absl::Seconds(5));
  auto stats = replicas[1].Call(&KeywordReward::Stats, StatsRequest()).Get(absl::Seconds(5));
  if (!again.ok() || !stats.ok()) return 1;
  std::printf("after restart     -> score %+.2f, restarts %d, scored by this instance %lld\n",
              again->scores(0), stats->restarts(), static_cast<long long>(stats->scored()));
  return 0;
}
