#include "rollout/generation_engine.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <deque>
#include <exception>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "kernels/token_logprobs.h"
#include "models/catch_torch.h"
#include "models/transformer.h"

namespace troupe::rollout {

// One KV-cache slot and the sequence living in it.
struct GenerationEngine::Slot {
  bool active = false;
  int64_t item = 0;  // Index of the sample in Generate's work queue; Serve: the item's tag.
  const std::vector<int32_t>* prompt = nullptr;
  std::vector<int32_t> owned_prompt;  // Serve: the prompt `prompt` points to.
  std::vector<int32_t> uncached;      // Tokens to feed at the next forward.
  GeneratedSample sample;
};

namespace {

std::string ShapeString(at::IntArrayRef shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

}  // namespace

absl::Status GenerationEngine::CheckPrompt(const std::vector<int32_t>& prompt,
                                           const std::string& what) const {
  if (prompt.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " is empty"));
  if (static_cast<int64_t>(prompt.size()) >= options_.max_seq_len) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has ", prompt.size(),
                                                   " tokens; max_seq_len ", options_.max_seq_len,
                                                   " leaves no room to generate"));
  }
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || prompt[i] >= vocab_size_) {
      return absl::InvalidArgumentError(absl::StrCat(what, " token ", i, " = ", prompt[i],
                                                     " is outside the vocabulary [0, ", vocab_size_,
                                                     ")"));
    }
  }
  return absl::OkStatus();
}

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
  }
  return "unknown";
}

absl::StatusOr<std::unique_ptr<GenerationEngine>> GenerationEngine::Create(
    std::shared_ptr<models::CausalLMImpl> model, const GenerationEngineOptions& options) {
  if (model == nullptr) return absl::InvalidArgumentError("GenerationEngine: model is null");
  if (options.num_slots <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("GenerationEngine: num_slots = ", options.num_slots, " must be > 0"));
  }
  if (options.max_seq_len <= 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("GenerationEngine: max_seq_len = ", options.max_seq_len, " must be > 1"));
  }
  TROUPE_ASSIGN_OR_RETURN(models::KVCache cache,
                          model->CreateKVCache(options.num_slots, options.max_seq_len));
  return std::unique_ptr<GenerationEngine>(new GenerationEngine(
      std::move(model), std::make_unique<models::KVCache>(std::move(cache)), options));
}

GenerationEngine::GenerationEngine(std::shared_ptr<models::CausalLMImpl> model,
                                   std::unique_ptr<models::KVCache> cache,
                                   const GenerationEngineOptions& options)
    : model_(std::move(model)),
      cache_(std::move(cache)),
      options_(options),
      vocab_size_(model_->config().vocab_size),
      slots_(options.num_slots),
      version_(options.initial_weight_version),
      accepted_version_(options.initial_weight_version) {
  for (const auto& item : model_->named_parameters(/*recurse=*/true)) {
    params_.emplace(item.key(), item.value());
  }
  if (options_.weight_versions_kept > 0) {
    // The initial weights are the first version kept (and what a partial update merges over).
    at::NoGradGuard no_grad;
    auto initial = std::make_shared<Weights>();
    for (const auto& [name, param] : params_) initial->emplace_back(name, param.detach().clone());
    absl::MutexLock lock(&mutex_);
    kept_[options_.initial_weight_version] = std::move(initial);
  }
}

GenerationEngine::~GenerationEngine() = default;

int64_t GenerationEngine::weight_version() const {
  absl::MutexLock lock(&mutex_);
  return version_;
}

absl::Status GenerationEngine::UpdateWeights(WeightUpdate update) {
  const std::string what = absl::StrCat("UpdateWeights (version ", update.version, "): ");
  auto check_version = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) -> absl::Status {
    if (update.version <= accepted_version_) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, "version must exceed the latest accepted version ", accepted_version_));
    }
    return absl::OkStatus();
  };
  {
    absl::MutexLock lock(&mutex_);
    TROUPE_RETURN_IF_ERROR(check_version());
  }
  absl::flat_hash_set<std::string> seen;
  std::vector<std::pair<std::string, at::Tensor>> copies;
  copies.reserve(update.tensors.size());
  for (const auto& [name, tensor] : update.tensors) {
    auto it = params_.find(name);
    if (it == params_.end()) {
      return absl::InvalidArgumentError(absl::StrCat(what, "unknown tensor '", name, "'"));
    }
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat(what, "tensor '", name, "' appears twice"));
    }
    if (!tensor.defined() || !at::isFloatingType(tensor.scalar_type())) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, "tensor '", name, "' must be a defined floating-point tensor"));
    }
    const at::Tensor& param = it->second;
    if (tensor.sizes() != param.sizes()) {
      return absl::InvalidArgumentError(absl::StrCat(what, "tensor '", name, "' has shape ",
                                                     ShapeString(tensor.sizes()), ", the model ",
                                                     ShapeString(param.sizes())));
    }
    // A private copy in the parameter's dtype and device: the caller may keep changing its own.
    TROUPE_RETURN_IF_ERROR(models::CatchTorchAs(
        absl::StatusCode::kResourceExhausted, absl::StatusCode::kResourceExhausted,
        absl::StrCat(what, "cannot copy tensor '", name, "'"), [&] {
          copies.emplace_back(name, tensor.detach().to(param.options(), /*non_blocking=*/false,
                                                       /*copy=*/true));
          return absl::OkStatus();
        }));
  }
  if (!update.partial && seen.size() != params_.size()) {
    std::vector<std::string> missing;
    for (const auto& [name, param] : params_) {
      if (!seen.contains(name)) missing.push_back(name);
    }
    std::sort(missing.begin(), missing.end());
    return absl::InvalidArgumentError(absl::StrCat(
        what, missing.size(), " parameter(s) missing (set partial for a partial update), e.g. '",
        missing.front(), "'"));
  }

  absl::MutexLock lock(&mutex_);
  TROUPE_RETURN_IF_ERROR(check_version());
  if (options_.weight_versions_kept > 0) {
    if (update.partial) {
      // The parameters it leaves alone keep the newest kept version's weights.
      for (const auto& [name, tensor] : *kept_.rbegin()->second) {
        if (!seen.contains(name)) copies.emplace_back(name, tensor);
      }
    }
    kept_[update.version] = std::make_shared<const Weights>(std::move(copies));
    while (static_cast<int64_t>(kept_.size()) > options_.weight_versions_kept) {
      kept_.erase(kept_.begin());
    }
    accepted_version_ = update.version;
    return absl::OkStatus();
  }
  if (pending_.has_value() && update.partial) {
    // Merge over the queued update: the newer tensors win.
    for (auto& [name, tensor] : pending_->tensors) {
      if (!seen.contains(name)) copies.emplace_back(name, std::move(tensor));
    }
    update.partial = pending_->partial;
  }
  update.tensors = std::move(copies);
  accepted_version_ = update.version;
  pending_ = std::move(update);
  return absl::OkStatus();
}

bool GenerationEngine::ApplyPendingUpdate(int64_t max_version, int64_t min_version) {
  if (options_.weight_versions_kept > 0) {
    std::shared_ptr<const Weights> weights;
    int64_t target = 0;
    {
      absl::MutexLock lock(&mutex_);
      // The newest kept version in [min_version, max_version]. If there is none, the weights in
      // effect stay if they are in that range (a running call keeps its version even if it is
      // no longer kept); else the oldest kept version above min_version (a restarted worker
      // never had the pinned version), or none (newer ones are held back).
      const int64_t floor = std::max<int64_t>(min_version, 0);
      auto it = max_version < 0 ? kept_.end() : kept_.upper_bound(max_version);
      if (it != kept_.begin() && std::prev(it)->first >= floor) {
        --it;
      } else if (version_ >= floor && (max_version < 0 || version_ <= max_version)) {
        return false;
      } else {
        it = kept_.lower_bound(floor);
        if (min_version < 0 || it == kept_.end()) return false;
      }
      if (it->first == version_) return false;
      target = it->first;
      weights = it->second;
    }
    {
      at::NoGradGuard no_grad;
      for (const auto& [name, tensor] : *weights) params_.at(name).copy_(tensor);
    }
    ++stats_.weight_updates_applied;
    absl::MutexLock lock(&mutex_);
    version_ = target;
    return true;
  }
  std::optional<WeightUpdate> update;
  {
    absl::MutexLock lock(&mutex_);
    if (pending_.has_value() && max_version >= 0 && pending_->version > max_version) return false;
    update.swap(pending_);
  }
  if (!update.has_value()) return false;
  {
    at::NoGradGuard no_grad;
    for (const auto& [name, tensor] : update->tensors) params_.at(name).copy_(tensor);
  }
  ++stats_.weight_updates_applied;
  absl::MutexLock lock(&mutex_);
  version_ = update->version;
  return true;
}

absl::StatusOr<std::vector<GeneratedSample>> GenerationEngine::Generate(
    absl::Span<const std::vector<int32_t>> prompts, const SamplingParams& params,
    const StepCallback& on_step) {
  if (prompts.empty()) return absl::InvalidArgumentError("Generate: no prompts");
  for (size_t p = 0; p < prompts.size(); ++p) {
    TROUPE_RETURN_IF_ERROR(CheckPrompt(prompts[p], absl::StrCat("Generate: prompt ", p)));
  }
  TROUPE_RETURN_IF_ERROR(ValidateSamplingParams(params, vocab_size_));

  const int64_t total = static_cast<int64_t>(prompts.size()) * params.n;
  std::vector<GeneratedSample> results(total);
  int64_t next_item = 0;
  auto fill = [&](Slot& slot) {
    if (next_item >= total) return false;
    slot.active = true;
    slot.item = next_item++;
    slot.sample.prompt_index = slot.item / params.n;
    slot.sample.sample_index = slot.item % params.n;
    slot.prompt = &prompts[slot.sample.prompt_index];
    slot.uncached = *slot.prompt;
    return true;
  };
  auto finish = [&](Slot& slot) { results[slot.item] = std::move(slot.sample); };
  absl::Status status =
      models::CatchTorch("Generate", [&] { return RunSteps(params, on_step, fill, finish); });
  ResetSlots();  // Leave no sequence behind, whatever happened.
  if (!status.ok()) return status;
  return results;
}

absl::Status GenerationEngine::Serve(const SamplingParams& params, const WorkSource& source,
                                     const ServeSink& sink) {
  TROUPE_RETURN_IF_ERROR(ValidateSamplingParams(params, vocab_size_));
  if (params.n != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("Serve: params.n = ", params.n, "; each served prompt is one sample (n 1)"));
  }
  std::deque<ServeItem> queue;
  // Takes what `source` has (waiting for it when `wait`); false once it says stop.
  auto pull = [&](bool wait) {
    std::optional<std::vector<ServeItem>> items = source(wait);
    if (!items.has_value()) return false;
    for (ServeItem& item : *items) queue.push_back(std::move(item));
    return true;
  };
  auto fill = [&](Slot& slot) {
    while (!queue.empty()) {
      ServeItem item = std::move(queue.front());
      queue.pop_front();
      absl::Status bad = CheckPrompt(item.prompt, absl::StrCat("Serve: item ", item.tag));
      if (!bad.ok()) {
        sink(item.tag, bad);
        continue;
      }
      slot.active = true;
      slot.item = item.tag;
      slot.sample.prompt_index = item.tag;
      slot.owned_prompt = std::move(item.prompt);
      slot.prompt = &slot.owned_prompt;
      slot.uncached = slot.owned_prompt;
      return true;
    }
    return false;
  };
  auto finish = [&](Slot& slot) { sink(slot.item, std::move(slot.sample)); };
  bool open = true;
  while (open) {
    if (!pull(/*wait=*/true)) break;  // Idle: wait for work.
    // New work joins the running batch at every step boundary.
    auto on_step = [&](int64_t) {
      if (open) open = pull(/*wait=*/false);
    };
    absl::Status status =
        models::CatchTorch("Serve", [&] { return RunSteps(params, on_step, fill, finish); });
    if (!status.ok()) {
      // Every sequence in flight and every queued item gets the error; the engine is reset.
      for (Slot& slot : slots_) {
        if (slot.active) sink(slot.item, status);
      }
      for (ServeItem& item : queue) sink(item.tag, status);
      queue.clear();
      ResetSlots();
      return status;
    }
    ResetSlots();
  }
  return absl::OkStatus();
}

void GenerationEngine::ResetSlots() {
  for (int64_t s = 0; s < cache_->num_slots(); ++s) {
    cache_->ResetSlot(s);
    slots_[s] = Slot();
  }
}

absl::StatusOr<at::Tensor> GenerationEngine::ForwardRows(const std::vector<int64_t>& rows,
                                                         bool prefill) {
  const int64_t batch = static_cast<int64_t>(rows.size());
  int64_t width = 1;
  for (int64_t s : rows) width = std::max<int64_t>(width, slots_[s].uncached.size());
  std::vector<int64_t> ids(batch * width, 0);
  std::vector<int64_t> positions(batch * width, 0);
  models::CacheForwardOptions forward_options;
  forward_options.last_token_only = true;
  for (int64_t b = 0; b < batch; ++b) {
    const Slot& slot = slots_[rows[b]];
    const int64_t cached = cache_->lengths[rows[b]];
    for (int64_t t = 0; t < width; ++t) {
      if (t < static_cast<int64_t>(slot.uncached.size())) ids[b * width + t] = slot.uncached[t];
      positions[b * width + t] = cached + t;  // Padding gets harmless positions too.
    }
    if (prefill) forward_options.num_new.push_back(slot.uncached.size());
  }
  at::Tensor ids_t = at::tensor(ids, at::kLong).view({batch, width});
  at::Tensor positions_t = at::tensor(positions, at::kLong).view({batch, width});
  TROUPE_ASSIGN_OR_RETURN(at::Tensor logits, model_->ForwardWithCache(ids_t, positions_t, *cache_,
                                                                      rows, forward_options));
  ++stats_.forward_calls;
  for (int64_t s : rows) {
    (prefill ? stats_.prefill_tokens : stats_.decode_tokens) += slots_[s].uncached.size();
  }
  return logits.select(1, 0);  // [B, V]
}

absl::Status GenerationEngine::RunSteps(const SamplingParams& params, const StepCallback& on_step,
                                        const std::function<bool(Slot&)>& fill,
                                        const std::function<void(Slot&)>& finish) {
  at::NoGradGuard no_grad;
  ResetSlots();

  for (int64_t step = 0;; ++step) {
    // ---- Step boundary: callback, weight update, refill.
    if (on_step) on_step(step);
    if (ApplyPendingUpdate(params.max_weight_version, params.min_weight_version)) {
      // The cached keys/values came from the old weights: rebuild them from the new ones.
      for (int64_t s = 0; s < cache_->num_slots(); ++s) {
        Slot& slot = slots_[s];
        if (!slot.active) continue;
        cache_->ResetSlot(s);
        slot.uncached = *slot.prompt;
        slot.uncached.insert(slot.uncached.end(), slot.sample.tokens.begin(),
                             slot.sample.tokens.end());
        stats_.recomputed_tokens += slot.uncached.size();
      }
    }
    for (int64_t s = 0; s < cache_->num_slots(); ++s) {
      Slot& slot = slots_[s];
      if (slot.active) continue;
      slot = Slot();
      if (!fill(slot)) break;
    }

    // ---- Forward: prefill rows and decode rows (ascending slots, so contiguous runs are cheap).
    // A fresh sample whose prompt a leader prefills at this step follows it (the file comment).
    std::vector<int64_t> prefill_rows;
    std::vector<int64_t> decode_rows;
    std::vector<int64_t> followers, leader_rows;  // leader_rows: the leader's row in prefill_rows
    absl::flat_hash_map<const std::vector<int32_t>*, int64_t> leaders;  // prompt -> its row
    for (int64_t s = 0; s < cache_->num_slots(); ++s) {
      Slot& slot = slots_[s];
      if (!slot.active) continue;
      if (slot.uncached.size() <= 1) {
        decode_rows.push_back(s);
        continue;
      }
      const bool fresh = slot.sample.tokens.empty() && cache_->lengths[s] == 0;
      auto leader = fresh ? leaders.find(slot.prompt) : leaders.end();
      if (leader != leaders.end()) {
        followers.push_back(s);
        leader_rows.push_back(leader->second);
        continue;
      }
      if (fresh) leaders.emplace(slot.prompt, static_cast<int64_t>(prefill_rows.size()));
      prefill_rows.push_back(s);
    }
    if (prefill_rows.empty() && decode_rows.empty()) break;
    ++stats_.steps;
    stats_.max_active_slots = std::max<int64_t>(
        stats_.max_active_slots, prefill_rows.size() + decode_rows.size() + followers.size());
    const int64_t version = weight_version();
    std::vector<at::Tensor> logits_parts;
    std::vector<int64_t> rows;
    for (const auto* group : {&prefill_rows, &decode_rows}) {
      if (group->empty()) continue;
      TROUPE_ASSIGN_OR_RETURN(at::Tensor part, ForwardRows(*group, group == &prefill_rows));
      if (group == &prefill_rows && !followers.empty()) {
        // The followers: the leaders' cache entries, and their logits rows.
        std::vector<int64_t> leader_slots;
        int64_t width = 0;
        for (int64_t r : leader_rows) {
          leader_slots.push_back(prefill_rows[r]);
          width = std::max(width, cache_->lengths[prefill_rows[r]]);
        }
        const at::Tensor from = at::tensor(leader_slots, at::kLong);
        const at::Tensor to = at::tensor(followers, at::kLong);
        for (int64_t l = 0; l < cache_->num_layers(); ++l) {
          for (at::Tensor* kv : {&cache_->keys[l], &cache_->values[l]}) {
            at::Tensor filled = kv->narrow(2, 0, width);
            filled.index_copy_(0, to, filled.index_select(0, from));
          }
        }
        for (size_t i = 0; i < followers.size(); ++i) {
          cache_->lengths[followers[i]] = cache_->lengths[leader_slots[i]];
          stats_.shared_prefill_tokens += slots_[followers[i]].uncached.size();
        }
        part = at::cat({part, part.index_select(0, at::tensor(leader_rows, at::kLong))}, 0);
      }
      logits_parts.push_back(part);
      rows.insert(rows.end(), group->begin(), group->end());
      if (group == &prefill_rows) rows.insert(rows.end(), followers.begin(), followers.end());
    }
    at::Tensor logits =
        logits_parts.size() == 1 ? logits_parts[0] : at::cat(logits_parts, /*dim=*/0);

    // ---- Sample one token per row.
    std::vector<double> uniforms;
    uniforms.reserve(rows.size());
    for (int64_t s : rows) {
      const GeneratedSample& sample = slots_[s].sample;
      uniforms.push_back(SampleUniform(params.seed, sample.prompt_index, sample.sample_index,
                                       static_cast<int64_t>(sample.tokens.size())));
    }
    at::Tensor logq = ProcessedLogProbs(logits, params);
    at::Tensor tokens = DrawTokens(logq, uniforms);
    at::Tensor logp = kernels::TokenLogProbs(logits, tokens).contiguous();
    at::Tensor logq_token = logq.gather(1, tokens.unsqueeze(1)).squeeze(1).contiguous();
    tokens = tokens.contiguous();
    const int64_t* token_data = tokens.data_ptr<int64_t>();
    const float* logp_data = logp.data_ptr<float>();
    const float* logq_data = logq_token.data_ptr<float>();
    stats_.generated_tokens += static_cast<int64_t>(rows.size());

    for (size_t r = 0; r < rows.size(); ++r) {
      const int64_t s = rows[r];
      Slot& slot = slots_[s];
      GeneratedSample& sample = slot.sample;
      const int32_t token = static_cast<int32_t>(token_data[r]);
      sample.tokens.push_back(token);
      sample.logprobs.push_back(logp_data[r]);
      sample.sampling_logprobs.push_back(logq_data[r]);
      sample.weight_versions.push_back(version);
      slot.uncached.assign(1, token);
      const int64_t generated = static_cast<int64_t>(sample.tokens.size());
      const bool stopped = std::find(params.stop_token_ids.begin(), params.stop_token_ids.end(),
                                     token) != params.stop_token_ids.end();
      const bool full =
          generated >= params.max_new_tokens ||
          static_cast<int64_t>(slot.prompt->size()) + generated >= options_.max_seq_len;
      if (stopped || full) {
        sample.finish_reason = stopped ? FinishReason::kStop : FinishReason::kLength;
        finish(slot);
        slot = Slot();
        cache_->ResetSlot(s);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace troupe::rollout
