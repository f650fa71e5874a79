// NodeReconciler: Reconcile(node) — read the node, its report and the policies selecting it
// from the caches; Evaluate per policy (pure) → Resolve → brake check → Plan (pure) → write
// only the difference (one Node PATCH with taints/cordon/record under a resourceVersion
// precondition, the GPUHealthy condition via nodes/status, Events, drains). Level-based: it
// never looks at what event caused it, and asks to be requeued when the verdict may change
// without a new report (a `for` elapsing, recovery's healthyFor, a stale heartbeat).
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
#include "operator/fleet_index.h"
#include "operator/metrics.h"
#include "operator/node_writer.h"
#include "policy/evaluate.h"
#include "remediation/record.h"
#include "runtime/controller.h"

namespace gg::op {

struct NodeReconcilerDeps {
  ClusterView& view;
  NodeWriter& writer;
  events::EventRecorder& recorder;
  DrainRunner& drains;
  FleetIndex& index;
  OperatorMetrics& metrics;
  Clock& clock;
  std::function<void(const std::string& policy)> enqueue_policy;  // status needs a refresh
  Logger log = Logger().WithName("node-reconciler");
  // Device-level (DRA) remediation; null: never device-level (every fence is node-level).
  DraClient* dra = nullptr;
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

 private:
  // Whether the bad GPUs of `verdict` can be fenced device by device on `node` (policy
  // deviceLevel Auto, DeviceTaintRule served, every GPU not fenced yet found in the node's
  // ResourceSlices); fills `map` with the GPUs it looked up.
  StatusOr<bool> DeviceLevelPossible(const std::string& node, const policy::Verdict& verdict,
                                     const api::RemediationSpec& rem,
                                     const std::optional<remediation::RemediationRecord>& record,
                                     remediation::GpuDeviceMap* map);

  // Our last write to `node` landed at a resourceVersion the cache has not reached yet: a
  // decision from that cache would be made on stale taints/record and its write would only
  // meet 409 Conflict (seen at once on every fenced node: the drain's follow-up pass raced
  // the echo of the fence). The echo's watch event enqueues the node again.
  bool CacheBehindOwnWrite(const std::string& node, const std::string& cache_rv);
  void NoteOwnWrite(const std::string& node, const std::string& rv);

  NodeReconcilerDeps d_;
  std::mutex written_mu_;
  std::unordered_map<std::string, std::uint64_t> written_rv_;  // only while the cache is behind
  std::unordered_map<std::string, std::uint64_t> condition_echo_;  // awaiting its watch event
  // Serializes decisions that may start a new fence, so concurrent workers cannot both pass
  // the brake on the same budget slot (the index reflects our writes at once).
  std::mutex brake_mu_;
};

// api → drainer spec.
remediation::DrainSpec ToDrainSpec(const api::DrainSpec& spec);

}  // namespace gg::op
