// kubectl gpu-guardian: flags anywhere → client → status | explain | timeline | release.
#include "cli/plugin.h"

#include <yaml-cpp/yaml.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <set>

#include "cli/release.h"
#include "cli/status.h"
#include "cli/timeline.h"
#include "common/log.h"
#include "common/time_util.h"
#include "k8s/config.h"
#include "k8s/crd_hint.h"
#include "k8s/rest_client.h"

namespace gg::cli {
namespace {

// Flags that take a value (kubectl's globals we honour, and ours), for finding the command
// among the arguments.
const std::set<std::string>& ValueFlags() {
  static const std::set<std::string> kFlags = {
      "--kubeconfig", "--context",  "-n",      "--namespace", "--request-timeout",
      "-s",           "--server",   "-o",      "--output",    "--log-format",
      "--log-level",  "--duration", "--lease", "--reason"};
  return kFlags;
}

// The first argument that is not a flag or a flag's value ("" when none).
std::string FindCommand(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") return i + 1 < args.size() ? args[i + 1] : "";
    if (a.size() > 1 && a[0] == '-') {
      if (a.find('=') == std::string::npos && ValueFlags().count(a)) ++i;  // skip its value
      continue;
    }
    return a;
  }
  return "";
}

std::string CommandList() {
  std::string s;
  for (const auto& c : PluginCommands()) s += (s.empty() ? "" : ", ") + c;
  return s;
}

// kubectl's --request-timeout: "0" (none), a bare number of seconds, or a duration ("5s").
StatusOr<std::chrono::milliseconds> ParseRequestTimeout(const std::string& v) {
  if (!v.empty() && v.find_first_not_of("0123456789") == std::string::npos)
    return std::chrono::milliseconds(std::stoll(v) * 1000);
  auto d = ParseDuration(v);
  if (!d.ok())
    return InvalidArgumentError("--request-timeout: want a duration like 5s or 1m, or 0, got \"" +
                                v + "\"");
  return std::chrono::duration_cast<std::chrono::milliseconds>(*d);
}

// The kubeconfig file kubectl would read: the flag, else the first existing file of
// $KUBECONFIG, else ~/.kube/config.
std::string KubeconfigPath(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("KUBECONFIG")) {
    std::string list = env;
    size_t start = 0;
    while (start <= list.size()) {
      size_t end = list.find(':', start);
      if (end == std::string::npos) end = list.size();
      std::string p = list.substr(start, end - start);
      if (!p.empty() && std::filesystem::exists(p)) return p;
      start = end + 1;
    }
  }
  if (const char* home = std::getenv("HOME")) {
    std::string p = std::string(home) + "/.kube/config";
    if (std::filesystem::exists(p)) return p;
  }
  return "";
}

YAML::Node ToYaml(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::object: {
      YAML::Node n(YAML::NodeType::Map);
      for (const auto& [k, v] : j.items()) n[k] = ToYaml(v);
      if (j.empty()) n.SetStyle(YAML::EmitterStyle::Flow);  // "{}", not a dangling line
      return n;
    }
    case nlohmann::json::value_t::array: {
      YAML::Node n(YAML::NodeType::Sequence);
      for (const auto& v : j) n.push_back(ToYaml(v));
      if (j.empty()) n.SetStyle(YAML::EmitterStyle::Flow);
      return n;
    }
    case nlohmann::json::value_t::string:
      return YAML::Node(j.get<std::string>());
    case nlohmann::json::value_t::boolean:
      return YAML::Node(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return YAML::Node(j.get<long long>());
    case nlohmann::json::value_t::number_unsigned:
      return YAML::Node(j.get<unsigned long long>());
    case nlohmann::json::value_t::number_float:
      return YAML::Node(j.get<double>());
    default:
      return YAML::Node(YAML::NodeType::Null);
  }
}

std::string RenderYaml(const nlohmann::json& j) {
  YAML::Emitter e;
  e << ToYaml(j);
  return std::string(e.c_str()) + "\n";
}

// The plugin's global flags and the arguments of its commands.
struct PluginFlags {
  std::string kubeconfig, context, ns, server, request_timeout, output = "table";
  std::string lease = "gpu-guardian-operator";
  std::string log_format = "text", log_level = "warn", duration = "60s";
  bool no_color = false, until_recovered = false;
  std::string node;    // explain's and release's argument
  std::string reason;  // release --reason
};

struct PluginSubcommands {
  CLI::App* status;
  CLI::App* explain;
  CLI::App* timeline;
  CLI::App* release;
};

PluginSubcommands DefineFlags(CLI::App& app, PluginFlags& f) {
  app.require_subcommand(0, 1);
  app.add_option("--kubeconfig", f.kubeconfig,
                 "Path to the kubeconfig file (default $KUBECONFIG, ~/.kube/config)");
  app.add_option("--context", f.context, "The kubeconfig context to use");
  app.add_option("-n,--namespace", f.ns,
                 "Namespace of the operator's and agents' Leases (default: found by name)");
  app.add_option("--request-timeout", f.request_timeout,
                 "Time to wait for one API request (e.g. 5s, 1m; 0: no limit)");
  app.add_option("-s,--server", f.server, "API server URL (plain HTTP, e.g. kubectl proxy)");
  app.add_option("-o,--output", f.output, "Output format: table, wide, json, yaml")
      ->check(CLI::IsMember({"table", "wide", "json", "yaml"}))
      ->capture_default_str();
  app.add_option("--lease", f.lease, "Name of the operator's leader-election Lease")
      ->capture_default_str();
  app.add_flag("--no-color", f.no_color, "Never color the output");
  app.add_option("--log-format", f.log_format, "text|json")->capture_default_str();
  app.add_option("--log-level", f.log_level, "debug|info|warn|error")->capture_default_str();

  auto* status = app.add_subcommand(
      "status",
      "Table of GPU nodes: state, GPUs, actions, since, policy, why; the brake and "
      "held-back nodes below it");
  auto* explain =
      app.add_subcommand("explain", "The evidence, the deciding rule and the record for one node");
  explain->add_option("node", f.node, "Node name")->required();
  auto* timeline =
      app.add_subcommand("timeline", "Live story of faults, verdicts, remediation and recovery");
  timeline->add_option("--duration", f.duration, "Stop after this long (e.g. 90s, 5m)")
      ->capture_default_str();
  timeline->add_flag("--until-recovered", f.until_recovered,
                     "Stop once every fenced node has recovered");
  auto* release =
      app.add_subcommand("release",
                         "Hand a node back now: remove gpu-guardian's taint and cordon (never an "
                         "administrator's), lift a quarantine; recorded with the reason");
  release->add_option("node", f.node, "Node name")->required();
  release->add_option("--reason", f.reason, "Why the node is handed back (recorded)")->required();
  for (auto* sub : {status, explain, timeline, release}) sub->fallthrough();
  return {status, explain, timeline, release};
}

// Parses `args` into `app`; returns the exit code when the run ends here (help, a usage error).
std::optional<int> ParseCommandLine(CLI::App& app, const std::vector<std::string>& args,
                                    std::ostream& out, std::ostream& err) {
  // An unknown command is named with the real ones (CLI11 would only say "not expected").
  const std::string command = FindCommand(args);
  if (!command.empty() && std::find(PluginCommands().begin(), PluginCommands().end(), command) ==
                              PluginCommands().end()) {
    err << "error: unknown command \"" << command << "\" for \"" << kPluginName << "\"\n"
        << "Available commands: " << CommandList() << "\n"
        << "Run '" << kPluginName << " --help' for usage.\n";
    return 1;
  }
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 wants them reversed
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    err << "error: " << e.what() << "\nRun '" << kPluginName << " --help' for usage.\n";
    return 1;
  }
  if (app.get_subcommands().empty()) {
    err << "error: a command is needed: " << CommandList() << "\n\n" << app.help();
    return 1;
  }
  return std::nullopt;
}

// Applies --log-level and --log-format; false (with the error on `err`) when either is bad.
bool ApplyLogFlags(const PluginFlags& f, std::ostream& err) {
  LogLevel level;
  if (!Logger::ParseLevel(f.log_level, &level)) {
    err << "error: --log-level: want debug, info, warn or error\n";
    return false;
  }
  Logger::SetGlobalLevel(level);
  if (f.log_format == "json") {
    Logger::SetGlobalFormat(LogFormat::kJson);
  } else if (f.log_format != "text") {
    err << "error: --log-format: want text or json\n";
    return false;
  }
  return true;
}

// A client for the cluster the kubeconfig flags name; null (with the error on `err`) if none.
std::unique_ptr<k8s::RestClient> Connect(const PluginFlags& f, Clock& clock, std::stop_token stop,
                                         std::ostream& err) {
  StatusOr<k8s::ClientConfig> cfg = InvalidArgumentError("unset");
  if (!f.context.empty() && f.server.empty()) {
    const std::string path = KubeconfigPath(f.kubeconfig);
    if (path.empty()) {
      err << "error: --context " << f.context << ": no kubeconfig file found\n";
      return nullptr;
    }
    cfg = k8s::LoadKubeconfig(path, f.context);
  } else {
    cfg = k8s::ResolveConfig(f.kubeconfig, f.server);
  }
  if (!cfg.ok()) {
    err << "error: " << cfg.status().message() << "\n";
    return nullptr;
  }
  if (!f.request_timeout.empty()) {
    auto t = ParseRequestTimeout(f.request_timeout);
    if (!t.ok()) {
      err << "error: " << t.status().message() << "\n";
      return nullptr;
    }
    cfg->timeout = t->count() > 0 ? *t : std::chrono::milliseconds(0);
  }
  k8s::RestClientOptions ro;
  ro.cancel_retries = stop;
  if (!f.request_timeout.empty()) ro.max_attempts = 1;  // the user bounded the wait
  auto client = k8s::RestClient::Create(*cfg, clock, ro);
  if (!client.ok()) {
    err << "error: " << client.status().message() << "\n";
    return nullptr;
  }
  return std::move(*client);
}

int RunStatusCommand(k8s::RestClient& client, Clock& clock, const PluginFlags& f, bool color,
                     std::ostream& out, std::ostream& err) {
  ClusterStatus st;
  auto brakes = CollectBrakes(client);
  if (!brakes.ok()) {
    err << "error: " << brakes.status().message() << "\n";
    return 1;
  }
  st.brakes = std::move(*brakes);
  auto rows = CollectRows(client);
  if (!rows.ok()) {
    err << "error: " << rows.status().message() << "\n";
    return 1;
  }
  st.rows = std::move(*rows);
  const WallTime now = clock.Now();
  st.lease = FindOperatorLease(client, f.ns, f.lease, now);
  if (f.output == "json") {
    out << StatusToJson(st).dump(2) << "\n";
  } else if (f.output == "yaml") {
    out << RenderYaml(StatusToJson(st));
  } else {
    out << RenderTable(st.rows, now, color, f.output == "wide") << RenderBrakes(st);
  }
  if (!st.lease.problem.empty()) {
    err << "error: " << st.lease.problem
        << "\nThe states above are the last the operator wrote and may be stale.\n";
    return 1;
  }
  return 0;
}

int RunExplainCommand(k8s::RestClient& client, Clock& clock, const PluginFlags& f,
                      std::ostream& out, std::ostream& err) {
  auto text = Explain(client, f.node, clock.Now(), f.ns);
  if (!text.ok()) {
    err << "error: " << text.status().message() << "\n";
    return 1;
  }
  out << *text;
  return 0;
}

int RunReleaseCommand(k8s::RestClient& client, Clock& clock, const PluginFlags& f,
                      std::ostream& out, std::ostream& err) {
  auto text = ReleaseNode(client, f.node, f.reason, clock.Now());
  if (!text.ok()) {
    err << "error: " << text.status().message() << "\n";
    return 1;
  }
  out << *text;
  return 0;
}

int RunTimelineCommand(k8s::RestClient& client, Clock& clock, const PluginFlags& f, bool color,
                       std::stop_token stop, std::ostream& out, std::ostream& err) {
  auto d = ParseDuration(f.duration);
  if (!d.ok()) {
    err << "error: --duration: " << d.status().message() << "\n";
    return 1;
  }
  TimelineOptions opts;
  opts.duration = *d;
  opts.until_recovered = f.until_recovered;
  opts.color = color;
  Timeline tl(client, clock, out, opts);
  Status st = tl.Run(stop);
  out << "\nMeasured per node (watch delivery times):\n" << tl.Summary();
  if (!st.ok()) {
    err << "error: " << st.message() << "\n";
    if (k8s::IsResourceNotServed(st)) err << k8s::MissingResourceHint(k8s::kGpuNodeHealths) << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

const std::vector<std::string>& PluginCommands() {
  static const std::vector<std::string> kCommands = {"status", "explain", "timeline", "release"};
  return kCommands;
}

int RunPlugin(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
              std::stop_token stop, bool stdout_is_tty) {
  CLI::App app{
      "GPU node health as gpu-guardian sees it.\n\nkubectl's global flags (--kubeconfig, "
      "--context, -n, --request-timeout) may be given before or after the command.",
      kPluginName};
  PluginFlags flags;
  const PluginSubcommands cmds = DefineFlags(app, flags);
  if (auto code = ParseCommandLine(app, args, out, err)) return *code;
  if (!ApplyLogFlags(flags, err)) return 1;
  Clock& clock = RealClock::Default();
  std::unique_ptr<k8s::RestClient> client = Connect(flags, clock, stop, err);
  if (!client) return 1;
  const bool color = stdout_is_tty && !flags.no_color;
  if (*cmds.status) return RunStatusCommand(*client, clock, flags, color, out, err);
  if (*cmds.explain) return RunExplainCommand(*client, clock, flags, out, err);
  if (*cmds.release) return RunReleaseCommand(*client, clock, flags, out, err);
  return RunTimelineCommand(*client, clock, flags, color, stop, out, err);
}

}  // namespace gg::cli
