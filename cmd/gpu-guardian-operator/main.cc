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

int main(int argc, char** argv) {
  std::stop_token stop = gg::InstallShutdownSignals();

  CLI::App app{"gpu-guardian-operator: GPU health decisions and safe remediation"};
  gg::op::OperatorConfig cfg;
  std::string kubeconfig, server, log_format = "text", log_level = "info";
  std::string lease_duration = "15s", renew_deadline = "10s", retry_period = "2s";
  std::string drain_poll = "1s";
  std::string mode = "watch", poll_interval = "30s";
  app.add_option("--kubeconfig", kubeconfig, "Path to a kubeconfig (default: $KUBECONFIG, "
                                             "~/.kube/config, then in-cluster)");
  app.add_option("--server", server, "API server URL without auth (kubectl proxy, the simulator)");
  app.add_option("--metrics-addr", cfg.metrics_addr,
                 "Listen address of /metrics, /healthz and /readyz")
      ->capture_default_str();
  app.add_flag("--leader-elect", cfg.leader_elect,
               "Campaign for a Lease before acting (--leader-elect or --leader-elect=true; "
               "off by default: one replica started by hand acts at once)")
      ->capture_default_str();
  app.add_option("--leader-election-namespace", cfg.leader_election_namespace,
                 "Namespace of the leader-election Lease (default: the pod's own, from the "
                 "service-account namespace file, then $POD_NAMESPACE)");
  app.add_option("--leader-election-id", cfg.leader_election_id, "Name of the Lease")
      ->capture_default_str();
  app.add_option("--leader-election-identity", cfg.identity,
                 "This replica's identity (default: <hostname>_<random>)");
  app.add_option("--lease-duration", lease_duration, "Lease duration")->capture_default_str();
  app.add_option("--renew-deadline", renew_deadline, "Renew deadline")->capture_default_str();
  app.add_option("--retry-period", retry_period, "Retry period")->capture_default_str();
  app.add_option("--workers", cfg.workers, "Node reconcilers running in parallel")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option("--max-running-drains", cfg.max_running_drains,
                 "Process-wide cap on drains in progress (policies cap their own)")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  app.add_option("--max-concurrent-evictions", cfg.max_concurrent_evictions,
                 "Evictions in flight per drain")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--drain-poll-interval", drain_poll, "How often a drain re-lists its node's pods")
      ->capture_default_str();
  app.add_option(
         "--mode", mode,
         "watch: one LIST, then WATCH (default). poll: a full LIST of every watched "
         "collection each --poll-interval and no watch, as the original design did; for clusters "
         "that forbid watches and for the API-load comparison in bench/")
      ->check(CLI::IsMember({"watch", "poll"}))
      ->capture_default_str();
  app.add_option("--poll-interval", poll_interval, "LIST interval in --mode poll")
      ->capture_default_str();
  app.add_option("--log-format", log_format, "text | json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  app.add_option("--log-level", log_level, "debug | info | warn | error")
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  gg::LogLevel level = gg::LogLevel::kInfo;
  gg::Logger::ParseLevel(log_level, &level);
  gg::Logger::SetGlobalLevel(level);
  gg::Logger::SetGlobalFormat(log_format == "json" ? gg::LogFormat::kJson : gg::LogFormat::kText);
  gg::Logger log = gg::Logger().WithName("main");

  if (!gg::ParseDurationFlag("--lease-duration", lease_duration, &cfg.lease_duration) ||
      !gg::ParseDurationFlag("--renew-deadline", renew_deadline, &cfg.renew_deadline) ||
      !gg::ParseDurationFlag("--retry-period", retry_period, &cfg.retry_period) ||
      !gg::ParseDurationFlag("--drain-poll-interval", drain_poll, &cfg.drain_poll_interval)) {
    return 2;
  }
  if (mode == "poll") {
    if (!gg::ParseDurationFlag("--poll-interval", poll_interval, &cfg.poll_interval)) return 2;
  } else if (app.count("--poll-interval") > 0) {
    std::fprintf(stderr, "--poll-interval needs --mode poll\n");
    return 2;
  }

  if (cfg.leader_elect && cfg.leader_election_namespace.empty()) {
    auto ns = gg::op::DefaultLeaseNamespace();
    if (!ns.ok()) {
      log.Error("cannot start leader election", {{"error", ns.status().message()}});
      return 2;
    }
    cfg.leader_election_namespace = *ns;
  }

  auto client_cfg = gg::k8s::ResolveConfig(kubeconfig, server);
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
                        {"mode", mode}});
  gg::Status s = op.Run(stop);
  if (!s.ok()) {
    log.Error("operator stopped", {{"error", s.ToString()}});
    return 1;
  }
  log.Info("stopped cleanly");
  return 0;
}
