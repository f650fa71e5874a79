// AgentLeases: freshness from the agents' per-node Leases. Every agent renews
// <agent namespace>/gpu-guardian-agent-<node> (holderIdentity = the node) at each heartbeat
// instead of rewriting its GPUNodeHealth report; this informer (label selector
// gpuguardian.io/agent-lease=true, one namespace; LIST then WATCH, or the poll mode's periodic
// LIST) keeps, per node, only the last renewTime: one map entry of a name and 8 bytes, not the
// Lease. A node's report is as fresh as the later of its heartbeatTime and its Lease's renewTime.
//
// A Lease counts only when its name and holderIdentity name the same node and it has a
// renewTime; any other is ignored (admission keeps an agent to its own node's Lease).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/clock.h"
#include "k8s/objects.h"
#include "runtime/informer.h"

namespace gg::op {

class AgentLeases final : public runtime::InformerCore {
 public:
  // `poll_interval` > 0: poll mode (a LIST each interval, no WATCH), as the other informers.
  AgentLeases(k8s::RestClient& client, Clock& clock, const std::string& lease_namespace,
              Duration poll_interval = Duration::zero());
  ~AgentLeases() override;

  // Called on the informer's thread after a node's renewTime appeared, moved or went away.
  // Set before Start().
  void OnChange(std::function<void(const std::string& node)> fn) { on_change_ = std::move(fn); }
  // The node's last Lease renewTime (nullopt: no usable Lease).
  std::optional<WallTime> RenewTime(const std::string& node) const;
  std::size_t Size() const;

  // The node a Lease speaks for ("" when it speaks for none, see above).
  static std::string NodeOf(const k8s::Lease& lease);
  static std::string LabelSelector();

 protected:
  void BeginRelist() override;
  StatusOr<k8s::ListPageInfo> OnListPage(std::string& body) override;
  void EndRelist() override;
  Status OnWatchLine(std::string_view line, std::string* rv) override;
  // No permission to list the Leases, or no Lease API: node freshness comes from the reports
  // alone (as with agents that heartbeat through the report) instead of the operator never
  // becoming ready; one error with the fix, and the informer keeps retrying.
  void OnListError(const Status& s) override;

 private:
  // Records the Lease (or forgets its node when it no longer counts); calls on_change_.
  void Apply(const k8s::Lease& lease, bool from_list);
  void Forget(const std::string& node);

  // node → renewTime (ns since the epoch), sorted by node: 40 bytes a node where a hash map
  // node costs ~75 (the operator's per-node budget is 2 KB). LIST pages arrive in name order,
  // so building it appends; only a node added later moves the tail.
  using Entry = std::pair<std::string, std::int64_t>;
  std::vector<Entry>::iterator Find(const std::string& node);
  std::vector<Entry>::const_iterator Find(const std::string& node) const;

  mutable std::shared_mutex mu_;
  std::vector<Entry> renew_ns_;
  std::unordered_set<std::string> seen_;  // nodes seen by the current relist
  std::function<void(const std::string&)> on_change_;
  std::string namespace_;
  bool refusal_logged_ = false;  // informer thread only
};

}  // namespace gg::op
