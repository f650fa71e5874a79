// Scenario tests: the whole operator (informers, reconcilers, drains, Events, leader election)
// against the in-process simulator over loopback HTTP. Reports are written directly as
// GPUNodeHealth objects. Assertions are about the world: taints, cordons, conditions,
// Events, pods, policy status and metrics.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>

#include "api/gpu_node_health.h"
#include "api/test_reports.h"
#include "common/clock.h"
#include "common/time_util.h"
#include "events/aggregating.h"
#include "events/rest_sink.h"
#include "k8s/codec.h"
#include "k8s/rest_client.h"
#include "metrics/registry.h"
#include "operator/operator.h"
#include "sim/server.h"
#include "sim/test_objects.h"

namespace gg::op {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr char kPolicies[] = "/apis/gpuguardian.io/v1alpha1/gpuhealthpolicies";

bool WaitFor(const std::function<bool()>& f, std::chrono::milliseconds timeout = 30s) {
  auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (f()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return f();
}

// A running operator with its own registry, on its own thread.
struct RunningOperator {
  std::unique_ptr<metrics::Registry> registry = std::make_unique<metrics::Registry>();
  std::unique_ptr<k8s::RestClient> client;
  std::unique_ptr<Operator> op;
  std::stop_source stop;
  std::jthread thread;
  Status result;
  ~RunningOperator() { Stop(); }
  void Stop() {
    stop.request_stop();
    if (thread.joinable()) thread.join();
  }
  double Metric(std::string_view name, const metrics::LabelValues& labels = {}) {
    return registry->Value(name, labels);
  }
};

class OperatorSimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sim::SimOptions o;
    o.bookmark_interval = 200ms;
    o.time_scale = 30;  // 30 s grace → 1 s
    auto s = sim::SimServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    sim_ = std::move(*s);
    client_ = NewClient();
    k8s::ResourceType crds{"apiextensions.k8s.io", "v1", "customresourcedefinitions",
                           "CustomResourceDefinition", false};
    ASSERT_TRUE(
        client_->Create(crds, "", sim::GuardianCrd("gpuhealthpolicies", "GPUHealthPolicy").dump())
            .ok());
    ASSERT_TRUE(
        client_->Create(crds, "", sim::GuardianCrd("gpunodehealths", "GPUNodeHealth").dump()).ok());
    ASSERT_TRUE(
        sim_->Create("/api/v1/namespaces",
                     {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "ml"}}}})
            .ok());
    ASSERT_TRUE(
        sim_->Create("/api/v1/namespaces", {{"apiVersion", "v1"},
                                            {"kind", "Namespace"},
                                            {"metadata", {{"name", "gpu-guardian-system"}}}})
            .ok());
  }
  void TearDown() override {
    ops_.clear();
    if (sim_) sim_->Stop();
  }

  std::unique_ptr<k8s::RestClient> NewClient() {
    k8s::ClientConfig cfg;
    cfg.server = sim_->Url();
    auto c = k8s::RestClient::Create(cfg, RealClock::Default());
    EXPECT_TRUE(c.ok()) << c.status();
    return std::move(*c);
  }

  RunningOperator& StartOperator(std::string identity, bool leader_elect = false) {
    auto r = std::make_unique<RunningOperator>();
    r->client = NewClient();
    OperatorConfig cfg;
    cfg.metrics_addr = "127.0.0.1:0";
    cfg.identity = std::move(identity);
    cfg.leader_elect = leader_elect;
    cfg.leader_election_namespace = "gpu-guardian-system";
    cfg.lease_duration = 3s;
    cfg.renew_deadline = 2s;
    cfg.retry_period = 300ms;
    cfg.drain_poll_interval = 100ms;
    cfg.eviction_backoff_initial = 200ms;
    cfg.eviction_backoff_max = 1s;
    cfg.event_retry_sleep = 100ms;
    r->op = std::make_unique<Operator>(*r->client, RealClock::Default(), *r->registry, cfg);
    RunningOperator* raw = r.get();
    r->thread = std::jthread([raw] { raw->result = raw->op->Run(raw->stop.get_token()); });
    ops_.push_back(std::move(r));
    return *raw;
  }

  void AddNode(const std::string& name, json labels = json::object(), bool unschedulable = false,
               json taints = nullptr) {
    labels["nvidia.com/gpu.present"] = "true";
    json n = {{"apiVersion", "v1"},
              {"kind", "Node"},
              {"metadata", {{"name", name}, {"labels", labels}}},
              {"spec", json::object()},
              {"status",
               {{"capacity", {{"nvidia.com/gpu", "8"}}},
                {"allocatable", {{"nvidia.com/gpu", "8"}}},
                {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
    if (unschedulable) n["spec"]["unschedulable"] = true;
    if (!taints.is_null()) n["spec"]["taints"] = taints;
    ASSERT_TRUE(sim_->Create("/api/v1/nodes", n).ok());
  }

  // A ReplicaSet of GPU pods; the sim's controllers create, schedule and run them.
  void AddReplicaSet(const std::string& name, int replicas, int grace_seconds = 30) {
    ASSERT_TRUE(sim_->Create("/apis/apps/v1/namespaces/ml/replicasets",
                             sim::GpuReplicaSet(name, "ml", replicas, grace_seconds))
                    .ok());
  }

  void AddPdb(const std::string& app, int min_available) {
    ASSERT_TRUE(sim_->Create("/apis/policy/v1/namespaces/ml/poddisruptionbudgets",
                             sim::MinAvailablePdb(app, "ml", min_available))
                    .ok());
  }

  json Pods(const std::string& app) {
    auto l = sim_->List("/api/v1/namespaces/ml/pods");
    json out = json::array();
    if (!l.ok()) return out;
    for (auto& p : (*l)["items"]) {
      if (p["metadata"]["labels"].value("app", "") == app) out.push_back(p);
    }
    return out;
  }
  // Running, not terminating pods of `app`, by node.
  std::multiset<std::string> RunningNodes(const std::string& app) {
    std::multiset<std::string> out;
    for (auto& p : Pods(app)) {
      if (p["metadata"].contains("deletionTimestamp")) continue;
      if (p["status"].value("phase", "") != "Running") continue;
      out.insert(p["spec"].value("nodeName", ""));
    }
    return out;
  }

  static json DefaultSpec() {
    return json::parse(R"({
      "nodeSelector": {"matchLabels": {"nvidia.com/gpu.present": "true"}},
      "rules": [
        {"name": "fatal-xid", "xid": {"codes": [79]}, "count": 1, "action": "Drain"},
        {"name": "hot", "thermal": {"temperatureAboveCelsius": 85}, "for": "1h", "action": "Taint"}
      ],
      "unknown": {"after": "1h", "action": "Event"},
      "remediation": {"taint": {"effect": "NoSchedule"},
                      "drain": {"scope": "GPUPods", "timeout": "2m"}},
      "recovery": {"automatic": true, "healthyFor": "2s"},
      "safety": {"maxUnhealthy": "100%", "maxNodesPerHour": 1000, "maxConcurrentDrains": 100}
    })");
  }

  void CreatePolicy(const std::string& name, json spec) {
    json p = {{"apiVersion", "gpuguardian.io/v1alpha1"},
              {"kind", "GPUHealthPolicy"},
              {"metadata", {{"name", name}}},
              {"spec", spec}};
    ASSERT_TRUE(sim_->Create(kPolicies, p).ok());
  }

  api::GpuNodeHealthStatus HealthyReport(const std::string& node) {
    return api::testing::HealthyReport(node, RealClock::Default().Now(), 2);
  }
  api::GpuNodeHealthStatus XidReport(const std::string& node, int xid = 79) {
    auto s = HealthyReport(node);
    api::testing::AddXid(s, xid);
    return s;
  }
  void WriteReport(const std::string& node, const api::GpuNodeHealthStatus& s) {
    ASSERT_TRUE(
        sim::PutReportStatus(*sim_, node, json::parse(api::EncodeGpuNodeHealthStatus(s))).ok());
  }

  json Node(const std::string& name) {
    auto n = sim_->Get("/api/v1/nodes/" + name);
    return n.ok() ? *n : json();
  }
  static bool HasOurTaint(const json& node) {
    for (auto& t : node["spec"].value("taints", json::array())) {
      if (t.value("key", "") == api::kTaintKey) return true;
    }
    return false;
  }
  static bool HasTaint(const json& node, const std::string& key) {
    for (auto& t : node["spec"].value("taints", json::array())) {
      if (t.value("key", "") == key) return true;
    }
    return false;
  }
  static bool Cordoned(const json& node) { return node["spec"].value("unschedulable", false); }
  static std::string Condition(const json& node) {
    for (auto& c : node["status"].value("conditions", json::array())) {
      if (c.value("type", "") == api::kConditionType) return c.value("status", "");
    }
    return "";
  }
  // Events (core/v1, all namespaces) with this reason about `object`.
  std::vector<json> Events(const std::string& reason, const std::string& object = "") {
    std::vector<json> out;
    auto l = sim_->List("/api/v1/events");
    if (!l.ok()) return out;
    for (auto& e : (*l)["items"]) {
      if (e.value("reason", "") != reason) continue;
      if (!object.empty() && e["involvedObject"].value("name", "") != object) continue;
      out.push_back(e);
    }
    return out;
  }
  json PolicyStatus(const std::string& name) {
    auto p = sim_->Get(std::string(kPolicies) + "/" + name);
    if (!p.ok() || !p->contains("status") || !(*p)["status"].is_object()) return json::object();
    return (*p)["status"];
  }
  static std::string PolicyCondition(const json& status, const std::string& type) {
    for (auto& c : status.value("conditions", json::array())) {
      if (c.value("type", "") == type) return c.value("status", "");
    }
    return "";
  }

  std::unique_ptr<sim::SimServer> sim_;
  std::unique_ptr<k8s::RestClient> client_;
  std::vector<std::unique_ptr<RunningOperator>> ops_;
};

TEST_F(OperatorSimTest, Xid79FencesDrainsRespectingPdbAndRecovers) {
  for (const char* n : {"gpu-0", "gpu-1", "gpu-2"}) AddNode(n);
  AddReplicaSet("train", 2);
  AddPdb("train", 1);
  ASSERT_TRUE(WaitFor([&] { return RunningNodes("train").size() == 2; })) << Pods("train").dump();
  const std::string bad = *RunningNodes("train").begin();
  for (const char* n : {"gpu-0", "gpu-1", "gpu-2"}) WriteReport(n, HealthyReport(n));
  CreatePolicy("default", DefaultSpec());
  auto& op = StartOperator("op-a");
  ASSERT_TRUE(WaitFor([&] { return PolicyStatus("default").value("healthyNodes", 0) == 3; }))
      << PolicyStatus("default").dump();
  EXPECT_EQ(Condition(Node(bad)), "True");

  WriteReport(bad, XidReport(bad));
  ASSERT_TRUE(WaitFor([&] {
    json n = Node(bad);
    return HasOurTaint(n) && Cordoned(n) && Condition(n) == "False";
  })) << Node(bad).dump();
  // Drained: the train pods left the bad node and run elsewhere (the PDB kept one up).
  ASSERT_TRUE(WaitFor(
      [&] {
        auto nodes = RunningNodes("train");
        return nodes.size() == 2 && nodes.count(bad) == 0;
      },
      60s))
      << Pods("train").dump();
  ASSERT_TRUE(WaitFor([&] { return !Events("NodeDrained", bad).empty(); })) << Node(bad).dump();
  EXPECT_FALSE(Events("GPUUnhealthy", bad).empty());
  EXPECT_FALSE(Events("NodeCordoned", bad).empty());
  EXPECT_GE(op.Metric("gpu_guardian_evictions_total", {"success"}), 1);
  EXPECT_GE(op.Metric("gpu_guardian_remediations_total", {"cordon", "success"}), 1);
  EXPECT_EQ(op.Metric("gpu_guardian_node_healthy", {bad}), 0);
  EXPECT_TRUE(WaitFor([&] { return PolicyStatus("default").value("unhealthyNodes", 0) == 1; }))
      << PolicyStatus("default").dump();

  // The GPU is replaced: healthy report → recovery after healthyFor (2 s).
  WriteReport(bad, HealthyReport(bad));
  ASSERT_TRUE(WaitFor([&] {
    json n = Node(bad);
    return !HasOurTaint(n) && !Cordoned(n) && Condition(n) == "True";
  })) << Node(bad).dump();
  EXPECT_TRUE(WaitFor([&] { return !Events("GPURecovered", bad).empty(); }));
  EXPECT_EQ(op.Metric("gpu_guardian_node_healthy", {bad}), 1);
}

TEST_F(OperatorSimTest, ThermalShorterThanForDoesNothing) {
  AddNode("gpu-0");
  CreatePolicy("default", DefaultSpec());
  auto hot = HealthyReport("gpu-0");
  hot.gpus[0].temperature_c = 95;
  WriteReport("gpu-0", hot);
  auto& op = StartOperator("op-a");
  ASSERT_TRUE(WaitFor([&] { return PolicyStatus("default").value("matchedNodes", 0) == 1; }));
  std::this_thread::sleep_for(1500ms);
  json n = Node("gpu-0");
  EXPECT_FALSE(HasOurTaint(n));
  EXPECT_FALSE(Cordoned(n));
  EXPECT_TRUE(Events("NodeTainted").empty());
  EXPECT_EQ(op.Metric("gpu_guardian_remediations_total", {"taint", "success"}), 0);
}

TEST_F(OperatorSimTest, AdminCordonAndTaintAreLeftAlone) {
  AddNode("gpu-0", json::object(), /*unschedulable=*/true,
          json::array({{{"key", "maintenance"}, {"value", "x"}, {"effect", "NoSchedule"}}}));
  auto spec = DefaultSpec();
  spec["rules"][0]["action"] = "Cordon";
  CreatePolicy("default", spec);
  WriteReport("gpu-0", XidReport("gpu-0"));
  StartOperator("op-a");
  ASSERT_TRUE(WaitFor([&] { return HasOurTaint(Node("gpu-0")); })) << Node("gpu-0").dump();
  EXPECT_TRUE(HasTaint(Node("gpu-0"), "maintenance"));
  WriteReport("gpu-0", HealthyReport("gpu-0"));
  ASSERT_TRUE(WaitFor([&] {
    json n = Node("gpu-0");
    return !HasOurTaint(n) && Condition(n) == "True";
  })) << Node("gpu-0").dump();
  json n = Node("gpu-0");
  EXPECT_TRUE(HasTaint(n, "maintenance"));
  EXPECT_TRUE(Cordoned(n)) << "the admin's cordon must stay";
}

TEST_F(OperatorSimTest, BrakeLimitsRemediationToBudget) {
  for (int i = 0; i < 10; ++i) AddNode("gpu-" + std::to_string(i));
  auto spec = DefaultSpec();
  spec["rules"][0]["action"] = "Cordon";
  spec["safety"]["maxUnhealthy"] = "10%";
  CreatePolicy("default", spec);
  for (int i = 0; i < 10; ++i) {
    std::string n = "gpu-" + std::to_string(i);
    WriteReport(n, i < 3 ? XidReport(n) : HealthyReport(n));
  }
  auto& op = StartOperator("op-a");
  ASSERT_TRUE(WaitFor([&] {
    return PolicyCondition(PolicyStatus("default"), "BrakeEngaged") == "True";
  })) << PolicyStatus("default").dump();
  std::this_thread::sleep_for(1s);  // let every worker finish: the count must stay exact
  int fenced = 0;
  for (int i = 0; i < 10; ++i) fenced += Cordoned(Node("gpu-" + std::to_string(i))) ? 1 : 0;
  EXPECT_EQ(fenced, 1);
  EXPECT_TRUE(WaitFor([&] {
    json st = PolicyStatus("default");
    return st.value("remediatingNodes", 0) == 1 && st.value("unhealthyNodes", 0) == 3 &&
           st.contains("lastBrakeTime");
  })) << PolicyStatus("default").dump();
  EXPECT_TRUE(WaitFor([&] { return !Events("BrakeEngaged", "default").empty(); }));
  EXPECT_EQ(op.Metric("gpu_guardian_brake_engaged", {"default"}), 1);
}

TEST_F(OperatorSimTest, InvalidPolicyIsReportedAndOthersStillAct) {
  AddNode("gpu-0");
  json bad = DefaultSpec();
  bad["rules"] = json::parse(R"([{"name": "no-matcher", "action": "Drain"}])");
  CreatePolicy("broken", bad);
  auto good = DefaultSpec();
  good["rules"][0]["action"] = "Taint";
  CreatePolicy("good", good);
  WriteReport("gpu-0", XidReport("gpu-0"));
  StartOperator("op-a");
  ASSERT_TRUE(WaitFor([&] { return PolicyCondition(PolicyStatus("broken"), "Invalid") == "True"; }))
      << PolicyStatus("broken").dump();
  EXPECT_EQ(PolicyCondition(PolicyStatus("broken"), "Ready"), "False");
  EXPECT_TRUE(WaitFor([&] { return !Events("PolicyInvalid", "broken").empty(); }));
  ASSERT_TRUE(WaitFor([&] { return HasOurTaint(Node("gpu-0")); }));
  EXPECT_FALSE(Cordoned(Node("gpu-0"))) << "the invalid policy's Drain must not apply";
  EXPECT_TRUE(WaitFor([&] { return PolicyCondition(PolicyStatus("good"), "Ready") == "True"; }))
      << PolicyStatus("good").dump();
}

TEST_F(OperatorSimTest, RestartMidDrainFinishesWithoutEvictingTwice) {
  AddNode("gpu-0");
  AddNode("gpu-1");
  // Long grace (60 s / 30 = 2 s) keeps evicted pods terminating across the restart.
  AddReplicaSet("train", 3, 60);
  ASSERT_TRUE(WaitFor([&] { return RunningNodes("train").size() == 3; }));
  const std::string bad = *RunningNodes("train").begin();
  const int on_bad = static_cast<int>(RunningNodes("train").count(bad));
  std::set<std::string> before;
  for (auto& p : Pods("train")) {
    if (p["spec"].value("nodeName", "") == bad) before.insert(p["metadata"].value("uid", ""));
  }
  CreatePolicy("default", DefaultSpec());
  WriteReport(bad, XidReport(bad));
  for (const char* n : {"gpu-0", "gpu-1"}) {
    if (bad != n) WriteReport(n, HealthyReport(n));
  }
  auto& a = StartOperator("op-a");
  // Wait until the drain started (some pod terminating), then stop the operator.
  ASSERT_TRUE(WaitFor([&] {
    for (auto& p : Pods("train")) {
      if (p["metadata"].contains("deletionTimestamp")) return true;
    }
    return false;
  }));
  a.Stop();
  double a_evictions = a.Metric("gpu_guardian_evictions_total", {"success"});
  auto& b = StartOperator("op-b");
  ASSERT_TRUE(WaitFor([&] { return !Events("NodeDrained", bad).empty(); }, 60s))
      << Node(bad).dump();
  double b_evictions = b.Metric("gpu_guardian_evictions_total", {"success"});
  // Every pod of the bad node was evicted exactly once across both operators.
  EXPECT_EQ(a_evictions + b_evictions, on_bad);
  for (auto& p : Pods("train")) {
    if (before.count(p["metadata"].value("uid", ""))) {
      EXPECT_TRUE(p["metadata"].contains("deletionTimestamp")) << p.dump();
    }
  }
}

// remediation.drain.order with a podSelector stage: every batch pod is gone before the first
// inference pod is evicted. The batch PriorityClass is the higher one on purpose, so an order
// by priority alone would evict inference first; the selector decides here.
TEST_F(OperatorSimTest, DrainOrderBySelectorEvictsEveryBatchPodBeforeInference) {
  for (auto [name, value] : {std::pair{"batch-high", 5000}, std::pair{"inference-low", 100}}) {
    ASSERT_TRUE(sim_->Create("/apis/scheduling.k8s.io/v1/priorityclasses",
                             {{"apiVersion", "scheduling.k8s.io/v1"},
                              {"kind", "PriorityClass"},
                              {"metadata", {{"name", name}}},
                              {"value", value}})
                    .ok());
  }
  AddNode("gpu-0");
  // Long grace (60 s / 30 = 2 s): a batch pod stays terminating long enough to be seen.
  for (auto [app, cls, replicas] :
       {std::tuple{"batch", "batch-high", 3}, std::tuple{"infer", "inference-low", 2}}) {
    json rs = sim::GpuReplicaSet(app, "ml", replicas, 60);
    rs["spec"]["template"]["metadata"]["labels"]["workload-class"] = app;
    rs["spec"]["template"]["spec"]["priorityClassName"] = cls;
    ASSERT_TRUE(sim_->Create("/apis/apps/v1/namespaces/ml/replicasets", rs).ok());
  }
  ASSERT_TRUE(WaitFor([&] {
    return RunningNodes("batch").size() == 3 && RunningNodes("infer").size() == 2;
  })) << Pods("batch").dump();
  // Priority admission resolved the classes into spec.priority.
  EXPECT_EQ(Pods("batch")[0]["spec"].value("priority", 0), 5000);
  EXPECT_EQ(Pods("infer")[0]["spec"].value("priority", 0), 100);
  std::set<std::string> batch_uids;
  for (auto& p : Pods("batch")) batch_uids.insert(p["metadata"].value("uid", ""));
  std::set<std::string> infer_uids;
  for (auto& p : Pods("infer")) infer_uids.insert(p["metadata"].value("uid", ""));

  json spec = DefaultSpec();
  spec["remediation"]["drain"]["order"] =
      json::parse(R"([{"podSelector": {"matchLabels": {"workload-class": "batch"}}}, {}])");
  CreatePolicy("default", spec);
  WriteReport("gpu-0", XidReport("gpu-0"));
  StartOperator("op-a");
  // Watch closely: the first time an original inference pod is terminating or gone, no
  // original batch pod may be left.
  std::optional<std::size_t> batch_left_at_first_inference;
  ASSERT_TRUE(WaitFor(
      [&] {
        std::size_t batch_left = 0, infer_left = 0;
        bool infer_evicted = false;
        auto l = sim_->List("/api/v1/namespaces/ml/pods");
        if (!l.ok()) return false;
        for (auto& p : (*l)["items"]) {
          const std::string uid = p["metadata"].value("uid", "");
          batch_left += batch_uids.count(uid);
          if (infer_uids.count(uid)) {
            ++infer_left;
            infer_evicted = infer_evicted || p["metadata"].contains("deletionTimestamp");
          }
        }
        infer_evicted = infer_evicted || infer_left < infer_uids.size();
        if (infer_evicted && !batch_left_at_first_inference)
          batch_left_at_first_inference = batch_left;
        return batch_left == 0 && infer_left == 0;
      },
      60s))
      << Pods("batch").dump() << Pods("infer").dump();
  ASSERT_TRUE(batch_left_at_first_inference.has_value());
  EXPECT_EQ(*batch_left_at_first_inference, 0u) << "inference evicted while batch pods were left";
  EXPECT_TRUE(WaitFor([&] { return !Events("NodeDrained", "gpu-0").empty(); }));
}

// A nodeCondition rule end to end: another detector's condition written on the Node reaches
// the rules through the operator's Node cache; the node is cordoned, and released once the
// detector clears it and healthyFor passes.
TEST_F(OperatorSimTest, NodeConditionFromAnotherDetectorCordonsAndReleases) {
  AddNode("gpu-0");
  WriteReport("gpu-0", HealthyReport("gpu-0"));
  json spec = DefaultSpec();
  spec["rules"] = json::parse(
      R"([{"name": "npd-xid", "nodeCondition": {"type": "GPUXidFatal"}, "action": "Cordon"}])");
  CreatePolicy("npd", spec);
  StartOperator("op-a");
  ASSERT_TRUE(WaitFor([&] { return Condition(Node("gpu-0")) == "True"; })) << Node("gpu-0").dump();
  // The detector sets (then clears) its condition; a conflict with the operator's own status
  // write is retried, as a real detector would.
  auto set_xid = [&](const std::string& status) {
    return WaitFor([&] {
      json n = Node("gpu-0");
      json conds = json::array();
      for (auto& c : n["status"]["conditions"]) {
        if (c.value("type", "") != "GPUXidFatal") conds.push_back(c);
      }
      n["status"]["conditions"] = conds;
      n["status"]["conditions"].push_back(
          {{"type", "GPUXidFatal"},
           {"status", status},
           {"reason", "FatalXid"},
           {"lastTransitionTime", FormatRfc3339(RealClock::Default().Now())}});
      return sim_->Update("/api/v1/nodes/gpu-0", n).ok();
    });
  };
  ASSERT_TRUE(set_xid("True"));
  ASSERT_TRUE(WaitFor([&] {
    json n = Node("gpu-0");
    return Cordoned(n) && HasOurTaint(n) && Condition(n) == "False";
  })) << Node("gpu-0").dump();
  // The recorder writes Events on its own thread, after the Node write they describe.
  EXPECT_TRUE(WaitFor([&] { return !Events("GPUUnhealthy", "gpu-0").empty(); }));
  ASSERT_TRUE(set_xid("False"));
  WriteReport("gpu-0", HealthyReport("gpu-0"));
  ASSERT_TRUE(WaitFor([&] {
    json n = Node("gpu-0");
    return !Cordoned(n) && !HasOurTaint(n) && Condition(n) == "True";
  })) << Node("gpu-0").dump();
}

TEST_F(OperatorSimTest, TwoReplicasOnlyTheLeaderWrites) {
  AddNode("gpu-0");
  auto spec = DefaultSpec();
  spec["rules"][0]["action"] = "Cordon";
  CreatePolicy("default", spec);
  WriteReport("gpu-0", HealthyReport("gpu-0"));
  auto& a = StartOperator("op-a", /*leader_elect=*/true);
  auto& b = StartOperator("op-b", /*leader_elect=*/true);
  ASSERT_TRUE(WaitFor([&] { return a.op->IsLeader() || b.op->IsLeader(); }));
  std::this_thread::sleep_for(500ms);
  EXPECT_NE(a.op->IsLeader(), b.op->IsLeader());
  RunningOperator& leader = a.op->IsLeader() ? a : b;
  RunningOperator& follower = a.op->IsLeader() ? b : a;
  WriteReport("gpu-0", XidReport("gpu-0"));
  ASSERT_TRUE(WaitFor([&] { return Cordoned(Node("gpu-0")); }));
  ASSERT_TRUE(WaitFor([&] { return !Events("NodeCordoned").empty(); }));
  std::this_thread::sleep_for(500ms);
  for (auto& e : Events("NodeCordoned")) {
    EXPECT_EQ(e["source"].value("host", ""), leader.op->identity()) << e.dump();
  }
  EXPECT_EQ(follower.Metric("gpu_guardian_remediations_total", {"cordon", "success"}), 0);
  EXPECT_EQ(leader.Metric("gpu_guardian_remediations_total", {"cordon", "success"}), 1);

  // Clean handover: the leader stops and releases the lease; the follower takes over and
  // finishes the recovery.
  leader.Stop();
  EXPECT_TRUE(leader.result.ok()) << leader.result;
  ASSERT_TRUE(WaitFor([&] { return follower.op->IsLeader(); }, 10s));
  WriteReport("gpu-0", HealthyReport("gpu-0"));
  ASSERT_TRUE(WaitFor([&] { return !Cordoned(Node("gpu-0")); })) << Node("gpu-0").dump();
  EXPECT_TRUE(WaitFor([&] { return !Events("GPURecovered", "gpu-0").empty(); }));
  // The recovery Event came from the new leader.
  for (auto& e : Events("GPURecovered", "gpu-0")) {
    EXPECT_EQ(e["source"].value("host", ""), follower.op->identity()) << e.dump();
  }
}

TEST_F(OperatorSimTest, RecorderAggregatesRepeatsIntoOneEvent) {
  AddNode("gpu-0");
  events::RestEventSink sink(*client_);
  events::AggregatingRecorder rec(sink, RealClock::Default());
  auto node = events::ObjectRef::Node("gpu-0", "uid-0");
  for (int i = 0; i < 3; ++i) rec.Event(node, events::kGPUUnhealthy, "Xid 79 on GPU 0");
  rec.Event(node, events::kGPUUnhealthy, "Xid 48 on GPU 1");
  rec.Flush();
  auto ev = Events("GPUUnhealthy", "gpu-0");
  ASSERT_EQ(ev.size(), 2u);
  std::multiset<int> counts;
  for (auto& e : ev) {
    counts.insert(e.value("count", 0));
    EXPECT_EQ(e["metadata"].value("namespace", ""), "default");
    EXPECT_EQ(e.value("type", ""), "Warning");
  }
  EXPECT_EQ(counts, (std::multiset<int>{1, 3}));
  EXPECT_EQ(rec.Stats().patched, 2u);
}

// A restarted operator against nodes that already carry the right condition
// and record writes nothing to them.
TEST_F(OperatorSimTest, RestartedOperatorRewritesNothingAlreadyTrue) {
  std::vector<std::string> names;
  for (int i = 0; i < 10; ++i) names.push_back("gpu-" + std::to_string(i));
  for (const auto& n : names) {
    AddNode(n);
    WriteReport(n, HealthyReport(n));
  }
  AddNode("bad");
  WriteReport("bad", XidReport("bad"));
  CreatePolicy("default", DefaultSpec());
  auto& a = StartOperator("op-a");
  ASSERT_TRUE(WaitFor([&] {
    for (const auto& n : names) {
      if (Condition(Node(n)) != "True") return false;
    }
    return !Events("NodeDrained", "bad").empty();
  })) << Node("bad").dump();
  ASSERT_TRUE(WaitFor([&] { return PolicyStatus("default").value("healthyNodes", 0) == 10; }));
  a.Stop();
  // The cluster settles too: its node lifecycle controller taints the cordoned node
  // node.kubernetes.io/unschedulable, as a real one does.
  ASSERT_TRUE(WaitFor([&] {
    for (const auto& t : Node("bad")["spec"].value("taints", json::array()))
      if (t.value("key", "") == "node.kubernetes.io/unschedulable") return true;
    return false;
  })) << Node("bad").dump();
  names.push_back("bad");
  std::map<std::string, std::string> rv;
  for (const auto& n : names) rv[n] = Node(n)["metadata"].value("resourceVersion", "");

  auto& b = StartOperator("op-b");
  // Every node reconciled at least once and nothing left queued: any write would be done.
  auto reconciled = [&] {
    return b.Metric("controller_runtime_reconcile_total", {"node", "success"}) +
           b.Metric("controller_runtime_reconcile_total", {"node", "requeue_after"});
  };
  ASSERT_TRUE(WaitFor([&] {
    return reconciled() >= static_cast<double>(names.size()) &&
           b.Metric("workqueue_depth", {"node"}) == 0 &&
           b.Metric("workqueue_unfinished_work_seconds", {"node"}) == 0;
  })) << reconciled();
  for (const auto& n : names) {
    EXPECT_EQ(Node(n)["metadata"].value("resourceVersion", ""), rv[n])
        << n << " was rewritten: " << Node(n).dump();
  }
  EXPECT_TRUE(HasOurTaint(Node("bad")));
}

// A fault is reconciled before the housekeeping queued ahead of it (here the
// initial reconcile that writes the GPUHealthy condition of 300 healthy nodes).
TEST_F(OperatorSimTest, FaultIsFencedBeforeQueuedHousekeeping) {
  constexpr int kHealthy = 300;
  for (int i = 0; i < kHealthy; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "gpu-%03d", i);
    AddNode(name);
    WriteReport(name, HealthyReport(name));
  }
  AddNode("zz-faulty");  // listed last: without priority it is reconciled last
  WriteReport("zz-faulty", XidReport("zz-faulty"));
  CreatePolicy("default", DefaultSpec());

  // Watch nodes from now on: how many conditions were written before the fence landed.
  std::mutex mu;
  std::set<std::string> with_condition;
  std::optional<std::size_t> before_fence;
  k8s::WatchOptions wo;
  wo.resource_version = std::to_string(sim_->ResourceVersion());
  std::jthread watcher([&](std::stop_token st) {
    while (!st.stop_requested()) {
      Status s = client_->Watch(
          k8s::kNodes, "", wo,
          [&](std::string_view line) {
            auto ev = k8s::ParseWatchEvent<k8s::Node>(line, true);
            if (!ev.ok()) return true;
            const k8s::Node& n = ev->object;
            if (!n.meta.resource_version.empty()) wo.resource_version = n.meta.resource_version;
            std::scoped_lock l(mu);
            if (n.meta.name == "zz-faulty") {
              if (n.FindTaint(api::kTaintKey) && !before_fence)
                before_fence = with_condition.size();
            } else if (n.FindCondition(api::kConditionType)) {
              with_condition.insert(n.meta.name);
            }
            return true;
          },
          st);
      (void)s;
    }
  });
  StartOperator("op-a");
  ASSERT_TRUE(WaitFor(
      [&] {
        std::scoped_lock l(mu);
        return before_fence.has_value() &&
               with_condition.size() == static_cast<std::size_t>(kHealthy);
      },
      120s));
  std::scoped_lock l(mu);
  // Four workers: the fault goes first, the other three may finish a node each meanwhile.
  EXPECT_LT(*before_fence, 30u) << "the fault waited behind " << *before_fence
                                << " condition writes";
}

}  // namespace
}  // namespace gg::op
