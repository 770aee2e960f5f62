// The sections of the job spec, one function each (model_section.cc, data_section.cc, ...): Walk*
// names the section's keys, in the order the resolved spec lists them, each with its type, range,
// doc and the condition under which it is read (spec_walker.h); Check*Rules checks the rules
// between keys that blame a key of the section, on the resolved spec, once every key is valid on
// its own. Internal to //recipes/job_spec.
#ifndef TROUPE_RECIPES_JOB_SPEC_SECTIONS_H_
#define TROUPE_RECIPES_JOB_SPEC_SECTIONS_H_

#include "recipes/job_spec/job_spec.h"
#include "recipes/job_spec/spec_walker.h"

namespace troupe::recipes::job_spec_internal {

// Each Walk* takes the top-level section and walks its own section of `spec` (read into it in
// kRead; only read in the other modes).
void WalkModel(Section& top, JobSpec& spec);
void WalkData(Section& top, JobSpec& spec);
void WalkReward(Section& top, JobSpec& spec);
void WalkAlgorithm(Section& top, JobSpec& spec);
void WalkRollout(Section& top, JobSpec& spec);
void WalkAsync(Section& top, JobSpec& spec);
void WalkTrainer(Section& top, JobSpec& spec);
void WalkSft(Section& top, JobSpec& spec);
void WalkActors(Section& top, JobSpec& spec);
void WalkLogging(Section& top, JobSpec& spec);

// The rules between keys; errors go to ctx.Add, located at the key to change.
void CheckModelRules(const JobSpec& spec, Context& ctx);
void CheckDataRules(const JobSpec& spec, Context& ctx);
void CheckRewardRules(const JobSpec& spec, Context& ctx);
void CheckAlgorithmRules(const JobSpec& spec, Context& ctx);
void CheckRolloutRules(const JobSpec& spec, Context& ctx);
void CheckTrainerRules(const JobSpec& spec, Context& ctx);
void CheckSftRules(const JobSpec& spec, Context& ctx);
void CheckActorsRules(const JobSpec& spec, Context& ctx);

}  // namespace troupe::recipes::job_spec_internal

#endif  // TROUPE_RECIPES_JOB_SPEC_SECTIONS_H_
