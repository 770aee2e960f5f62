#include "models/weight_shapes.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"

namespace troupe {
namespace models {
namespace {

using Json = nlohmann::json;

constexpr char kSingleFile[] = "model.safetensors";
constexpr char kIndexFile[] = "model.safetensors.index.json";

bool IsDirectory(const std::string& path) {
  struct stat info = {};
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

bool Exists(const std::string& path) {
  struct stat info = {};
  return ::stat(path.c_str(), &info) == 0;
}

std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
}

// The tensors' shapes from the header of the safetensors file `path`.
absl::StatusOr<WeightShapes> ReadFileShapes(const std::string& path) {
  TROUPE_ASSIGN_OR_RETURN(std::string length_bytes, ReadRegularFilePrefix(path, 8));
  auto error = [&path](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", why));
  };
  if (length_bytes.size() < 8) return error("shorter than a safetensors header");
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<unsigned char>(length_bytes[i]);
  if (length > kMaxSafetensorsHeaderBytes) {
    return error(absl::StrCat("header length ", length, " is more than the ",
                              kMaxSafetensorsHeaderBytes >> 20,
                              " MiB a safetensors header may be"));
  }
  TROUPE_ASSIGN_OR_RETURN(std::string bytes,
                          ReadRegularFilePrefix(path, static_cast<size_t>(8 + length)));
  if (bytes.size() < 8 + length) {
    return error(absl::StrCat("header length ", length, " exceeds the file"));
  }
  const Json header = Json::parse(bytes.begin() + 8, bytes.end(), nullptr,
                                  /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) {
    return error("the header is not a JSON object (not a safetensors file)");
  }
  WeightShapes shapes;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const Json& entry = it.value();
    const auto shape = entry.is_object() ? entry.find("shape") : entry.end();
    if (!entry.is_object() || shape == entry.end() || !shape->is_array()) {
      return error(absl::StrCat("tensor '", it.key(), "': no shape"));
    }
    std::vector<int64_t> dims;
    for (const Json& d : *shape) {
      if (!d.is_number_unsigned()) {
        return error(absl::StrCat("tensor '", it.key(), "': shape is not a list of sizes"));
      }
      dims.push_back(static_cast<int64_t>(d.get<uint64_t>()));
    }
    shapes[it.key()] = std::move(dims);
  }
  return shapes;
}

absl::StatusOr<WeightShapes> ReadIndexShapes(const std::string& path) {
  TROUPE_ASSIGN_OR_RETURN(std::string text, ReadRegularFile(path, kMaxSafetensorsIndexBytes));
  auto error = [&path](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", why));
  };
  const Json root = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) return error("not a JSON object");
  const auto weight_map = root.find("weight_map");
  if (weight_map == root.end() || !weight_map->is_object()) {
    return error("field 'weight_map' must be an object of tensor name -> shard file");
  }
  std::map<std::string, std::vector<std::string>> tensors_of;  // shard -> its tensors
  for (auto it = weight_map->begin(); it != weight_map->end(); ++it) {
    if (!it.value().is_string()) {
      return error(absl::StrCat("field 'weight_map': entry '", it.key(), "' must be a file name"));
    }
    const std::string shard = it.value().get<std::string>();
    if (shard.empty() || absl::StrContains(shard, "/") || shard == "." || shard == "..") {
      return error(absl::StrCat("field 'weight_map': tensor '", it.key(), "' names shard \"", shard,
                                "\", which is not a file beside the index"));
    }
    tensors_of[shard].push_back(it.key());
  }
  WeightShapes shapes;
  const std::string dir = DirName(path);
  for (const auto& [shard, names] : tensors_of) {
    absl::StatusOr<WeightShapes> in_shard = ReadFileShapes(absl::StrCat(dir, "/", shard));
    if (!in_shard.ok()) {
      return absl::Status(in_shard.status().code(),
                          absl::StrCat(path, ": shard: ", in_shard.status().message()));
    }
    for (const std::string& name : names) {
      auto found = in_shard->find(name);
      if (found == in_shard->end()) {
        return error(absl::StrCat("weight_map puts tensor '", name, "' in '", shard,
                                  "' but that shard has no such tensor"));
      }
      shapes[name] = found->second;
    }
  }
  return shapes;
}

bool IsRotaryBuffer(const std::string& name) { return absl::EndsWith(name, "rotary_emb.inv_freq"); }

}  // namespace

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::StatusOr<WeightShapes> ReadSafetensorsShapes(const std::string& path) {
  if (IsDirectory(path)) {
    const std::string single = absl::StrCat(path, "/", kSingleFile);
    if (Exists(single)) return ReadFileShapes(single);
    const std::string index = absl::StrCat(path, "/", kIndexFile);
    if (Exists(index)) return ReadIndexShapes(index);
    return absl::NotFoundError(
        absl::StrCat(path, ": directory has neither ", kSingleFile, " nor ", kIndexFile));
  }
  if (!Exists(path)) return absl::NotFoundError(absl::StrCat(path, ": not found"));
  if (absl::EndsWith(path, ".json")) return ReadIndexShapes(path);
  return ReadFileShapes(path);
}

WeightShapes CausalLmWeightShapes(const ModelConfig& c) {
  WeightShapes shapes;
  const int64_t hidden = c.hidden_size;
  const int64_t head_dim = c.head_dim();
  const int64_t kv_heads =
      c.num_key_value_heads > 0 ? c.num_key_value_heads : c.num_attention_heads;
  const int64_t q_dim = c.num_attention_heads * head_dim;
  const int64_t kv_dim = kv_heads * head_dim;
  shapes["model.embed_tokens.weight"] = {c.vocab_size, hidden};
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string layer = absl::StrCat("model.layers.", i, ".");
    const std::string attn = layer + "self_attn.";
    shapes[attn + "q_proj.weight"] = {q_dim, hidden};
    shapes[attn + "k_proj.weight"] = {kv_dim, hidden};
    shapes[attn + "v_proj.weight"] = {kv_dim, hidden};
    shapes[attn + "o_proj.weight"] = {hidden, q_dim};
    if (c.attention_bias) {
      shapes[attn + "q_proj.bias"] = {q_dim};
      shapes[attn + "k_proj.bias"] = {kv_dim};
      shapes[attn + "v_proj.bias"] = {kv_dim};
    }
    if (c.o_proj_bias()) shapes[attn + "o_proj.bias"] = {hidden};
    if (c.qk_norm()) {
      shapes[attn + "q_norm.weight"] = {head_dim};
      shapes[attn + "k_norm.weight"] = {head_dim};
    }
    shapes[layer + "mlp.gate_proj.weight"] = {c.intermediate_size, hidden};
    shapes[layer + "mlp.up_proj.weight"] = {c.intermediate_size, hidden};
    shapes[layer + "mlp.down_proj.weight"] = {hidden, c.intermediate_size};
    shapes[layer + "input_layernorm.weight"] = {hidden};
    shapes[layer + "post_attention_layernorm.weight"] = {hidden};
  }
  shapes["model.norm.weight"] = {hidden};
  if (!c.tie_word_embeddings) shapes["lm_head.weight"] = {c.vocab_size, hidden};
  return shapes;
}

std::vector<std::string> CausalLmShapeMismatches(const WeightShapes& file,
                                                 const ModelConfig& config, bool value_model_too,
                                                 size_t max_lines) {
  WeightShapes expected = CausalLmWeightShapes(config);
  // A value model's directory: its value head instead of the causal LM's output layer.
  const bool value_model = value_model_too && file.count("score.weight") > 0;
  if (value_model_too) expected.erase("lm_head.weight");  // a value model reads no output layer
  if (value_model) expected["score.weight"] = {1, config.hidden_size};
  std::vector<std::string> problems;
  for (const auto& [name, shape] : expected) {
    auto found = file.find(name);
    if (found == file.end()) {
      problems.push_back(absl::StrCat(name, " is missing from the checkpoint"));
    } else if (found->second != shape) {
      problems.push_back(absl::StrCat(name, " is ", ShapeString(found->second),
                                      " in the checkpoint, ", ShapeString(shape),
                                      " for the config"));
    }
  }
  for (const auto& [name, shape] : file) {
    if (expected.count(name) > 0 || IsRotaryBuffer(name)) continue;
    if (name == "lm_head.weight" && (config.tie_word_embeddings || value_model_too)) continue;
    problems.push_back(absl::StrCat(name, " ", ShapeString(shape),
                                    " in the checkpoint has no place in a model of the config"));
  }
  std::sort(problems.begin(), problems.end());
  if (problems.size() > max_lines) {
    const size_t more = problems.size() - max_lines;
    problems.resize(max_lines);
    problems.push_back(absl::StrCat("... and ", more, " more"));
  }
  return problems;
}

}  // namespace models
}  // namespace troupe
