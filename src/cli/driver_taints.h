// The device taints DRA drivers publish in their own ResourceSlices (KEP-5055; NVIDIA's
// driver: gpu.nvidia.com/xid=<xid> after an Xid its health check read), as `status` and
// `explain` show them: per device, who published it, key, value, effect and timeAdded.
#pragma once

#include <string>
#include <vector>

#include "k8s/objects.h"
#include "k8s/rest_client.h"

namespace gg::cli {

// One line per taint on a device of `node`'s slices:
// "gpu.nvidia.com/node-a/gpu-3 (GPU-…) gpu.nvidia.com/xid=48:NoSchedule since <RFC 3339>,
// published by the driver".
std::vector<std::string> DriverTaintLines(const std::vector<k8s::ResourceSlice>& slices,
                                          const std::string& node);

// The ResourceSlices of `node` (all nodes when empty) through the newest resource.k8s.io
// version that serves them. Empty when none is served or the caller may not list them: the
// table never fails for want of DRA.
std::vector<k8s::ResourceSlice> ListSlices(k8s::RestClient& client, const std::string& node);

}  // namespace gg::cli
