// gpu-guardian-agent: flags -> AgentConfig -> AgentApp -> run until SIGTERM (or --once).
#include <CLI/CLI.hpp>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>

#include "agent/app.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/signals.h"
#include "common/time_util.h"
#include "metrics/registry.h"

namespace {

// Flags kept as text until parsed into the config (lists, durations, logging).
struct TextFlags {
  std::string sources = "nvml", publish = "resource";
  std::string heartbeat = "5m", sweep = "10s", debounce = "200ms", nvml_deadline = "5s";
  std::string log_format = "text", log_level = "info";
};

void AddFlags(CLI::App& app, gg::agent::AgentConfig& cfg, TextFlags& t) {
  app.add_option("--node-name", cfg.node_name, "Node to report for (default $NODE_NAME)");
  app.add_option("--kubeconfig", cfg.kubeconfig, "Kubeconfig file");
  app.add_option("--server", cfg.server, "API server URL (plain HTTP, e.g. kubectl proxy)");
  app.add_option("--source", t.sources, "Sources: nvml,kmsg,file,script")->capture_default_str();
  app.add_option("--file", cfg.file_path, "JSON file for the file source");
  app.add_option("--script", cfg.script_path, "YAML fault timeline for the script source");
  app.add_option("--time-scale", cfg.time_scale, "Script time scale")->capture_default_str();
  app.add_option("--publish", t.publish, "Publish modes: resource,annotation")
      ->capture_default_str();
  app.add_option("--heartbeat", t.heartbeat,
                 "Heartbeat interval: renews the node's Lease (the report is written only when "
                 "its facts change)")
      ->capture_default_str();
  app.add_option("--lease-namespace", cfg.lease_namespace,
                 "Namespace of the node's heartbeat Lease (default: the pod's own, from the "
                 "service-account namespace file, then $POD_NAMESPACE, else gpu-guardian)");
  app.add_option("--sweep-interval", t.sweep, "NVML sweep interval")->capture_default_str();
  app.add_option("--debounce", t.debounce, "Minimum time between writes")->capture_default_str();
  app.add_flag("--once", cfg.once, "Collect once and exit");
  app.add_flag("--print", cfg.print, "Print the report JSON to stdout");
  app.add_option("--metrics-addr", cfg.metrics_addr, "Metrics/health listen address (0: off)")
      ->capture_default_str();
  app.add_option("--xid-ignore", cfg.xid_ignore, "Xids to ignore (comma list)");
  app.add_option("--xid-critical", cfg.xid_critical, "Xids always critical (comma list)");
  app.add_flag("--xid-ignore-dp-defaults", cfg.xid_ignore_dp_defaults,
               "Also ignore the device plugin's application Xids 13,31,43,45,68,109");
  app.add_option("--kmsg-path", cfg.kmsg_path, "Kernel log path")->capture_default_str();
  app.add_flag("--kmsg-from-boot", cfg.kmsg_from_boot, "Read the kernel log from boot");
  app.add_option("--nvml-library", cfg.nvml_library, "NVML library to dlopen")
      ->capture_default_str();
  app.add_option("--nvml-deadline", t.nvml_deadline, "NVML call deadline")->capture_default_str();
  app.add_option("--xid-ring-size", cfg.xid_ring_size, "Xid entries kept in the report")
      ->capture_default_str();
  app.add_option("--log-format", t.log_format, "text|json")->capture_default_str();
  app.add_option("--log-level", t.log_level, "debug|info|warn|error")->capture_default_str();
}

// Logging set up and the text flags parsed into `cfg`; false (message printed) when invalid.
bool ApplyFlags(const TextFlags& t, gg::agent::AgentConfig& cfg) {
  gg::LogLevel level;
  if (!gg::Logger::ParseLevel(t.log_level, &level)) {
    std::cerr << "--log-level: want debug, info, warn or error\n";
    return false;
  }
  gg::Logger::SetGlobalLevel(level);
  if (t.log_format == "json") {
    gg::Logger::SetGlobalFormat(gg::LogFormat::kJson);
  } else if (t.log_format != "text") {
    std::cerr << "--log-format: want text or json\n";
    return false;
  }
  cfg.sources = gg::agent::SplitList(t.sources);
  cfg.publish = gg::agent::SplitList(t.publish);
  gg::Duration deadline{};
  if (!gg::ParseDurationFlag("--heartbeat", t.heartbeat, &cfg.heartbeat) ||
      !gg::ParseDurationFlag("--sweep-interval", t.sweep, &cfg.sweep_interval) ||
      !gg::ParseDurationFlag("--debounce", t.debounce, &cfg.debounce) ||
      !gg::ParseDurationFlag("--nvml-deadline", t.nvml_deadline, &deadline))
    return false;
  cfg.nvml_deadline = std::chrono::duration_cast<std::chrono::milliseconds>(deadline);
  return true;
}

// Runs the agent until SIGTERM (or once); the process exit status.
int Run(const gg::agent::AgentConfig& cfg, std::stop_token stop) {
  gg::Logger log = gg::Logger().WithName("agent");
  auto agent = gg::agent::AgentApp::Create(cfg, gg::RealClock::Default(),
                                           gg::metrics::DefaultRegistry(), log);
  if (!agent.ok()) {
    log.Error("cannot start", {{"error", agent.status().ToString()}});
    return 2;
  }
  if (cfg.once) return (*agent)->RunOnce(std::cout);

  gg::metrics::RegisterProcessMetrics(gg::metrics::DefaultRegistry());
  if (auto st = (*agent)->Start(stop); !st.ok()) {
    log.Error("cannot start", {{"error", st.ToString()}});
    return 2;
  }
  // Everything runs on the agent's threads; main only waits for SIGTERM.
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  cv.wait(lock, stop, [] { return false; });
  log.Info("shutting down");
  (*agent)->Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::stop_token stop = gg::InstallShutdownSignals();
  gg::agent::AgentConfig cfg;
  if (const char* n = std::getenv("NODE_NAME")) cfg.node_name = n;
  TextFlags text;
  CLI::App app{"gpu-guardian-agent: GPU health reports for one node"};
  AddFlags(app, cfg, text);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (!ApplyFlags(text, cfg)) return 2;
  return Run(cfg, stop);
}
