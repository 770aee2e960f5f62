// troupe's own version, printed by `troupe version` and reported by every process.
#ifndef TROUPE_CLI_VERSION_H_
#define TROUPE_CLI_VERSION_H_

namespace troupe {

inline constexpr char kTroupeVersion[] = "0.1.0";

}  // namespace troupe

#endif  // TROUPE_CLI_VERSION_H_
