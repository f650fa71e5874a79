// The two publish modes as ReportWriters over the k8s RestClient, plus the Node look-up the
// agent does at start (nvidia.com/gpu capacity = expected GPU count).
//   resource:   cluster-scoped GPUNodeHealth/<node> (ownerReference -> Node, uid fetched),
//               created when missing, then `status` written by merge patch on /status; a
//               heartbeat patches only status.heartbeatTime, with the resourceVersion of our
//               last write as precondition (anything else changed the object since: the
//               whole report is written again). With a NodeLease (UseLease) a heartbeat
//               renews the node's Lease instead and the report is written only when its
//               facts change; while the Lease cannot be written (no RBAC grant, no such
//               namespace, an older cluster) the heartbeat falls back to the report patch.
//   annotation: Node annotation gpuguardian.io/health = compact {"v":1,...} (merge patch).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "agent/node_lease.h"
#include "agent/publisher.h"
#include "common/log.h"
#include "k8s/rest_client.h"

namespace gg::agent {

inline constexpr char kFieldManager[] = "gpu-guardian-agent";

class ResourceWriter final : public ReportWriter {
 public:
  // `client` must outlive the writer.
  ResourceWriter(k8s::RestClient& client, std::string node_name, Logger log = Logger());
  // Called with the Node's nvidia.com/gpu capacity whenever the writer reads the Node (when
  // creating the object), so an agent that started while the API was down still learns it.
  void OnNodeCapacity(std::function<void(int)> fn) { on_capacity_ = std::move(fn); }
  // Heartbeats renew `lease` (created with the first report) instead of patching the report.
  void UseLease(std::unique_ptr<NodeLease> lease) { lease_ = std::move(lease); }
  std::string_view Mode() const override { return "resource"; }
  Status Write(const api::GpuNodeHealthStatus& report) override;
  Status Heartbeat(const api::GpuNodeHealthStatus& report) override;

  // The heartbeat's patch: {"metadata":{"resourceVersion":rv},"status":{"heartbeatTime":t}}.
  static std::string HeartbeatPatchBody(WallTime heartbeat_time,
                                        const std::string& resource_version);
  // The body of the status patch: {"status": <report>} with explicit nulls for top-level
  // fields the report omits, so a merge patch clears them instead of keeping stale values.
  static std::string StatusPatchBody(const api::GpuNodeHealthStatus& report);
  // The object created when missing (metadata + ownerReference, no status).
  static std::string NewObjectBody(const std::string& node_name, const std::string& node_uid);

 private:
  Status EnsureObject();
  // True when the Lease was renewed with `now`. A refusal (403, 404, 422...) pauses the
  // Lease for kLeasePauseHeartbeats heartbeats, which patch the report instead.
  bool RenewLease(WallTime now);

  k8s::RestClient& client_;
  std::string node_;
  Logger log_;
  bool exists_ = false;
  std::string written_rv_;  // resourceVersion after our last successful write ("" unknown)
  std::function<void(int)> on_capacity_;
  std::unique_ptr<NodeLease> lease_;  // null: heartbeats patch the report
  bool lease_tried_ = false;          // the first report write also created/renewed the Lease
  bool lease_failing_ = false;        // the last attempt failed (logged once per error)
  int lease_paused_ = 0;              // heartbeats left that skip a refused Lease
  std::string lease_error_;           // last logged Lease error
};

class AnnotationWriter final : public ReportWriter {
 public:
  AnnotationWriter(k8s::RestClient& client, std::string node_name);
  std::string_view Mode() const override { return "annotation"; }
  Status Write(const api::GpuNodeHealthStatus& report) override;

 private:
  k8s::RestClient& client_;
  std::string node_;
};

// The Node's status.capacity["nvidia.com/gpu"] (0 when absent).
StatusOr<int> ReadNodeGpuCapacity(k8s::RestClient& client, const std::string& node_name);

}  // namespace gg::agent
