// Simulated kubelet: starts the pods bound to existing nodes and finishes their graceful
// termination once the grace period (divided by the time scale) has passed. A pod whose
// containers have readiness (or startup) probes turns Ready when the slowest first probe runs,
// initialDelaySeconds (divided by the time scale) after it started: the simulated probe
// always succeeds, as a healthy replacement's would. Every pod gets a
// unique IP from its node's podCIDR (hostNetwork pods: the node's InternalIP) and
// hostIP = the node's InternalIP. With --exec-images, pods whose image is an executable are
// handed to the PodRunner, which runs them as processes and owns their status and
// termination from then on.
#include <arpa/inet.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <string_view>
#include <tuple>

#include "sim/controller_util.h"
#include "sim/controllers.h"
#include "sim/pod_runner.h"

namespace gg::sim {

using internal::kPoll;
using internal::SteadyTime;
using internal::StoreWatch;
using internal::Str;
using nlohmann::json;

namespace {

std::string InternalIp(const json& node) {
  if (node.contains("status") && node["status"].contains("addresses"))
    for (const auto& a : node["status"]["addresses"])
      if (a.value("type", "") == "InternalIP") return a.value("address", "");
  return "";
}

// Pod IPs per node, allocated from the node's podCIDR (.0 and .1 left out, as the network
// and the node's bridge address), released when the pod is gone.
class PodIpAllocator {
 public:
  // Records an IP that a pod already has (seeded pods, pods from a previous run).
  void Note(const std::string& uid, const std::string& node, const std::string& ip) {
    if (uid.empty() || ip.empty() || by_uid_.count(uid)) return;
    uint32_t v = 0;
    if (!Parse(ip, &v)) return;
    used_[node].insert(v);
    by_uid_[uid] = {node, v};
  }
  // "" when the node has no usable podCIDR or the range is full.
  std::string Allocate(const std::string& uid, const std::string& node, const std::string& cidr) {
    if (auto it = by_uid_.find(uid); it != by_uid_.end()) return Format(it->second.second);
    auto slash = cidr.find('/');
    uint32_t base = 0;
    if (slash == std::string::npos || !Parse(cidr.substr(0, slash), &base)) return "";
    int prefix = std::atoi(cidr.substr(slash + 1).c_str());
    if (prefix < 8 || prefix > 30) return "";
    uint32_t size = 1u << (32 - prefix);
    base &= ~(size - 1);
    auto& used = used_[node];
    for (uint32_t i = 2; i + 1 < size; ++i) {
      if (used.count(base + i)) continue;
      used.insert(base + i);
      by_uid_[uid] = {node, base + i};
      return Format(base + i);
    }
    return "";
  }
  void Release(const std::string& uid) {
    auto it = by_uid_.find(uid);
    if (it == by_uid_.end()) return;
    used_[it->second.first].erase(it->second.second);
    by_uid_.erase(it);
  }

 private:
  static bool Parse(const std::string& ip, uint32_t* out) {
    in_addr a{};
    if (inet_pton(AF_INET, ip.c_str(), &a) != 1) return false;
    *out = ntohl(a.s_addr);
    return true;
  }
  static std::string Format(uint32_t v) {
    in_addr a{};
    a.s_addr = htonl(v);
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &a, buf, sizeof(buf));
    return buf;
  }
  std::map<std::string, std::set<uint32_t>> used_;
  std::map<std::string, std::pair<std::string, uint32_t>> by_uid_;
};

// A Node written without node IPAM's podCIDR: a /24 derived from its name, from a range
// the generated nodes do not use (10.192.0.0/10).
std::string FallbackPodCidr(const std::string& node) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char ch : node) h = (h ^ ch) * 1099511628211ULL;
  return "10." + std::to_string(192 + (h & 63)) + "." + std::to_string((h >> 8) & 255) + ".0/24";
}

// How long after start a pod's readiness (or startup) probes first run: the largest
// initialDelaySeconds over its containers, divided by the time scale; zero without probes.
std::chrono::milliseconds FirstProbeDelay(const json& p, double time_scale) {
  double s = 0;
  for (const auto& c : p["spec"].value("containers", json::array()))
    for (const char* probe : {"readinessProbe", "startupProbe"})
      if (c.contains(probe) && c[probe].is_object())
        s = std::max(s, c[probe].value("initialDelaySeconds", 0.0));
  return std::chrono::milliseconds(static_cast<long>(s * 1000.0 / std::max(time_scale, 1e-6)));
}

// The status a simulated kubelet writes for a pod it "starts": Running, every condition True
// (Ready and ContainersReady only when `ready`), every container running since `ts`.
json RunningPodStatus(const json& p, const std::string& ts, const std::string& host_ip,
                      const std::string& pod_ip, bool ready) {
  json conds = json::array();
  for (const char* c :
       {"PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"}) {
    const bool gated = std::string_view(c) == "Ready" || std::string_view(c) == "ContainersReady";
    conds.push_back({{"type", c},
                     {"status", gated && !ready ? "False" : "True"},
                     {"lastProbeTime", nullptr},
                     {"lastTransitionTime", ts}});
  }
  json cstat = json::array();
  for (const auto& c : p["spec"].value("containers", json::array()))
    cstat.push_back({{"name", c.value("name", "")},
                     {"image", c.value("image", "")},
                     {"imageID", ""},
                     {"ready", ready},
                     {"started", true},
                     {"restartCount", 0},
                     {"state", {{"running", {{"startedAt", ts}}}}}});
  json status = {
      {"phase", "Running"}, {"startTime", ts}, {"conditions", conds}, {"containerStatuses", cstat}};
  if (!host_ip.empty()) {
    status["hostIP"] = host_ip;
    status["hostIPs"] = json::array({{{"ip", host_ip}}});
  }
  if (!pod_ip.empty()) {
    status["podIP"] = pod_ip;
    status["podIPs"] = json::array({{{"ip", pod_ip}}});
  }
  return status;
}

// The first readiness probe of a started pod succeeded: Ready, ContainersReady and every
// container ready (skipped when the pod is gone, replaced or terminating).
void MarkReady(ApiCore& core, const std::shared_ptr<const ResourceInfo>& pods_ri,
               const std::string& ns, const std::string& name, const std::string& uid) {
  auto r = core.Get(Target{pods_ri, ns, name, ""});
  if (!r.ok() || Str(r.obj, {"metadata", "uid"}) != uid ||
      r.obj["metadata"].contains("deletionTimestamp"))
    return;
  json st = r.obj.value("status", json::object());
  const std::string ts = core.NowRfc3339();
  for (auto& c : st["conditions"])
    if (c.value("type", "") == "Ready" || c.value("type", "") == "ContainersReady")
      c["status"] = "True", c["lastTransitionTime"] = ts;
  for (auto& c : st["containerStatuses"]) c["ready"] = true;
  core.Patch(
      Target{pods_ri, ns, name, "status"}, "application/merge-patch+json",
      json{{"status",
            {{"conditions", st["conditions"]}, {"containerStatuses", st["containerStatuses"]}}}},
      WriteOpts{});
}

}  // namespace

void Controllers::KubeletLoop(std::stop_token stop) {
  auto pods_ri = core_.registry().Find("", "v1", "pods");
  auto nodes_ri = core_.registry().Find("", "v1", "nodes");
  StoreWatch watch(core_.store(), pods_ri->storage);
  PodRunner* runner = opts_.pod_runner;
  PodIpAllocator ips;
  bool seeded = false;
  std::multimap<SteadyTime, std::tuple<std::string, std::string, std::string>> due, ready_due;
  while (!stop.stop_requested()) {
    std::deque<WatchEvent> evs;
    watch.Pop(evs, kPoll);
    auto now = std::chrono::steady_clock::now();
    for (const auto& e : evs) {
      if (e.type == EventType::kDeleted) {
        ips.Release(e.obj->uid);
        if (runner) runner->Forget(e.obj->uid);
        continue;
      }
      json p = json::parse(e.obj->json, nullptr, false);
      if (!p.is_object()) continue;
      const json& md = p["metadata"];
      std::string node = Str(p, {"spec", "nodeName"});
      bool host_network = p["spec"].value("hostNetwork", false);
      std::string known_ip = Str(p, {"status", "podIP"});
      if (!host_network && !node.empty()) ips.Note(e.obj->uid, node, known_ip);
      if (md.contains("deletionTimestamp")) {
        long grace = md.value("deletionGracePeriodSeconds", 0L);
        if (runner && runner->Runs(e.obj->uid)) {
          runner->Terminate(e.obj->uid,
                            grace);  // the runner removes it when its processes are gone
          continue;
        }
        auto delay = std::chrono::milliseconds(static_cast<long>(
            static_cast<double>(grace) * 1000.0 / std::max(opts_.time_scale, 1e-6)));
        due.emplace(now + delay, std::make_tuple(e.obj->ns, e.obj->name, e.obj->uid));
        continue;
      }
      std::string phase = Str(p, {"status", "phase"});
      if (node.empty() || !(phase.empty() || phase == "Pending")) continue;
      if (runner && runner->Runs(e.obj->uid)) continue;  // the runner writes its status
      auto node_res = core_.Get(Target{nodes_ri, "", node, ""});
      if (!node_res.ok()) continue;
      const json& n = node_res.obj;
      if (!seeded) {
        // Pods inserted before this loop started keep their IPs.
        for (const auto& q : core_.ListObjects(pods_ri->storage)) {
          std::string qn = Str(q, {"spec", "nodeName"}), qip = Str(q, {"status", "podIP"});
          if (!qn.empty() && !qip.empty() && !q["spec"].value("hostNetwork", false))
            ips.Note(Str(q, {"metadata", "uid"}), qn, qip);
        }
        seeded = true;
      }
      std::string host_ip = InternalIp(n);
      std::string cidr = Str(n, {"spec", "podCIDR"});
      if (cidr.empty()) cidr = FallbackPodCidr(node);
      std::string pod_ip = host_network ? host_ip : ips.Allocate(e.obj->uid, node, cidr);
      if (runner && runner->Handles(p)) {
        runner->Admit(p, n, pod_ip, host_ip);
        continue;
      }
      const auto probe_delay = FirstProbeDelay(p, opts_.time_scale);
      json status =
          RunningPodStatus(p, core_.NowRfc3339(), host_ip, pod_ip, probe_delay.count() == 0);
      if (probe_delay.count() > 0)
        ready_due.emplace(now + probe_delay, std::make_tuple(e.obj->ns, e.obj->name, e.obj->uid));
      core_.Patch(Target{pods_ri, e.obj->ns, e.obj->name, "status"}, "application/merge-patch+json",
                  json{{"status", status}}, WriteOpts{});
    }
    while (!due.empty() && due.begin()->first <= now) {
      auto [ns, name, uid] = due.begin()->second;
      due.erase(due.begin());
      core_.FinishTermination(Target{pods_ri, ns, name, ""}, uid);
    }
    for (; !ready_due.empty() && ready_due.begin()->first <= now;
         ready_due.erase(ready_due.begin()))
      std::apply([&](const auto&... a) { MarkReady(core_, pods_ri, a...); },
                 ready_due.begin()->second);
  }
}

}  // namespace gg::sim
