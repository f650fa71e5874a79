// DraClient: discovery, ResourceSlice LIST, DeviceTaintRule create/delete, claim lookups.
#include "operator/dra_client.h"

#include <algorithm>
#include <map>

#include "k8s/codec.h"
#include "k8s/errors.h"
#include "remediation/drainer.h"

namespace gg::op {

std::string DraCapabilities::WhyNot(api::DeviceTaintEffect effect) const {
  if (!Served()) return message;
  if (effect == api::DeviceTaintEffect::kNone && !effect_none) {
    return "DeviceTaintRule " + rule_version +
           " does not accept effect None (Kubernetes 1.35+ with DRADeviceTaintRules)";
  }
  return "";
}

DraClient::DraClient(k8s::RestClient& client, Clock& clock, Duration refresh)
    : client_(client), clock_(clock), refresh_(refresh) {}

StatusOr<DraCapabilities> DraClient::Capabilities() {
  {
    std::scoped_lock lock(mu_);
    if (cached_ && clock_.Monotonic() - cached_at_ < refresh_) return *cached_;
  }
  auto caps = Discover();
  if (!caps.ok()) return caps.status();
  std::scoped_lock lock(mu_);
  cached_ = *caps;
  cached_at_ = clock_.Monotonic();
  return *caps;
}

StatusOr<DraCapabilities> DraClient::Discover() {
  const std::string group = k8s::kResourceGroup;
  DraCapabilities caps;
  auto body = client_.RawGet("/apis/" + group);
  if (!body.ok()) {
    if (IsNotFound(body.status())) {
      caps.message = "the API server does not serve " + group;
      return caps;
    }
    return body.status().WithContext("discovering " + group);
  }
  auto versions = remediation::ParseGroupVersions(*body);
  if (!versions.ok()) return versions.status().WithContext("discovering " + group);
  std::sort(versions->begin(), versions->end(), [](const std::string& a, const std::string& b) {
    return remediation::NewerApiVersion(a, b);
  });
  // Newest first: the first version serving a resource is the one to use for it
  // (DeviceTaintRule is v1alpha3 in 1.33-1.35 and v1beta2 in 1.36, while slices are v1).
  for (const auto& v : *versions) {
    auto list = client_.RawGet("/apis/" + group + "/" + v);
    if (!list.ok()) {
      if (IsNotFound(list.status())) continue;
      return list.status().WithContext("discovering " + group + "/" + v);
    }
    auto res = remediation::ParseDraResources(*list);
    if (!res.ok()) return res.status().WithContext("discovering " + group + "/" + v);
    if (res->resource_slices && caps.slice_version.empty()) caps.slice_version = v;
    if (res->resource_claims && caps.claim_version.empty()) caps.claim_version = v;
    if (res->device_taint_rules && caps.rule_version.empty()) {
      caps.rule_version = v;
      caps.effect_none = res->device_taint_rule_status;
    }
  }
  if (caps.slice_version.empty()) {
    caps.message = "the API server serves no ResourceSlices (" + group + ")";
  } else if (caps.rule_version.empty()) {
    caps.message = "the API server does not serve DeviceTaintRule (" + group +
                   "; needs Kubernetes 1.33+ with the DRADeviceTaints feature gate and the "
                   "v1alpha3 API, or 1.36 with DRADeviceTaintRules and v1beta2)";
  } else {
    caps.message = "DeviceTaintRule " + group + "/" + caps.rule_version + ", ResourceSlice " +
                   caps.slice_version;
  }
  return caps;
}

StatusOr<remediation::GpuDeviceMap> DraClient::MapGpus(const std::string& node,
                                                       const std::string& driver,
                                                       const std::vector<std::string>& uuids) {
  auto caps = Capabilities();
  if (!caps.ok()) return caps.status();
  if (caps->slice_version.empty()) return remediation::MapGpuDevices({}, node, driver, uuids);
  std::vector<k8s::ResourceSlice> slices;
  k8s::ListOptions lo;
  lo.field_selector = "spec.nodeName=" + node;
  lo.limit = 100;
  Status s = client_.ListPages(
      k8s::ResourceSlices(caps->slice_version), "", lo,
      [&](std::string& body) -> StatusOr<k8s::ListPageInfo> {
        auto list = k8s::ParseListInto<k8s::ResourceSlice>(body, [&](k8s::ResourceSlice&& sl) {
          // Keep only the driver's slices: other drivers' devices never map.
          if (sl.driver == driver) slices.push_back(std::move(sl));
        });
        if (!list.ok()) return list.status();
        return k8s::ListPageInfo{list->resource_version, list->continue_token};
      });
  if (!s.ok()) return s.WithContext("listing ResourceSlices of node " + node);
  return remediation::MapGpuDevices(slices, node, driver, uuids);
}

StatusOr<std::string> DraClient::EnsureRule(const remediation::DeviceTaintRuleSpec& spec,
                                            bool* created_now) {
  if (created_now) *created_now = false;
  auto caps = Capabilities();
  if (!caps.ok()) return caps.status();
  if (caps->rule_version.empty()) return FailedPreconditionError(caps->message);
  const auto type = k8s::DeviceTaintRules(caps->rule_version);
  const std::string name = remediation::DeviceTaintRuleName(spec.device);
  auto created =
      client_.Create(type, "", remediation::BuildDeviceTaintRule(caps->rule_version, spec));
  if (created.ok()) {
    if (created_now) *created_now = true;
    return name;
  }
  if (!IsAlreadyExists(created.status())) {
    return created.status().WithContext("creating DeviceTaintRule " + name);
  }
  auto cur = client_.Get(type, "", name);
  if (!cur.ok()) return cur.status().WithContext("reading DeviceTaintRule " + name);
  if (!remediation::IsOurDeviceTaintRule(*cur)) {
    return FailedPreconditionError("DeviceTaintRule " + name +
                                   " exists and was not created by gpu-guardian; left alone");
  }
  return name;
}

Status DraClient::DeleteOurRule(const std::string& name, bool* skipped) {
  if (skipped) *skipped = false;
  auto caps = Capabilities();
  if (!caps.ok()) return caps.status();
  // No longer served (a downgrade, the gate turned off): nothing is enforced any more, and
  // recovery of the node must not wait for an API that is gone.
  if (caps->rule_version.empty()) return OkStatus();
  const auto type = k8s::DeviceTaintRules(caps->rule_version);
  auto cur = client_.Get(type, "", name);
  if (!cur.ok()) {
    if (IsNotFound(cur.status())) return OkStatus();
    return cur.status().WithContext("reading DeviceTaintRule " + name);
  }
  if (!remediation::IsOurDeviceTaintRule(*cur)) {
    if (skipped) *skipped = true;  // never touch a rule we did not create
    return OkStatus();
  }
  k8s::DeleteOptions opts;
  opts.precondition_uid = remediation::RuleUid(*cur);  // not a same-named successor
  Status s = client_.Delete(type, "", name, opts);
  if (s.ok() || IsNotFound(s)) return OkStatus();
  return s.WithContext("deleting DeviceTaintRule " + name);
}

StatusOr<std::map<std::string, std::string>> DraClient::ClaimBodies(
    const std::vector<k8s::Pod>& pods, const std::string& version,
    const std::vector<std::string>& also) {
  std::vector<std::pair<std::string, std::string>> keys;  // namespace, name
  for (const auto& p : pods) {
    for (const auto& c : p.resource_claims) keys.emplace_back(p.meta.namespace_, c);
  }
  for (const auto& k : also) {
    const size_t slash = k.find('/');
    if (slash != std::string::npos) keys.emplace_back(k.substr(0, slash), k.substr(slash + 1));
  }
  std::map<std::string, std::string> out;
  for (const auto& [ns, name] : keys) {
    std::string key = ns + "/" + name;
    if (out.contains(key)) continue;
    auto body = client_.Get(k8s::ResourceClaims(version), ns, name);
    if (!body.ok()) {
      if (IsNotFound(body.status())) continue;  // deleted with its pod
      return body.status().WithContext("reading ResourceClaim " + key);
    }
    out.emplace(key, std::move(*body));
  }
  return out;
}

StatusOr<std::set<std::string>> DraClient::PodsHolding(
    const std::string& node, const std::vector<remediation::DeviceRef>& devices) {
  auto caps = Capabilities();
  if (!caps.ok()) return caps.status();
  if (caps->claim_version.empty()) return std::set<std::string>{};
  remediation::RestPodApi pods_api(client_);
  auto pods = pods_api.ListPodsOnNode(node);
  if (!pods.ok()) return pods.status();
  auto bodies = ClaimBodies(*pods, caps->claim_version);
  if (!bodies.ok()) return bodies.status();
  std::map<std::string, k8s::ResourceClaim> claims;
  for (const auto& [key, body] : *bodies) {
    auto claim = k8s::ParseObject<k8s::ResourceClaim>(body);
    if (!claim.ok()) return claim.status().WithContext("ResourceClaim " + key);
    claims.emplace(key, std::move(*claim));
  }
  return remediation::PodsHoldingDevices(*pods, claims, devices);
}

StatusOr<bool> DraClient::MarkClaim(const std::string& version, const std::string& key,
                                    std::string body,
                                    const std::vector<remediation::DeviceRef>& devices,
                                    const remediation::ClaimDeviceCondition& c) {
  const size_t slash = key.find('/');
  const std::string ns = key.substr(0, slash), name = key.substr(slash + 1);
  const auto type = k8s::ResourceClaims(version);
  for (int attempt = 0;; ++attempt) {
    auto next = remediation::ClaimWithDeviceCondition(body, devices, c);
    if (!next.ok()) return next.status().WithContext("ResourceClaim " + key);
    if (!next->has_value()) return false;
    auto put = client_.UpdateStatus(type, ns, name, **next);
    if (put.ok()) return true;
    if (IsNotFound(put.status())) return false;
    if (!k8s::IsConflict(put.status()) || attempt == 2) {
      return put.status().WithContext("writing the status of ResourceClaim " + key);
    }
    auto again = client_.Get(type, ns, name);  // a concurrent writer: read, apply again
    if (!again.ok()) return IsNotFound(again.status()) ? StatusOr<bool>(false) : again.status();
    body = std::move(*again);
  }
}

StatusOr<std::vector<std::string>> DraClient::MarkClaims(
    const std::string& node, const std::vector<remediation::DeviceRef>& devices,
    const remediation::ClaimDeviceCondition& c, const std::vector<std::string>& also) {
  std::vector<std::string> written;
  auto caps = Capabilities();
  if (!caps.ok()) return caps.status();
  if (caps->claim_version.empty() || devices.empty()) return written;
  remediation::RestPodApi pods_api(client_);
  auto pods = pods_api.ListPodsOnNode(node);
  if (!pods.ok()) return pods.status();
  auto bodies = ClaimBodies(*pods, caps->claim_version, also);
  if (!bodies.ok()) return bodies.status();
  for (auto& [key, body] : *bodies) {
    auto w = MarkClaim(caps->claim_version, key, std::move(body), devices, c);
    if (!w.ok()) return w.status();
    if (*w) written.push_back(key);
  }
  return written;
}

}  // namespace gg::op
