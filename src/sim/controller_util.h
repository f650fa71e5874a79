// Internal helpers shared by the simulated cluster's control loops (kubelet, scheduler,
// disruption, workload, node lifecycle and garbage collection): an in-process store watch,
// small JSON readers, resource quantities, taints/tolerations, node affinity and Events.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/api.h"

namespace gg::sim::internal {

using SteadyTime = std::chrono::steady_clock::time_point;

inline constexpr auto kPoll = std::chrono::milliseconds(50);

// An in-process watch that restarts (with a fresh initial state) if it overflows.
class StoreWatch {
 public:
  StoreWatch(Store& store, std::string storage) : store_(store), storage_(std::move(storage)) {
    Restart();
  }
  ~StoreWatch() { store_.StopWatch(w_); }
  // False when the watch overflowed and restarted: `out` then begins with the full current
  // state as ADDED events, and objects deleted meanwhile never show up as DELETED (a
  // controller must treat what it knew and does not see again as gone).
  bool Pop(std::deque<WatchEvent>& out, std::chrono::milliseconds wait) {
    if (!w_->Pop(out, wait)) {
      store_.StopWatch(w_);
      Restart();
      return false;
    }
    return true;
  }

 private:
  void Restart() {
    w_ = store_.StartWatch(storage_, "", LabelSelector(), FieldSelector(), std::nullopt).watcher;
  }
  Store& store_;
  std::string storage_;
  std::shared_ptr<Watcher> w_;
};

// The string at path, or "" when absent or not a string.
std::string Str(const nlohmann::json& j, std::initializer_list<const char*> path);

// A resource.Quantity in thousandths ("500m" -> 500, "2" -> 2000, "1Ki" -> 1024000);
// nullopt when it does not parse. Numbers are accepted as well as strings.
std::optional<std::int64_t> ParseQuantityMilli(const nlohmann::json& q);

// Resource amounts in thousandths of a unit, by resource name (cpu, memory, pods,
// nvidia.com/gpu, ...).
using Resources = std::map<std::string, std::int64_t>;

// What a pod asks the scheduler for, as the real scheduler computes it: per resource the
// larger of the sum over containers and the largest init container, plus spec.overhead; a
// container's limit stands in for a missing request (API defaulting). Always includes
// pods=1000 (one pod).
Resources PodRequests(const nlohmann::json& pod);

struct Taint {
  std::string key, value, effect;
  std::string time_added;  // RFC 3339, NoExecute taints
};
struct Toleration {
  std::string key, op = "Equal", value, effect;
  std::optional<std::int64_t> seconds;  // tolerationSeconds
  bool Tolerates(const Taint& t) const;
};
std::vector<Taint> NodeTaints(const nlohmann::json& node);
std::vector<Toleration> PodTolerations(const nlohmann::json& pod);
// The first taint with an effect in `effects` that no toleration tolerates.
const Taint* FirstUntolerated(const std::vector<Taint>& taints, const std::vector<Toleration>& tols,
                              std::initializer_list<std::string_view> effects);

// spec.nodeSelector and required node affinity (nodeSelectorTerms ORed, their
// matchExpressions and matchFields ANDed; In/NotIn/Exists/DoesNotExist/Gt/Lt).
bool NodeSelectorMatches(const nlohmann::json& pod_spec, const nlohmann::json& node);
// One NodeSelectorTerm against a node's labels and name.
bool NodeSelectorTermMatches(const nlohmann::json& term, const nlohmann::json& labels,
                             const std::string& node_name);
// Sum of the weights of the preferred node affinity terms the node matches.
std::int64_t PreferredAffinityScore(const nlohmann::json& pod_spec, const nlohmann::json& node);

// What the DaemonSet controller needs of a node.
struct NodeInfo {
  long gpus = 0;
  bool schedulable = true;
  nlohmann::json node;  // metadata (name, labels) + spec (taints) for matching
};

NodeInfo MakeNodeInfo(const nlohmann::json& n);
// Not terminal (Succeeded/Failed) and not being deleted.
bool PodActive(const nlohmann::json& p);
bool PodTerminal(const nlohmann::json& p);
// The Ready condition is True.
bool PodReady(const nlohmann::json& p);
// lastTransitionTime of the condition `type`, "" if absent.
std::string ConditionTransition(const nlohmann::json& obj, const char* type);
std::string ControllerUid(const nlohmann::json& p);

// The keys whose time has come (at or before `now`), in key order.
template <class Time>
std::vector<std::string> DueKeys(const std::map<std::string, Time>& at, Time now) {
  std::vector<std::string> out;
  for (const auto& [key, when] : at)
    if (when <= now) out.push_back(key);
  return out;
}

// Parses RFC 3339 (with or without fraction, 'Z' only); nullopt otherwise.
std::optional<std::chrono::system_clock::time_point> ParseTime(const std::string& s);
std::string FormatMicroTime(std::chrono::system_clock::time_point t);

// Writes an events.k8s.io/v1 Event about `regarding` (a full object) as a component's
// EventRecorder does: name <object>.<hex nanoseconds>, eventTime now, reportingController,
// reportingInstance. Returns the created Event's name ("" on failure).
std::string RecordEvent(ApiCore& core, const nlohmann::json& regarding, const std::string& type,
                        const std::string& reason, const std::string& action,
                        const std::string& note, const std::string& controller,
                        const std::string& instance);
// Bumps the series (count, lastObservedTime) of an Event RecordEvent wrote.
void BumpEventSeries(ApiCore& core, const std::string& ns, const std::string& name, int count);

}  // namespace gg::sim::internal
