// ResourceClaim status writes per release (see claim_status.h).
#include "sim/claim_status.h"

#include <cstdlib>
#include <map>
#include <set>
#include <vector>

namespace gg::sim {
namespace {

using json = nlohmann::json;

const json& At(const json& j, const char* a, const char* b = nullptr) {
  static const json kNull;
  if (!j.is_object() || !j.contains(a)) return kNull;
  if (!b) return j[a];
  const json& x = j[a];
  return x.is_object() && x.contains(b) ? x[b] : kNull;
}

// Each status.devices entry by driver, so changes can be attributed to their driver.
std::map<std::string, std::vector<json>> EntriesByDriver(const json& claim) {
  std::map<std::string, std::vector<json>> out;
  const json& devs = At(claim, "status", "devices");
  if (!devs.is_array()) return out;
  for (const auto& e : devs) out[e.is_object() ? e.value("driver", "") : ""].push_back(e);
  return out;
}

std::optional<ApiError> UnallocatedEntry(const json& next) {
  const json& devs = At(next, "status", "devices");
  if (!devs.is_array()) return std::nullopt;
  const json& results = At(At(next, "status", "allocation"), "devices", "results");
  for (size_t i = 0; i < devs.size(); ++i) {
    const json& e = devs[i];
    bool found = false;
    for (const auto& r : results.is_array() ? results : json::array()) {
      found = found || (r.value("driver", "") == e.value("driver", "") &&
                        r.value("pool", "") == e.value("pool", "") &&
                        r.value("device", "") == e.value("device", ""));
    }
    if (!found) {
      std::string name = At(next, "metadata").value("name", "");
      return InvalidErr(
          "ResourceClaim", "resource.k8s.io", name,
          {{"FieldValueInvalid",
            "Invalid value: \"" + e.value("driver", "") + "/" + e.value("pool", "") + "/" +
                e.value("device", "") + "\": must be an allocated device in the claim",
            "status.devices[" + std::to_string(i) + "]"}});
    }
  }
  return std::nullopt;
}

std::optional<ApiError> Deny(Authorizer& authz, const WriteOpts& o, const std::string& verb,
                             const std::string& sub, const std::string& ns,
                             const std::string& name) {
  Attributes a;
  a.user = o.user;
  a.groups = o.groups;
  a.verb = verb;
  a.api_group = "resource.k8s.io";
  a.resource = "resourceclaims";
  a.subresource = sub;
  a.namespace_ = ns;
  a.name = name;
  if (authz.Authorize(a).allowed) return std::nullopt;
  json st = ForbiddenStatus(a);
  ApiError e = ForbiddenErr(st.value("message", ""));
  return e;
}

}  // namespace

std::optional<ApiError> AdmitClaimStatus(const Target& t, const std::string& kube_version,
                                         Authorizer* authz, bool from_patch, const json& old_claim,
                                         json& next, const WriteOpts& o) {
  if (t.sub != "status" || t.ri->group != "resource.k8s.io" || t.ri->resource != "resourceclaims")
    return std::nullopt;
  const std::string verb = from_patch ? "patch" : "update";
  int kube_minor = 35;
  if (auto dot = kube_version.find('.'); dot != std::string::npos) {
    kube_minor = std::atoi(kube_version.c_str() + dot + 1);
  }
  if (kube_minor < 33) {
    if (next.contains("status") && next["status"].is_object()) next["status"].erase("devices");
    return std::nullopt;
  }
  if (auto e = UnallocatedEntry(next)) return e;
  if (kube_minor < 36 || authz == nullptr || o.user.empty()) return std::nullopt;
  const std::string ns = At(old_claim, "metadata").value("namespace", "");
  const std::string claim = At(old_claim, "metadata").value("name", "");
  for (const char* f : {"allocation", "reservedFor"}) {
    if (At(old_claim, "status", f) != At(next, "status", f)) {
      if (auto e = Deny(*authz, o, verb, "binding", ns, claim)) return e;
      break;
    }
  }
  auto before = EntriesByDriver(old_claim), after = EntriesByDriver(next);
  std::set<std::string> drivers;
  for (const auto& [d, v] : before) drivers.insert(d);
  for (const auto& [d, v] : after) drivers.insert(d);
  for (const auto& d : drivers) {
    if (before[d] == after[d]) continue;
    // The synthetic subresource is named by the driver, not the claim.
    if (auto e = Deny(*authz, o, "arbitrary-node:" + verb, "driver", ns, d)) return e;
  }
  return std::nullopt;
}

}  // namespace gg::sim
