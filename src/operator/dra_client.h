// DraClient: the operator's I/O for device-level (DRA) remediation — which resource.k8s.io
// version serves DeviceTaintRule (discovery, cached), the node's GPU devices from its
// ResourceSlices, creating and deleting OUR DeviceTaintRules, and the pods holding a device
// through their ResourceClaims. The decisions themselves are pure (remediation/plan.h,
// remediation/device_taints.h); this only talks to the API server.
//
// ResourceSlices are read with one LIST per decision (fieldSelector spec.nodeName=<node>), not
// an informer: a slice of an 8-GPU node is several KiB of JSON, a fleet has one or more per
// node, and a cache of them all would cost more memory than every other cache of the operator
// together — for the few nodes that ever need a device-level decision. The LIST happens only
// when a bad GPU has no DeviceTaintRule yet; holding and recovery read the record.
// ResourceClaims likewise: one GET per claim named by a pod on the node, only when a
// device-level drain starts.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/gpu_health_policy.h"
#include "common/clock.h"
#include "common/status.h"
#include "k8s/rest_client.h"
#include "remediation/device_taints.h"

namespace gg::op {

struct DraCapabilities {
  std::string rule_version;   // newest version serving devicetaintrules; "" when none
  std::string slice_version;  // newest version serving resourceslices
  std::string claim_version;  // newest version serving resourceclaims
  bool effect_none = false;   // DeviceTaintRule accepts effect None (1.35+: it has /status)
  std::string message;        // what device-level remediation uses, or why it is unavailable

  bool Served() const { return !rule_version.empty() && !slice_version.empty(); }
  // Usable for a policy asking for `effect` (None needs the 1.35+ API).
  bool UsableFor(api::DeviceTaintEffect effect) const {
    return Served() && (effect != api::DeviceTaintEffect::kNone || effect_none);
  }
  // Why not usable for `effect` (empty when usable).
  std::string WhyNot(api::DeviceTaintEffect effect) const;
};

// The DRA operations the reconcilers use (DraClient over HTTP; FakeDra in fakes.h).
class DraApi {
 public:
  virtual ~DraApi() = default;
  // Cached discovery. An error is transient (the API server did not answer): callers requeue
  // rather than fall back to fencing whole nodes.
  virtual StatusOr<DraCapabilities> Capabilities() = 0;
  // GPU UUID -> (driver, pool, device) from `node`'s ResourceSlices of `driver`.
  virtual StatusOr<remediation::GpuDeviceMap> MapGpus(const std::string& node,
                                                      const std::string& driver,
                                                      const std::vector<std::string>& uuids) = 0;
  // Creates our DeviceTaintRule for one GPU; returns its name (*created: this call made it).
  // An existing rule of that name that is ours counts as done (a retried pass); one that is
  // not ours is left alone (FailedPrecondition).
  virtual StatusOr<std::string> EnsureRule(const remediation::DeviceTaintRuleSpec& spec,
                                           bool* created) = 0;
  // Deletes our rule `name` (UID precondition). Gone already, or DeviceTaintRule no longer
  // served: OK. Not ours: left alone, OK with *skipped set.
  virtual Status DeleteOurRule(const std::string& name, bool* skipped) = 0;
  // UIDs of the pods on `node` holding one of `devices` (ResourceClaim allocation results +
  // reservedFor).
  virtual StatusOr<std::set<std::string>> PodsHolding(
      const std::string& node, const std::vector<remediation::DeviceRef>& devices) = 0;
  // KEP-4817 (policy remediation.claimStatus): sets (c.healthy: removes) our GPUHealthy
  // condition on the status.devices entry of every ResourceClaim named by a pod on `node`,
  // or listed in `also` ("namespace/name": claims marked earlier whose pods may be gone), and
  // allocated one of `devices`, through resourceclaims/status. Returns the claims written
  // ("namespace/name"). Implementations without claims write nothing.
  virtual StatusOr<std::vector<std::string>> MarkClaims(
      const std::string& node, const std::vector<remediation::DeviceRef>& devices,
      const remediation::ClaimDeviceCondition& c, const std::vector<std::string>& also = {}) {
    (void)node, (void)devices, (void)c, (void)also;
    return std::vector<std::string>{};
  }
};

class DraClient : public DraApi {
 public:
  // `refresh`: discovery is repeated this often (an upgrade or a feature gate turned on must
  // not need an operator restart).
  DraClient(k8s::RestClient& client, Clock& clock, Duration refresh = std::chrono::minutes(10));

  StatusOr<DraCapabilities> Capabilities() override;
  StatusOr<remediation::GpuDeviceMap> MapGpus(const std::string& node, const std::string& driver,
                                              const std::vector<std::string>& uuids) override;
  StatusOr<std::string> EnsureRule(const remediation::DeviceTaintRuleSpec& spec,
                                   bool* created = nullptr) override;
  Status DeleteOurRule(const std::string& name, bool* skipped = nullptr) override;
  StatusOr<std::set<std::string>> PodsHolding(
      const std::string& node, const std::vector<remediation::DeviceRef>& devices) override;
  StatusOr<std::vector<std::string>> MarkClaims(const std::string& node,
                                                const std::vector<remediation::DeviceRef>& devices,
                                                const remediation::ClaimDeviceCondition& c,
                                                const std::vector<std::string>& also) override;

 private:
  StatusOr<DraCapabilities> Discover();
  // The ResourceClaims the pods name (same namespace), as read, keyed "namespace/name";
  // claims deleted meanwhile are left out.
  StatusOr<std::map<std::string, std::string>> ClaimBodies(
      const std::vector<k8s::Pod>& pods, const std::string& version,
      const std::vector<std::string>& also = {});
  // One claim's condition, re-read and retried on a write conflict.
  StatusOr<bool> MarkClaim(const std::string& version, const std::string& key, std::string body,
                           const std::vector<remediation::DeviceRef>& devices,
                           const remediation::ClaimDeviceCondition& c);

  k8s::RestClient& client_;
  Clock& clock_;
  Duration refresh_;
  std::mutex mu_;
  std::optional<DraCapabilities> cached_;
  MonoTime cached_at_{};
};

}  // namespace gg::op
