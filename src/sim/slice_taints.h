// Device taints in ResourceSlices (KEP-5055) as each release's kube-apiserver stores them:
// - before 1.33 the field does not exist in any served version (v1beta1 `basic` has no
//   `taints`): it is dropped like any field the type does not declare;
// - from 1.33 (`devices[].basic.taints` in v1beta1, `devices[].taints` in v1beta2 and v1;
//   the DRADeviceTaints gate treated as on, as for DeviceTaintRule) a taint written without
//   `timeAdded` gets the time of the write, as the server adds it "during create or update
//   if not set". Key, value and effect are validated with the object (schema.cc).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "sim/registry.h"

namespace gg::sim {

// For a create or update of a ResourceSlice (any other object passes untouched).
void PrepareSliceTaints(const ResourceInfo& ri, std::string_view kube_version,
                        const std::string& now, nlohmann::json& obj);

}  // namespace gg::sim
