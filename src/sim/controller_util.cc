// Helpers shared by the simulated cluster's control loops.
#include "sim/controller_util.h"

namespace gg::sim::internal {

using nlohmann::json;

std::string Str(const json& j, std::initializer_list<const char*> path) {
  const json* cur = &j;
  for (const char* p : path) {
    if (!cur->is_object() || !cur->contains(p)) return "";
    cur = &(*cur)[p];
  }
  return cur->is_string() ? cur->get<std::string>() : "";
}

bool NodeSelectorMatches(const json& pod_spec, const json& node) {
  if (!pod_spec.contains("nodeSelector") || !pod_spec["nodeSelector"].is_object()) return true;
  json labels = node["metadata"].value("labels", json::object());
  for (const auto& [k, v] : pod_spec["nodeSelector"].items())
    if (!labels.contains(k) || labels[k] != v) return false;
  return true;
}

NodeInfo MakeNodeInfo(const json& n) {
  NodeInfo ni;
  ni.node = {{"metadata", {{"labels", n["metadata"].value("labels", json::object())}}},
             {"spec", n.value("spec", json::object())}};
  std::string alloc;
  if (n.contains("status") && n["status"].contains("allocatable")) {
    const auto& a = n["status"]["allocatable"];
    if (a.contains("nvidia.com/gpu") && a["nvidia.com/gpu"].is_string()) alloc = a["nvidia.com/gpu"];
  }
  try {
    ni.gpus = alloc.empty() ? 0 : std::stol(alloc);
  } catch (...) {
    ni.gpus = 0;
  }
  ni.schedulable = !n.value("spec", json::object()).value("unschedulable", false);
  if (n.contains("status") && n["status"].contains("conditions"))
    for (const auto& c : n["status"]["conditions"])
      if (c.value("type", "") == "Ready" && c.value("status", "") == "False") ni.schedulable = false;
  return ni;
}

bool PodActive(const json& p) {
  std::string phase = Str(p, {"status", "phase"});
  return phase != "Succeeded" && phase != "Failed" && !p["metadata"].contains("deletionTimestamp");
}

std::string ControllerUid(const json& p) {
  for (const auto& r : p["metadata"].value("ownerReferences", json::array()))
    if (r.value("controller", false)) return r.value("uid", "");
  return "";
}

}  // namespace gg::sim::internal
