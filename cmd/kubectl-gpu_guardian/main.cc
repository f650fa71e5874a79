// kubectl gpu-guardian: status | explain NODE | timeline | release NODE (see src/cli/plugin.h).
#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include "cli/plugin.h"
#include "common/signals.h"

int main(int argc, char** argv) {
  auto stop = gg::InstallShutdownSignals();
  std::vector<std::string> args(argv + 1, argv + argc);
  return gg::cli::RunPlugin(args, std::cout, std::cerr, stop, isatty(STDOUT_FILENO) != 0);
}
