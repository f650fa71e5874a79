// A gpu-guardian fleet in a simulator: the two CRDs, N realistic GPU nodes with a healthy
// GPUNodeHealth report each, and a policy fencing on Xid 79 (so steady-state traffic never
// fences anything). Used by the runners that start the operator.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "api/gpu_node_health.h"
#include "api/test_reports.h"
#include "bench/scenarios/populate.h"
#include "sim/population.h"
#include "sim/server.h"
#include "sim/test_objects.h"

namespace gg::bench {

inline constexpr char kPoliciesPath[] = "/apis/gpuguardian.io/v1alpha1/gpuhealthpolicies";
inline constexpr char kReportsPath[] = "/apis/gpuguardian.io/v1alpha1/gpunodehealths";

inline nlohmann::json CrdJson(const std::string& plural, const std::string& kind) {
  return sim::GuardianCrd(plural, kind);
}

// What an agent on an 8-GPU node reports; `temperature` varies for "random report changes",
// `xid` adds an Xid 79 (GPU fallen off the bus) on GPU 0.
inline api::GpuNodeHealthStatus AgentReport(const std::string& node, bool xid,
                                            int temperature = 40) {
  auto s = api::testing::HealthyReport(node, std::chrono::system_clock::now(), 8, sim::FakeGpuUuid,
                                       "bench", temperature);
  if (xid) api::testing::AddXid(s);
  return s;
}

inline nlohmann::json ReportObject(const std::string& node) {
  return {
      {"apiVersion", "gpuguardian.io/v1alpha1"},
      {"kind", "GPUNodeHealth"},
      {"metadata", {{"name", node}}},
      {"status", nlohmann::json::parse(api::EncodeGpuNodeHealthStatus(AgentReport(node, false)))}};
}

// Fences (taint + cordon, drain of GPU pods) on one Xid 79; a brake that allows everything.
inline nlohmann::json XidPolicy(const std::string& scope = "GPUPods") {
  nlohmann::json p = {{"apiVersion", "gpuguardian.io/v1alpha1"},
                      {"kind", "GPUHealthPolicy"},
                      {"metadata", {{"name", "bench"}}}};
  p["spec"] = nlohmann::json::parse(R"({
      "nodeSelector": {"matchLabels": {"nvidia.com/gpu.present": "true"}},
      "rules": [{"name": "fatal-xid", "xid": {"codes": [79]}, "count": 1, "action": "Drain"}],
      "remediation": {"taint": {"effect": "NoSchedule"},
                      "drain": {"scope": "GPUPods", "timeout": "10m"}},
      "recovery": {"automatic": false},
      "safety": {"maxUnhealthy": "100%", "maxNodesPerHour": 1000000,
                 "maxConcurrentDrains": 100000}
    })");
  p["spec"]["remediation"]["drain"]["scope"] = scope;
  return p;
}

// CRDs + the gpu-guardian-system namespace. False (message on stderr) on failure.
inline bool CreateCrds(sim::SimServer& srv) {
  const char* crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
  Status a = srv.Create(crds, CrdJson("gpuhealthpolicies", "GPUHealthPolicy"));
  Status b = srv.Create(crds, CrdJson("gpunodehealths", "GPUNodeHealth"));
  if (!a.ok() || !b.ok()) {
    std::fprintf(stderr, "CRDs: %s %s\n", a.ToString().c_str(), b.ToString().c_str());
    return false;
  }
  (void)srv.Create("/api/v1/namespaces", {{"apiVersion", "v1"},
                                          {"kind", "Namespace"},
                                          {"metadata", {{"name", "gpu-guardian-system"}}}});
  return true;
}

// One healthy report per node 0..n-1 (names from NodeName), from several threads.
inline bool CreateReports(sim::SimServer& srv, const sim::PopulationSpec& spec, long n) {
  long threads = std::max(1L, std::min(8L, sysconf(_SC_NPROCESSORS_ONLN)));
  std::atomic<bool> ok{true};
  std::vector<std::jthread> ts;
  for (long t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      for (long i = t; i < n && ok.load(); i += threads) {
        Status s = srv.Create(kReportsPath, ReportObject(NodeName(spec, i)));
        if (!s.ok()) {
          std::fprintf(stderr, "report %ld: %s\n", i, s.ToString().c_str());
          ok = false;
        }
      }
    });
  }
  ts.clear();
  return ok.load();
}

}  // namespace gg::bench
