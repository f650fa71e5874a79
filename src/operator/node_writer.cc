// RestNodeWriter: Node PATCHes built with nlohmann (writes are rare).
#include "operator/node_writer.h"

#include <nlohmann/json.hpp>

#include "common/time_util.h"
#include "k8s/builders.h"
#include "k8s/codec.h"

namespace gg::op {

std::string NodeSpecPatchBody(const NodeSpecChange& c) {
  nlohmann::json j = nlohmann::json::object();
  if (!c.resource_version.empty()) j["metadata"]["resourceVersion"] = c.resource_version;
  for (const auto& [k, v] : c.annotations) {
    j["metadata"]["annotations"][k] = v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  }
  if (c.taints) {
    if (c.taints->empty()) {
      j["spec"]["taints"] = nullptr;
    } else {
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& t : *c.taints) {
        nlohmann::json tj = {{"key", t.key}, {"effect", t.effect}};
        if (!t.value.empty()) tj["value"] = t.value;
        if (t.time_added) tj["timeAdded"] = FormatRfc3339(*t.time_added);
        arr.push_back(std::move(tj));
      }
      j["spec"]["taints"] = std::move(arr);
    }
  }
  if (c.unschedulable) {
    j["spec"]["unschedulable"] = *c.unschedulable ? nlohmann::json(true) : nlohmann::json(nullptr);
  }
  return j.dump();
}

Status RestNodeWriter::CheckLeader() const {
  if (is_leader_ && !is_leader_()) return UnavailableError("not the leader: write skipped");
  return OkStatus();
}

namespace {
// metadata.resourceVersion of the node the server returned; "" if it does not parse.
std::string ResourceVersionOf(std::string& body) {
  auto rv = k8s::ParseResourceVersion(body);
  return rv.ok() ? *rv : std::string();
}
}  // namespace

StatusOr<std::string> RestNodeWriter::PatchNode(const std::string& node,
                                                const NodeSpecChange& change) {
  if (change.Empty()) return std::string();
  GG_RETURN_IF_ERROR(CheckLeader());
  auto r = client_.Patch(k8s::kNodes, "", node, k8s::PatchType::kStrategicMerge,
                         NodeSpecPatchBody(change));
  if (!r.ok()) return r.status().WithContext("patching node " + node);
  return ResourceVersionOf(*r);
}

StatusOr<std::string> RestNodeWriter::PatchCondition(const std::string& node,
                                                     const k8s::NodeCondition& c) {
  GG_RETURN_IF_ERROR(CheckLeader());
  auto r = client_.Patch(k8s::kNodes, "", node, k8s::PatchType::kStrategicMerge,
                         k8s::NodeConditionPatch(c), "status");
  if (!r.ok()) return r.status().WithContext("patching node status " + node);
  return ResourceVersionOf(*r);
}

}  // namespace gg::op
