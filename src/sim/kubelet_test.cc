// The simulated kubelet's pod addressing: every pod (simulated ones too) gets a unique IP
// from its node's podCIDR, hostIP = the node's InternalIP; IPs of pods already there are kept
// and a deleted pod's IP is free again.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <set>
#include <thread>

#include "sim/population.h"
#include "sim/server.h"
#include "sim/test_util.h"

namespace gg::sim {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

json Pod(const std::string& name, const std::string& node) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", "default"}}},
          {"spec", {{"nodeName", node}, {"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}};
}

TEST(KubeletAddressing, UniquePodIpsFromThePodCidrAndTheNodesInternalIp) {
  SimOptions o;
  auto s = SimServer::Start(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto& sim = **s;
  PopulationSpec spec;
  spec.nodes = 2;
  spec.pods_per_node = 2;  // seeded pods already hold .2 and .3 of each node
  ASSERT_TRUE(GeneratePopulation(spec, [&](json&& obj) { return sim.Insert(obj); }).ok());
  auto nodes = sim.List("/api/v1/nodes");
  ASSERT_TRUE(nodes.ok());
  const json node = (*nodes)["items"][0];
  const std::string name = node["metadata"]["name"], cidr = node["spec"]["podCIDR"];
  std::string internal;
  for (const auto& a : node["status"]["addresses"])
    if (a["type"] == "InternalIP") internal = a["address"];
  const std::string prefix = cidr.substr(0, cidr.rfind('.') + 1);

  std::set<std::string> taken;
  auto pods = sim.List("/api/v1/pods");
  ASSERT_TRUE(pods.ok());
  for (const auto& p : (*pods)["items"])
    if (p["spec"].value("nodeName", "") == name && p["status"].contains("podIP"))
      taken.insert(p["status"]["podIP"].get<std::string>());

  std::set<std::string> ips;
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(
        sim.Create("/api/v1/namespaces/default/pods", Pod("p" + std::to_string(i), name)).ok());
  for (int i = 0; i < 5; ++i) {
    json p;
    ASSERT_TRUE(WaitFor([&] {
      auto g = sim.Get("/api/v1/namespaces/default/pods/p" + std::to_string(i));
      if (!g.ok() || g->value("status", json::object()).value("phase", "") != "Running")
        return false;
      p = *g;
      return true;
    }));
    std::string ip = p["status"]["podIP"];
    EXPECT_EQ(ip.rfind(prefix, 0), 0u) << ip << " outside " << cidr;
    EXPECT_NE(ip, prefix + "0");
    EXPECT_NE(ip, prefix + "1");
    EXPECT_EQ(taken.count(ip), 0u) << ip << " was a seeded pod's";
    EXPECT_TRUE(ips.insert(ip).second) << ip << " given twice";
    EXPECT_EQ(p["status"]["hostIP"], internal);
    EXPECT_EQ(p["status"]["podIPs"][0]["ip"], ip);
  }
  // A pod removed frees its address for the next one.
  auto first = sim.Get("/api/v1/namespaces/default/pods/p0");
  ASSERT_TRUE(first.ok());
  std::string freed = (*first)["status"]["podIP"];
  ASSERT_TRUE(sim.Delete("/api/v1/namespaces/default/pods/p0").ok());
  // (The kubelet sees the deletion before the next pod: one watch, in order.)
  ASSERT_TRUE(sim.Create("/api/v1/namespaces/default/pods", Pod("again", name)).ok());
  json again;
  ASSERT_TRUE(WaitFor([&] {
    auto g = sim.Get("/api/v1/namespaces/default/pods/again");
    if (!g.ok() || !(*g)["status"].contains("podIP")) return false;
    again = *g;
    return true;
  }));
  EXPECT_EQ(again["status"]["podIP"], freed);
}

// pods/log of a simulated pod (no process): empty, with the real server's errors for bad
// requests.
TEST(KubeletAddressing, PodLogOfSimulatedPods) {
  SimOptions o;
  auto s = SimServer::Start(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto& sim = **s;
  json two = Pod("two", "");
  two["spec"].erase("nodeName");
  two["spec"]["containers"].push_back({{"name", "side"}, {"image", "busybox"}});
  ASSERT_TRUE(sim.Create("/api/v1/namespaces/default/pods", Pod("one", "")).ok());
  ASSERT_TRUE(sim.Create("/api/v1/namespaces/default/pods", two).ok());
  httplib::Client cli("127.0.0.1", sim.Port());
  auto r = cli.Get("/api/v1/namespaces/default/pods/one/log");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "");
  r = cli.Get("/api/v1/namespaces/default/pods/one/log?container=nope");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("container nope is not valid for pod one"), std::string::npos) << r->body;
  r = cli.Get("/api/v1/namespaces/default/pods/two/log");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("a container name must be specified for pod two, choose one of: [c side]"),
            std::string::npos)
      << r->body;
  r = cli.Get("/api/v1/namespaces/default/pods/one/log?previous=true");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  auto st = json::parse(r->body);
  EXPECT_EQ(st["message"], "previous terminated container \"c\" in pod \"one\" not found")
      << r->body;
  EXPECT_EQ(st["reason"], "BadRequest");
  r = cli.Get("/api/v1/namespaces/default/pods/missing/log");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  r = cli.Get("/api/v1/namespaces/default/pods/one/log?tailLines=x");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
}

// A simulated pod with a readiness probe is Running at once but Ready only when its probe
// first runs, initialDelaySeconds (divided by the time scale) after start; one without a
// probe is Ready at once.
TEST(KubeletReadiness, ReadyAfterTheReadinessProbesInitialDelay) {
  SimOptions o;
  o.time_scale = 2;  // initialDelaySeconds 3 -> 1.5 s
  auto s = SimServer::Start(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto& sim = **s;
  PopulationSpec spec;
  spec.nodes = 1;
  spec.pods_per_node = 0;
  ASSERT_TRUE(GeneratePopulation(spec, [&](json&& obj) { return sim.Insert(obj); }).ok());
  auto nodes = sim.List("/api/v1/nodes");
  ASSERT_TRUE(nodes.ok());
  const std::string node = (*nodes)["items"][0]["metadata"]["name"];
  json probed = Pod("probed", node);
  probed["spec"]["containers"][0]["readinessProbe"] = {{"exec", {{"command", {"true"}}}},
                                                       {"initialDelaySeconds", 3}};
  auto ready = [&](const std::string& name) -> std::string {
    auto g = sim.Get("/api/v1/namespaces/default/pods/" + name);
    if (!g.ok() || g->value("status", json::object()).value("phase", "") != "Running") return "";
    for (const auto& c : (*g)["status"]["conditions"])
      if (c["type"] == "Ready") return c["status"];
    return "";
  };
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(sim.Create("/api/v1/namespaces/default/pods", probed).ok());
  ASSERT_TRUE(sim.Create("/api/v1/namespaces/default/pods", Pod("plain", node)).ok());
  ASSERT_TRUE(WaitFor([&] { return ready("plain") == "True" && !ready("probed").empty(); }));
  if (std::chrono::steady_clock::now() - t0 < 1200ms) {
    EXPECT_EQ(ready("probed"), "False");
  }
  ASSERT_TRUE(WaitFor([&] { return ready("probed") == "True"; }));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 1400ms);
  auto g = sim.Get("/api/v1/namespaces/default/pods/probed");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ((*g)["status"]["containerStatuses"][0]["ready"], true);
}

}  // namespace
}  // namespace gg::sim
