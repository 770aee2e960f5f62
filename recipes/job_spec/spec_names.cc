#include "recipes/job_spec/spec_names.h"

#include "google/protobuf/descriptor.h"

namespace troupe::recipes {
namespace job_spec_internal {
namespace {

// The spellings of an enum of proto/actor_config.proto, in declaration order: its values'
// (spelling) options, so each name is written once, beside the value it names.
template <typename E>
const NameTable<E>& Spellings() {
  static const NameTable<E>* const table = [] {
    auto* t = new NameTable<E>;
    const google::protobuf::EnumDescriptor* d = google::protobuf::GetEnumDescriptor<E>();
    for (int i = 0; i < d->value_count(); ++i) {
      const google::protobuf::EnumValueDescriptor* v = d->value(i);
      t->emplace_back(v->options().GetExtension(proto::spelling), static_cast<E>(v->number()));
    }
    return t;
  }();
  return *table;
}

}  // namespace

const NameTable<AdvEstimator>& AdvEstimators() { return Spellings<AdvEstimator>(); }
const NameTable<KlType>& KlTypes() { return Spellings<KlType>(); }
const NameTable<LossAggMode>& LossAggModes() { return Spellings<LossAggMode>(); }
const NameTable<PolicyLoss>& PolicyLosses() { return Spellings<PolicyLoss>(); }
const NameTable<OffPolicyMode>& OffPolicyModes() { return Spellings<OffPolicyMode>(); }
const NameTable<LrSchedule>& LrSchedules() { return Spellings<LrSchedule>(); }
const NameTable<Sharding>& Shardings() { return Spellings<Sharding>(); }

const NameTable<PreferenceLoss>& PreferenceLosses() {
  static const NameTable<PreferenceLoss>* const table = [] {
    auto* t = new NameTable<PreferenceLoss>;
    for (const auto& entry : Spellings<PreferenceLoss>()) {
      if (entry.second != proto::PREFERENCE_LOSS_NONE) t->push_back(entry);
    }
    return t;
  }();
  return *table;
}

const NameTable<KlCtrlType>& KlCtrlTypes() {
  static const NameTable<KlCtrlType> table = {{"fixed", KlCtrlType::kFixed},
                                              {"adaptive", KlCtrlType::kAdaptive}};
  return table;
}

const NameTable<bool>& Samplers() {
  static const NameTable<bool> table = {{"sequential", false}, {"prioritized", true}};
  return table;
}

const NameTable<Truncation>& Truncations() {
  static const NameTable<Truncation> table = {
      {"error", Truncation::kError}, {"left", Truncation::kLeft}, {"right", Truncation::kRight}};
  return table;
}

const NameTable<std::optional<PlacementStrategy>>& PlacementStrategies() {
  static const NameTable<std::optional<PlacementStrategy>>* const table = [] {
    auto* t = new NameTable<std::optional<PlacementStrategy>>;
    const google::protobuf::EnumDescriptor* d =
        google::protobuf::GetEnumDescriptor<PlacementStrategy>();
    for (int i = 0; i < d->value_count(); ++i) {
      t->emplace_back(d->value(i)->name(), static_cast<PlacementStrategy>(d->value(i)->number()));
    }
    return t;
  }();
  return *table;
}

const std::vector<std::pair<absl::string_view, absl::string_view>>& VerlNames() {
  static const std::vector<std::pair<absl::string_view, absl::string_view>> table = {
      {"clip_ratio", "algorithm.clip_eps"},
      {"clip_ratio_low", "algorithm.clip_eps_low"},
      {"clip_ratio_high", "algorithm.clip_eps_high"},
      {"kl_loss_coef", "algorithm.kl.coef"},
      {"kl_loss_type", "algorithm.kl.type"},
      {"use_kl_loss", "algorithm.kl.coef (0 = off)"},
      {"norm_adv_by_std_in_grpo", "algorithm.norm_adv_by_std"},
      {"total_training_steps", "trainer.total_steps"},
      {"test_freq", "trainer.eval_every"},
      {"save_freq", "actors.checkpointer.every_steps"},
      {"max_actor_ckpt_to_keep", "actors.checkpointer.keep"},
      {"ppo_micro_batch_size_per_gpu", "trainer.micro_batch_size"},
      {"enable_gradient_checkpointing", "trainer.activation_checkpointing"},
      {"lr_warmup_steps", "trainer.warmup_steps"},
      {"warmup_style", "trainer.lr_schedule"},
      {"response_length", "data.max_response_length"},
      {"num_gpus", "actors.<kind>.resources.GPU"},
      {"num_cpus", "actors.<kind>.resources.CPU"},
  };
  return table;
}

}  // namespace job_spec_internal

using job_spec_internal::NameOf;

absl::string_view ModelInitName(ModelInit init) {
  switch (init) {
    case ModelInit::kSft:
      return "sft";
    case ModelInit::kRandom:
      return "random";
    case ModelInit::kPath:
      return "path";
  }
  return "?";
}
absl::string_view AdvEstimatorName(AdvEstimator v) {
  return NameOf(job_spec_internal::AdvEstimators(), v);
}
absl::string_view PolicyLossName(PolicyLoss v) {
  return NameOf(job_spec_internal::PolicyLosses(), v);
}
absl::string_view KlTypeName(KlType v) { return NameOf(job_spec_internal::KlTypes(), v); }
absl::string_view LossAggModeName(LossAggMode v) {
  return NameOf(job_spec_internal::LossAggModes(), v);
}
absl::string_view OffPolicyModeName(OffPolicyMode v) {
  return NameOf(job_spec_internal::OffPolicyModes(), v);
}
absl::string_view LrScheduleName(LrSchedule v) {
  return NameOf(job_spec_internal::LrSchedules(), v);
}
absl::string_view PreferenceLossName(PreferenceLoss v) {
  return NameOf(job_spec_internal::Spellings<PreferenceLoss>(), v);
}
absl::string_view TruncationName(Truncation v) {
  return NameOf(job_spec_internal::Truncations(), v);
}
absl::string_view PlacementStrategyName(PlacementStrategy v) {
  return NameOf(job_spec_internal::PlacementStrategies(), std::optional<PlacementStrategy>(v));
}
absl::string_view KlCtrlTypeName(KlCtrlType v) {
  return NameOf(job_spec_internal::KlCtrlTypes(), v);
}

}  // namespace troupe::recipes
