// Extra subcommands of the `troupe` binary, registered by the libraries that implement them, so
// one main() serves binaries with different contents: //cli:troupe (with the RL recipes and
// their LibTorch actors) and the lighter test binaries (tests/cluster) that only host test actors.
//
//   static const bool registered = troupe::RegisterCliCommand(
//       [](CLI::App& app, int* exit_code) { ...app.add_subcommand(...)... });
#ifndef TROUPE_CLI_COMMAND_REGISTRY_H_
#define TROUPE_CLI_COMMAND_REGISTRY_H_

#include <vector>

namespace CLI {
class App;
}

namespace troupe {

// Adds subcommands to `app`; their callbacks set *exit_code.
using CliCommandInstaller = void (*)(CLI::App& app, int* exit_code);

// Call from a static initialiser (the library must be alwayslink).
bool RegisterCliCommand(CliCommandInstaller installer);

// Every installer registered, in registration order.
const std::vector<CliCommandInstaller>& RegisteredCliCommands();

}  // namespace troupe

#endif  // TROUPE_CLI_COMMAND_REGISTRY_H_
