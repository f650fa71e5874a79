// Operator: the whole gpu-guardian-operator process as one object — informers on Nodes,
// GPUNodeHealths and GPUHealthPolicies (one LIST, then WATCH), the fleet index, two work
// queues and controllers (nodes, policies), the drain runner, the Event recorder, the
// health/metrics server and leader election, started in the Manager's order. main() builds
// an OperatorConfig from flags and calls Run(); tests run several in one process.
//
// Pods and PDBs have no informer: a drain LISTs its node's pods (fieldSelector
// spec.nodeName) once per round while it runs, and PDBs speak through 429s. A cluster-wide pod
// informer would hold every pod of the fleet in memory for the rare node being drained.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "common/clock.h"
#include "common/log.h"
#include "common/status.h"
#include "k8s/config.h"
#include "k8s/rest_client.h"
#include "metrics/registry.h"

namespace gg::op {

struct OperatorConfig {
  std::string metrics_addr = "127.0.0.1:8080";  // /metrics, /healthz, /readyz
  // Off by default, as controller-runtime scaffolds do: an operator started by hand (`make run`,
  // a kubeconfig) acts at once. The shipped Deployment turns it on (--leader-elect=true).
  bool leader_elect = false;
  // Required when leader_elect is set; main() fills it from DefaultLeaseNamespace() when the
  // flag is not given.
  std::string leader_election_namespace;
  std::string leader_election_id = "gpu-guardian-operator";
  std::string identity;  // empty: <hostname>_<random>
  Duration lease_duration = std::chrono::seconds(15);
  Duration renew_deadline = std::chrono::seconds(10);
  Duration retry_period = std::chrono::seconds(2);
  int workers = 4;                    // node reconcilers in parallel
  int max_running_drains = 32;        // process-wide cap (policies cap their own)
  int max_concurrent_evictions = 32;  // per drain
  Duration drain_poll_interval = std::chrono::seconds(1);
  Duration eviction_backoff_initial = std::chrono::seconds(1);
  Duration eviction_backoff_max = std::chrono::seconds(30);
  Duration event_retry_sleep = std::chrono::seconds(10);
  std::chrono::milliseconds cache_sync_timeout = std::chrono::minutes(2);
  // > 0: polling mode (--mode poll). Every informer re-LISTs its whole collection each
  // interval instead of watching, as the original gpu-guardian-operator design did (default 30 s
  // there). It exists for the API-load comparison in bench/ and for clusters that forbid watches;
  // decisions then lag changes by up to one interval. Zero: one LIST, then WATCH (the default).
  Duration poll_interval = Duration::zero();
  std::string component = "gpu-guardian-operator";
  // Namespace of the agents' per-node heartbeat Leases (operator/lease_freshness.h); main()
  // fills it with the pod's own namespace when --agent-lease-namespace is not given.
  std::string agent_lease_namespace = "gpu-guardian";
};

// The Lease namespace when --leader-election-namespace is not given: the pod's own — the
// service-account namespace file (<sa_dir>/namespace), then $POD_NAMESPACE. Outside a cluster
// neither exists: FailedPrecondition saying which flag to pass.
StatusOr<std::string> DefaultLeaseNamespace(const k8s::ConfigEnv& env = k8s::ConfigEnv::Real(),
                                            const std::string& sa_dir = k8s::kServiceAccountDir);

class Operator {
 public:
  // `client`, `clock` and `registry` must outlive the Operator.
  Operator(k8s::RestClient& client, Clock& clock, metrics::Registry& registry,
           OperatorConfig config, Logger log = Logger().WithName("operator"));
  ~Operator();
  Operator(const Operator&) = delete;
  Operator& operator=(const Operator&) = delete;

  // Blocks until `stop` (OK after a clean handover: drains stopped, lease released) or a
  // failure (cache sync timeout, lost lease → error; the process should exit non-zero).
  Status Run(std::stop_token stop);

  bool IsLeader() const;
  bool Synced() const;
  int HealthPort() const;
  const std::string& identity() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gg::op
