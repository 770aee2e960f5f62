// RewardConfigReader: reads one reward's config object (the JSON a RewardFactory receives) so that
// every reward refuses bad configs the same way.
//
//   TROUPE_ASSIGN_OR_RETURN(RewardConfigReader r,
//                           RewardConfigReader::Create("gsm8k", config, {"method",
//                           "format_score"}));
//   TROUPE_ASSIGN_OR_RETURN(double format_score, r.Number("format_score", 0.0, 0.0, 1.0));
//
// Create refuses a key outside the accepted list (INVALID_ARGUMENT "reward gsm8k: unknown config
// key 'methd' (accepted: format_score, method)"); each getter returns the default for an absent or
// null key and refuses a value of the wrong type or out of range, naming the reward and the key.
//
// Thread-safety: a reader is a value; its getters are const.
#ifndef TROUPE_REWARD_REWARD_CONFIG_H_
#define TROUPE_REWARD_REWARD_CONFIG_H_

#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace troupe::reward {

class RewardConfigReader {
 public:
  // `config` must be null or an object whose keys are all in `accepted`; INVALID_ARGUMENT
  // naming the reward and the first offending key otherwise.
  static absl::StatusOr<RewardConfigReader> Create(std::string reward, const nlohmann::json& config,
                                                   std::vector<std::string> accepted);

  // A number in [min, max].
  absl::StatusOr<double> Number(const std::string& key, double default_value,
                                double min = -std::numeric_limits<double>::infinity(),
                                double max = std::numeric_limits<double>::infinity()) const;
  absl::StatusOr<bool> Bool(const std::string& key, bool default_value) const;
  // A string; `allowed` non-empty restricts it to those values.
  absl::StatusOr<std::string> String(const std::string& key, const std::string& default_value,
                                     const std::vector<std::string>& allowed = {}) const;
  // Whether `key` is present and not null.
  bool Has(const std::string& key) const;

 private:
  RewardConfigReader(std::string reward, nlohmann::json config)
      : reward_(std::move(reward)), config_(std::move(config)) {}
  // The value of `key`, or nullptr when absent or null.
  const nlohmann::json* Find(const std::string& key) const;

  std::string reward_;
  nlohmann::json config_;
};

}  // namespace troupe::reward

#endif  // TROUPE_REWARD_REWARD_CONFIG_H_
