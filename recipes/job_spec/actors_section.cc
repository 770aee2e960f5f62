// The actors section: per actor kind (role), its registered type, replicas, resources, placement,
// restarts and free-form config.
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"

#include "recipes/job_spec/sections.h"

namespace troupe::recipes::job_spec_internal {
namespace {

constexpr char kResourcesDoc[] =
    "what each instance reserves; when written it is the whole request (CPU fractions allowed, "
    "whole GPUs, memory in bytes or \"512MiB\"). GPU only for a user's actor type: troupe's own "
    "actors compute on the CPU, so a GPU for one is refused";

constexpr char kPlacementDoc[] =
    "a placement group for the role: one bundle of its resources per replica, reserved "
    "all-or-nothing before any replica starts (replica i runs in bundle i) and removed with the "
    "role. PACK: as few nodes as possible; SPREAD: different nodes where possible; STRICT_PACK: "
    "all on one node; STRICT_SPREAD: each on a different node (a group the cluster cannot hold "
    "is an error naming the role; the role must reserve some resources). Spelled as Ray's "
    "strategies; absent = none (each replica is placed on its own)";

// "spread" and the like: the strategies are spelled in capitals, as in proto/core.proto and Ray.
const std::vector<std::pair<absl::string_view, absl::string_view>>& PlacementHints() {
  static const auto* const hints = [] {
    auto* texts = new std::vector<std::pair<std::string, std::string>>;
    for (const auto& [name, value] : PlacementStrategies()) {
      texts->emplace_back(absl::AsciiStrToLower(name),
                          absl::StrCat("did you mean ", Quote(name),
                                       "? the strategies are spelled in capitals, as Ray's"));
    }
    auto* views = new std::vector<std::pair<absl::string_view, absl::string_view>>;
    for (const auto& [bad, hint] : *texts) views->emplace_back(bad, hint);
    return views;
  }();
  return *hints;
}

// A written resources map is the whole request: what it does not name is 0.
void WalkResources(Section& r, ActorResources* out) {
  if (r.reading()) *out = ActorResources{};
  r.Double("CPU", &out->cpu, NonNegative());
  if (const SpecNode* v = r.Double("GPU", &out->gpu, NonNegative(), {.as_integer = true})) {
    if (out->gpu != std::floor(out->gpu)) {
      r.Error(*v, "GPU", absl::StrCat("expected a whole number of GPUs, got ", Got(*v)));
      out->gpu = 0;
    }
  }
  r.Memory("memory", &out->memory);
  Section custom = r.Sub("custom", {.write_if = !out->custom.empty()});
  if (custom.reading()) {
    for (const std::string& name : custom.Keys()) {
      if (name == "CPU" || name == "GPU" || name == "memory") {
        const SpecEntry* entry = custom.Take(name);
        custom.Error(entry->value, name,
                     absl::StrCat("a built-in resource: set ", r.path(), ".", name, " instead"));
        continue;
      }
      double amount = 0;
      if (custom.Double(name, &amount, NonNegative()) != nullptr) out->custom[name] = amount;
    }
  } else {
    for (auto& [name, amount] : out->custom) custom.Double(name, &amount, NonNegative());
  }
  custom.Finish();
  r.Finish();
}

// One kind of actor; the checkpointer's own keys follow in the same section (`finish` false).
// `max_restarts_default`: the default's text when it depends on other keys (nullptr: the value).
Section WalkActorGroup(Section& actors, absl::string_view kind, ActorGroupSpec* group,
                       Range replicas, const KeyOpts& replicas_opts, bool finish = true,
                       const char* max_restarts_default = nullptr) {
  Section g = actors.Sub(kind);
  g.String("type", &group->type,
           {.doc = "registered actor type of the role; the recipe checks it serves the role's "
                   "methods"});
  g.String("library", &group->library,
           {.doc = "shared library of actor types (runtime/actor_library.h) that the job's driver "
                   "and every actor of the job load (native code: docs/security.md; a head "
                   "started with --no-job-libraries refuses it); \"\" = none",
            .write_if = !group->library.empty()});
  g.Int("replicas", &group->replicas, replicas, replicas_opts);
  // Described as one key: its keys are the resources' names.
  std::vector<std::string> amounts;
  for (const auto& [name, amount] : group->resources.AsMap()) {
    amounts.push_back(absl::StrCat(name, ": ", amount));
  }
  g.Describe("resources", "a map: CPU, GPU, memory, custom: {NAME: amount}",
             absl::StrCat("{", absl::StrJoin(amounts, ", "), "}"), {.doc = kResourcesDoc});
  Section r = g.Sub("resources");
  if (g.mode() == WalkMode::kWrite || (r.reading() && r.written())) {
    WalkResources(r, &group->resources);
  }
  g.Enum("placement", &group->placement, PlacementStrategies(),
         {.doc = kPlacementDoc, .write_if = group->placement.has_value(), .default_text = "none"},
         PlacementHints());
  g.Int("max_restarts", &group->max_restarts, AtLeast(-1),
        {.doc = "restarts after a crash; -1 = unlimited (Ray)",
         .default_text = max_restarts_default});
  g.Json("config", &group->config,
         {.doc = "merged over the config the recipe derives from the typed sections (its keys "
                 "win); for troupe's own actor types, fields of that type's message in "
                 "proto/actor_config.proto (checked before any actor starts), for a user's type "
                 "whatever it reads"});
  if (finish) g.Finish();
  return g;
}

}  // namespace

void WalkActors(Section& top, JobSpec& spec) {
  ActorsSpec& actors = spec.actors;
  Section a = top.Sub("actors");
  const KeyOpts replicas = {.doc = "instances of the role"};
  WalkActorGroup(a, "rollout", &actors.rollout, Positive(), replicas);
  WalkActorGroup(a, "reward", &actors.reward, Positive(), replicas);
  WalkActorGroup(a, "reference", &actors.reference, NonNegative(), replicas);
  // The trainer and the critic: each one data-parallel group of `replicas` ranks.
  WalkActorGroup(a, "trainer", &actors.trainer, Positive(),
                 {.doc = "ranks of the trainer's data-parallel group: each trains on a "
                         "token-balanced share of every mini-batch, the gradients summed over "
                         "the group (Gloo) before one optimizer step in lockstep; rank 0 "
                         "publishes the weights and checkpoints"});
  WalkActorGroup(a, "critic", &actors.critic, NonNegative(),
                 {.doc = "ranks of the critic's data-parallel group (recipe ppo with adv_estimator "
                         "gae, the default there; else 0): each trains on a token-balanced share "
                         "of every mini-batch, the gradients summed over the group (Gloo) before "
                         "one optimizer step in lockstep; rank 0 computes the values and writes "
                         "the checkpoints. A critic of 2 or more ranks is not restarted "
                         "(max_restarts 0)",
                  .default_text = "0; 1 with adv_estimator gae"},
                 /*finish=*/true, /*max_restarts_default=*/"3; 0 with replicas > 1");
  WalkActorGroup(a, "replay_buffer", &actors.replay_buffer, Closed(1, 1), replicas);
  CheckpointerSpec& c = actors.checkpointer;
  Section checkpointer =
      WalkActorGroup(a, "checkpointer", &c, Closed(1, 1), replicas, /*finish=*/false);
  checkpointer.String("dir", &c.dir,
                      {.doc = "checkpoint root", .default_text = "<logging.dir>/ckpt"});
  checkpointer.Int("every_steps", &c.every_steps, NonNegative(),
                   {.doc = "checkpoint every K steps (and at the last step); 0 = never (the run "
                           "writes no checkpoint, so it cannot be resumed)"});
  checkpointer.Int("keep", &c.keep, NonNegative(), {.doc = "newest K checkpoints kept; 0 = all"});
  checkpointer.Finish();
  a.Finish("actor kind");
}

void CheckActorsRules(const JobSpec& spec, Context& ctx) {
  for (const auto& [kind, group] : ActorGroups(spec)) {
    const std::string path = absl::StrCat("actors.", kind, ".placement");
    if (!group->placement.has_value() || group->replicas == 0 || !ctx.RecipeReads(path)) continue;
    // The scheduler refuses a bundle of nothing: a group reserves what its replicas request.
    if (group->resources.AsMap().empty()) {
      ctx.Add(path, absl::StrCat("a placement group reserves the role's resources, one bundle "
                                 "per replica, and actors.",
                                 kind, ".resources reserves none (give it some, e.g. {CPU: 0.5})"));
    }
  }
}

}  // namespace troupe::recipes::job_spec_internal
