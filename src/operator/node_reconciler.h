// NodeReconciler: Reconcile(node) — read the node, its report, the policies selecting it and
// a finished drain's outcome into one remediation::NodeInput; Assess + Plan (pure, the one
// place a node decision is made) give one remediation::NodeChange; apply it through the
// interfaces below: DRA rules (DraApi), one Node PATCH with taints/cordon/record under a
// resourceVersion precondition and the GPUHealthy condition via nodes/status (NodeWriter),
// Events (EventRecorder), the drain (DrainStarter). Level-based: it never looks at what event
// caused it, and asks to be requeued when the verdict may change without a new report (a
// `for` elapsing, recovery's healthyFor, a stale heartbeat). Every action taken or skipped is
// logged once, here, with node, policy, rule and reason.
#pragma once

#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "common/clock.h"
#include "common/log.h"
#include "events/recorder.h"
#include "operator/cluster_view.h"
#include "operator/dra_client.h"
#include "operator/drain_runner.h"
#include "operator/escalation_client.h"
#include "operator/fleet_index.h"
#include "operator/metrics.h"
#include "operator/node_writer.h"
#include "remediation/plan.h"
#include "runtime/controller.h"

namespace gg::op {

struct NodeReconcilerDeps {
  ClusterView& view;
  NodeWriter& writer;
  events::EventRecorder& recorder;
  DrainStarter& drains;
  FleetIndex& index;
  OperatorMetrics& metrics;
  Clock& clock;
  std::function<void(const std::string& policy)> enqueue_policy;  // status needs a refresh
  Logger log = Logger().WithName("node-reconciler");
  // Device-level (DRA) remediation; null: never device-level (every fence is node-level).
  DraApi* dra = nullptr;
  // remediation.escalate hand-off; null: a policy asking for it fails its node's pass.
  EscalationApi* escalation = nullptr;
  // The node's agent Lease renewTime (operator/lease_freshness.h); a report is as fresh as
  // the later of its heartbeatTime and that. Empty: reports alone.
  std::function<std::optional<WallTime>(const std::string& node)> lease_renewed;
};

class NodeReconciler final : public runtime::Reconciler {
 public:
  explicit NodeReconciler(NodeReconcilerDeps deps) : d_(std::move(deps)) {}
  StatusOr<runtime::Result> Reconcile(const std::string& node, std::stop_token stop) override;

  // True when the watch event at `rv` is the echo of a pass of ours whose only write was the
  // GPUHealthy condition: the node is then already as that pass wanted and need not be
  // reconciled again (at 100k nodes the echoes doubled the initial reconcile). Consumes it.
  bool ConsumeOwnConditionEcho(const std::string& node, const std::string& rv);

  // Time a brake-held node waits before it is looked at again.
  static constexpr Duration kBrakeRecheck = std::chrono::seconds(10);
  // Time before a failed remediation.escalate create is tried again.
  static constexpr Duration kEscalationRetry = std::chrono::seconds(30);

 private:
  // One pass's context for the apply layer and its log lines.
  struct Pass {
    const k8s::Node& node;
    const remediation::NodeInput& in;
    const remediation::Assessment& assessment;
    remediation::Lookups lookups;
    remediation::GpuDeviceMap devices;  // the GPUs DeviceLevelPossible looked up
    bool slices_listed = false;         // `devices` holds this pass's one slice LIST
    WallTime now;
    std::optional<Logger> logger;  // built on the first line logged (most passes log none)
  };
  // The pass's logger: node, policy, rule and reason on every line.
  const Logger& Log(Pass& pass) const;

  // --- read ---
  // `holders` keeps the policy objects `policies` points into alive for the pass.
  remediation::NodeInput ReadInput(const k8s::Node& node,
                                   std::vector<std::shared_ptr<const PolicyObject>>* holders) const;
  // The brake (under brake_mu_, held by `brake_lock` until the fence is written) and the DRA
  // lookups Plan needs for the assessed verdict.
  Status Lookup(Pass& pass, std::unique_lock<std::mutex>& brake_lock);
  // The DRA driver's own device taints (policy deviceLevel Auto, DeviceTaintRule served, and
  // something device-level to look at), folded into `a` as evidence; the LIST they come from
  // also fills pass.devices for DeviceLevelPossible.
  Status ReadDriverTaints(Pass& pass, remediation::Assessment& a);
  // Whether the bad GPUs can be fenced device by device on the node (policy deviceLevel Auto,
  // DeviceTaintRule served, every GPU not fenced yet found in the node's ResourceSlices);
  // fills pass.devices with the GPUs it looked up.
  StatusOr<bool> DeviceLevelPossible(Pass& pass);

  // --- apply (node_apply.cc) ---
  StatusOr<runtime::Result> Apply(Pass& pass, remediation::NodeChange& change,
                                  std::unique_lock<std::mutex>& brake_lock);
  runtime::Result ApplyNotSelected(const std::string& node, const remediation::NodeChange& change);
  // Deletes and creates our DeviceTaintRules (before the Node patch: a rule that exists
  // without its record entry is found again on the next pass; the reverse would never be).
  Status ApplyDeviceTaints(Pass& pass, remediation::NodeChange& change);
  // Creates or deletes the remediation object (before the Node patch, like the DRA rules:
  // an object without its record entry is created again, AlreadyExists, on the next pass).
  // A failed create is logged and retried (after kEscalationRetry) without failing the pass.
  Status ApplyEscalation(Pass& pass, remediation::NodeChange& change);
  void NotEscalated(Pass& pass, remediation::NodeChange& change, const Status& why);
  void MarkClaims(Pass& pass, remediation::NodeChange& change);
  Status WriteNode(Pass& pass, const remediation::NodeChange& change);
  Status WriteCondition(Pass& pass, const remediation::NodeChange& change);
  // `after_write`: the Events follow a write the API server accepted (events::AdmittedByWrite).
  void EmitEvents(Pass& pass, const remediation::NodeChange& change, bool after_write);
  StatusOr<runtime::Result> RunDrain(Pass& pass, const remediation::NodeChange& change);
  runtime::Result Finish(Pass& pass, const remediation::NodeChange& change, runtime::Result result);
  void ForgetNode(const std::string& node);

  // Our last write to `node` landed at a resourceVersion the cache has not reached yet: a
  // decision from that cache would be made on stale taints/record and its write would only
  // meet 409 Conflict (seen at once on every fenced node: the drain's follow-up pass raced
  // the echo of the fence). The echo's watch event enqueues the node again.
  bool CacheBehindOwnWrite(const std::string& node, const std::string& cache_rv);
  void NoteOwnWrite(const std::string& node, const std::string& rv);
  void NoteConditionEcho(const std::string& node, const std::string& rv);

  NodeReconcilerDeps d_;
  std::mutex written_mu_;
  std::unordered_map<std::string, std::uint64_t> written_rv_;      // only while the cache is behind
  std::unordered_map<std::string, std::uint64_t> condition_echo_;  // awaiting its watch event
  // Serializes decisions that may start a new fence, so concurrent workers cannot both pass
  // the brake on the same budget slot (the index reflects our writes at once).
  std::mutex brake_mu_;
};

}  // namespace gg::op
