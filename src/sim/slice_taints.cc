// Device taints in ResourceSlices per release (see slice_taints.h).
#include "sim/slice_taints.h"

namespace gg::sim {

using json = nlohmann::json;

void PrepareSliceTaints(const ResourceInfo& ri, std::string_view kube_version,
                        const std::string& now, json& obj) {
  if (ri.group != "resource.k8s.io" || ri.resource != "resourceslices") return;
  if (!obj.is_object() || !obj.contains("spec") || !obj["spec"].is_object()) return;
  json& devices = obj["spec"]["devices"];
  if (!devices.is_array()) return;
  const bool served = kube_version >= std::string_view("1.33");
  for (auto& d : devices) {
    if (!d.is_object()) continue;
    // v1beta1 keeps them under `basic`; v1beta2/v1 on the device itself.
    json* holder = ri.version == "v1beta1"
                       ? (d.contains("basic") && d["basic"].is_object() ? &d["basic"] : nullptr)
                       : &d;
    if (!holder || !holder->contains("taints")) continue;
    if (!served) {
      holder->erase("taints");
      continue;
    }
    json& taints = (*holder)["taints"];
    if (!taints.is_array()) continue;  // validation refuses it
    for (auto& t : taints) {
      if (t.is_object() && (!t.contains("timeAdded") || t["timeAdded"].is_null()))
        t["timeAdded"] = now;
    }
  }
}

}  // namespace gg::sim
