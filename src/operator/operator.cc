// Operator wiring: flags-free construction of every component and the handlers that turn
// cache changes into node / policy keys.
#include "operator/operator.h"

#include <malloc.h>
#include <unistd.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <random>

#include "events/aggregating.h"
#include "events/rest_sink.h"
#include "k8s/resource.h"
#include "metrics/http_server.h"
#include "operator/cluster_view.h"
#include "operator/crd_objects.h"
#include "operator/dra_client.h"
#include "operator/drain_runner.h"
#include "operator/fleet_index.h"
#include "operator/lease_freshness.h"
#include "operator/metrics.h"
#include "operator/node_reconciler.h"
#include "operator/node_writer.h"
#include "operator/policy_reconciler.h"
#include "remediation/drainer.h"
#include "runtime/controller.h"
#include "runtime/informer.h"
#include "runtime/leader_election.h"
#include "runtime/manager.h"
#include "runtime/workqueue.h"

namespace gg::op {
namespace {

std::string DefaultIdentity() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0')
    std::snprintf(host, sizeof(host), "operator");
  std::random_device rd;
  char suffix[16];
  std::snprintf(suffix, sizeof(suffix), "%08x", rd());
  return std::string(host) + "_" + suffix;
}

// Other detectors' conditions (all but our GPUHealthy, as the projection keeps them: nodeCondition
// rules read them) differ.
bool ForeignConditionsChanged(const k8s::Node& a, const k8s::Node& b) {
  auto next = [](const k8s::ConditionList& v, std::size_t i) {
    while (i < v.size() && v[i].type == api::kConditionType) ++i;
    return i;
  };
  std::size_t i = next(a.conditions, 0), j = next(b.conditions, 0);
  for (; i < a.conditions.size() && j < b.conditions.size();
       i = next(a.conditions, i + 1), j = next(b.conditions, j + 1)) {
    if (!(a.conditions[i] == b.conditions[j])) return true;
  }
  return i < a.conditions.size() || j < b.conditions.size();
}

// Fields of a Node projection a decision reads; other updates (kubelet status) are ignored.
bool NodeRelevantChange(const k8s::Node& a, const k8s::Node& b) {
  if (a.unschedulable != b.unschedulable || !(a.meta.labels == b.meta.labels) ||
      !(a.meta.annotations == b.meta.annotations) || a.taints != b.taints ||
      ForeignConditionsChanged(a, b)) {
    return true;
  }
  const auto* ca = a.FindCondition(api::kConditionType);
  const auto* cb = b.FindCondition(api::kConditionType);
  if ((ca == nullptr) != (cb == nullptr)) return true;
  return ca && (ca->status != cb->status || ca->reason != cb->reason || ca->message != cb->message);
}

// Which lane a node key goes to: work that may fence or unfence a node now is urgent; refreshes
// of what is already true (the GPUHealthy condition of a healthy node, a heartbeat, a label
// change, a policy edit touching every node) are housekeeping. Faults then never queue
// behind housekeeping, e.g. behind the initial reconcile of 100k nodes.
using runtime::Priority;

// A remediation of ours is on the node (record or taint): resuming it is urgent.
bool NodeInRemediation(const k8s::Node& n) {
  return n.meta.annotations.Has(api::kRemediationAnnotation) || n.FindTaint(api::kTaintKey);
}

// The taints, cordon or our annotations changed (an admin's uncordon, our own fence landing).
bool NodeSpecOrRecordChanged(const k8s::Node& a, const k8s::Node& b) {
  return a.unschedulable != b.unschedulable || a.taints != b.taints ||
         !(a.meta.annotations == b.meta.annotations);
}

// A report that may call for action whatever the policy: Xids, lost GPUs, a failing source,
// or one that does not decode (→ Unknown). Threshold-only faults in a report first seen at
// start-up (no Xid, no lost GPU) are reconciled in the normal lane; later changes are urgent.
bool ReportMayNeedAction(const NodeHealthObject& r) {
  auto unpacked = r.Unpacked();
  if (!unpacked) return true;
  const auto& s = *unpacked;
  if (!s.xids.empty()) return true;
  if (s.expected_gpus > 0 && s.gpus.size() != static_cast<std::size_t>(s.expected_gpus))
    return true;
  for (const auto& g : s.gpus) {
    if (g.lost || g.remap_failure || g.remap_pending || g.retired_pages_pending) return true;
  }
  for (const auto& src : s.sources) {
    if (src.state != api::SourceState::kOk) return true;
  }
  return false;
}

// Facts changed (not only observedAt/heartbeatTime), or decodability changed.
// A heartbeat (only the timestamps moved) is told from the packed bytes without unpacking.
bool ReportFactsChanged(const NodeHealthObject& a, const NodeHealthObject& b) {
  if (a.HasStatus() != b.HasStatus()) return true;
  if (!a.HasStatus()) return a.decode_error != b.decode_error;
  if (a.packed.SameFactsBytes(b.packed)) return false;
  return !api::SameFacts(*a.Unpacked(), *b.Unpacked());
}

bool PolicySpecChanged(const PolicyObject& a, const PolicyObject& b) {
  if (a.meta.generation != b.meta.generation) return true;
  if (a.policy.has_value() != b.policy.has_value()) return true;
  return a.policy && !(a.policy->spec == b.policy->spec);
}

constexpr auto kPolicyBatch = std::chrono::milliseconds(300);
// How often the memory trimmer returns free heap pages to the system once the operator is
// steady.
constexpr auto kTrimPeriod = std::chrono::seconds(10);

std::string TrimSpace(std::string s) {
  const char* ws = " \t\r\n";
  s.erase(0, s.find_first_not_of(ws));
  s.erase(s.find_last_not_of(ws) + 1);
  return s;
}

}  // namespace

StatusOr<std::string> DefaultLeaseNamespace(const k8s::ConfigEnv& env, const std::string& sa_dir) {
  const std::string file = sa_dir + "/namespace";
  if (auto ns = env.read_file(file); ns.ok() && !TrimSpace(*ns).empty()) return TrimSpace(*ns);
  if (auto ns = env.getenv("POD_NAMESPACE"); ns && !TrimSpace(*ns).empty()) return TrimSpace(*ns);
  return FailedPreconditionError(
      "leader election needs the namespace of its Lease and none was found: not in a pod (no " +
      file +
      ") and $POD_NAMESPACE is unset; pass --leader-election-namespace=<namespace>, or "
      "run without --leader-elect (a single replica)");
}

struct Operator::Impl {
  Impl(k8s::RestClient& c, Clock& clk, metrics::Registry& reg, OperatorConfig cfg, Logger l)
      : client(c),
        clock(clk),
        registry(reg),
        config(std::move(cfg)),
        log(std::move(l)),
        metrics(reg),
        nodes(c, k8s::kNodes, clk, InformerOpts()),
        reports(c, k8s::kGpuNodeHealths, clk, InformerOpts(), NodeHealthCodec()),
        policies(c, k8s::kGpuHealthPolicies, clk, InformerOpts(), PolicyCodec()),
        leases(c, clk, config.agent_lease_namespace, config.poll_interval),
        view(nodes, reports, policies),
        node_queue("node", clk, &reg),
        policy_queue("policy", clk, &reg),
        health(reg, log) {
    if (config.identity.empty()) config.identity = DefaultIdentity();
    // glibc makes an arena per thread that allocates (informers, workers, timers); each keeps
    // its freed chunks between the long-lived objects. Two arenas: 3.41 KB a node of RSS at
    // 10k nodes instead of 3.97 KB (scenario_api_load), same CPU; one: 2.18 KB instead of
    // 2.39 KB later, CPU within noise (these threads mostly wait on the network). Process-wide,
    // like the malloc_trim below; set before the informer and worker threads start.
    mallopt(M_ARENA_MAX, 1);
  }

  bool Leading() const { return election == nullptr || election->IsLeader(); }
  // Runs in the member initializers: `config` is declared (so built) before the informers.
  runtime::InformerOptions InformerOpts() const {
    runtime::InformerOptions o;
    o.poll_interval = config.poll_interval;
    return o;
  }

  Status Init() {
    if (config.leader_elect) {
      GG_RETURN_IF_ERROR(SetUpLeaderElection());
    }
    MakeWriters();
    MakeDrainer();
    RegisterGaugeCallbacks();
    MakeControllers();
    MakeRunnables();
    AddHandlers();
    return OkStatus();
  }

  Status SetUpLeaderElection() {
    if (config.leader_election_namespace.empty()) {
      return InvalidArgumentError("leader election is on but its Lease namespace is not set");
    }
    runtime::LeaderElectionConfig le;
    le.lease_namespace = config.leader_election_namespace;
    le.lease_name = config.leader_election_id;
    le.identity = config.identity;
    le.lease_duration = config.lease_duration;
    le.renew_deadline = config.renew_deadline;
    le.retry_period = config.retry_period;
    le.release_on_cancel = true;
    // Poll mode is for clusters that forbid watches: followers poll the Lease too.
    le.watch_lease = config.poll_interval == Duration::zero();
    GG_RETURN_IF_ERROR(runtime::ValidateLeaderElectionConfig(le));
    auto e = runtime::NewLeaseLeaderElection(client, clock, le, log.WithName("leader-election"));
    if (!e.ok()) return e.status();
    lease_election = e->get();
    election = std::move(e).value();
    // Not ready while the Lease cannot be written (a namespace that does not exist, no
    // RBAC grant): the body of /readyz names the reason and the fix.
    health.AddReadyCheck("leader-election",
                         [le_ptr = lease_election] { return le_ptr->CampaignStatus(); });
    return OkStatus();
  }

  // Events, and the node and policy-status writers: all write only while leading.
  void MakeWriters() {
    auto is_leader = [this] { return Leading(); };
    event_sink = std::make_unique<events::RestEventSink>(client, is_leader);
    events::RecorderOptions ro;
    ro.component = config.component;
    ro.host = config.identity;
    ro.retry_sleep = config.event_retry_sleep;
    recorder = std::make_unique<events::AggregatingRecorder>(*event_sink, clock, ro);
    node_writer = std::make_unique<RestNodeWriter>(client, is_leader);
    status_writer = std::make_unique<RestPolicyStatusWriter>(client, is_leader);
  }

  // The pod API, the DRA client, the drainer and the runner that bounds concurrent drains.
  void MakeDrainer() {
    pod_api = std::make_unique<remediation::RestPodApi>(client);
    // DRA: no request is made until a policy asks for deviceLevel Auto.
    dra = std::make_unique<DraClient>(client, clock);
    escalation = std::make_unique<EscalationClient>(client);  // remediation.escalate
    remediation::DrainerOptions dopts;
    dopts.max_concurrent_evictions = config.max_concurrent_evictions;
    dopts.poll_interval = config.drain_poll_interval;
    dopts.initial_backoff = config.eviction_backoff_initial;
    dopts.max_backoff = config.eviction_backoff_max;
    dopts.on_eviction = [this](std::string_view r) { metrics.evictions.WithLabels({r}).Inc(); };
    dopts.log = log.WithName("drainer");
    // Refused evictions are retried when their budget allows again (watched while leading).
    budgets = std::make_unique<PdbBudgets>(client, clock, InformerOpts());
    dopts.budgets = budgets.get();
    drainer = std::make_unique<remediation::Drainer>(*pod_api, clock, dopts);
    drains = std::make_unique<DrainRunner>(
        *drainer, [this](const std::string& n) { node_queue.Add(n, Priority::kUrgent); },
        config.max_running_drains);
  }

  void RegisterGaugeCallbacks() {
    metrics.drains_in_progress.SetCallback(
        [this] { return static_cast<double>(drains->RunningCount()); });
    metrics.nodes_quarantined.SetCallback(
        [this] { return static_cast<double>(index.StateCounts()["Quarantined"]); });
    for (const char* state : {"Healthy", "Unhealthy", "Unknown", "Remediating", "Excluded"}) {
      std::string s = state;
      metrics.nodes_by_state.WithLabels({s}).SetCallback(
          [this, s] { return static_cast<double>(index.StateCounts()[s]); });
    }
  }

  // The node and policy reconcilers and the controllers that feed them from their queues.
  void MakeControllers() {
    NodeReconcilerDeps deps{
        view,
        *node_writer,
        *recorder,
        *drains,
        index,
        metrics,
        clock,
        [this](const std::string& p) { policy_queue.AddAfter(p, kPolicyBatch); },
        log.WithName("node-reconciler"),
        dra.get(),
        escalation.get()};
    deps.lease_renewed = [this](const std::string& n) { return leases.RenewTime(n); };
    node_reconciler = std::make_unique<NodeReconciler>(std::move(deps));
    policy_reconciler = std::make_unique<PolicyReconciler>(
        PolicyReconcilerDeps{view, *status_writer, *recorder, index, metrics, clock,
                             log.WithName("policy-reconciler"), dra.get()});
    runtime::ControllerOptions nopt;
    nopt.workers = config.workers;
    node_controller = std::make_unique<runtime::Controller>("node", *node_reconciler, node_queue,
                                                            nopt, registry, log.WithName("node"));
    runtime::ControllerOptions popt;
    popt.workers = 1;
    policy_controller = std::make_unique<runtime::Controller>(
        "policy", *policy_reconciler, policy_queue, popt, registry, log.WithName("policy"));
  }

  // Runnables beside the controllers: stopping drains when leadership ends, and trimming
  // the allocator after the initial sync.
  void MakeRunnables() {
    budget_watch = std::make_unique<runtime::StartStopRunnable>(
        "pdb-watch", [this] { budgets->Start(); }, [this] { budgets->Stop(); },
        /*needs_leader_election=*/true);
    drain_stopper = std::make_unique<runtime::FuncRunnable>(
        "drains",
        [this](std::stop_token stop) {
          // Holds until leadership ends or shutdown, then stops every drain before the lease
          // is released (a successor resumes them from the world state).
          std::mutex m;
          std::condition_variable_any cv;
          std::unique_lock lock(m);
          cv.wait(lock, stop, [] { return false; });
          drains->StopAll();
          return OkStatus();
        },
        /*needs_leader_election=*/true);
    memory_trimmer = std::make_unique<runtime::FuncRunnable>(
        "memory-trim",
        [this](std::stop_token stop) {
          // The initial LIST pages and the initial reconcile's garbage leave glibc's arenas
          // holding freed memory (tens of MB at 100k nodes) that a steady operator never
          // reuses: give it back once after the caches sync and once when the first backlog
          // of node work is done. Then every kTrimPeriod: watch events and PATCH responses
          // (~15 KB each) are freed between the small objects that stay, leaving free pages
          // inside the heap that only a trim returns (~1 KB a node of RSS at 10k nodes).
          auto wait = [&](const std::function<bool()>& ready) {
            std::mutex m;
            std::condition_variable_any cv;
            std::unique_lock lock(m);
            while (!ready()) {
              cv.wait_for(lock, stop, std::chrono::seconds(1), [] { return false; });
              if (stop.stop_requested()) return false;
            }
            return true;
          };
          if (!wait([this] {
                return nodes.HasSynced() && reports.HasSynced() && policies.HasSynced();
              })) {
            return OkStatus();
          }
          malloc_trim(0);
          if (!wait([this] { return node_queue.Len() == 0 && node_queue.Processing() == 0; })) {
            return OkStatus();
          }
          malloc_trim(0);
          while (wait([this, next = std::chrono::steady_clock::now() + kTrimPeriod] {
            return std::chrono::steady_clock::now() >= next;
          })) {
            malloc_trim(0);
          }
          return OkStatus();
        },
        /*needs_leader_election=*/false);
  }

  void EnqueueAllPolicies() {
    for (const auto& k : policies.ListKeys()) policy_queue.AddAfter(k, kPolicyBatch);
  }
  void EnqueueSelected(const PolicyObject& p) {
    if (!p.policy) return;
    for (const auto& n : index.MatchingNodes(p.policy->spec.node_selector)) node_queue.Add(n);
  }

  void AddHandlers() {
    nodes.AddEventHandler(runtime::EventHandlers<k8s::Node>{
        [this](const k8s::Node& n) {
          index.OnNode(n);
          node_queue.Add(n.meta.name, NodeInRemediation(n) ? Priority::kUrgent : Priority::kNormal);
          EnqueueAllPolicies();
        },
        [this](const k8s::Node& old_n, const k8s::Node& n) {
          if (index.OnNode(n)) EnqueueAllPolicies();
          if (!NodeRelevantChange(old_n, n)) return;
          // Another detector's condition may fence the node: as urgent as a spec change.
          const bool spec = NodeSpecOrRecordChanged(old_n, n) || ForeignConditionsChanged(old_n, n);
          // The echo of our own condition-only write: nothing to decide again. Any other
          // change in the same event (labels, taints, cordon, annotations) still counts.
          if (!spec && old_n.meta.labels == n.meta.labels &&
              node_reconciler->ConsumeOwnConditionEcho(n.meta.name, n.meta.resource_version)) {
            return;
          }
          node_queue.Add(n.meta.name, spec ? Priority::kUrgent : Priority::kNormal);
        },
        [this](const k8s::Node& n) {
          index.OnNodeDeleted(n.meta.name);
          node_queue.Add(n.meta.name);
          EnqueueAllPolicies();
        }});
    reports.AddEventHandler(runtime::EventHandlers<NodeHealthObject>{
        [this](const NodeHealthObject& r) {
          node_queue.Add(r.meta.name,
                         ReportMayNeedAction(r) ? Priority::kUrgent : Priority::kNormal);
        },
        [this](const NodeHealthObject& old_r, const NodeHealthObject& r) {
          node_queue.Add(r.meta.name,
                         ReportFactsChanged(old_r, r) ? Priority::kUrgent : Priority::kNormal);
        },
        [this](const NodeHealthObject& r) { node_queue.Add(r.meta.name, Priority::kUrgent); }});
    // A renewed agent Lease refreshes its node's report (a node gone Unknown comes back).
    leases.OnChange([this](const std::string& n) { node_queue.Add(n, Priority::kNormal); });
    policies.AddEventHandler(runtime::EventHandlers<PolicyObject>{
        [this](const PolicyObject& p) {
          policy_queue.Add(p.meta.name);
          EnqueueSelected(p);
        },
        [this](const PolicyObject& old_p, const PolicyObject& p) {
          policy_queue.Add(p.meta.name);
          if (PolicySpecChanged(old_p, p)) {
            EnqueueSelected(old_p);
            EnqueueSelected(p);
          }
        },
        [this](const PolicyObject& p) {
          policy_queue.Add(p.meta.name);
          EnqueueSelected(p);
        }});
  }

  Status Run(std::stop_token stop) {
    runtime::ManagerOptions mo;
    mo.health_listen = config.metrics_addr;
    mo.cache_sync_timeout = config.cache_sync_timeout;
    // This term's Events reach the API before the successor can act (bounded: the handover).
    mo.before_release = [this] { (void)recorder->Flush(std::chrono::seconds(1)); };
    runtime::Manager mgr(mo, log.WithName("manager"), &health, election.get());
    mgr.AddInformer("nodes", nodes);
    mgr.AddInformer("gpunodehealths", reports);
    mgr.AddInformer("gpuhealthpolicies", policies);
    mgr.AddInformer("agentleases", leases);  // refused for good: synced without (OnListError)
    mgr.Add(*node_controller);
    mgr.Add(*policy_controller);
    mgr.Add(*drain_stopper);
    mgr.Add(*budget_watch);
    mgr.Add(*memory_trimmer);
    manager = &mgr;
    Status s = mgr.Run(stop);
    manager = nullptr;
    drains->StopAll();
    // Events of decisions made while leading are delivered even after a lost lease (bounded).
    (void)recorder->Flush(std::chrono::seconds(10));
    return s;
  }

  k8s::RestClient& client;
  Clock& clock;
  metrics::Registry& registry;
  OperatorConfig config;
  Logger log;
  OperatorMetrics metrics;
  runtime::Informer<k8s::Node> nodes;
  runtime::Informer<NodeHealthObject> reports;
  runtime::Informer<PolicyObject> policies;
  AgentLeases leases;
  InformerView view;
  FleetIndex index;
  runtime::WorkQueue node_queue;
  runtime::WorkQueue policy_queue;
  metrics::HealthServer health;
  std::unique_ptr<runtime::LeaderElection> election;
  runtime::LeaseLeaderElection* lease_election = nullptr;  // = election.get() when leader_elect
  std::unique_ptr<events::RestEventSink> event_sink;
  std::unique_ptr<events::AggregatingRecorder> recorder;
  std::unique_ptr<RestNodeWriter> node_writer;
  std::unique_ptr<RestPolicyStatusWriter> status_writer;
  std::unique_ptr<remediation::RestPodApi> pod_api;
  std::unique_ptr<DraClient> dra;
  std::unique_ptr<EscalationClient> escalation;
  std::unique_ptr<PdbBudgets> budgets;  // before the drainer and drains that use it
  std::unique_ptr<remediation::Drainer> drainer;
  std::unique_ptr<DrainRunner> drains;
  std::unique_ptr<NodeReconciler> node_reconciler;
  std::unique_ptr<PolicyReconciler> policy_reconciler;
  std::unique_ptr<runtime::Controller> node_controller;
  std::unique_ptr<runtime::Controller> policy_controller;
  std::unique_ptr<runtime::FuncRunnable> drain_stopper;
  std::unique_ptr<runtime::StartStopRunnable> budget_watch;
  std::unique_ptr<runtime::FuncRunnable> memory_trimmer;
  std::atomic<runtime::Manager*> manager{nullptr};
  Status init_status;
};

Operator::Operator(k8s::RestClient& client, Clock& clock, metrics::Registry& registry,
                   OperatorConfig config, Logger log)
    : impl_(std::make_unique<Impl>(client, clock, registry, std::move(config), std::move(log))) {
  impl_->init_status = impl_->Init();
}

Operator::~Operator() {
  if (impl_) {
    impl_->metrics.drains_in_progress.SetCallback(nullptr);
    impl_->metrics.nodes_quarantined.SetCallback(nullptr);
    for (const char* state : {"Healthy", "Unhealthy", "Unknown", "Remediating", "Excluded"}) {
      impl_->metrics.nodes_by_state.WithLabels({state}).SetCallback(nullptr);
    }
    if (impl_->drains) impl_->drains->StopAll();
  }
}

Status Operator::Run(std::stop_token stop) {
  if (!impl_->init_status.ok()) return impl_->init_status;
  return impl_->Run(stop);
}

bool Operator::IsLeader() const { return impl_->election ? impl_->election->IsLeader() : true; }
bool Operator::Synced() const {
  return impl_->nodes.HasSynced() && impl_->reports.HasSynced() && impl_->policies.HasSynced() &&
         impl_->leases.HasSynced();
}
int Operator::HealthPort() const { return impl_->health.port(); }
const std::string& Operator::identity() const { return impl_->config.identity; }

}  // namespace gg::op
