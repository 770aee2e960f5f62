// The chat template that turns a dataset job's chat-messages prompts into prompt text: the
// PromptRenderer of RecordPrompts (data/record_prompts.h) and of the SFT warm start's records.
//
// Where it comes from, in this order:
//   data.chat_template   a file: a tokenizer_config.json (name ending in .json: its
//                        chat_template and special tokens), or a template (any other name: the
//                        special tokens are those of the job tokenizer's tokenizer_config.json,
//                        when there is one);
//   the tokenizer        the "chat_template" of the tokenizer_config.json beside the job's
//                        tokenizer: model.tokenizer's (its directory, or the directory it names),
//                        else model.init's when it is a model directory.
// Neither: no renderer (a messages prompt is then refused, naming its record).
//
// The renderer renders with add_generation_prompt (the text ends where the assistant's answer
// starts), as verl's RL dataset does. Prompt tokens are then BOS + the tokenizer's encoding of
// that text (data/record_prompts.h), special tokens such as <|im_start|> matched as single ids.
//
//   TROUPE_ASSIGN_OR_RETURN(JobChatTemplate chat, LoadJobChatTemplate(spec));
//   if (chat.renderer) log("prompts rendered with " + chat.source);
//
// Thread-safety: the renderer is immutable and may be called concurrently.
#ifndef TROUPE_RECIPES_RL_CHAT_PROMPTS_H_
#define TROUPE_RECIPES_RL_CHAT_PROMPTS_H_

#include <string>

#include "absl/status/statusor.h"
#include "data/record.h"
#include "recipes/job_spec/job_spec.h"

namespace troupe::recipes {

struct JobChatTemplate {
  data::ChatRenderer renderer;  // Null when the job has no chat template.
  std::string source;           // The file it came from ("" with no template).
};

// The job's chat template, parsed. INVALID_ARGUMENT naming data.chat_template (or
// model.tokenizer / model.init for the tokenizer's config) and the template's own
// "SOURCE:LINE: message" for a file that cannot be read or parsed. Reads the files; starts
// nothing.
absl::StatusOr<JobChatTemplate> LoadJobChatTemplate(const JobSpec& spec);

// The tokenizer_config.json beside the job's tokenizer (see the file comment), "" when the job's
// tokenizer is not a file the spec names (init: random or sft without model.tokenizer). The
// file need not exist.
std::string JobTokenizerConfigPath(const JobSpec& spec);
// The tokenizer.json the job's prompts are encoded with, when the spec names it: model.tokenizer,
// else model.init's tokenizer.json when it is a model directory; "" otherwise.
std::string JobTokenizerPath(const JobSpec& spec);

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_RL_CHAT_PROMPTS_H_
