// DRA device-level remediation, pure parts (see device_taints.h).
#include "remediation/device_taints.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "api/gpu_node_health.h"

namespace gg::remediation {
namespace {

using json = nlohmann::json;

struct VersionKey {
  bool valid = false;
  int major = 0;
  int stage = 0;  // 2 GA, 1 beta, 0 alpha
  int minor = 0;
};

VersionKey ParseVersion(std::string_view v) {
  VersionKey k;
  if (v.size() < 2 || v[0] != 'v') return k;
  size_t i = 1;
  auto number = [&](int* out) {
    size_t start = i;
    int n = 0;
    while (i < v.size() && v[i] >= '0' && v[i] <= '9' && i - start < 6) n = n * 10 + (v[i++] - '0');
    *out = n;
    return i > start;
  };
  if (!number(&k.major) || k.major == 0) return k;
  if (i == v.size()) {
    k.stage = 2;
    k.valid = true;
    return k;
  }
  std::string_view rest = v.substr(i);
  if (rest.starts_with("beta")) {
    k.stage = 1;
    i += 4;
  } else if (rest.starts_with("alpha")) {
    k.stage = 0;
    i += 5;
  } else {
    return k;
  }
  if (!number(&k.minor) || i != v.size()) return k;
  k.valid = true;
  return k;
}

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

bool LabelChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}
bool Alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

// DNS-1123 subdomain characters, lowercased; anything else becomes '-'.
std::string SubdomainPart(std::string_view s) {
  std::string out;
  for (char c : s) {
    char l = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    out.push_back(((l >= 'a' && l <= 'z') || (l >= '0' && l <= '9') || l == '-' || l == '.') ? l
                                                                                             : '-');
  }
  return out;
}

const json* Path(const json& j, std::initializer_list<const char*> keys) {
  const json* cur = &j;
  for (const char* k : keys) {
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(k);
    if (it == cur->end()) return nullptr;
    cur = &*it;
  }
  return cur;
}

std::string Str(const json& j, std::initializer_list<const char*> keys) {
  const json* v = Path(j, keys);
  return v && v->is_string() ? v->get<std::string>() : "";
}

}  // namespace

StatusOr<DeviceRef> ParseDeviceRef(std::string_view s) {
  size_t first = s.find('/');
  size_t last = s.rfind('/');
  if (first == std::string_view::npos || first == last || first == 0 || last + 1 == s.size() ||
      last == first + 1) {
    return InvalidArgumentError("device reference \"" + std::string(s) +
                                "\": expected <driver>/<pool>/<device>");
  }
  return DeviceRef{std::string(s.substr(0, first)),
                   std::string(s.substr(first + 1, last - first - 1)),
                   std::string(s.substr(last + 1))};
}

bool NewerApiVersion(std::string_view a, std::string_view b) {
  VersionKey ka = ParseVersion(a), kb = ParseVersion(b);
  if (ka.valid != kb.valid) return ka.valid;
  if (!ka.valid) return a < b;
  if (ka.stage != kb.stage) return ka.stage > kb.stage;
  if (ka.major != kb.major) return ka.major > kb.major;
  return ka.minor > kb.minor;
}

StatusOr<std::vector<std::string>> ParseGroupVersions(std::string_view body) {
  json j = json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("versions") || !j["versions"].is_array()) {
    return InvalidArgumentError("not an APIGroup document (no versions list)");
  }
  std::vector<std::string> out;
  for (const auto& v : j["versions"]) {
    if (v.is_object() && v.contains("version") && v["version"].is_string()) {
      out.push_back(v["version"].get<std::string>());
    }
  }
  return out;
}

StatusOr<DraResources> ParseDraResources(std::string_view body) {
  json j = json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("resources") || !j["resources"].is_array()) {
    return InvalidArgumentError("not an APIResourceList document (no resources list)");
  }
  DraResources r;
  for (const auto& e : j["resources"]) {
    if (!e.is_object() || !e.contains("name") || !e["name"].is_string()) continue;
    std::string n = e["name"].get<std::string>();
    if (n == "resourceslices") r.resource_slices = true;
    if (n == "resourceclaims") r.resource_claims = true;
    if (n == "devicetaintrules") r.device_taint_rules = true;
    if (n == "devicetaintrules/status") r.device_taint_rule_status = true;
  }
  return r;
}

GpuDeviceMap MapGpuDevices(const std::vector<k8s::ResourceSlice>& slices, std::string_view node,
                           std::string_view driver, const std::vector<std::string>& uuids) {
  GpuDeviceMap out;
  const std::string qualified = std::string(driver) + "/uuid";
  for (const auto& s : slices) {
    if (s.node_name != node || s.driver != driver) continue;
    for (const auto& d : s.devices) {
      auto it = d.attributes.find("uuid");
      if (it == d.attributes.end()) it = d.attributes.find(qualified);
      for (const auto& t : d.taints) {
        out.driver_taints.push_back({DeviceRef{s.driver, s.pool_name, d.name},
                                     it == d.attributes.end() ? "" : it->second, t.key, t.value,
                                     t.effect, t.time_added});
      }
      if (it == d.attributes.end()) continue;
      if (std::find(uuids.begin(), uuids.end(), it->second) == uuids.end()) continue;
      // The first publication wins; a GPU published twice (a slice being replaced) is the
      // same device name in the same pool in practice.
      out.by_uuid.emplace(it->second, DeviceRef{s.driver, s.pool_name, d.name});
    }
  }
  for (const auto& u : uuids) {
    if (!out.by_uuid.contains(u)) out.unmapped.push_back(u);
  }
  return out;
}

std::set<std::string> PodsHoldingDevices(const std::vector<k8s::Pod>& pods,
                                         const std::map<std::string, k8s::ResourceClaim>& claims,
                                         const std::vector<DeviceRef>& devices) {
  std::set<std::string> out;
  for (const auto& p : pods) {
    for (const auto& cname : p.resource_claims) {
      auto it = claims.find(p.meta.namespace_.str() + "/" + cname);
      if (it == claims.end()) continue;
      const k8s::ResourceClaim& c = it->second;
      bool holds = false;
      for (const auto& a : c.allocations) {
        DeviceRef d{a.driver, a.pool, a.device};
        holds = holds || std::find(devices.begin(), devices.end(), d) != devices.end();
      }
      if (!holds) continue;
      bool reserved = false;
      for (const auto& r : c.reserved_for) {
        if (!r.kind.empty() && r.kind != "pods") continue;
        reserved = reserved || (!r.uid.empty() ? r.uid == p.meta.uid : r.name == p.meta.name);
      }
      if (reserved) out.insert(p.meta.uid);
    }
  }
  return out;
}

namespace {

bool SameDevice(const json& e, const DeviceRef& d) {
  return e.is_object() && e.value("driver", "") == d.driver && e.value("pool", "") == d.pool &&
         e.value("device", "") == d.device;
}

// Sets (or, healthy, removes) our condition in one status.devices entry; true when it changed.
bool SetEntryCondition(json& entry, const ClaimDeviceCondition& c) {
  json conds = entry.value("conditions", json::array());
  if (!conds.is_array()) conds = json::array();
  json kept = json::array();
  json ours;
  for (auto& cond : conds) {
    if (cond.is_object() && cond.value("type", "") == kClaimConditionType) {
      ours = cond;
    } else {
      kept.push_back(cond);
    }
  }
  if (!c.healthy) {
    std::string message = c.message.size() > 1024 ? c.message.substr(0, 1024) : c.message;
    if (ours.is_object() && ours.value("status", "") == "False" &&
        ours.value("message", "") == message)
      return false;
    kept.push_back({{"type", kClaimConditionType},
                    {"status", "False"},
                    {"reason", kClaimConditionReason},
                    {"message", message},
                    {"lastTransitionTime", c.now}});
  } else if (ours.is_null()) {
    return false;
  }
  if (kept.empty()) {
    entry.erase("conditions");
  } else {
    entry["conditions"] = std::move(kept);
  }
  return true;
}

}  // namespace

StatusOr<std::optional<std::string>> ClaimWithDeviceCondition(std::string_view claim_json,
                                                              const std::vector<DeviceRef>& devices,
                                                              const ClaimDeviceCondition& c) {
  json claim = json::parse(claim_json, nullptr, false);
  if (!claim.is_object() || claim.value("kind", "") != "ResourceClaim") {
    return InvalidArgumentError("not a ResourceClaim");
  }
  const json* results = Path(claim, {"status", "allocation", "devices", "results"});
  if (!results || !results->is_array()) return std::optional<std::string>();
  json& status = claim["status"];
  json entries = status.value("devices", json::array());
  if (!entries.is_array()) entries = json::array();
  bool changed = false;
  for (const auto& d : devices) {
    bool allocated = false;
    for (const auto& r : *results) allocated = allocated || SameDevice(r, d);
    if (!allocated) continue;
    auto it = std::find_if(entries.begin(), entries.end(),
                           [&](const json& e) { return SameDevice(e, d); });
    if (it == entries.end()) {
      if (c.healthy) continue;
      entries.push_back({{"driver", d.driver}, {"pool", d.pool}, {"device", d.device}});
      it = entries.end() - 1;
    }
    if (!SetEntryCondition(*it, c)) continue;
    changed = true;
    if (c.healthy && it->size() == 3) entries.erase(it);  // only driver/pool/device: ours
  }
  if (!changed) return std::optional<std::string>();
  if (entries.empty()) {
    status.erase("devices");
  } else {
    status["devices"] = std::move(entries);
  }
  return std::optional<std::string>(claim.dump());
}

std::string DeviceTaintRuleName(const DeviceRef& d) {
  char hash[17];
  std::snprintf(hash, sizeof(hash), "%016llx",
                static_cast<unsigned long long>(Fnv1a(d.driver + "/" + d.pool + "/" + d.device)));
  std::string tail = "-" + SubdomainPart(d.device) + "-" + std::string(hash, 8);
  std::string pool = SubdomainPart(d.pool);
  constexpr size_t kMax = 253;
  std::string head = "gpuguardian-";
  if (head.size() + pool.size() + tail.size() > kMax) {
    size_t room = kMax > head.size() + tail.size() ? kMax - head.size() - tail.size() : 0;
    pool.resize(std::min(pool.size(), room));
  }
  std::string name = head + pool + tail;
  if (name.size() > kMax) name = head + std::string(hash, 16);  // absurdly long device name
  // Subdomain segments must start and end alphanumeric: collapse what cutting left behind.
  std::string out;
  for (char c : name) {
    if ((c == '.' || c == '-') && !out.empty() && (out.back() == '.' || out.back() == '-')) {
      if (c == '.') out.back() = '-';
      continue;
    }
    out.push_back(c);
  }
  return out;
}

std::string ToLabelValue(std::string_view s) {
  std::string out;
  for (char c : s) out.push_back(LabelChar(c) ? c : '-');
  if (out.size() > 63) out.resize(63);
  while (!out.empty() && !Alnum(out.back())) out.pop_back();
  size_t start = 0;
  while (start < out.size() && !Alnum(out[start])) ++start;
  return out.substr(start);
}

std::string BuildDeviceTaintRule(std::string_view version, const DeviceTaintRuleSpec& spec) {
  std::string message = spec.message;
  if (message.size() > 1024) message.resize(1024);
  json rule = {
      {"apiVersion", "resource.k8s.io/" + std::string(version)},
      {"kind", "DeviceTaintRule"},
      {"metadata",
       {{"name", DeviceTaintRuleName(spec.device)},
        {"labels",
         {{kRuleManagedByLabel, kRuleManagedByValue}, {kRuleNodeLabel, ToLabelValue(spec.node)}}},
        {"annotations",
         {{kRuleOwnerAnnotation, kRuleOwnerValue},
          {kRuleGpuAnnotation, spec.gpu_uuid},
          {kRuleReasonAnnotation, message.empty() ? spec.reason : message}}}}},
      {"spec",
       {{"deviceSelector",
         {{"driver", spec.device.driver},
          {"pool", spec.device.pool},
          {"device", spec.device.device}}},
        {"taint", {{"key", api::kTaintKey}, {"effect", spec.effect}}}}}};
  std::string value = ToLabelValue(spec.reason);
  if (!value.empty()) rule["spec"]["taint"]["value"] = value;
  if (!spec.policy.empty()) rule["metadata"]["annotations"]["gpuguardian.io/policy"] = spec.policy;
  return rule.dump();
}

bool IsOurDeviceTaintRule(std::string_view body) {
  json j = json::parse(body, nullptr, false);
  if (!j.is_object()) return false;
  return Str(j, {"metadata", "labels", kRuleManagedByLabel}) == kRuleManagedByValue &&
         Str(j, {"metadata", "annotations", kRuleOwnerAnnotation}) == kRuleOwnerValue;
}

std::string RuleUid(std::string_view body) {
  json j = json::parse(body, nullptr, false);
  return j.is_object() ? Str(j, {"metadata", "uid"}) : "";
}

}  // namespace gg::remediation
