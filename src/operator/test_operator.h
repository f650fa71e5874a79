// What the operator's simulator tests share to run the whole operator in-process: a client of
// the simulator, an operator configuration without leader election, an agent's report.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "api/gpu_node_health.h"
#include "common/clock.h"
#include "k8s/rest_client.h"
#include "operator/operator.h"
#include "sim/server.h"

namespace gg::op {

inline StatusOr<std::unique_ptr<k8s::RestClient>> SimClient(sim::SimServer& srv) {
  k8s::ClientConfig cfg;
  cfg.server = srv.Url();
  return k8s::RestClient::Create(cfg, RealClock::Default());
}

// One replica (no leader election), metrics and probes on a free port.
inline OperatorConfig SingleOperatorConfig(std::string identity) {
  OperatorConfig oc;
  oc.metrics_addr = "127.0.0.1:0";
  oc.leader_elect = false;
  oc.identity = std::move(identity);
  return oc;
}

// An agent's report (encoded status) for a one-GPU node, written now; with `xid` an Xid 79.
inline nlohmann::json OneGpuReport(const std::string& node, bool xid) {
  api::GpuNodeHealthStatus s;
  s.node_name = node;
  s.agent_version = "test";
  s.observed_at = s.heartbeat_time = std::chrono::system_clock::now();
  s.expected_gpus = 1;
  api::GpuStatus g;
  g.index = 0;
  g.uuid = "GPU-" + node;
  s.gpus.push_back(g);
  s.sources.push_back({"nvml", api::SourceState::kOk, ""});
  if (xid) {
    api::XidEvent e;
    e.xid = 79;
    e.gpu_uuid = g.uuid;
    e.count = 1;
    e.first_seen = e.last_seen = s.observed_at;
    s.xids.push_back(e);
  }
  return nlohmann::json::parse(api::EncodeGpuNodeHealthStatus(s));
}

// A GPUHealthPolicy "p" over nodes labelled nvidia.com/gpu.present=true that cordons on one
// Xid 79, with no brake (maxUnhealthy 100%); `extra` is merged into its spec.
inline nlohmann::json XidCordonPolicy(const nlohmann::json& extra = nlohmann::json::object()) {
  nlohmann::json spec = nlohmann::json::parse(R"({
      "nodeSelector": {"matchLabels": {"nvidia.com/gpu.present": "true"}},
      "rules": [{"name": "fatal-xid", "xid": {"codes": [79]}, "count": 1, "action": "Cordon"}],
      "safety": {"maxUnhealthy": "100%"}})");
  spec.merge_patch(extra);
  return {{"apiVersion", "gpuguardian.io/v1alpha1"},
          {"kind", "GPUHealthPolicy"},
          {"metadata", {{"name", "p"}}},
          {"spec", spec}};
}

}  // namespace gg::op
