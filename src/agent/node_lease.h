// NodeLease: the agent's heartbeat as a per-node coordination.k8s.io/v1 Lease, the way the
// kubelet renews its node's Lease in kube-node-lease instead of rewriting Node status. A renew
// moves only the Lease's renewTime (a few hundred bytes on the wire and to every watcher), not
// the GPUNodeHealth report, so an unchanged fleet costs the operator's watch almost nothing.
//
// The Lease: <namespace>/gpu-guardian-agent-<node>, label gpuguardian.io/agent-lease=true,
// holderIdentity = the node, leaseDurationSeconds = a few heartbeats, renewTime in MicroTime
// form (RFC 3339, microseconds). Renew(): GET then create when missing (404), else a PUT
// carrying the resourceVersion of our last write; a conflict (someone else wrote it) reads it
// again and updates once more, a deletion creates it again.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/status.h"
#include "k8s/rest_client.h"

namespace gg::agent {

class NodeLease {
 public:
  // `client` must outlive the lease. `duration_s`: leaseDurationSeconds written (>= 1).
  NodeLease(k8s::RestClient& client, std::string node_name, std::string lease_namespace,
            std::int32_t duration_s);

  // Creates or renews the Lease with renewTime = `now`. OK when it now says so.
  Status Renew(WallTime now);

  const std::string& name() const { return name_; }
  const std::string& lease_namespace() const { return ns_; }

  // "gpu-guardian-agent-<node>".
  static std::string NameFor(std::string_view node_name);
  // The whole Lease (create and PUT); `resource_version` "" on create.
  static std::string Body(const std::string& node_name, const std::string& lease_namespace,
                          const std::string& resource_version, std::int32_t duration_s,
                          WallTime renew_time);

 private:
  Status ReadAndUpdate(WallTime now);
  Status Create(WallTime now);
  Status Update(WallTime now);

  k8s::RestClient& client_;
  std::string node_, ns_, name_;
  std::int32_t duration_s_;
  std::string rv_;  // resourceVersion after our last successful write ("" unknown)
};

}  // namespace gg::agent
