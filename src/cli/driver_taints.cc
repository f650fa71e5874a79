// Device taints published by DRA drivers, for status/explain (see driver_taints.h).
#include "cli/driver_taints.h"

#include "common/time_util.h"
#include "k8s/codec.h"
#include "k8s/crd_hint.h"
#include "k8s/resource.h"

namespace gg::cli {

std::vector<std::string> DriverTaintLines(const std::vector<k8s::ResourceSlice>& slices,
                                          const std::string& node) {
  std::vector<std::string> out;
  for (const auto& s : slices) {
    if (s.node_name != node) continue;
    for (const auto& d : s.devices) {
      auto uuid = d.attributes.find("uuid");
      if (uuid == d.attributes.end()) uuid = d.attributes.find(s.driver + "/uuid");
      for (const auto& t : d.taints) {
        std::string line = s.driver + "/" + s.pool_name + "/" + d.name;
        if (uuid != d.attributes.end()) line += " (" + uuid->second + ")";
        line += " " + t.key + (t.value.empty() ? "" : "=" + t.value) + ":" + t.effect;
        if (t.time_added) line += " since " + FormatRfc3339(*t.time_added);
        out.push_back(line + ", published by the driver");
      }
    }
  }
  return out;
}

std::vector<k8s::ResourceSlice> ListSlices(k8s::RestClient& client, const std::string& node) {
  std::vector<k8s::ResourceSlice> out;
  k8s::ListOptions lo;
  lo.limit = 500;
  if (!node.empty()) lo.field_selector = "spec.nodeName=" + node;
  // Newest first: v1 from 1.34, v1beta2 from 1.33, v1beta1 (the `basic` shape) before.
  for (const char* version : {"v1", "v1beta2", "v1beta1"}) {
    std::vector<k8s::ResourceSlice> got;
    Status st =
        client.ListPages(k8s::ResourceSlices(version), "", lo,
                         [&](std::string& page) -> StatusOr<k8s::ListPageInfo> {
                           GG_ASSIGN_OR_RETURN(auto list, k8s::ParseList<k8s::ResourceSlice>(page));
                           for (auto& s : list.items) got.push_back(std::move(s));
                           return k8s::ListPageInfo{list.resource_version, list.continue_token};
                         });
    if (st.ok()) return got;
    if (!IsNotFound(st) && !k8s::IsResourceNotServed(st)) return out;  // forbidden, down: none
  }
  return out;
}

}  // namespace gg::cli
