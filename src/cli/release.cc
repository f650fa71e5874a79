// kubectl gpu-guardian release: read the node, PlanRelease, one PATCH (resourceVersion
// precondition), the Events.
#include "cli/release.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "api/gpu_node_health.h"
#include "common/strings.h"
#include "common/time_util.h"
#include "events/sink.h"
#include "k8s/codec.h"
#include "remediation/plan.h"

namespace gg::cli {
namespace {

using nlohmann::json;

remediation::NodeView ToView(const k8s::Node& node) {
  remediation::NodeView v;
  v.name = node.meta.name;
  v.unschedulable = node.unschedulable;
  for (const auto& t : node.taints) v.taints.push_back({t.key, t.value, t.effect});
  if (auto a = node.meta.annotations.Get(api::kRemediationAnnotation)) {
    v.record_annotation = std::string(*a);
  }
  return v;
}

// Strategic-merge body: the record, the node's taints without ours (the list is replaced
// whole), the cordon lifted; metadata.resourceVersion makes it fail on a node changed since.
std::string PatchBody(const k8s::Node& node, const remediation::NodeChange& c) {
  json j;
  j["metadata"]["resourceVersion"] = node.meta.resource_version;
  if (c.record) {
    j["metadata"]["annotations"][api::kRemediationAnnotation] =
        remediation::EncodeRecord(*c.record);
  }
  if (c.remove_taint) {
    json kept = json::array();
    for (const auto& t : node.taints) {
      if (t.key == api::kTaintKey) continue;
      json one = {{"key", t.key}, {"effect", t.effect}};
      if (!t.value.empty()) one["value"] = t.value;
      if (t.time_added) one["timeAdded"] = FormatRfc3339(*t.time_added);
      kept.push_back(std::move(one));
    }
    j["spec"]["taints"] = kept.empty() ? json(nullptr) : kept;
  }
  if (c.unschedulable && !*c.unschedulable) j["spec"]["unschedulable"] = nullptr;
  return j.dump();
}

Status PostEvents(k8s::RestClient& client, const k8s::Node& node, const remediation::NodeChange& c,
                  WallTime now) {
  int64_t nanos =
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  for (const auto& e : c.events) {
    events::CoreEvent ev;
    char suffix[32];
    std::snprintf(suffix, sizeof(suffix), "%llx", static_cast<unsigned long long>(nanos++));
    ev.name = node.meta.name + "." + suffix;
    ev.namespace_ = "default";
    ev.involved = events::ObjectRef::Node(node.meta.name, node.meta.uid);
    ev.type = e.type;
    ev.reason = e.reason;
    ev.message = e.message;
    ev.first_timestamp = ev.last_timestamp = now;
    ev.component = "kubectl-gpu_guardian";
    auto r = client.Create(k8s::kEvents, ev.namespace_, events::EncodeCoreEvent(ev));
    if (!r.ok()) return r.status();
  }
  return OkStatus();
}

std::string Summary(const std::string& node, const remediation::NodeChange& c) {
  std::vector<std::string> done;
  if (c.unschedulable && !*c.unschedulable) done.push_back("uncordoned");
  if (c.remove_taint) done.push_back("untainted " + std::string(api::kTaintKey));
  if (c.record && !c.record->device_taints.empty()) {
    done.push_back("the operator removes its " + std::to_string(c.record->device_taints.size()) +
                   " DRA device taint(s)");
  }
  if (c.record && c.record->drain.phase == remediation::DrainPhase::kRunning) {
    done.push_back("the operator stops its drain");
  }
  if (done.empty()) done.push_back("remediation ended");
  return "node/" + node + " released: " + Join(done, ", ") + "\n";
}

}  // namespace

StatusOr<std::string> ReleaseNode(k8s::RestClient& client, const std::string& name,
                                  const std::string& reason, WallTime now) {
  if (TrimSpace(reason).empty()) {
    return InvalidArgumentError("--reason: say why the node is handed back (it is recorded)");
  }
  for (int attempt = 0;; ++attempt) {
    GG_ASSIGN_OR_RETURN(std::string body, client.Get(k8s::kNodes, "", name));
    GG_ASSIGN_OR_RETURN(k8s::Node node, k8s::ParseObject<k8s::Node>(body));
    remediation::NodeChange c = remediation::PlanRelease(ToView(node), reason, now);
    if (!c.WritesNode()) {
      return "node/" + name + " holds nothing of gpu-guardian's: nothing to release\n";
    }
    auto patched =
        client.Patch(k8s::kNodes, "", name, k8s::PatchType::kStrategicMerge, PatchBody(node, c));
    if (!patched.ok() && IsAborted(patched.status()) && attempt < 4) continue;  // raced: again
    if (!patched.ok()) return patched.status();
    GG_RETURN_IF_ERROR(PostEvents(client, node, c, now));
    return Summary(name, c);
  }
}

}  // namespace gg::cli
