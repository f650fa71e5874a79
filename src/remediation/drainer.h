// Drainer: evicts a node's pods through the Eviction API, kubectl-drain style but as a
// restartable, level-based loop:
//  * skips finished, DaemonSet-owned and mirror pods; scope GPUPods keeps only pods that
//    request nvidia.com/gpu or hold a ResourceClaim;
//  * evicts stage by stage in the policy's order (first stage whose rule matches a pod; the
//    next stage starts only when the previous one's pods are gone);
//  * a PDB refusal (429) is retried as soon as a budget covering the pod allows a disruption
//    again (BudgetWatch, a watch on the PodDisruptionBudgets), never more pods at once than
//    the budget allows; without a budget in view, and as a fallback, a refusal or other error
//    backs off per pod (exponential, capped, Retry-After honored), never a tight loop;
//  * a pod is done when no pod with its UID is on the node any more (a new pod with the same
//    name is not the old one); pods already terminating are waited for, never re-evicted;
//  * every round re-lists the node's pods, so a restarted operator resumes a drain from the
//    world state without evicting anything twice;
//  * past the deadline the drain is Blocked, naming the pods left and their last error
//    (e.g. the PDB that refused).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/gpu_health_policy.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/status.h"
#include "k8s/objects.h"
#include "k8s/rest_client.h"

namespace gg::remediation {

// The policy's scope (api::DrainScope): GPU pods only, or every pod.
using DrainScope = api::DrainScope;

// One step of the eviction order: the policy's own type (priorityBelow and/or podSelector).
using DrainStage = api::DrainStep;

// One drain: the policy's drain settings (api::DrainSpec; its timeout becomes the deadline
// passed to Drain), narrowed for a device-level drain.
struct DrainJob : api::DrainSpec {
  DrainJob() = default;
  explicit DrainJob(api::DrainSpec policy) : api::DrainSpec(std::move(policy)) {}
  // Device-level (DRA) drain: only these pods (UIDs of the pods holding a fenced GPU through
  // their ResourceClaims); every other pod on the node is out of scope.
  std::optional<std::set<std::string>> pod_uids;
};

// What the drainer needs from the cluster (RestPodApi in production, fakes in tests).
class PodApi {
 public:
  virtual ~PodApi() = default;
  // All pods bound to `node` (any namespace).
  virtual StatusOr<std::vector<k8s::Pod>> ListPodsOnNode(std::string_view node) = 0;
  // POST pods/<name>/eviction with a UID precondition. PDB refusal → ResourceExhausted.
  virtual Status Evict(const k8s::Pod& pod, const k8s::DeleteOptions& options) = 0;
};

// LIST /api/v1/pods?fieldSelector=spec.nodeName=<node> (paged, 500) and the Eviction API.
class RestPodApi final : public PodApi {
 public:
  explicit RestPodApi(k8s::RestClient& client) : client_(client) {}
  StatusOr<std::vector<k8s::Pod>> ListPodsOnNode(std::string_view node) override;
  Status Evict(const k8s::Pod& pod, const k8s::DeleteOptions& options) override;

 private:
  k8s::RestClient& client_;
};

// One PodDisruptionBudget as the drainer sees it.
struct BudgetState {
  std::string key;            // "namespace/name"
  std::int32_t allowed = 0;   // status.disruptionsAllowed
  std::uint64_t version = 0;  // rises whenever the budget's status or selector changes
};

// What the drainer may know about the budgets that cover pods (the operator's PdbBudgets: a
// watch on policy/v1 poddisruptionbudgets). Without one, refusals are retried on a timer only.
class BudgetWatch {
 public:
  virtual ~BudgetWatch() = default;
  // The budgets covering `pod` (its namespace, selector matching its labels); nullopt while
  // the watch cannot tell (not synced yet, or not allowed to list budgets).
  virtual std::optional<std::vector<BudgetState>> Covering(const k8s::Pod& pod) const = 0;
  // `fn(namespace)` runs on the watch's thread whenever a budget there comes to allow a
  // disruption (or a new one appears). Unsubscribe waits for a running call to return.
  virtual std::uint64_t Subscribe(std::function<void(std::string_view ns)> fn) = 0;
  virtual void Unsubscribe(std::uint64_t id) = 0;
};

// Eviction outcomes reported to `on_eviction` (metric label "result").
inline constexpr std::string_view kEvictionSuccess = "success";
inline constexpr std::string_view kEvictionBlocked = "pdb_blocked";  // 429
inline constexpr std::string_view kEvictionGone = "not_found";
inline constexpr std::string_view kEvictionError = "error";

struct DrainerOptions {
  int max_concurrent_evictions = 32;  // per drain
  Duration poll_interval = std::chrono::seconds(1);
  Duration initial_backoff = std::chrono::seconds(1);
  Duration max_backoff = std::chrono::seconds(30);  // also the fallback while a budget is 0
  BudgetWatch* budgets = nullptr;                   // optional; outlives the drainer
  std::function<void(std::string_view result)> on_eviction;  // optional, thread-safe
  Logger log = Logger().WithName("drainer");                 // progress and PDB refusals, once each
};

enum class DrainState { kDone, kBlocked, kCancelled };
std::string_view DrainStateName(DrainState s);

struct DrainResult {
  DrainState state = DrainState::kDone;
  int evicted = 0;                    // evictions this run issued (accepted by the server)
  int waited_terminating = 0;         // pods found already terminating and only waited for
  int skipped = 0;                    // DaemonSet/mirror/finished/out-of-scope pods
  std::vector<std::string> blocking;  // "ns/name: why" for pods still there (Blocked)
  std::string message;                // one line for Events/logs
  bool timed_out = false;             // Blocked because the deadline passed
};

class Drainer {
 public:
  Drainer(PodApi& api, Clock& clock, DrainerOptions options = {});

  // Runs until the pods in scope are gone (Done), `deadline` (wall clock, Blocked) or `stop`
  // (Cancelled). Pods that will never be evicted under `spec` (no controller without force,
  // emptyDir without delete_empty_dir_data) make the result Blocked as soon as the rest is done.
  DrainResult Drain(std::string_view node, const DrainJob& spec, WallTime deadline,
                    std::stop_token stop);

  // Pure helpers (exposed for tests).
  // Stage index of `pod` in `order` (order.size() for "no stage matched").
  static std::size_t StageOf(const k8s::Pod& pod, const std::vector<DrainStage>& order);
  // Empty when the pod is to be evicted; else why not ("daemonset", "mirror", "finished",
  // "out-of-scope").
  static std::string_view SkipReason(const k8s::Pod& pod, const DrainJob& spec);
  // Non-empty when the pod is in scope but must not be evicted under `spec`.
  static std::string Unevictable(const k8s::Pod& pod, const DrainJob& spec);

 private:
  PodApi& api_;
  Clock& clock_;
  DrainerOptions opts_;
};

}  // namespace gg::remediation
