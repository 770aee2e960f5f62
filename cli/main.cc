// The `troupe` command: one binary for every process and user command.
//
//   troupe version          prints troupe's version
//   troupe doctor [--json]  probes what this machine gives troupe (see cli/doctor.h)
#include <cstdio>
#include <string>

#include "CLI/CLI.hpp"
#include "cli/doctor.h"
#include "cli/version.h"

int main(int argc, char** argv) {
  CLI::App app{"troupe: a native C++ runtime for asynchronous RL post-training"};
  app.require_subcommand(1);

  CLI::App* version = app.add_subcommand("version", "Print troupe's version");
  version->callback([] { std::printf("troupe %s\n", troupe::kTroupeVersion); });

  bool doctor_json = false;
  int doctor_exit = 0;
  CLI::App* doctor = app.add_subcommand(
      "doctor", "Probe this machine: LibTorch, BLAS and matmul GFLOP/s, CPUs, memory, CUDA, NCCL");
  doctor->add_flag("--json", doctor_json, "Print one JSON object instead of text");
  doctor->callback([&] { doctor_exit = troupe::RunDoctor(doctor_json); });

  CLI11_PARSE(app, argc, argv);
  return doctor_exit;
}
