// The data section: where the prompts come from (a registered task, or JSONL datasets), how they
// are read and drawn, and the batch and sequence sizes.
#include <optional>

#include "recipes/job_spec/job_tasks.h"
#include "recipes/job_spec/sections.h"

namespace troupe::recipes::job_spec_internal {
namespace {

constexpr char kRecordsOnly[] =
    "reads records of data.train_files, which is not set (a task's prompts are its own)";

// The task's own keys (`digits: 3`), in its declaration order, typed and bounded as it declares.
void WalkTaskParams(Section& d, const TaskDefinition& task, DataSpec& data) {
  if (d.reading()) data.task_params = nlohmann::json::object();
  for (const TaskParam& param : task.params) {
    const bool set = !d.reading() && data.task_params.contains(param.name);
    nlohmann::json value = set ? data.task_params.at(param.name) : param.default_value;
    const Range range = Closed(param.min, param.max);
    const KeyOpts opts = {.doc = param.doc.c_str(), .write_if = set};
    switch (param.type) {
      case TaskParam::Type::kInt: {
        int64_t v = value.get<int64_t>();
        d.Int(param.name, &v, range, opts);
        value = v;
        break;
      }
      case TaskParam::Type::kNumber: {
        double v = value.get<double>();
        d.Double(param.name, &v, range, opts);
        value = v;
        break;
      }
      case TaskParam::Type::kBool: {
        bool v = value.get<bool>();
        d.Bool(param.name, &v, opts);
        value = v;
        break;
      }
      case TaskParam::Type::kString: {
        std::string v = value.get<std::string>();
        KeyOpts string_opts = opts;
        string_opts.allow_empty = true;
        d.String(param.name, &v, string_opts);
        value = v;
        break;
      }
    }
    if (d.reading()) data.task_params[param.name] = value;
  }
}

}  // namespace

void WalkData(Section& top, JobSpec& spec) {
  DataSpec& data = spec.data;
  Section d = top.Sub("data");
  const bool dataset = !data.train_files.empty();
  const bool offline = !data.preference_files.empty();
  // (What a recipe does not read of it, its rules say: the resolved spec lists none of it.)
  const std::shared_ptr<const JobRecipeRules> recipe = RulesOf(spec);
  const bool sft_files = recipe->trains_on_sft_files;
  // A record's keys are read with data.train_files (a recipe training on sft.train_files: with
  // them), the ones a preference record has also with data.preference_files.
  const bool records = dataset || sft_files;
  const SpecNode* task_node =
      d.String("task", &data.task,
               {.doc = "a registered task (recipes/job_spec/job_tasks.h); exactly one of "
                       "data.task and data.train_files (neither for recipe sft)",
                .write_if = !data.task.empty()});
  d.StringList("train_files", &data.train_files,
               {.doc = "dataset files of records in verl's shape, the format by suffix "
                       "(data/record_source.h): JSONL (.jsonl, .jsonl.gz; indexed, never "
                       "loaded whole) or a JSON array (.json; read whole, up to 1 GiB)",
                .write_if = dataset});
  d.StringList("val_files", &data.val_files,
               {.doc = "held-out records (formats as data.train_files): evaluations score the "
                       "first data.heldout_size of "
                       "them, in file order; none = no evaluation (recipe sft: read at "
                       "sft.prompt_key / sft.response_key, the response the reference; none = the "
                       "last data.heldout_size training records)",
                .read_if = records,
                .unread_why = kRecordsOnly,
                .write_if = !data.val_files.empty()});
  d.StringList("preference_files", &data.preference_files,
               {.doc = "recipe dpo: offline pairs, preference records (formats as "
                       "data.train_files) (prompt, chosen, "
                       "rejected, as recipe rm reads them) trained on instead of pairs sampled "
                       "from the policy; data.task gives the held-out evaluation and is required "
                       "(a dataset job's data.train_files / val_files cannot be combined with it "
                       "yet)",
                .write_if = offline});
  d.String("prompt_key", &data.prompt_key,
           {.doc = "the record's prompt: a string, or a list of chat messages (OpenRLHF: "
                   "prompt_key)",
            .read_if = records || offline,
            .unread_why = kRecordsOnly,
            .write_if = dataset || offline});
  d.String("answer_key", &data.answer_key,
           {.doc = "dotted path of the ground truth the reward checks (a non-string is passed as "
                   "JSON text)",
            .read_if = records,
            .unread_why = kRecordsOnly,
            .write_if = dataset});
  d.String("data_source_key", &data.data_source_key,
           {.doc = "the record's data source: the reward that scores it unless reward.name is set",
            .read_if = records,
            .unread_why = kRecordsOnly,
            .write_if = dataset});
  d.String("default_data_source", &data.default_data_source,
           {.doc = "data source of records without one; \"\" = they are refused",
            .allow_empty = true,
            .read_if = records,
            .unread_why = kRecordsOnly,
            .write_if = dataset});
  d.String("chosen_key", &data.chosen_key,
           {.doc = "recipe rm and dpo's preference_files: dotted path of a preference record's "
                   "preferred response (a string, or chat messages rendered like the prompt)",
            .read_if = records || offline,
            .unread_why = kRecordsOnly,
            .write_if = offline || (dataset && recipe->reads_preference_records)});
  d.String("rejected_key", &data.rejected_key,
           {.doc = "recipe rm and dpo's preference_files: dotted path of a preference record's "
                   "dispreferred response (as chosen_key)",
            .read_if = records || offline,
            .unread_why = kRecordsOnly,
            .write_if = offline || (dataset && recipe->reads_preference_records)});
  d.Bool("shuffle", &data.shuffle,
         {.doc = "draw records in a per-epoch permutation of (data.seed, epoch) instead of file "
                 "order",
          .read_if = records,
          .unread_why = kRecordsOnly,
          .write_if = dataset});
  d.Bool("filter_overlong_prompts", &data.filter_overlong_prompts,
         {.doc = "drop prompts longer than data.max_prompt_length tokens (a full scan before the "
                 "run; the count is logged and in summary.json)",
          .read_if = records,
          .unread_why = kRecordsOnly,
          .write_if = dataset});
  d.Enum("truncation", &data.truncation, Truncations(),
         {.doc = "a prompt longer than data.max_prompt_length: error refuses the run naming "
                 "FILE:LINE; left / right cut tokens from that side",
          .read_if = records || offline,
          .unread_why = kRecordsOnly,
          .write_if = dataset || offline});
  d.String("chat_template", &data.chat_template,
           {.doc = "chat template file rendering messages prompts; \"\" = a messages prompt is "
                   "refused",
            .allow_empty = true,
            .read_if = records,
            .unread_why = kRecordsOnly,
            .write_if = dataset || !data.chat_template.empty()});
  Section sampler = d.Sub("sampler", {.write_if = data.sampler.prioritized});
  sampler.Enum("type", &data.sampler.prioritized, Samplers(),
               {.doc = "RL recipes: sequential draws the training prompts in order (epochs); "
                       "prioritized draws them at random, those whose last group's rewards were "
                       "all equal (all solved or all failed) uniform_weight times as often "
                       "(recipes/rl/prompt_source.h)",
                .read_if = !offline,
                .unread_why = "offline dpo trains on data.preference_files in their own order; "
                              "the sampler picks prompts to generate from"});
  sampler.Double("uniform_weight", &data.sampler.uniform_weight, LeftOpen(0, 1),
                 {.doc = "prioritized: the relative chance of drawing a prompt whose last group's "
                         "rewards were all equal (a prompt never drawn or whose last group was "
                         "mixed: 1)",
                  .read_if = data.sampler.prioritized,
                  .unread_why = "weighs the draws of data.sampler.type: prioritized only"});
  sampler.Finish();
  d.Int("train_batch_size", &data.train_batch_size, Positive(), {.doc = "prompts per step"});
  d.Int("gen_batch_size", &data.gen_batch_size, Positive(),
        {.doc = "asynchronous RL runs: prompts a generation round draws, split over the rollout "
                "workers (gen_batch_size / replicas per Generate call); larger rounds batch "
                "generation better when dynamic sampling drops most groups (verl's DAPO recipe: "
                "3 x train_batch_size)",
         .write_if = data.gen_batch_size > 0,
         .default_text = "train_batch_size"});
  d.Int("max_prompt_length", &data.max_prompt_length, Positive(), {.doc = "prompt tokens"});
  d.Int("max_response_length", &data.max_response_length, Positive(),
        {.doc = "response tokens (recipe sft: new tokens of a held-out answer when written)",
         .write_if = !sft_files || d.ctx()->Written("data.max_response_length")});
  d.Int("heldout_size", &data.heldout_size, Positive(),
        {.doc = "held-out problems for evaluations (of a task, or of data.val_files)"});
  d.Int("seed", &data.seed, NonNegative(),
        {.doc = "chooses the task's splits, or seeds a dataset's shuffle (as verl's data.seed)"});

  if (d.reading() && task_node == nullptr) {
    // A recipe training on sft.train_files reads its records there: neither key is required.
    if (data.train_files.empty() && !sft_files) {
      d.Missing("task", "missing required key (or data.train_files for a dataset)");
      d.AcceptRest();  // Task-specific keys cannot be checked without a valid task.
    } else {
      d.Finish();
    }
    return;
  }
  const std::string& task_name =
      d.mode() == WalkMode::kDescribe ? d.ctx()->describe_task : data.task;
  std::optional<TaskDefinition> task = FindJobTask(task_name);
  if (d.reading() && !task.has_value()) {
    std::vector<std::string> names = JobTaskNames();
    std::string message = absl::StrCat("unknown task ", Quote(data.task));
    const std::string close = Closest(data.task, names);
    if (!close.empty()) absl::StrAppend(&message, " (did you mean ", Quote(close), "?)");
    absl::StrAppend(&message, "; registered tasks: ", absl::StrJoin(names, ", "));
    d.Error(*task_node, "task", message);
    d.AcceptRest();
    return;
  }
  if (task.has_value()) WalkTaskParams(d, *task, data);
  d.Finish();
}

void CheckDataRules(const JobSpec& spec, Context& ctx) {
  const DataSpec& d = spec.data;
  const bool offline_pairs = !d.preference_files.empty();
  const std::shared_ptr<const JobRecipeRules> recipe = RulesOf(spec);
  if (offline_pairs && !recipe->reads_offline_pairs) {
    ctx.Add("data.preference_files",
            absl::StrCat("offline preference pairs are recipe dpo's (this job's recipe is ",
                         spec.recipe, "; recipe rm reads its pairs from data.train_files)"));
  }
  if (offline_pairs && d.task.empty()) {
    ctx.Add("data.preference_files",
            "offline dpo evaluates on a task's held-out problems: set data.task (a dataset job's "
            "data.train_files / val_files cannot be combined with it yet)");
  }
  if (!recipe->reads_preference_records && !(offline_pairs && recipe->reads_offline_pairs)) {
    for (const char* key : {"data.chosen_key", "data.rejected_key"}) {
      if (ctx.Written(key)) {
        ctx.Add(key, absl::StrCat("names a preference record's response, read by recipe rm and "
                                  "by recipe dpo's data.preference_files only (this job's recipe "
                                  "is ",
                                  spec.recipe, ")"));
      }
    }
  }
  if (!d.task.empty() && !d.train_files.empty()) {
    ctx.Add("data.train_files", "give data.task or data.train_files, not both");
  }
  if (ctx.Written("data.gen_batch_size") && spec.async.max_staleness == 0) {
    ctx.Add("data.gen_batch_size",
            "sets the prompts of a generation round of an asynchronous run (async.max_staleness "
            ">= 1); a synchronous step generates exactly the groups its batch lacks");
  }
  if (ctx.Written("data.gen_batch_size") && offline_pairs) {
    ctx.Add("data.gen_batch_size", "offline dpo generates nothing: its pairs are read");
  }
}

}  // namespace troupe::recipes::job_spec_internal
