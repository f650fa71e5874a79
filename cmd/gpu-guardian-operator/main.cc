// gpu-guardian-operator: flags → config → wiring → run. Everything else lives in src/operator.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "common/clock.h"
#include "common/log.h"
#include "common/signals.h"
#include "common/time_util.h"
#include "k8s/config.h"
#include "k8s/rest_client.h"
#include "metrics/registry.h"
#include "operator/operator.h"

namespace {

// The command line: the operator's config plus the flags that are parsed into it.
struct OperatorFlags {
  gg::op::OperatorConfig cfg;
  std::string kubeconfig, server, log_format = "text", log_level = "info";
  std::string lease_duration = "15s", renew_deadline = "10s", retry_period = "2s";
  std::string drain_poll = "1s";
  std::string mode = "watch", poll_interval = "30s";
};

void DefineFlags(CLI::App& app, OperatorFlags& f) {
  app.add_option("--kubeconfig", f.kubeconfig,
                 "Path to a kubeconfig (default: $KUBECONFIG, "
                 "~/.kube/config, then in-cluster)");
  app.add_option("--server", f.server,
                 "API server URL without auth (kubectl proxy, the simulator)");
  app.add_option("--metrics-addr", f.cfg.metrics_addr,
                 "Listen address of /metrics, /healthz and /readyz")
      ->capture_default_str();
  app.add_flag("--leader-elect", f.cfg.leader_elect,
               "Campaign for a Lease before acting (--leader-elect or --leader-elect=true; "
               "off by default: one replica started by hand acts at once)")
      ->capture_default_str();
  app.add_option("--leader-election-namespace", f.cfg.leader_election_namespace,
                 "Namespace of the leader-election Lease (default: the pod's own, from the "
                 "service-account namespace file, then $POD_NAMESPACE)");
  app.add_option("--leader-election-id", f.cfg.leader_election_id, "Name of the Lease")
      ->capture_default_str();
  app.add_option("--leader-election-identity", f.cfg.identity,
                 "This replica's identity (default: <hostname>_<random>)");
  app.add_option("--lease-duration", f.lease_duration, "Lease duration")->capture_default_str();
  app.add_option("--renew-deadline", f.renew_deadline, "Renew deadline")->capture_default_str();
  app.add_option("--retry-period", f.retry_period, "Retry period")->capture_default_str();
  app.add_option("--agent-lease-namespace", f.cfg.agent_lease_namespace,
                 "Namespace of the agents' per-node heartbeat Leases (default: the pod's own, "
                 "from the service-account namespace file, then $POD_NAMESPACE, else "
                 "gpu-guardian)");
  app.add_option("--workers", f.cfg.workers, "Node reconcilers running in parallel")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option("--max-running-drains", f.cfg.max_running_drains,
                 "Process-wide cap on drains in progress (policies cap their own)")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  app.add_option("--max-concurrent-evictions", f.cfg.max_concurrent_evictions,
                 "Evictions in flight per drain")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--drain-poll-interval", f.drain_poll,
                 "How often a drain re-lists its node's pods")
      ->capture_default_str();
  app.add_option(
         "--mode", f.mode,
         "watch: one LIST, then WATCH (default). poll: a full LIST of every watched "
         "collection each --poll-interval and no watch, as the original design did; for clusters "
         "that forbid watches and for the API-load comparison in bench/")
      ->check(CLI::IsMember({"watch", "poll"}))
      ->capture_default_str();
  app.add_option("--poll-interval", f.poll_interval, "LIST interval in --mode poll")
      ->capture_default_str();
  app.add_option("--log-format", f.log_format, "text | json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  app.add_option("--log-level", f.log_level, "debug | info | warn | error")
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}))
      ->capture_default_str();
}

// Parses the duration flags into the config, checks --mode against --poll-interval and finds
// the Lease namespace; false (the reason printed or logged) when the flags cannot run.
bool ValidateFlags(const CLI::App& app, OperatorFlags& f, gg::Logger& log) {
  if (!gg::ParseDurationFlag("--lease-duration", f.lease_duration, &f.cfg.lease_duration) ||
      !gg::ParseDurationFlag("--renew-deadline", f.renew_deadline, &f.cfg.renew_deadline) ||
      !gg::ParseDurationFlag("--retry-period", f.retry_period, &f.cfg.retry_period) ||
      !gg::ParseDurationFlag("--drain-poll-interval", f.drain_poll, &f.cfg.drain_poll_interval)) {
    return false;
  }
  if (f.mode == "poll") {
    if (!gg::ParseDurationFlag("--poll-interval", f.poll_interval, &f.cfg.poll_interval))
      return false;
  } else if (app.count("--poll-interval") > 0) {
    std::fprintf(stderr, "--poll-interval needs --mode poll\n");
    return false;
  }

  if (app.count("--agent-lease-namespace") == 0) {
    if (auto ns = gg::op::DefaultLeaseNamespace(); ns.ok()) f.cfg.agent_lease_namespace = *ns;
  }
  if (f.cfg.leader_elect && f.cfg.leader_election_namespace.empty()) {
    auto ns = gg::op::DefaultLeaseNamespace();
    if (!ns.ok()) {
      log.Error("cannot start leader election", {{"error", ns.status().message()}});
      return false;
    }
    f.cfg.leader_election_namespace = *ns;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::stop_token stop = gg::InstallShutdownSignals();

  CLI::App app{"gpu-guardian-operator: GPU health decisions and safe remediation"};
  OperatorFlags flags;
  DefineFlags(app, flags);
  CLI11_PARSE(app, argc, argv);
  gg::op::OperatorConfig& cfg = flags.cfg;

  gg::LogLevel level = gg::LogLevel::kInfo;
  gg::Logger::ParseLevel(flags.log_level, &level);
  gg::Logger::SetGlobalLevel(level);
  gg::Logger::SetGlobalFormat(flags.log_format == "json" ? gg::LogFormat::kJson
                                                         : gg::LogFormat::kText);
  gg::Logger log = gg::Logger().WithName("main");
  if (!ValidateFlags(app, flags, log)) return 2;

  auto client_cfg = gg::k8s::ResolveConfig(flags.kubeconfig, flags.server);
  if (!client_cfg.ok()) {
    log.Error("no usable cluster configuration", {{"error", client_cfg.status().ToString()}});
    return 1;
  }
  // Wall time advances only with the monotonic clock, so a system clock set back and then
  // corrected never counts as healthy time (recovery's healthyFor). Never destroyed: threads
  // left behind by a slow shutdown may still read it.
  gg::Clock& clock = *new gg::MonotonicWallClock(gg::RealClock::Default());
  gg::k8s::RestClientOptions client_opts;
  // On SIGTERM no request waits out a Retry-After or a backoff: shutdown stays prompt.
  client_opts.cancel_retries = stop;
  auto client = gg::k8s::RestClient::Create(*client_cfg, clock, client_opts);
  if (!client.ok()) {
    log.Error("cannot create API client", {{"error", client.status().ToString()}});
    return 1;
  }
  gg::metrics::Registry& registry = gg::metrics::DefaultRegistry();
  gg::metrics::RegisterProcessMetrics(registry);

  gg::op::Operator op(**client, clock, registry, cfg);
  log.Info("starting", {{"server", client_cfg->server},
                        {"identity", op.identity()},
                        {"metrics_addr", cfg.metrics_addr},
                        {"leader_elect", cfg.leader_elect},
                        {"lease_namespace", cfg.leader_elect ? cfg.leader_election_namespace : ""},
                        {"mode", flags.mode}});
  gg::Status s = op.Run(stop);
  if (!s.ok()) {
    log.Error("operator stopped", {{"error", s.ToString()}});
    return 1;
  }
  log.Info("stopped cleanly");
  return 0;
}
