// Device-level (DRA) remediation scenarios: the whole operator against the in-process
// simulator serving the resource.k8s.io API set of Kubernetes 1.33, 1.35 and 1.36
// (DeviceTaintRule v1alpha3 / v1alpha3 with status / v1beta2), and 1.32 (no DeviceTaintRule).
// One 8-GPU node publishes its GPUs in a ResourceSlice (driver gpu.nvidia.com); pods hold GPUs
// through ResourceClaims. Assertions are about the world: DeviceTaintRules, the node's
// schedulability and taints, which pods are left, policy conditions, Events and metrics.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "api/gpu_node_health.h"
#include "api/test_reports.h"
#include "common/clock.h"
#include "k8s/rest_client.h"
#include "metrics/registry.h"
#include "operator/operator.h"
#include "sim/population.h"
#include "sim/schema.h"
#include "sim/server.h"
#include "sim/test_objects.h"

namespace gg::op {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr char kPolicies[] = "/apis/gpuguardian.io/v1alpha1/gpuhealthpolicies";
constexpr int kGpus = 8;

bool WaitFor(const std::function<bool()>& f, std::chrono::milliseconds timeout = 30s) {
  auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (f()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return f();
}

class DraFixture {
 public:
  explicit DraFixture(std::string kube_version) : kube_(std::move(kube_version)) {}
  ~DraFixture() { Stop(); }

  void Start() {
    sim::SimOptions o;
    o.bookmark_interval = 200ms;
    o.time_scale = 30;  // 30 s grace -> 1 s
    o.kube_version = kube_;
    // The operator runs as its service account under deploy/rbac/operator.yaml: a DRA verb
    // missing there fails these tests.
    o.authz = "rbac";
    // With the optional claim-status RBAC too (policies with remediation.claimStatus).
    o.rbac_files = {std::string(GG_SOURCE_DIR) + "/deploy/rbac/operator.yaml",
                    std::string(GG_SOURCE_DIR) + "/deploy/rbac/claim-status.yaml"};
    o.token_users = {{"op-token", "system:serviceaccount:gpu-guardian:gpu-guardian-operator"}};
    auto s = sim::SimServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    sim_ = std::move(*s);
    k8s::ClientConfig cfg;
    cfg.server = sim_->Url();
    cfg.token = "admin";
    auto c = k8s::RestClient::Create(cfg, RealClock::Default());
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
    k8s::ResourceType crds{"apiextensions.k8s.io", "v1", "customresourcedefinitions",
                           "CustomResourceDefinition", false};
    ASSERT_TRUE(
        client_->Create(crds, "", sim::GuardianCrd("gpuhealthpolicies", "GPUHealthPolicy").dump())
            .ok());
    ASSERT_TRUE(
        client_->Create(crds, "", sim::GuardianCrd("gpunodehealths", "GPUNodeHealth").dump()).ok());
    for (const char* ns : {"ml", "gpu-guardian-system"}) {
      ASSERT_TRUE(
          sim_->Create("/api/v1/namespaces",
                       {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}})
              .ok());
    }
  }

  void Stop() {
    stop_.request_stop();
    if (thread_.joinable()) thread_.join();
    op_.reset();
    // Close the clients' keep-alive connections first: the server would wait them out.
    op_client_.reset();
    client_.reset();
    if (sim_) sim_->Stop();
  }

  void StartOperator() {
    k8s::ClientConfig cfg;
    cfg.server = sim_->Url();
    cfg.token = "op-token";
    auto c = k8s::RestClient::Create(cfg, RealClock::Default());
    ASSERT_TRUE(c.ok()) << c.status();
    op_client_ = std::move(*c);
    OperatorConfig oc;
    oc.metrics_addr = "127.0.0.1:0";
    oc.identity = "op-dra";
    oc.leader_elect = false;
    oc.drain_poll_interval = 100ms;
    oc.eviction_backoff_initial = 200ms;
    oc.eviction_backoff_max = 1s;
    oc.event_retry_sleep = 100ms;
    op_ = std::make_unique<Operator>(*op_client_, RealClock::Default(), registry_, oc);
    thread_ = std::jthread([this] { result_ = op_->Run(stop_.get_token()); });
  }

  // A GPU node; with `slice` its GPUs are published in a ResourceSlice as NVIDIA's DRA
  // driver does (pool = node name, devices gpu-0..7 with a uuid attribute; with `mig` > 0
  // each GPU's MIG devices gpu-<i>-mig-19-<start>-1 instead).
  // `driver_taints`: taints the driver publishes on devices of the slice (their `node` unused).
  void AddNode(const std::string& name, bool slice, int mig = 0,
               const std::vector<sim::DriverTaintSpec>& driver_taints = {}) {
    json n = {{"apiVersion", "v1"},
              {"kind", "Node"},
              {"metadata", {{"name", name}, {"labels", {{"nvidia.com/gpu.present", "true"}}}}},
              {"spec", json::object()},
              {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
    auto created = sim_->CreateAndGet("/api/v1/nodes", n);
    ASSERT_TRUE(created.ok()) << created.status();
    if (slice) {
      auto s = sim::MakeResourceSlice(name, kGpus, "NVIDIA-H100-80GB-HBM3", kube_, 1, mig);
      // Owned by this Node (its uid), as the driver publishes it; a dangling owner would
      // have the cluster's garbage collector delete the slice.
      s["metadata"]["ownerReferences"][0]["uid"] = (*created)["metadata"]["uid"];
      for (const auto& t : driver_taints) {
        Status added = sim::AddDriverTaint(s, t, kube_);
        ASSERT_TRUE(added.ok()) << added;
      }
      Status st = sim_->Insert(s);
      ASSERT_TRUE(st.ok()) << st;
    }
  }

  // A DRA node with pods holding GPU 3 and GPU 5 through their claims.
  void AddNodeWithPodsOnGpus3And5(const std::string& node) {
    AddNode(node, /*slice=*/true);
    AddClaimPod("holds-gpu-3", node, 3);
    AddClaimPod("holds-gpu-5", node, 5);
  }

  // A DRA node whose driver tainted `device` itself (gpu.nvidia.com/xid=48:NoSchedule, its
  // health check), with a pod holding each GPU of `gpus` (holds-gpu-<i>), running.
  void AddDriverTaintedNode(const std::string& node, const std::string& device,
                            const std::vector<int>& gpus) {
    sim::DriverTaintSpec dt;
    dt.device = device;
    dt.value = "48";
    AddNode(node, /*slice=*/true, 0, {dt});
    for (int g : gpus) AddClaimPod("holds-gpu-" + std::to_string(g), node, g);
    ASSERT_TRUE(WaitFor([&] { return RunningPods().size() == gpus.size(); }));
  }
  std::string SlicesPath() const {
    return "/apis/" + sim::ResourceSliceApiVersion(kube_) + "/resourceslices";
  }
  // The (only) ResourceSlice, as the server has it.
  json TheSlice() {
    auto l = sim_->List(SlicesPath());
    return l.ok() && !(*l)["items"].empty() ? (*l)["items"][0] : json();
  }

  // A healthy report for `node`, policy "dra" with `spec`, the operator started and the node
  // judged healthy.
  void StartHealthyUnder(const std::string& node, const json& spec) {
    WriteReport(node, HealthyReport(node));
    CreatePolicy("dra", spec);
    StartOperator();
    ASSERT_TRUE(WaitFor([&] { return GpuCondition(Node(node)) == "True"; }));
  }
  // ResourceClaim ml/<name> (null when it cannot be read).
  json Claim(const std::string& name) {
    auto c = sim_->Get("/apis/resource.k8s.io/" + ClaimVersion() +
                       "/namespaces/ml/resourceclaims/" + name);
    return c.ok() ? *c : json();
  }

  // The claim API version the sim serves first (what kubectl would use).
  std::string ClaimVersion() const { return kube_ >= "1.34" ? "v1" : "v1beta2"; }
  std::string RuleVersion() const { return sim::DeviceTaintRuleVersion(kube_); }
  std::string RulesPath() const {
    return "/apis/resource.k8s.io/" + RuleVersion() + "/devicetaintrules";
  }

  // A pod on `node` holding DRA device gpu-<gpu> through its own ResourceClaim (allocated
  // and reserved for the pod, as the scheduler and kubelet leave it).
  void AddClaimPod(const std::string& pod, const std::string& node, int gpu) {
    AddClaimPod(pod, node, "gpu-" + std::to_string(gpu));
  }
  void AddClaimPod(const std::string& pod, const std::string& node, const std::string& device) {
    json p = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", pod}, {"namespace", "ml"}, {"labels", {{"app", "dra"}}}}},
              {"spec",
               {{"nodeName", node},
                {"terminationGracePeriodSeconds", 30},
                {"resourceClaims", {{{"name", "gpu"}, {"resourceClaimName", pod + "-gpu"}}}},
                {"containers",
                 {{{"name", "c"},
                   {"image", "cuda"},
                   {"resources", {{"claims", {{{"name", "gpu"}}}}}}}}}}}};
    auto created = sim_->CreateAndGet("/api/v1/namespaces/ml/pods", p);
    ASSERT_TRUE(created.ok()) << created.status();
    std::string uid = (*created)["metadata"].value("uid", "");
    json request = {{"name", "gpu"}, {"exactly", {{"deviceClassName", "gpu.nvidia.com"}}}};
    json result = {
        {"request", "gpu"}, {"driver", "gpu.nvidia.com"}, {"pool", node}, {"device", device}};
    json claim;
    claim["apiVersion"] = "resource.k8s.io/" + ClaimVersion();
    claim["kind"] = "ResourceClaim";
    claim["metadata"] = {{"name", pod + "-gpu"}, {"namespace", "ml"}};
    claim["spec"]["devices"]["requests"] = json::array({request});
    claim["status"]["allocation"]["devices"]["results"] = json::array({result});
    claim["status"]["reservedFor"] =
        json::array({{{"resource", "pods"}, {"name", pod}, {"uid", uid}}});
    Status st = sim_->Insert(claim);
    ASSERT_TRUE(st.ok()) << st;
  }

  void CreatePolicy(const std::string& name, json spec) {
    json p = {{"apiVersion", "gpuguardian.io/v1alpha1"},
              {"kind", "GPUHealthPolicy"},
              {"metadata", {{"name", name}}},
              {"spec", spec}};
    ASSERT_TRUE(sim_->Create(kPolicies, p).ok());
  }

  // Drains at device level: Xid 95 (uncontained ECC, RESET_GPU) evicts; Xid 79 is node-wide.
  static json DevicePolicy(const std::string& effect = "NoSchedule") {
    json spec = json::parse(R"({
      "nodeSelector": {"matchLabels": {"nvidia.com/gpu.present": "true"}},
      "rules": [
        {"name": "uncontained-ecc", "xid": {"codes": [95]}, "count": 1, "action": "Drain"},
        {"name": "fatal-xid", "xid": {"codes": [79]}, "count": 1, "action": "Drain"}
      ],
      "unknown": {"after": "1h", "action": "Event"},
      "remediation": {"drain": {"scope": "GPUPods", "timeout": "2m", "force": true},
                      "deviceLevel": "Auto"},
      "recovery": {"automatic": true, "healthyFor": "2s"},
      "safety": {"maxUnhealthy": "100%", "maxNodesPerHour": 1000, "maxConcurrentDrains": 100}
    })");
    spec["remediation"]["deviceTaintEffect"] = effect;
    return spec;
  }

  api::GpuNodeHealthStatus HealthyReport(const std::string& node) {
    // GPU uuids as the node's ResourceSlice publishes them.
    return api::testing::HealthyReport(node, RealClock::Default().Now(), kGpus, sim::FakeGpuUuid);
  }
  api::GpuNodeHealthStatus XidReport(const std::string& node, int xid, int gpu) {
    auto s = HealthyReport(node);
    if (xid == 79) {
      api::testing::AddXid(s, 79, gpu);
      s.gpus[gpu].lost = true;
    } else {
      api::testing::AddXid(s, xid, gpu, "Memory", "RESET_GPU", "Uncontained ECC error");
    }
    return s;
  }
  void WriteReport(const std::string& node, const api::GpuNodeHealthStatus& s) {
    ASSERT_TRUE(
        sim::PutReportStatus(*sim_, node, json::parse(api::EncodeGpuNodeHealthStatus(s))).ok());
  }

  json Rules() {
    auto l = sim_->List(RulesPath());
    return l.ok() ? (*l)["items"] : json::array();
  }
  json OurRules() {
    json out = json::array();
    for (auto& r : Rules()) {
      if (r["metadata"].value("labels", json::object()).value("app.kubernetes.io/managed-by", "") ==
          "gpu-guardian") {
        out.push_back(r);
      }
    }
    return out;
  }
  json Node(const std::string& name) {
    auto n = sim_->Get("/api/v1/nodes/" + name);
    return n.ok() ? *n : json();
  }
  static bool HasOurTaint(const json& node) {
    if (!node.is_object()) return false;
    for (auto& t : node.value("spec", json::object()).value("taints", json::array())) {
      if (t.value("key", "") == api::kTaintKey) return true;
    }
    return false;
  }
  static bool Cordoned(const json& node) {
    return node.is_object() && node.value("spec", json::object()).value("unschedulable", false);
  }
  static std::string GpuCondition(const json& node) {
    if (!node.is_object()) return "";
    for (auto& c : node.value("status", json::object()).value("conditions", json::array())) {
      if (c.value("type", "") == api::kConditionType) return c.value("status", "");
    }
    return "";
  }
  // Pods not terminating, by name.
  std::set<std::string> LivePods() {
    std::set<std::string> out;
    auto l = sim_->List("/api/v1/namespaces/ml/pods");
    if (!l.ok()) return out;
    for (auto& p : (*l)["items"]) {
      if (p["metadata"].contains("deletionTimestamp")) continue;
      out.insert(p["metadata"].value("name", ""));
    }
    return out;
  }
  std::set<std::string> RunningPods() {
    std::set<std::string> out;
    auto l = sim_->List("/api/v1/namespaces/ml/pods");
    if (!l.ok()) return out;
    for (auto& p : (*l)["items"]) {
      if (!p["metadata"].contains("deletionTimestamp") &&
          p.value("status", json::object()).value("phase", "") == "Running")
        out.insert(p["metadata"].value("name", ""));
    }
    return out;
  }
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
  json PolicyCondition(const std::string& policy, const std::string& type) {
    auto p = sim_->Get(std::string(kPolicies) + "/" + policy);
    if (!p.ok() || !p->contains("status") || !(*p)["status"].is_object()) return json::object();
    for (auto& c : (*p)["status"].value("conditions", json::array())) {
      if (c.value("type", "") == type) return c;
    }
    return json::object();  // absent
  }
  double Metric(std::string_view name, const metrics::LabelValues& labels) {
    return registry_.Value(name, labels);
  }

  std::string kube_;
  std::unique_ptr<sim::SimServer> sim_;
  std::unique_ptr<k8s::RestClient> client_;
  std::unique_ptr<k8s::RestClient> op_client_;
  metrics::Registry registry_;
  std::unique_ptr<Operator> op_;
  std::stop_source stop_;
  std::jthread thread_;
  Status result_;
};

class DraSimTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    f_ = std::make_unique<DraFixture>(GetParam());
    f_->Start();
  }
  void TearDown() override { f_.reset(); }
  std::unique_ptr<DraFixture> f_;
};

// Xid 95 on one GPU of an 8-GPU DRA node: exactly one DeviceTaintRule (ours) for that GPU,
// only the pod holding it is evicted, the node stays schedulable and untainted; an admin's
// DeviceTaintRule is never touched; recovery deletes our rule and only ours.
TEST_P(DraSimTest, Xid95TaintsOneGpuEvictsItsPodAndRecovers) {
  DraFixture& f = *f_;
  const std::string node = "dra-0";
  f.AddNodeWithPodsOnGpus3And5(node);
  ASSERT_TRUE(WaitFor([&] { return f.RunningPods().size() == 2; }));
  // An administrator's rule on another GPU of the same node (no ownership marks).
  json admin = {
      {"apiVersion", "resource.k8s.io/" + f.RuleVersion()},
      {"kind", "DeviceTaintRule"},
      {"metadata", {{"name", "admin-maintenance"}}},
      {"spec",
       {{"deviceSelector", {{"driver", "gpu.nvidia.com"}, {"pool", node}, {"device", "gpu-6"}}},
        {"taint", {{"key", "example.com/maintenance"}, {"effect", "NoSchedule"}}}}}};
  ASSERT_TRUE(f.sim_->Create(f.RulesPath(), admin).ok());
  f.WriteReport(node, f.HealthyReport(node));
  f.CreatePolicy("dra", DraFixture::DevicePolicy());
  f.StartOperator();
  ASSERT_TRUE(WaitFor([&] { return f.GpuCondition(f.Node(node)) == "True"; }));
  ASSERT_TRUE(WaitFor([&] {
    return f.PolicyCondition("dra", "DeviceLevelAvailable").value("status", "") == "True";
  })) << f.PolicyCondition("dra", "DeviceLevelAvailable").dump();

  f.WriteReport(node, f.XidReport(node, 95, 3));
  ASSERT_TRUE(WaitFor([&] { return f.OurRules().size() == 1; })) << f.Rules().dump();
  json rule = f.OurRules()[0];
  EXPECT_EQ(rule["spec"]["deviceSelector"],
            json({{"driver", "gpu.nvidia.com"}, {"pool", node}, {"device", "gpu-3"}}));
  EXPECT_EQ(rule["spec"]["taint"]["key"], "gpuguardian.io/unhealthy");
  EXPECT_EQ(rule["spec"]["taint"]["value"], "uncontained-ecc");
  EXPECT_EQ(rule["spec"]["taint"]["effect"], "NoSchedule");
  EXPECT_EQ(rule["metadata"]["annotations"]["gpuguardian.io/gpu-uuid"], sim::FakeGpuUuid(node, 3));

  // Only the pod holding GPU 3 goes; the other keeps running.
  ASSERT_TRUE(WaitFor([&] { return !f.LivePods().contains("holds-gpu-3"); }));
  ASSERT_TRUE(WaitFor([&] { return !f.Events("NodeDrained", node).empty(); }));
  EXPECT_EQ(f.RunningPods(), std::set<std::string>{"holds-gpu-5"});
  json n = f.Node(node);
  EXPECT_FALSE(DraFixture::Cordoned(n));
  EXPECT_FALSE(DraFixture::HasOurTaint(n));
  EXPECT_EQ(DraFixture::GpuCondition(n), "False");
  EXPECT_EQ(f.Rules().size(), 2u);  // ours + the admin's
  EXPECT_EQ(f.Metric("gpu_guardian_remediations_total", {"device_taint", "success"}), 1);
  EXPECT_EQ(f.Metric("gpu_guardian_remediations_total", {"cordon", "success"}), 0);

  // Healthy for healthyFor: our rule is deleted, the admin's stays.
  f.WriteReport(node, f.HealthyReport(node));
  ASSERT_TRUE(WaitFor([&] { return f.OurRules().empty(); })) << f.Rules().dump();
  ASSERT_TRUE(WaitFor([&] { return !f.Events("GPURecovered", node).empty(); }));
  json left = f.Rules();
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0]["metadata"]["name"], "admin-maintenance");
  EXPECT_EQ(DraFixture::GpuCondition(f.Node(node)), "True");
  EXPECT_EQ(f.Metric("gpu_guardian_remediations_total", {"device_untaint", "success"}), 1);
}

// A GPU fallen off the bus (Xid 79, reboot needed) is node-wide: under the default rules the
// node is tainted and cordoned, and no DeviceTaintRule is written.
TEST_P(DraSimTest, Xid79FencesTheWholeNode) {
  DraFixture& f = *f_;
  const std::string node = "dra-0";
  f.AddNode(node, /*slice=*/true);
  f.WriteReport(node, f.HealthyReport(node));
  json spec = DraFixture::DevicePolicy();
  spec.erase("rules");  // the conservative defaults: fatal Xids cordon
  f.CreatePolicy("dra", spec);
  f.StartOperator();
  ASSERT_TRUE(WaitFor([&] { return f.GpuCondition(f.Node(node)) == "True"; }));
  f.WriteReport(node, f.XidReport(node, 79, 3));
  ASSERT_TRUE(WaitFor([&] {
    json n = f.Node(node);
    return DraFixture::Cordoned(n) && DraFixture::HasOurTaint(n);
  })) << f.Node(node).dump();
  EXPECT_TRUE(f.Rules().empty()) << f.Rules().dump();
  EXPECT_EQ(f.Metric("gpu_guardian_remediations_total", {"device_taint", "success"}), 0);
}

// A MIG-partitioned node (each GPU three 1g MIG devices, published as NVIDIA's DRA driver
// does). An Xid the driver confined to GPU instance 2 of GPU 2 fences that MIG device only:
// one DeviceTaintRule, only the pod holding it evicted, the node schedulable. Then an Xid on
// the same GPU whose recovery resets the GPU fences every MIG device of it (the MIG-enabled
// GPU itself is not published); recovery removes every rule of ours.
TEST_P(DraSimTest, MigXidFencesOnlyThatMigDeviceAndAGpuResetFencesAllOfThem) {
  DraFixture& f = *f_;
  const std::string node = "dra-mig";
  f.AddNode(node, /*slice=*/true, /*mig=*/3);
  f.AddClaimPod("holds-mig-2-1", node, "gpu-2-mig-19-1-1");  // GPU instance 2
  f.AddClaimPod("holds-mig-2-2", node, "gpu-2-mig-19-2-1");  // GPU instance 3, same GPU
  f.AddClaimPod("holds-mig-5-0", node, "gpu-5-mig-19-0-1");  // another GPU
  ASSERT_TRUE(WaitFor([&] { return f.RunningPods().size() == 3; }));
  auto report = [&](std::optional<int> xid) {
    auto s = f.HealthyReport(node);
    for (auto& g : s.gpus) {
      g.mig_enabled = true;
      uint32_t slot = 0;
      for (const auto& m : sim::MigLayout("NVIDIA-H100-80GB-HBM3", 3)) {
        g.mig_devices.push_back({slot++,
                                 sim::FakeMigUuid(g.uuid, m.gpu_instance, m.compute_instance),
                                 m.gpu_instance, m.compute_instance, m.profile, std::nullopt});
      }
    }
    if (xid == 13) api::testing::AddXid(s, 13, 2, "application", "RESTART_APP", "Graphics engine");
    if (xid == 95) api::testing::AddXid(s, 95, 2, "memory", "RESET_GPU", "Uncontained ECC error");
    if (xid) s.xids.back().gpu_instance = 2, s.xids.back().compute_instance = 0;
    return s;
  };
  f.WriteReport(node, report(std::nullopt));
  json spec = DraFixture::DevicePolicy();
  spec["rules"].push_back(
      {{"name", "app-error"}, {"xid", {{"codes", {13}}}}, {"count", 1}, {"action", "Drain"}});
  f.CreatePolicy("dra", spec);
  f.StartOperator();
  ASSERT_TRUE(WaitFor([&] { return f.GpuCondition(f.Node(node)) == "True"; }));

  f.WriteReport(node, report(13));
  ASSERT_TRUE(WaitFor([&] { return f.OurRules().size() == 1; })) << f.Rules().dump();
  json rule = f.OurRules()[0];
  EXPECT_EQ(rule["spec"]["deviceSelector"],
            json({{"driver", "gpu.nvidia.com"}, {"pool", node}, {"device", "gpu-2-mig-19-1-1"}}));
  EXPECT_EQ(rule["spec"]["taint"]["value"], "app-error");
  EXPECT_EQ(rule["metadata"]["annotations"]["gpuguardian.io/gpu-uuid"],
            sim::FakeMigUuid(sim::FakeGpuUuid(node, 2), 2, 0));
  ASSERT_TRUE(WaitFor([&] {
    return !f.Events("NodeDrained", node).empty() && !f.LivePods().contains("holds-mig-2-1");
  }));
  EXPECT_EQ(f.RunningPods(), (std::set<std::string>{"holds-mig-2-2", "holds-mig-5-0"}));
  json n = f.Node(node);
  EXPECT_FALSE(DraFixture::Cordoned(n));
  EXPECT_FALSE(DraFixture::HasOurTaint(n));
  EXPECT_EQ(f.OurRules().size(), 1u);

  f.WriteReport(node, report(95));
  ASSERT_TRUE(WaitFor([&] { return f.OurRules().size() == 3; })) << f.Rules().dump();
  std::set<std::string> fenced;
  for (auto& r : f.OurRules()) fenced.insert(r["spec"]["deviceSelector"].value("device", ""));
  EXPECT_EQ(fenced,
            (std::set<std::string>{"gpu-2-mig-19-0-1", "gpu-2-mig-19-1-1", "gpu-2-mig-19-2-1"}));
  n = f.Node(node);
  EXPECT_FALSE(DraFixture::Cordoned(n));
  EXPECT_FALSE(DraFixture::HasOurTaint(n));

  f.WriteReport(node, report(std::nullopt));
  ASSERT_TRUE(WaitFor([&] { return f.OurRules().empty(); })) << f.Rules().dump();
  ASSERT_TRUE(WaitFor([&] { return !f.Events("GPURecovered", node).empty(); }));
  EXPECT_TRUE(f.LivePods().contains("holds-mig-5-0"));
}

// remediation.claimStatus (KEP-4817): the claim holding the fenced GPU carries our GPUHealthy
// condition (False, DeviceFenced) on its status.devices entry for that device, written under
// deploy/rbac/claim-status.yaml (on 1.36 through the driver-granular authorization); a claim
// holding another GPU is left alone; recovery takes the condition off again.
TEST_P(DraSimTest, ClaimStatusMarksTheClaimHoldingAFencedGpu) {
  DraFixture& f = *f_;
  const std::string node = "dra-0";
  f.AddNodeWithPodsOnGpus3And5(node);
  ASSERT_TRUE(WaitFor([&] { return f.RunningPods().size() == 2; }));
  json spec = DraFixture::DevicePolicy();
  spec["rules"][0]["action"] = "Taint";  // the pod stays: its claim is what we look at
  spec["remediation"]["claimStatus"] = true;
  f.StartHealthyUnder(node, spec);
  auto claim = [&](const std::string& name) { return f.Claim(name); };
  auto our_condition = [&](const std::string& name) -> json {
    json c = claim(name);
    if (!c.is_object()) return json();
    for (auto& e : c.value("status", json::object()).value("devices", json::array())) {
      for (auto& cond : e.value("conditions", json::array())) {
        if (cond.value("type", "") == "GPUHealthy") return json{{"entry", e}, {"condition", cond}};
      }
    }
    return json();
  };

  f.WriteReport(node, f.XidReport(node, 95, 3));
  ASSERT_TRUE(WaitFor([&] { return !our_condition("holds-gpu-3-gpu").is_null(); }))
      << claim("holds-gpu-3-gpu").dump()
      << f.Metric("gpu_guardian_remediations_total", {"claim_status", "failure"});
  json got = our_condition("holds-gpu-3-gpu");
  EXPECT_EQ(got["entry"].value("device", ""), "gpu-3");
  EXPECT_EQ(got["entry"].value("pool", ""), node);
  EXPECT_EQ(got["entry"].value("driver", ""), "gpu.nvidia.com");
  EXPECT_EQ(got["condition"].value("status", ""), "False");
  EXPECT_EQ(got["condition"].value("reason", ""), "DeviceFenced");
  EXPECT_NE(got["condition"].value("message", "").find("Xid 95"), std::string::npos) << got.dump();
  EXPECT_TRUE(our_condition("holds-gpu-5-gpu").is_null()) << claim("holds-gpu-5-gpu").dump();
  EXPECT_EQ(f.Metric("gpu_guardian_remediations_total", {"claim_status", "success"}), 1);
  EXPECT_FALSE(DraFixture::Cordoned(f.Node(node)));

  f.WriteReport(node, f.HealthyReport(node));
  ASSERT_TRUE(WaitFor([&] { return f.OurRules().empty(); })) << f.Rules().dump();
  ASSERT_TRUE(WaitFor([&] { return our_condition("holds-gpu-3-gpu").is_null(); }))
      << claim("holds-gpu-3-gpu").dump();
  EXPECT_FALSE(claim("holds-gpu-3-gpu")["status"].contains("devices"));
}

// remediation.claimStatus with a drain: the claim holding the fenced GPU gets the condition,
// its pod is drained (the claim, created on its own, stays), and recovery takes the condition
// off that claim although no pod names it any more: the record kept which claims were marked.
// The same for a GPU the driver tainted itself (GPU 6: counted as fenced, its claim marked).
TEST_P(DraSimTest, ClaimStatusIsClearedOnClaimsWhosePodsWereDrained) {
  DraFixture& f = *f_;
  const std::string node = "dra-0";
  f.AddDriverTaintedNode(node, "gpu-6", {3, 5, 6});
  json spec = DraFixture::DevicePolicy();
  spec["remediation"]["claimStatus"] = true;
  f.StartHealthyUnder(node, spec);
  auto marked = [&](const std::string& name) {
    json c = f.Claim(name);
    if (!c.is_object()) return false;
    for (auto& e : c.value("status", json::object()).value("devices", json::array())) {
      for (auto& cond : e.value("conditions", json::array())) {
        if (cond.value("type", "") == "GPUHealthy" && cond.value("status", "") == "False") {
          return true;
        }
      }
    }
    return false;
  };

  auto report = f.XidReport(node, 95, 3);
  api::testing::AddXid(report, 48, 6, "Memory", "RESET_GPU", "Double bit ECC error");
  f.WriteReport(node, report);
  ASSERT_TRUE(WaitFor([&] {
    return !f.LivePods().contains("holds-gpu-3") && !f.LivePods().contains("holds-gpu-6") &&
           !f.Events("NodeDrained", node).empty();
  }));
  EXPECT_EQ(f.RunningPods(), std::set<std::string>{"holds-gpu-5"});
  EXPECT_TRUE(marked("holds-gpu-3-gpu"));
  EXPECT_TRUE(marked("holds-gpu-6-gpu"));
  EXPECT_FALSE(marked("holds-gpu-5-gpu"));
  EXPECT_EQ(f.OurRules().size(), 1u) << f.Rules().dump();  // GPU 3 only: GPU 6 is the driver's

  // The driver republishes without its taint and our GPUs are healthy: recovery.
  json sl = f.TheSlice();
  ASSERT_TRUE(sl.is_object());
  for (auto& d : sl["spec"]["devices"]) (d.contains("basic") ? d["basic"] : d).erase("taints");
  ASSERT_TRUE(f.sim_->Update(f.SlicesPath() + "/" + sl["metadata"].value("name", ""), sl).ok());
  f.WriteReport(node, f.HealthyReport(node));
  ASSERT_TRUE(
      WaitFor([&] { return f.OurRules().empty() && !f.Events("GPURecovered", node).empty(); }));
  ASSERT_TRUE(WaitFor([&] { return !marked("holds-gpu-3-gpu") && !marked("holds-gpu-6-gpu"); }))
      << "conditions left on the claims of drained pods";
  EXPECT_EQ(f.Metric("gpu_guardian_remediations_total", {"claim_status_clear", "failure"}), 0);
}

// NVIDIA's DRA driver taints GPU 3 itself (gpu.nvidia.com/xid=48:NoSchedule, its health
// check) after an Xid our policy has no rule for. That taint is evidence: the node's verdict
// and record name it, a DeviceTaintedByDriver Event says so, the pod holding GPU 3 is drained
// (the other stays), no DeviceTaintRule of ours duplicates the driver's, the node stays
// schedulable. A later fault of ours on GPU 5 gets our rule (for GPU 5 only). While the
// driver's taint stays the occurrence holds; once the driver republishes GPU 3 without it,
// recovery deletes our rule and only ours: the operator never writes the driver's slice.
TEST_P(DraSimTest, DriverTaintIsEvidenceDrainsItsPodAndIsNeverDuplicatedOrRemoved) {
  DraFixture& f = *f_;
  const std::string node = "dra-0";
  f.AddDriverTaintedNode(node, "gpu-3", {3, 5});
  const std::string slices = f.SlicesPath();
  auto slice = [&] { return f.TheSlice(); };
  auto device_taints = [&](const json& sl, const std::string& dev) -> json {
    for (auto& d : sl["spec"]["devices"]) {
      if (d.value("name", "") != dev) continue;
      const json& h = d.contains("basic") ? d["basic"] : d;
      return h.value("taints", json::array());
    }
    return json::array();
  };
  // The server stamped timeAdded on the driver's taint.
  json published = device_taints(slice(), "gpu-3");
  ASSERT_EQ(published.size(), 1u) << slice().dump();
  EXPECT_TRUE(published[0].contains("timeAdded")) << published.dump();

  // Our agent saw the Xid too; the policy has no rule for 48.
  auto report = f.HealthyReport(node);
  api::testing::AddXid(report, 48, 3, "Memory", "RESET_GPU", "Double bit ECC error");
  f.WriteReport(node, report);
  f.CreatePolicy("dra", DraFixture::DevicePolicy());
  f.StartOperator();
  ASSERT_TRUE(WaitFor([&] {
    return !f.LivePods().contains("holds-gpu-3") && !f.Events("NodeDrained", node).empty() &&
           DraFixture::GpuCondition(f.Node(node)) == "False";
  })) << f.Node(node).dump();
  EXPECT_EQ(f.RunningPods(), std::set<std::string>{"holds-gpu-5"});
  EXPECT_TRUE(f.OurRules().empty()) << f.Rules().dump();
  auto by_driver = f.Events("DeviceTaintedByDriver", node);
  ASSERT_EQ(by_driver.size(), 1u);
  EXPECT_NE(by_driver[0].value("message", "").find("gpu.nvidia.com/xid=48:NoSchedule"),
            std::string::npos)
      << by_driver[0].dump();
  EXPECT_EQ(by_driver[0].value("type", ""), "Warning");
  json n = f.Node(node);
  EXPECT_FALSE(DraFixture::Cordoned(n));
  EXPECT_FALSE(DraFixture::HasOurTaint(n));
  json record = json::parse(
      n["metadata"]["annotations"].value(std::string(api::kRemediationAnnotation), "{}"));
  ASSERT_EQ(record.value("deviceTaints", json::array()).size(), 1u) << record.dump();
  EXPECT_EQ(record["deviceTaints"][0].value("driverTaint", ""), "gpu.nvidia.com/xid=48:NoSchedule");
  EXPECT_EQ(record["deviceTaints"][0].value("device", ""), "gpu.nvidia.com/" + node + "/gpu-3");
  EXPECT_FALSE(record["deviceTaints"][0].contains("ruleName"));
  EXPECT_NE(record.value("rules", json::array()).dump().find("driverTaint"), std::string::npos);

  // A fault of ours on GPU 5: our rule for GPU 5 only.
  api::testing::AddXid(report, 95, 5, "Memory", "RESET_GPU", "Uncontained ECC error");
  f.WriteReport(node, report);
  ASSERT_TRUE(WaitFor([&] { return f.OurRules().size() == 1; })) << f.Rules().dump();
  EXPECT_EQ(f.OurRules()[0]["spec"]["deviceSelector"].value("device", ""), "gpu-5");

  // Our GPUs report healthy, but the driver's taint stays: the occurrence holds.
  f.WriteReport(node, f.HealthyReport(node));
  std::this_thread::sleep_for(3s);  // past healthyFor (2s)
  EXPECT_EQ(f.OurRules().size(), 1u);
  EXPECT_EQ(DraFixture::GpuCondition(f.Node(node)), "False");
  EXPECT_TRUE(f.Events("GPURecovered", node).empty());

  // The driver's plugin restarts and republishes GPU 3 without the Xid taint (from 1.35 an
  // informational None taint of its own stays on GPU 6).
  json republished = slice();
  for (auto& d : republished["spec"]["devices"]) {
    json& h = d.contains("basic") ? d["basic"] : d;
    h.erase("taints");
    if (f.kube_ >= "1.35" && d.value("name", "") == "gpu-6") {
      h["taints"] =
          json::array({{{"key", "gpu.nvidia.com/xid"}, {"value", "13"}, {"effect", "None"}}});
    }
  }
  auto put = f.sim_->Update(slices + "/" + republished["metadata"].value("name", ""), republished);
  ASSERT_TRUE(put.ok()) << put.status();
  const std::string driver_rv = (*put)["metadata"].value("resourceVersion", "");
  ASSERT_TRUE(WaitFor([&] {
    return f.OurRules().empty() && !f.Events("GPURecovered", node).empty() &&
           DraFixture::GpuCondition(f.Node(node)) == "True";
  })) << f.Rules().dump();
  // Recovery deleted only our rule; the driver's slice is as the driver left it.
  json after = slice();
  EXPECT_EQ(after["metadata"].value("resourceVersion", ""), driver_rv);
  if (f.kube_ >= "1.35") {
    EXPECT_EQ(device_taints(after, "gpu-6").size(), 1u) << after.dump();
  }
  json rec_after = json::parse(f.Node(node)["metadata"]["annotations"].value(
      std::string(api::kRemediationAnnotation), "{}"));
  EXPECT_FALSE(rec_after.contains("deviceTaints")) << rec_after.dump();
}

INSTANTIATE_TEST_SUITE_P(KubeVersions, DraSimTest, ::testing::Values("1.33", "1.35", "1.36"),
                         [](const auto& info) {
                           std::string s = "k8s_" + info.param;
                           for (auto& c : s) c = c == '.' ? '_' : c;
                           return s;
                         });

// Kubernetes 1.32 serves no DeviceTaintRule: the policy says so (condition + one Event) and
// the confined fault fences the node as without DRA.
TEST(DraSimFallback, NoDeviceTaintRuleServedMeansNodeLevel) {
  DraFixture f("1.32");
  f.Start();
  const std::string node = "dra-0";
  f.AddNode(node, /*slice=*/true);
  f.WriteReport(node, f.HealthyReport(node));
  f.CreatePolicy("dra", DraFixture::DevicePolicy());
  f.StartOperator();
  ASSERT_TRUE(WaitFor([&] {
    return f.PolicyCondition("dra", "DeviceLevelAvailable").value("status", "") == "False";
  })) << f.PolicyCondition("dra", "DeviceLevelAvailable").dump();
  EXPECT_EQ(f.PolicyCondition("dra", "DeviceLevelAvailable").value("reason", ""),
            "DeviceTaintRulesNotServed");
  f.WriteReport(node, f.XidReport(node, 95, 3));
  ASSERT_TRUE(WaitFor([&] {
    json n = f.Node(node);
    return DraFixture::Cordoned(n) && DraFixture::HasOurTaint(n);
  })) << f.Node(node).dump();
  // Said once, on the policy.
  ASSERT_TRUE(WaitFor([&] { return !f.Events("RemediationSkipped", "dra").empty(); }));
  std::this_thread::sleep_for(300ms);
  auto skipped = f.Events("RemediationSkipped", "dra");
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(skipped[0].value("count", 0), 1);
  EXPECT_NE(skipped[0].value("message", "").find("DeviceTaintRule"), std::string::npos);
}

// A node whose GPUs are not published through DRA (no ResourceSlice) on a DRA cluster, and a
// policy with deviceLevel Off on a DRA node: both fence the node.
TEST(DraSimFallback, NoSliceOrDeviceLevelOffMeansNodeLevel) {
  DraFixture f("1.35");
  f.Start();
  f.AddNode("plain-0", /*slice=*/false);
  f.AddNode("off-0", /*slice=*/true);
  for (const char* n : {"plain-0", "off-0"}) f.WriteReport(n, f.HealthyReport(n));
  json plain = DraFixture::DevicePolicy();
  plain["nodeSelector"]["matchExpressions"] = {{{"key", "dra-test"}, {"operator", "DoesNotExist"}}};
  // Label off-0 so that a deviceLevel Off policy selects it and the Auto one does not.
  ASSERT_TRUE(
      f.sim_->MergePatch("/api/v1/nodes/off-0", {{"metadata", {{"labels", {{"dra-test", "off"}}}}}})
          .ok());
  f.CreatePolicy("auto", plain);
  json off = DraFixture::DevicePolicy();
  off["nodeSelector"] = {{"matchLabels", {{"dra-test", "off"}}}};
  off["remediation"]["deviceLevel"] = "Off";
  f.CreatePolicy("off", off);
  f.StartOperator();
  for (const char* n : {"plain-0", "off-0"}) f.WriteReport(n, f.XidReport(n, 95, 3));
  for (const char* n : {"plain-0", "off-0"}) {
    ASSERT_TRUE(WaitFor([&] {
      json node = f.Node(n);
      return DraFixture::Cordoned(node) && DraFixture::HasOurTaint(node);
    })) << n
        << " " << f.Node(n).dump();
  }
  EXPECT_TRUE(f.Rules().empty()) << f.Rules().dump();
  EXPECT_EQ(f.PolicyCondition("auto", "DeviceLevelAvailable").value("status", ""), "True");
  EXPECT_TRUE(f.PolicyCondition("off", "DeviceLevelAvailable").empty());
}

// NoSchedule + Drain evicts through the Eviction API: a PodDisruptionBudget that allows no
// disruption keeps the holder running (the operator retries), and once it goes the holder is
// evicted. The pod on the healthy GPU is never touched.
TEST(DraSimEffects, DeviceLevelDrainHonoursPdbs) {
  DraFixture f("1.36");
  f.Start();
  const std::string node = "dra-0";
  f.AddNode(node, /*slice=*/true);
  f.AddClaimPod("holds-gpu-3", node, 3);
  f.AddClaimPod("holds-gpu-5", node, 5);
  json pdb = {{"apiVersion", "policy/v1"},
              {"kind", "PodDisruptionBudget"},
              {"metadata", {{"name", "dra-pdb"}, {"namespace", "ml"}}},
              {"spec", {{"minAvailable", 2}, {"selector", {{"matchLabels", {{"app", "dra"}}}}}}}};
  ASSERT_TRUE(f.sim_->Create("/apis/policy/v1/namespaces/ml/poddisruptionbudgets", pdb).ok());
  ASSERT_TRUE(WaitFor([&] { return f.RunningPods().size() == 2; }));
  f.WriteReport(node, f.HealthyReport(node));
  f.CreatePolicy("dra", DraFixture::DevicePolicy());
  f.StartOperator();
  f.WriteReport(node, f.XidReport(node, 95, 3));
  ASSERT_TRUE(WaitFor([&] { return f.OurRules().size() == 1; }));
  ASSERT_TRUE(
      WaitFor([&] { return f.Metric("gpu_guardian_evictions_total", {"pdb_blocked"}) >= 1; }));
  EXPECT_TRUE(f.LivePods().contains("holds-gpu-3"));
  EXPECT_FALSE(DraFixture::Cordoned(f.Node(node)));
  ASSERT_TRUE(f.sim_->Delete("/apis/policy/v1/namespaces/ml/poddisruptionbudgets/dra-pdb").ok());
  ASSERT_TRUE(WaitFor([&] { return !f.LivePods().contains("holds-gpu-3"); }));
  ASSERT_TRUE(WaitFor([&] { return !f.Events("NodeDrained", node).empty(); }));
  EXPECT_EQ(f.RunningPods(), std::set<std::string>{"holds-gpu-5"});
}

// Effect None only announces: on 1.35 the rule is written with effect None and nothing is
// evicted; 1.33 does not accept None, so the policy says so and the node is fenced instead.
TEST(DraSimEffects, EffectNoneAnnouncesOnlyFrom135) {
  {
    DraFixture f("1.35");
    f.Start();
    const std::string node = "dra-0";
    f.AddNode(node, /*slice=*/true);
    f.AddClaimPod("holds-gpu-3", node, 3);
    ASSERT_TRUE(WaitFor([&] { return f.RunningPods().size() == 1; }));
    f.WriteReport(node, f.HealthyReport(node));
    f.CreatePolicy("dra", DraFixture::DevicePolicy("None"));
    f.StartOperator();
    f.WriteReport(node, f.XidReport(node, 95, 3));
    ASSERT_TRUE(WaitFor([&] { return f.OurRules().size() == 1; }));
    EXPECT_EQ(f.OurRules()[0]["spec"]["taint"]["effect"], "None");
    ASSERT_TRUE(WaitFor([&] { return DraFixture::GpuCondition(f.Node(node)) == "False"; }));
    std::this_thread::sleep_for(1s);  // a drain would have evicted by now (grace 1 s)
    EXPECT_EQ(f.RunningPods(), std::set<std::string>{"holds-gpu-3"});
    EXPECT_TRUE(f.Events("NodeDrained", node).empty());
    EXPECT_FALSE(DraFixture::Cordoned(f.Node(node)));
  }
  {
    DraFixture f("1.33");
    f.Start();
    const std::string node = "dra-0";
    f.AddNode(node, /*slice=*/true);
    f.WriteReport(node, f.HealthyReport(node));
    json spec = DraFixture::DevicePolicy("None");
    spec["rules"][0]["action"] = "Cordon";
    f.CreatePolicy("dra", spec);
    f.StartOperator();
    ASSERT_TRUE(WaitFor([&] {
      return f.PolicyCondition("dra", "DeviceLevelAvailable").value("status", "") == "False";
    }));
    EXPECT_NE(f.PolicyCondition("dra", "DeviceLevelAvailable").value("message", "").find("None"),
              std::string::npos);
    f.WriteReport(node, f.XidReport(node, 95, 3));
    ASSERT_TRUE(WaitFor([&] { return DraFixture::Cordoned(f.Node(node)); }));
    EXPECT_TRUE(f.Rules().empty());
  }
}

}  // namespace
}  // namespace gg::op
