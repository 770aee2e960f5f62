#include "models/model_config.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "models/config_json.h"
#include "nlohmann/json.hpp"

namespace troupe {
namespace models {
namespace {

using Json = nlohmann::json;

absl::Status CheckPositive(const ConfigKeys& keys, absl::string_view key, int64_t value) {
  if (value <= 0) return keys.Error(key, absl::StrCat("must be positive, got ", value));
  return absl::OkStatus();
}

absl::Status CheckTokenId(const ConfigKeys& keys, absl::string_view key, int64_t id,
                          int64_t vocab_size) {
  if (id < 0 || id >= vocab_size) {
    return keys.Error(key, absl::StrCat("token id ", id, " is outside the vocabulary [0, ",
                                        vocab_size, ") given by vocab_size"));
  }
  return absl::OkStatus();
}

bool SupportedModelType(const std::string& model_type) {
  return model_type == "llama" || model_type == "qwen2" || model_type == "qwen3";
}

std::string UnsupportedModelType(const std::string& model_type) {
  return absl::StrCat("unsupported model type \"", model_type,
                      "\" (supported: \"llama\", \"qwen2\", \"qwen3\")");
}

std::string DefaultArchitecture(const std::string& model_type, bool classifier) {
  const char* base = model_type == "qwen2" ? "Qwen2" : model_type == "qwen3" ? "Qwen3" : "Llama";
  return absl::StrCat(base, classifier ? "ForSequenceClassification" : "ForCausalLM");
}

// rope_scaling: null is handled by the caller; {"rope_type"|"type": "default"} means none.
absl::StatusOr<std::optional<RopeScaling>> ParseRopeScaling(const ConfigKeys& keys,
                                                            const Json& scaling) {
  if (!scaling.is_object()) {
    return keys.Error("rope_scaling",
                      absl::StrCat("must be an object or null, got ", scaling.dump()));
  }
  std::string type;
  for (const char* key : {"rope_type", "type"}) {
    auto it = scaling.find(key);
    if (it == scaling.end() || it->is_null()) continue;
    if (!it->is_string()) {
      return keys.Error("rope_scaling", absl::StrCat("'", key, "' must be a string"));
    }
    if (!type.empty() && type != it->get<std::string>()) {
      return keys.Error("rope_scaling",
                        absl::StrCat("'rope_type' and 'type' disagree: ", scaling.dump()));
    }
    type = it->get<std::string>();
  }
  if (type.empty()) return keys.Error("rope_scaling", "needs 'rope_type' (or 'type')");
  if (type == "default" && scaling.size() == 1) return std::optional<RopeScaling>();
  if (type != "llama3") {
    return keys.Error("rope_scaling", absl::StrCat("RoPE scaling type \"", type,
                                                   "\" is not supported (only \"llama3\")"));
  }
  RopeScaling r;
  r.rope_type = type;
  for (auto it = scaling.begin(); it != scaling.end(); ++it) {
    const std::string& key = it.key();
    if (key == "rope_type" || key == "type") continue;
    const Json& v = it.value();
    if (key == "original_max_position_embeddings") {
      if (!v.is_number_integer()) {
        return keys.Error("rope_scaling", absl::StrCat("'", key, "' must be an integer"));
      }
      r.original_max_position_embeddings = v.get<int64_t>();
      continue;
    }
    double* field = key == "factor"             ? &r.factor
                    : key == "low_freq_factor"  ? &r.low_freq_factor
                    : key == "high_freq_factor" ? &r.high_freq_factor
                                                : nullptr;
    if (field == nullptr) {
      return keys.Error("rope_scaling",
                        absl::StrCat("key '", key, "' is not supported for type llama3"));
    }
    if (!v.is_number()) {
      return keys.Error("rope_scaling", absl::StrCat("'", key, "' must be a number"));
    }
    *field = v.get<double>();
  }
  for (const char* key :
       {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}) {
    if (!scaling.contains(key)) {
      return keys.Error("rope_scaling", absl::StrCat("llama3 scaling needs '", key, "'"));
    }
  }
  return std::optional<RopeScaling>(r);
}

}  // namespace

absl::Status ModelConfig::Validate(absl::string_view source_name) const {
  Json empty = Json::object();
  ConfigKeys keys(empty, source_name);
  if (!SupportedModelType(model_type)) {
    return keys.Error("model_type", UnsupportedModelType(model_type));
  }
  TROUPE_RETURN_IF_ERROR(CheckPositive(keys, "vocab_size", vocab_size));
  TROUPE_RETURN_IF_ERROR(CheckPositive(keys, "hidden_size", hidden_size));
  TROUPE_RETURN_IF_ERROR(CheckPositive(keys, "intermediate_size", intermediate_size));
  TROUPE_RETURN_IF_ERROR(CheckPositive(keys, "num_hidden_layers", num_hidden_layers));
  TROUPE_RETURN_IF_ERROR(CheckPositive(keys, "num_attention_heads", num_attention_heads));
  TROUPE_RETURN_IF_ERROR(CheckPositive(keys, "num_key_value_heads", num_key_value_heads));
  TROUPE_RETURN_IF_ERROR(CheckPositive(keys, "max_position_embeddings", max_position_embeddings));
  if (explicit_head_dim.has_value()) {
    TROUPE_RETURN_IF_ERROR(CheckPositive(keys, "head_dim", *explicit_head_dim));
  } else if (hidden_size % num_attention_heads != 0) {
    return keys.Error("num_attention_heads",
                      absl::StrCat("hidden_size ", hidden_size, " is not divisible by ",
                                   "num_attention_heads ", num_attention_heads));
  }
  if (num_attention_heads % num_key_value_heads != 0) {
    return keys.Error(
        "num_key_value_heads",
        absl::StrCat("num_attention_heads ", num_attention_heads,
                     " is not divisible by num_key_value_heads ", num_key_value_heads));
  }
  if (head_dim() % 2 != 0) {
    if (explicit_head_dim.has_value()) {
      return keys.Error(
          "head_dim", absl::StrCat("head_dim ", head_dim(), " must be even for rotary embeddings"));
    }
    return keys.Error("num_attention_heads",
                      absl::StrCat("head_dim = hidden_size / num_attention_heads = ", head_dim(),
                                   " must be even for rotary embeddings"));
  }
  if (rope_scaling.has_value()) {
    const RopeScaling& r = *rope_scaling;
    if (r.rope_type != "llama3") {
      return keys.Error("rope_scaling", absl::StrCat("RoPE scaling type \"", r.rope_type,
                                                     "\" is not supported (only \"llama3\")"));
    }
    if (!(r.factor >= 1.0)) {
      return keys.Error("rope_scaling", absl::StrCat("factor must be at least 1, got ", r.factor));
    }
    if (!(r.low_freq_factor > 0) || !(r.high_freq_factor > r.low_freq_factor)) {
      return keys.Error("rope_scaling",
                        absl::StrCat("need 0 < low_freq_factor < high_freq_factor, got ",
                                     r.low_freq_factor, " and ", r.high_freq_factor));
    }
    if (r.original_max_position_embeddings <= 0) {
      return keys.Error("rope_scaling",
                        absl::StrCat("original_max_position_embeddings must be positive, got ",
                                     r.original_max_position_embeddings));
    }
  }
  if (!(rope_theta > 0)) {
    return keys.Error("rope_theta", absl::StrCat("must be positive, got ", rope_theta));
  }
  if (!(rms_norm_eps > 0)) {
    return keys.Error("rms_norm_eps", absl::StrCat("must be positive, got ", rms_norm_eps));
  }
  if (!(initializer_range > 0)) {
    return keys.Error("initializer_range",
                      absl::StrCat("must be positive, got ", initializer_range));
  }
  if (hidden_act != "silu") {
    return keys.Error("hidden_act",
                      absl::StrCat("unsupported activation \"", hidden_act, "\" (only \"silu\")"));
  }
  if (torch_dtype != "float32" && torch_dtype != "float16" && torch_dtype != "bfloat16") {
    return keys.Error("torch_dtype", absl::StrCat("unsupported dtype \"", torch_dtype,
                                                  "\" (float32, float16 or bfloat16)"));
  }
  if (model_type == "qwen2" && !attention_bias) {
    return keys.Error("attention_bias", "qwen2 always has q/k/v biases; it cannot be false");
  }
  if (bos_token_id.has_value()) {
    TROUPE_RETURN_IF_ERROR(CheckTokenId(keys, "bos_token_id", *bos_token_id, vocab_size));
  }
  if (pad_token_id.has_value()) {
    TROUPE_RETURN_IF_ERROR(CheckTokenId(keys, "pad_token_id", *pad_token_id, vocab_size));
  }
  for (int64_t id : eos_token_ids) {
    TROUPE_RETURN_IF_ERROR(CheckTokenId(keys, "eos_token_id", id, vocab_size));
  }
  if (num_labels.has_value())
    TROUPE_RETURN_IF_ERROR(CheckPositive(keys, "num_labels", *num_labels));
  return absl::OkStatus();
}

std::string ModelConfig::ToJson() const {
  Json j = Json::object();
  std::vector<std::string> archs = architectures;
  if (archs.empty()) archs.push_back(DefaultArchitecture(model_type, num_labels.has_value()));
  j["architectures"] = archs;
  j["model_type"] = model_type;
  j["vocab_size"] = vocab_size;
  j["hidden_size"] = hidden_size;
  j["intermediate_size"] = intermediate_size;
  j["num_hidden_layers"] = num_hidden_layers;
  j["num_attention_heads"] = num_attention_heads;
  j["num_key_value_heads"] = num_key_value_heads;
  j["max_position_embeddings"] = max_position_embeddings;
  j["rope_theta"] = rope_theta;
  j["rms_norm_eps"] = rms_norm_eps;
  j["initializer_range"] = initializer_range;
  j["tie_word_embeddings"] = tie_word_embeddings;
  j["attention_bias"] = attention_bias;
  j["hidden_act"] = hidden_act;
  j["torch_dtype"] = torch_dtype;
  j["head_dim"] = head_dim();
  if (rope_scaling.has_value()) {
    j["rope_scaling"] = {
        {"rope_type", rope_scaling->rope_type},
        {"factor", rope_scaling->factor},
        {"low_freq_factor", rope_scaling->low_freq_factor},
        {"high_freq_factor", rope_scaling->high_freq_factor},
        {"original_max_position_embeddings", rope_scaling->original_max_position_embeddings}};
  } else {
    j["rope_scaling"] = nullptr;
  }
  j["use_cache"] = true;
  j["mlp_bias"] = false;
  if (model_type != "llama") j["use_sliding_window"] = false;
  WriteTokenIds(bos_token_id, pad_token_id, eos_token_ids, &j);
  if (num_labels.has_value()) j["num_labels"] = *num_labels;
  return j.dump(2) + "\n";
}

bool operator==(const RopeScaling& a, const RopeScaling& b) {
  return a.rope_type == b.rope_type && a.factor == b.factor &&
         a.low_freq_factor == b.low_freq_factor && a.high_freq_factor == b.high_freq_factor &&
         a.original_max_position_embeddings == b.original_max_position_embeddings;
}

bool operator==(const ModelConfig& a, const ModelConfig& b) {
  return a.model_type == b.model_type && a.architectures == b.architectures &&
         a.vocab_size == b.vocab_size && a.hidden_size == b.hidden_size &&
         a.intermediate_size == b.intermediate_size && a.num_hidden_layers == b.num_hidden_layers &&
         a.num_attention_heads == b.num_attention_heads &&
         a.num_key_value_heads == b.num_key_value_heads &&
         a.explicit_head_dim == b.explicit_head_dim && a.rope_scaling == b.rope_scaling &&
         a.max_position_embeddings == b.max_position_embeddings && a.rope_theta == b.rope_theta &&
         a.rms_norm_eps == b.rms_norm_eps && a.initializer_range == b.initializer_range &&
         a.tie_word_embeddings == b.tie_word_embeddings && a.attention_bias == b.attention_bias &&
         a.hidden_act == b.hidden_act && a.torch_dtype == b.torch_dtype &&
         a.bos_token_id == b.bos_token_id && a.pad_token_id == b.pad_token_id &&
         a.eos_token_ids == b.eos_token_ids && a.num_labels == b.num_labels;
}

absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view json_text,
                                             absl::string_view source_name) {
  TROUPE_ASSIGN_OR_RETURN(const Json root, ParseConfigObject(json_text, source_name));
  ConfigKeys keys(root, source_name);
  ModelConfig c;

  TROUPE_ASSIGN_OR_RETURN(std::optional<std::string> model_type, keys.String("model_type"));
  if (!model_type.has_value()) return keys.Missing("model_type");
  c.model_type = *model_type;
  if (!SupportedModelType(c.model_type)) {
    return keys.Error("model_type", UnsupportedModelType(c.model_type));
  }
  const bool qwen2 = c.model_type == "qwen2";
  const bool llama = c.model_type == "llama";

  if (const Json* archs = keys.Find("architectures")) {
    if (!archs->is_array()) return keys.Error("architectures", "must be a list of strings");
    for (const Json& a : *archs) {
      if (!a.is_string()) return keys.Error("architectures", "must be a list of strings");
      c.architectures.push_back(a.get<std::string>());
    }
  }

  TROUPE_ASSIGN_OR_RETURN(c.vocab_size, keys.RequiredInt("vocab_size"));
  TROUPE_ASSIGN_OR_RETURN(c.hidden_size, keys.RequiredInt("hidden_size"));
  TROUPE_ASSIGN_OR_RETURN(c.intermediate_size, keys.RequiredInt("intermediate_size"));
  TROUPE_ASSIGN_OR_RETURN(c.num_hidden_layers, keys.RequiredInt("num_hidden_layers"));
  TROUPE_ASSIGN_OR_RETURN(c.num_attention_heads, keys.RequiredInt("num_attention_heads"));
  c.num_key_value_heads = c.num_attention_heads;
  TROUPE_RETURN_IF_ERROR(keys.OptionalInt("num_key_value_heads", &c.num_key_value_heads));
  c.max_position_embeddings = llama ? 2048 : 32768;
  TROUPE_RETURN_IF_ERROR(keys.OptionalInt("max_position_embeddings", &c.max_position_embeddings));

  TROUPE_RETURN_IF_ERROR(keys.OptionalDouble("rope_theta", &c.rope_theta));
  TROUPE_RETURN_IF_ERROR(keys.OptionalDouble("rms_norm_eps", &c.rms_norm_eps));
  TROUPE_RETURN_IF_ERROR(keys.OptionalDouble("initializer_range", &c.initializer_range));
  TROUPE_RETURN_IF_ERROR(keys.OptionalBool("tie_word_embeddings", &c.tie_word_embeddings));

  c.attention_bias = qwen2;
  TROUPE_RETURN_IF_ERROR(keys.OptionalBool("attention_bias", &c.attention_bias));

  TROUPE_ASSIGN_OR_RETURN(std::optional<std::string> act, keys.String("hidden_act"));
  if (act.has_value()) c.hidden_act = *act;

  // transformers >= 4.56 writes "dtype"; older versions "torch_dtype".
  TROUPE_ASSIGN_OR_RETURN(std::optional<std::string> dtype, keys.String("torch_dtype"));
  if (dtype.has_value()) {
    c.torch_dtype = *dtype;
  } else {
    TROUPE_ASSIGN_OR_RETURN(dtype, keys.String("dtype"));
    if (dtype.has_value()) c.torch_dtype = *dtype;
  }

  TROUPE_ASSIGN_OR_RETURN(c.bos_token_id, keys.Int("bos_token_id"));
  TROUPE_ASSIGN_OR_RETURN(c.pad_token_id, keys.Int("pad_token_id"));
  if (const Json* eos = keys.Find("eos_token_id")) {
    if (eos->is_number_integer()) {
      c.eos_token_ids.push_back(eos->get<int64_t>());
    } else if (eos->is_array()) {
      for (const Json& id : *eos) {
        if (!id.is_number_integer()) {
          return keys.Error("eos_token_id", "must be an integer or a list of integers");
        }
        c.eos_token_ids.push_back(id.get<int64_t>());
      }
    } else {
      return keys.Error(
          "eos_token_id",
          absl::StrCat("must be an integer or a list of integers, got ", eos->dump()));
    }
  }
  TROUPE_ASSIGN_OR_RETURN(c.num_labels, keys.Int("num_labels"));

  if (const Json* scaling = keys.Find("rope_scaling")) {
    TROUPE_ASSIGN_OR_RETURN(c.rope_scaling, ParseRopeScaling(keys, *scaling));
  }
  TROUPE_ASSIGN_OR_RETURN(std::optional<int64_t> head_dim, keys.Int("head_dim"));
  // A head_dim equal to the derived one is the same model: kept implicit, so configs compare equal.
  if (head_dim.has_value() &&
      !(c.num_attention_heads > 0 && c.hidden_size % c.num_attention_heads == 0 &&
        *head_dim == c.hidden_size / c.num_attention_heads)) {
    c.explicit_head_dim = *head_dim;
  }

  // Architecture options this implementation does not have: refuse rather than compute wrongly.
  TROUPE_ASSIGN_OR_RETURN(std::optional<bool> sliding, keys.Bool("use_sliding_window"));
  if (sliding.value_or(false)) {
    return keys.Error("use_sliding_window", "sliding-window attention is not supported");
  }
  if (const Json* window = keys.Find("sliding_window"); window != nullptr && llama) {
    return keys.Error(
        "sliding_window",
        absl::StrCat("sliding-window attention is not supported (got ", window->dump(),
                     "; llama has no use_sliding_window to disable it)"));
  }
  if (const Json* layer_types = keys.Find("layer_types")) {
    if (!layer_types->is_array()) return keys.Error("layer_types", "must be a list of strings");
    for (const Json& t : *layer_types) {
      if (!t.is_string() || t.get<std::string>() != "full_attention") {
        return keys.Error(
            "layer_types",
            absl::StrCat("only \"full_attention\" layers are supported, got ", t.dump()));
      }
    }
  }
  TROUPE_ASSIGN_OR_RETURN(std::optional<bool> mlp_bias, keys.Bool("mlp_bias"));
  if (mlp_bias.value_or(false)) return keys.Error("mlp_bias", "MLP biases are not supported");

  TROUPE_RETURN_IF_ERROR(c.Validate(source_name));
  return c;
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot open: ", std::strerror(err)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::InvalidArgumentError(absl::StrCat(path, ": read failed"));
  return ParseModelConfig(text.str(), path);
}

}  // namespace models
}  // namespace troupe
