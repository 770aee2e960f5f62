#include "cli/command_registry.h"

namespace troupe {
namespace {

std::vector<CliCommandInstaller>& Installers() {
  static auto* installers = new std::vector<CliCommandInstaller>();
  return *installers;
}

}  // namespace

bool RegisterCliCommand(CliCommandInstaller installer) {
  Installers().push_back(installer);
  return true;
}

const std::vector<CliCommandInstaller>& RegisteredCliCommands() { return Installers(); }

}  // namespace troupe
