// The logging section: where the run writes its metrics, events and resolved spec.
#include "recipes/job_spec/sections.h"

namespace troupe::recipes::job_spec_internal {

void WalkLogging(Section& top, JobSpec& spec) {
  LoggingSpec& logging = spec.logging;
  Section l = top.Sub("logging");
  l.String("dir", &logging.dir,
           {.doc = "the run's directory: metrics.jsonl, TensorBoard events, job.yaml",
            .default_text = "runs/<name>"});
  l.Bool("tensorboard", &logging.tensorboard, {.doc = "write TensorBoard event files"});
  l.Int("log_every", &logging.log_every, Positive(),
        {.doc = "metrics records and the progress line every K steps (and the last step, and "
                "evaluations)"});
  l.Finish();
}

}  // namespace troupe::recipes::job_spec_internal
