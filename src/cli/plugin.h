// The kubectl plugin's front end: `kubectl gpu-guardian [flags] COMMAND [flags]`. kubectl runs
// a plugin with the user's arguments as they were typed, so kubectl's own global flags
// (--kubeconfig, --context, -n/--namespace, --request-timeout, -s/--server) may come before or
// after the command, in `--flag value` or `--flag=value` form; so may -o and the log flags.
#pragma once

#include <iosfwd>
#include <stop_token>
#include <string>
#include <vector>

namespace gg::cli {

inline constexpr char kPluginName[] = "kubectl gpu-guardian";

// The commands, in usage order.
const std::vector<std::string>& PluginCommands();

// Runs the plugin; returns the exit status. `args` excludes argv[0].
int RunPlugin(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
              std::stop_token stop, bool stdout_is_tty);

}  // namespace gg::cli
