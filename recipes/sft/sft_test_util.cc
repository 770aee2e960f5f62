#include "recipes/sft/sft_test_util.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace troupe::recipes {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  return absl::StrCat(base != nullptr ? base : "/tmp", "/", name, "_", ::getpid());
}

SftOptions TinySftOptions() {
  SftOptions o;
  o.model.hidden_size = 32;
  o.model.intermediate_size = 64;
  o.model.num_attention_heads = 4;
  o.model.num_key_value_heads = 2;
  o.model.max_position_embeddings = 64;
  o.batch_size = 32;
  o.learning_rate = 1e-2;
  o.threads = 1;
  return o;
}

std::function<void(const std::string&)> CollectLines(std::vector<std::string>* lines) {
  return [lines](const std::string& line) {
    if (lines != nullptr) lines->push_back(line);
  };
}

}  // namespace troupe::recipes
