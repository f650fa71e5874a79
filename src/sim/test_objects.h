// Objects that tests and benchmarks seed into the simulator, shared so each fixture does not
// carry its own copy.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/server.h"

namespace gg::sim {

// A cluster-scoped gpuguardian.io/v1alpha1 CRD with a status subresource and a schema that
// accepts any body: for tests of the operator's behaviour, where the shipped CRD's validation
// (exercised by its own tests against deploy/crds/) is not what is under test.
inline nlohmann::json GuardianCrd(const std::string& plural, const std::string& kind) {
  using json = nlohmann::json;
  return {{"apiVersion", "apiextensions.k8s.io/v1"},
          {"kind", "CustomResourceDefinition"},
          {"metadata", {{"name", plural + ".gpuguardian.io"}}},
          {"spec",
           {{"group", "gpuguardian.io"},
            {"scope", "Cluster"},
            {"names", {{"plural", plural}, {"kind", kind}}},
            {"versions",
             {{{"name", "v1alpha1"},
               {"served", true},
               {"storage", true},
               {"subresources", {{"status", json::object()}}},
               {"schema",
                {{"openAPIV3Schema",
                  {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}}}}}}}}}};
}

// A ReplicaSet of one-GPU pods (label app=<name>); the simulator's controllers create,
// schedule and run its pods.
inline nlohmann::json GpuReplicaSet(const std::string& name, const std::string& ns, int replicas,
                                    int grace_seconds = 30) {
  using json = nlohmann::json;
  json tmpl = {
      {"metadata", {{"labels", {{"app", name}}}}},
      {"spec",
       {{"terminationGracePeriodSeconds", grace_seconds},
        {"containers",
         {{{"name", "c"},
           {"image", "cuda"},
           {"resources",
            {{"requests", {{"nvidia.com/gpu", "1"}}}, {"limits", {{"nvidia.com/gpu", "1"}}}}}}}}}}};
  return {{"apiVersion", "apps/v1"},
          {"kind", "ReplicaSet"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"labels", {{"app", name}}}}},
          {"spec",
           {{"replicas", replicas},
            {"selector", {{"matchLabels", {{"app", name}}}}},
            {"template", tmpl}}}};
}

// A PodDisruptionBudget "<app>-pdb" with minAvailable over the pods labelled app=<app>.
inline nlohmann::json MinAvailablePdb(const std::string& app, const std::string& ns,
                                      int min_available) {
  return {
      {"apiVersion", "policy/v1"},
      {"kind", "PodDisruptionBudget"},
      {"metadata", {{"name", app + "-pdb"}, {"namespace", ns}}},
      {"spec", {{"minAvailable", min_available}, {"selector", {{"matchLabels", {{"app", app}}}}}}}};
}

// Writes a GPUNodeHealth status the way an agent does: merge-patch the report when it exists,
// create it otherwise. `status` is the encoded `status` object.
inline Status PutReportStatus(SimServer& sim, const std::string& node,
                              const nlohmann::json& status) {
  const std::string collection = "/apis/gpuguardian.io/v1alpha1/gpunodehealths";
  const std::string path = collection + "/" + node;
  if (sim.Get(path).ok()) return sim.MergePatch(path, {{"status", status}}).status();
  return sim.Create(collection, {{"apiVersion", "gpuguardian.io/v1alpha1"},
                                 {"kind", "GPUNodeHealth"},
                                 {"metadata", {{"name", node}}},
                                 {"status", status}});
}

// A Ready GPU node labelled nvidia.com/gpu.present=true with `gpus` nvidia.com/gpu, as the
// operator's fleet tests seed it.
inline nlohmann::json ReadyGpuNode(const std::string& name, int gpus = 1) {
  using json = nlohmann::json;
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", {{"nvidia.com/gpu.present", "true"}}}}},
          {"spec", json::object()},
          {"status",
           {{"capacity", {{"nvidia.com/gpu", std::to_string(gpus)}}},
            {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

// A simulator with the two gpuguardian.io CRDs (GuardianCrd) and, per name, a ReadyGpuNode
// with the report `report(name)`; no kubelet, scheduler or controllers.
template <typename ReportFn>
StatusOr<std::unique_ptr<SimServer>> StartGuardianFleet(const std::vector<std::string>& nodes,
                                                        ReportFn report) {
  SimOptions o;
  o.kubelet = o.scheduler = o.controllers = false;
  auto s = SimServer::Start(o);
  if (!s.ok()) return s.status();
  SimServer& srv = **s;
  const char* crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
  GG_RETURN_IF_ERROR(srv.Create(crds, GuardianCrd("gpuhealthpolicies", "GPUHealthPolicy")));
  GG_RETURN_IF_ERROR(srv.Create(crds, GuardianCrd("gpunodehealths", "GPUNodeHealth")));
  for (const std::string& n : nodes) {
    GG_RETURN_IF_ERROR(srv.Create("/api/v1/nodes", ReadyGpuNode(n)));
    GG_RETURN_IF_ERROR(PutReportStatus(srv, n, report(n)));
  }
  return s;
}

}  // namespace gg::sim
