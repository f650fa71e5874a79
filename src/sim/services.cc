// Services as kube-apiserver serves them: defaults, a ClusterIP from the service CIDR (and
// node ports for NodePort/LoadBalancer), allocated values kept across updates, and the
// `kubernetes` Service with its Endpoints in `default`.
#include <set>

#include "sim/api.h"

namespace gg::sim {

using nlohmann::json;

namespace {

// kubeadm's default --service-cluster-ip-range; the `kubernetes` Service gets the first IP.
constexpr std::uint32_t kServiceNet = (10u << 24) | (96u << 16);  // 10.96.0.0/12
constexpr std::uint32_t kServiceMask = 0xfff00000u;
constexpr int kNodePortLo = 30000, kNodePortHi = 32767;

std::string Ip(std::uint32_t v) {
  return std::to_string(v >> 24) + "." + std::to_string((v >> 16) & 255) + "." +
         std::to_string((v >> 8) & 255) + "." + std::to_string(v & 255);
}

std::optional<std::uint32_t> ParseIp(const std::string& s) {
  std::uint32_t v = 0;
  int parts = 0;
  std::size_t i = 0;
  while (i <= s.size() && parts < 4) {
    std::size_t j = s.find('.', i);
    if (j == std::string::npos) j = s.size();
    std::string p = s.substr(i, j - i);
    if (p.empty() || p.size() > 3 || p.find_first_not_of("0123456789") != std::string::npos)
      return std::nullopt;
    int n = std::stoi(p);
    if (n > 255) return std::nullopt;
    v = (v << 8) | static_cast<std::uint32_t>(n);
    ++parts;
    i = j + 1;
  }
  if (parts != 4 || i != s.size() + 1) return std::nullopt;
  return v;
}

bool AllocatesClusterIp(const json& spec) {
  return spec.value("type", "ClusterIP") != "ExternalName" && spec.value("clusterIP", "") != "None";
}

bool HasNodePorts(const json& spec) {
  std::string type = spec.value("type", "ClusterIP");
  return type == "NodePort" || type == "LoadBalancer";
}

}  // namespace

void ApiCore::DefaultService(json& svc) const {
  if (!svc.contains("spec") || !svc["spec"].is_object()) svc["spec"] = json::object();
  json& spec = svc["spec"];
  if (!spec.contains("type")) spec["type"] = "ClusterIP";
  if (!spec.contains("sessionAffinity")) spec["sessionAffinity"] = "None";
  if (spec.contains("ports") && spec["ports"].is_array()) {
    for (auto& p : spec["ports"]) {
      if (!p.is_object()) continue;
      if (!p.contains("protocol")) p["protocol"] = "TCP";
      if (!p.contains("targetPort") && p.contains("port")) p["targetPort"] = p["port"];
    }
  }
  if (spec["type"] != "ExternalName") {
    if (!spec.contains("internalTrafficPolicy")) spec["internalTrafficPolicy"] = "Cluster";
    if (!spec.contains("ipFamilies")) spec["ipFamilies"] = json::array({"IPv4"});
    if (!spec.contains("ipFamilyPolicy")) spec["ipFamilyPolicy"] = "SingleStack";
  }
  if (HasNodePorts(spec) && !spec.contains("externalTrafficPolicy"))
    spec["externalTrafficPolicy"] = "Cluster";
  if (!svc.contains("status") || !svc["status"].is_object())
    svc["status"] = {{"loadBalancer", json::object()}};
}

std::optional<ApiError> ApiCore::AllocateServiceLocked(json& svc, const json* old) {
  json& spec = svc["spec"];
  const std::string name = svc["metadata"].value("name", "");
  const json* ospec = old && old->contains("spec") ? &(*old)["spec"] : nullptr;
  std::set<std::uint32_t> used_ips;
  std::set<int> used_ports;
  auto ri = registry_.Find("", "v1", "services");
  std::string self = svc["metadata"].value("namespace", "") + "/" + name;
  store_.ForEachLocked(ri->storage, "", "", [&](const std::string& key, const ObjPtr& o) {
    if (key == self) return true;
    json j = json::parse(o->json, nullptr, false);
    if (!j.is_object() || !j.contains("spec")) return true;
    if (auto ip = ParseIp(j["spec"].value("clusterIP", ""))) used_ips.insert(*ip);
    for (const auto& p : j["spec"].value("ports", json::array()))
      if (p.is_object() && p.contains("nodePort") && p["nodePort"].is_number_integer())
        used_ports.insert(p["nodePort"].get<int>());
    return true;
  });
  if (AllocatesClusterIp(spec)) {
    std::string want = spec.value("clusterIP", "");
    if (want.empty() && spec.contains("clusterIPs") && spec["clusterIPs"].is_array() &&
        !spec["clusterIPs"].empty() && spec["clusterIPs"][0].is_string())
      want = spec["clusterIPs"][0].get<std::string>();
    if (!want.empty()) {
      auto ip = ParseIp(want);
      if (!ip || (*ip & kServiceMask) != kServiceNet)
        return InvalidErr("Service", "", name,
                          {{"FieldValueInvalid",
                            "Invalid value: []string{\"" + want + "\"}: failed to allocate IP " +
                                want + ": the provided IP (" + want +
                                ") is not in the valid range. The range of valid IPs is " +
                                Ip(kServiceNet) + "/12",
                            "spec.clusterIPs"}});
      if (used_ips.count(*ip))
        return InvalidErr("Service", "", name,
                          {{"FieldValueInvalid",
                            "Invalid value: []string{\"" + want + "\"}: failed to allocate IP " +
                                want + ": provided IP is already allocated",
                            "spec.clusterIPs"}});
    } else {
      // Sequential from .10 (the real allocator picks at random; .1-.9 stay for fixed IPs).
      std::uint32_t ip = kServiceNet + 10;
      while (used_ips.count(ip) && ip < (kServiceNet | ~kServiceMask)) ++ip;
      want = Ip(ip);
    }
    spec["clusterIP"] = want;
    spec["clusterIPs"] = json::array({want});
  }
  if (HasNodePorts(spec) && spec.contains("ports") && spec["ports"].is_array()) {
    for (std::size_t i = 0; i < spec["ports"].size(); ++i) {
      json& p = spec["ports"][i];
      if (!p.is_object()) continue;
      if (p.contains("nodePort") && p["nodePort"].is_number_integer() && p["nodePort"] != 0) {
        int np = p["nodePort"].get<int>();
        bool kept = false;
        if (ospec)
          for (const auto& op : ospec->value("ports", json::array()))
            if (op.is_object() && op.value("nodePort", 0) == np) kept = true;
        if (!kept && (np < kNodePortLo || np > kNodePortHi || used_ports.count(np)))
          return InvalidErr(
              "Service", "", name,
              {{"FieldValueInvalid",
                "Invalid value: " + std::to_string(np) +
                    (used_ports.count(np) ? ": provided port is already allocated"
                                          : ": provided port is not in the valid range. The range "
                                            "of valid ports is 30000-32767"),
                "spec.ports[" + std::to_string(i) + "].nodePort"}});
        used_ports.insert(np);
        continue;
      }
      int np = kNodePortLo;
      while (used_ports.count(np) && np < kNodePortHi) ++np;
      used_ports.insert(np);
      p["nodePort"] = np;
    }
  }
  return std::nullopt;
}

void ApiCore::SeedKubernetesService(const std::string& host, int port) {
  auto svc_ri = registry_.Find("", "v1", "services");
  auto ep_ri = registry_.Find("", "v1", "endpoints");
  WriteOpts o;
  o.seed = true;
  json port_entry = {{"name", "https"}, {"port", 443}, {"protocol", "TCP"}, {"targetPort", port}};
  json svc = {{"apiVersion", "v1"}, {"kind", "Service"}};
  svc["metadata"] = {{"name", "kubernetes"}, {"namespace", "default"}};
  svc["metadata"]["labels"] = {{"component", "apiserver"}, {"provider", "kubernetes"}};
  svc["spec"] = {{"clusterIP", Ip(kServiceNet + 1)}, {"ports", json::array({port_entry})}};
  Create(Target{svc_ri, "default", "kubernetes", ""}, std::move(svc), o);
  json subset;
  subset["addresses"] = json::array({json{{"ip", host}}});
  subset["ports"] = json::array({json{{"name", "https"}, {"port", port}, {"protocol", "TCP"}}});
  json ep = {{"apiVersion", "v1"}, {"kind", "Endpoints"}};
  ep["metadata"] = {{"name", "kubernetes"}, {"namespace", "default"}};
  ep["metadata"]["labels"] = {{"endpointslice.kubernetes.io/skip-mirror", "true"}};
  ep["subsets"] = json::array({subset});
  Create(Target{ep_ri, "default", "kubernetes", ""}, std::move(ep), o);
}

}  // namespace gg::sim
