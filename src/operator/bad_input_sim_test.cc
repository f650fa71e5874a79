// Bad input against the whole operator (in-process simulator over loopback HTTP): invalid
// policies, garbage reports, annotation garbage and application-Xid storms. Each must give a
// clear, visible error (policy condition, Event, node condition message) and change nothing
// else: no taint, no cordon, no eviction. Every negative assertion waits first for a positive
// sign that the operator did read the input, so a slow machine cannot make it pass vacuously.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "api/gpu_node_health.h"
#include "api/test_reports.h"
#include "common/clock.h"
#include "k8s/rest_client.h"
#include "metrics/registry.h"
#include "operator/operator.h"
#include "sim/rbac.h"
#include "sim/server.h"

namespace gg::op {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

const std::string kPolicyPath = "/apis/gpuguardian.io/v1alpha1/gpuhealthpolicies";
const std::string kReportPath = "/apis/gpuguardian.io/v1alpha1/gpunodehealths";

bool Eventually(const std::function<bool()>& ok, std::chrono::milliseconds limit = 45s) {
  for (auto end = std::chrono::steady_clock::now() + limit;
       std::chrono::steady_clock::now() < end;) {
    if (ok()) return true;
    std::this_thread::sleep_for(100ms);
  }
  return ok();
}

// A cluster-scoped CRD of ours that stores anything (the sim then keeps garbage as written,
// which is what an API server with a permissive or outdated schema would do).
json PermissiveCrd(const std::string& plural, const std::string& kind) {
  json version = {{"name", "v1alpha1"},
                  {"served", true},
                  {"storage", true},
                  {"subresources", {{"status", json::object()}}},
                  {"schema",
                   {{"openAPIV3Schema",
                     {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}}}}};
  return {{"apiVersion", "apiextensions.k8s.io/v1"},
          {"kind", "CustomResourceDefinition"},
          {"metadata", {{"name", plural + ".gpuguardian.io"}}},
          {"spec",
           {{"group", "gpuguardian.io"},
            {"scope", "Cluster"},
            {"names", {{"plural", plural}, {"kind", kind}}},
            {"versions", {version}}}}};
}

class BadInputSimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sim::SimOptions o;
    o.bookmark_interval = 200ms;
    o.time_scale = 30;
    auto s = sim::SimServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    sim_ = std::move(*s);
    ASSERT_TRUE(sim_->Insert(PermissiveCrd("gpuhealthpolicies", "GPUHealthPolicy")).ok());
    ASSERT_TRUE(sim_->Insert(PermissiveCrd("gpunodehealths", "GPUNodeHealth")).ok());
    ASSERT_TRUE(
        sim_->Insert({{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "ml"}}}})
            .ok());
    k8s::ClientConfig cfg;
    cfg.server = sim_->Url();
    auto c = k8s::RestClient::Create(cfg, RealClock::Default());
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
  }
  void TearDown() override {
    stop_.request_stop();
    if (thread_.joinable()) thread_.join();
    op_.reset();
    if (sim_) sim_->Stop();
  }

  void StartOperator() {
    OperatorConfig cfg;
    cfg.metrics_addr = "127.0.0.1:0";
    cfg.identity = "op";
    cfg.leader_elect = false;
    cfg.drain_poll_interval = 100ms;
    cfg.eviction_backoff_initial = 200ms;
    cfg.eviction_backoff_max = 1s;
    cfg.event_retry_sleep = 100ms;
    op_ = std::make_unique<Operator>(*client_, RealClock::Default(), registry_, cfg);
    thread_ = std::jthread([this] { (void)op_->Run(stop_.get_token()); });
  }

  void AddNode(const std::string& name, json labels = json::object(), json annotations = nullptr,
               bool unschedulable = false) {
    labels["nvidia.com/gpu.present"] = "true";
    json meta = {{"name", name}, {"labels", labels}};
    if (!annotations.is_null()) meta["annotations"] = annotations;
    json n = {{"apiVersion", "v1"},
              {"kind", "Node"},
              {"metadata", meta},
              {"spec", {{"unschedulable", unschedulable}}},
              {"status",
               {{"capacity", {{"nvidia.com/gpu", "8"}}},
                {"allocatable", {{"nvidia.com/gpu", "8"}}},
                {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
    ASSERT_TRUE(sim_->Insert(n).ok());
  }
  // A running GPU pod bound to `node` (the simulated kubelet marks it Running).
  void AddGpuPod(const std::string& name, const std::string& node) {
    json c = {{"name", "c"},
              {"image", "cuda"},
              {"resources",
               {{"requests", {{"nvidia.com/gpu", "1"}}}, {"limits", {{"nvidia.com/gpu", "1"}}}}}};
    // Owned by a controller: a drain evicts it (an unowned pod would only block the drain).
    // The owner must exist, or the cluster's garbage collector deletes the pod: a Job (the
    // simulator runs no Job controller, so the pods stay exactly as created here).
    if (job_uid_.empty()) {
      json job = {{"apiVersion", "batch/v1"},
                  {"kind", "Job"},
                  {"metadata", {{"name", "train"}, {"namespace", "ml"}}},
                  {"spec",
                   {{"template",
                     {{"spec",
                       {{"restartPolicy", "Never"},
                        {"containers", {{{"name", "c"}, {"image", "cuda"}}}}}}}}}}};
      auto created = sim_->CreateAndGet("/apis/batch/v1/namespaces/ml/jobs", job);
      ASSERT_TRUE(created.ok()) << created.status();
      job_uid_ = (*created)["metadata"]["uid"];
    }
    json owner = {{"apiVersion", "batch/v1"},
                  {"kind", "Job"},
                  {"name", "train"},
                  {"uid", job_uid_},
                  {"controller", true}};
    json p = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}, {"namespace", "ml"}, {"ownerReferences", {owner}}}},
              {"spec", {{"nodeName", node}, {"containers", {c}}}}};
    ASSERT_TRUE(sim_->Create("/api/v1/namespaces/ml/pods", p).ok());
    // Running before any operator starts, so "still running" later means "never evicted".
    ASSERT_TRUE(Eventually([&] { return PodRunning(name); })) << name;
  }
  std::string job_uid_;
  bool PodRunning(const std::string& name) {
    auto p = sim_->Get("/api/v1/namespaces/ml/pods/" + name);
    return p.ok() && !p->at("metadata").contains("deletionTimestamp") &&
           p->value("/status/phase"_json_pointer, "") == "Running";
  }

  void CreatePolicy(const std::string& name, const json& spec) {
    ASSERT_TRUE(sim_->Insert({{"apiVersion", "gpuguardian.io/v1alpha1"},
                              {"kind", "GPUHealthPolicy"},
                              {"metadata", {{"name", name}}},
                              {"spec", spec}})
                    .ok());
  }
  // The shipped sample policies, as `kubectl apply -f deploy/samples/<file>` would create them.
  void ApplySample(const std::string& file) {
    std::ifstream in(std::string(GG_SOURCE_DIR) + "/deploy/samples/" + file);
    std::stringstream text;
    text << in.rdbuf();
    auto docs = sim::ParseYamlDocuments(text.str());
    ASSERT_TRUE(docs.ok()) << docs.status();
    for (const auto& d : *docs) {
      ASSERT_TRUE(sim_->Insert(d).ok()) << file;
    }
  }
  static json TaintingSpec() {
    return json::parse(R"({
      "nodeSelector": {"matchLabels": {"nvidia.com/gpu.present": "true"}},
      "rules": [{"name": "fatal-xid", "xid": {"codes": [79]}, "count": 1, "action": "Drain"}],
      "remediation": {"drain": {"scope": "GPUPods", "timeout": "2m"}},
      "safety": {"maxUnhealthy": "100%", "maxNodesPerHour": 1000, "maxConcurrentDrains": 100}})");
  }

  // A well-formed report for `node` (2 GPUs), as JSON so tests can break it.
  static json Report(const std::string& node, int fatal_xid = 0) {
    auto s = api::testing::HealthyReport(node, RealClock::Default().Now(), 2);
    if (fatal_xid) {
      api::XidEvent e;
      e.xid = fatal_xid;
      e.gpu_uuid = s.gpus[0].uuid;
      e.count = 1;
      e.first_seen = e.last_seen = s.observed_at;
      e.recommended_action = "RESTART_BM";
      s.xids.push_back(e);
    }
    return json::parse(api::EncodeGpuNodeHealthStatus(s));
  }
  void WriteReport(const std::string& node, const json& status) {
    std::string path = kReportPath + "/" + node;
    if (sim_->Get(path).ok()) {
      auto obj = sim_->Get(path);
      (*obj)["status"] = status;  // replace, so garbage is not merged into the old report
      ASSERT_TRUE(sim_->Update(path, *obj).ok());
      return;
    }
    ASSERT_TRUE(sim_->Insert({{"apiVersion", "gpuguardian.io/v1alpha1"},
                              {"kind", "GPUNodeHealth"},
                              {"metadata", {{"name", node}}},
                              {"status", status}})
                    .ok());
  }

  json Node(const std::string& name) {
    auto n = sim_->Get("/api/v1/nodes/" + name);
    return n.ok() ? *n : json::object();
  }
  static bool Fenced(const json& node) {
    if (node.value("/spec/unschedulable"_json_pointer, false)) return true;
    for (const auto& t : node.value("/spec/taints"_json_pointer, json::array()))
      if (t.value("key", "") == api::kTaintKey) return true;
    return false;
  }
  // The GPUHealthy condition ({} when absent).
  static json GpuCondition(const json& node) {
    for (const auto& c : node.value("/status/conditions"_json_pointer, json::array()))
      if (c.value("type", "") == api::kConditionType) return c;
    return json::object();
  }
  std::vector<json> Events(const std::string& reason, const std::string& object) {
    std::vector<json> out;
    auto l = sim_->List("/api/v1/events");
    if (!l.ok()) return out;
    for (auto& e : (*l)["items"])
      if (e.value("reason", "") == reason && e["involvedObject"].value("name", "") == object)
        out.push_back(e);
    return out;
  }
  json PolicyCondition(const std::string& policy, const std::string& type) {
    auto p = sim_->Get(kPolicyPath + "/" + policy);
    if (!p.ok()) return json::object();
    for (const auto& c : p->value("/status/conditions"_json_pointer, json::array()))
      if (c.value("type", "") == type) return c;
    return json::object();
  }
  double Evictions() { return registry_.Value("gpu_guardian_evictions_total", {"success"}); }

  std::unique_ptr<sim::SimServer> sim_;
  std::unique_ptr<k8s::RestClient> client_;
  metrics::Registry registry_;
  std::unique_ptr<Operator> op_;
  std::stop_source stop_;
  std::jthread thread_;
};

// Schema and semantic errors, each in its own policy: every one is marked Invalid with a
// message naming the field and gets one PolicyInvalid Event; none acts on a node whose report
// carries a fatal Xid. Fixing one policy makes it act, which proves the others were read too.
TEST_F(BadInputSimTest, InvalidPoliciesAreReportedAndActOnNothing) {
  AddNode("gpu-0");
  AddGpuPod("train-0", "gpu-0");
  WriteReport("gpu-0", Report("gpu-0", 79));
  struct Bad {
    const char* name;
    const char* patch;  // merged into TaintingSpec()
    const char* field;  // must appear in the Invalid condition's message
  } bad[] = {
      {"rules-not-a-list", R"({"rules": {"fatal": 79}})", "spec.rules"},
      {"count-is-text",
       R"({"rules": [{"name": "x", "xid": {"codes": [79]}, "count": "many", "action": "Drain"}]})",
       "spec.rules[0].count"},
      {"unknown-action", R"({"rules": [{"name": "x", "gpuLost": true, "action": "Reboot"}]})",
       "spec.rules[0].action"},
      {"over-budget", R"({"safety": {"maxUnhealthy": "250%"}})", "spec.safety.maxUnhealthy"},
      {"bad-duration",
       R"({"rules": [{"name": "x", "gpuLost": true, "for": "soon", "action": "Drain"}]})",
       "spec.rules[0].for"},
      {"xid-out-of-range",
       R"({"rules": [{"name": "x", "xid": {"codes": [-79]}, "action": "Drain"}]})",
       "spec.rules[0].xid.codes[0]"},
      {"matched-and-ignored",
       R"({"rules": [{"name": "x", "xid": {"codes": [79], "ignore": [79]}, "action": "Drain"}]})",
       "spec.rules[0].xid"},
      {"bad-selector",
       R"({"nodeSelector": {"matchExpressions": [{"key": "a", "operator": "Equals"}]}})",
       "spec.nodeSelector.matchExpressions[0].operator"},
  };
  for (const auto& b : bad) {
    json spec = TaintingSpec();
    spec.merge_patch(json::parse(b.patch));
    CreatePolicy(b.name, spec);
  }
  StartOperator();
  for (const auto& b : bad) {
    ASSERT_TRUE(Eventually([&] {
      return PolicyCondition(b.name, "Invalid").value("status", "") == "True";
    })) << b.name
        << ": " << PolicyCondition(b.name, "Invalid").dump();
    std::string msg = PolicyCondition(b.name, "Invalid").value("message", "");
    EXPECT_NE(msg.find(b.field), std::string::npos) << b.name << ": " << msg;
    EXPECT_EQ(PolicyCondition(b.name, "Ready").value("status", ""), "False") << b.name;
    EXPECT_TRUE(Eventually([&] { return Events("PolicyInvalid", b.name).size() == 1; })) << b.name;
  }
  json n = Node("gpu-0");
  EXPECT_FALSE(Fenced(n)) << n.dump();
  EXPECT_TRUE(GpuCondition(n).empty()) << "no valid policy selects the node: no verdict to publish";
  EXPECT_TRUE(PodRunning("train-0"));
  EXPECT_EQ(Evictions(), 0);

  // The positive control: the same fatal Xid under a corrected policy is acted on.
  // Read-modify-write with the resourceVersion: the operator's status writes may win the race
  // (409), as with any client, so retry.
  bool updated = false;
  for (int attempt = 0; attempt < 20 && !updated; ++attempt) {
    auto fixed = sim_->Get(kPolicyPath + "/over-budget");
    ASSERT_TRUE(fixed.ok());
    (*fixed)["spec"] = TaintingSpec();
    updated = sim_->Update(kPolicyPath + "/over-budget", *fixed).ok();
  }
  ASSERT_TRUE(updated);
  EXPECT_TRUE(Eventually([&] { return Fenced(Node("gpu-0")); })) << Node("gpu-0").dump();
  EXPECT_TRUE(Eventually(
      [&] { return PolicyCondition("over-budget", "Invalid").value("status", "") == "False"; }));
}

// Reports the operator cannot trust: wrong types, arrays past the codec's bounds, and the
// legacy report annotation holding garbage. The node goes Unknown with the decode error in the
// condition message; a fatal Xid next to the garbage must not be acted on.
TEST_F(BadInputSimTest, UnreadableReportsMakeTheNodeUnknownNeverFenced) {
  CreatePolicy("default", TaintingSpec());
  struct Case {
    std::string node;
    json status;  // GPUNodeHealth .status (null: use the annotation instead)
    std::string annotation;
    std::string why;  // must appear in the condition message
  };
  std::vector<Case> cases;
  {
    json r = Report("wrong-types", 79);
    r["gpus"] = "eight";
    cases.push_back({"wrong-types", r, "", "status.gpus"});
  }
  {
    json r = Report("wrong-xid-type", 79);
    r["xids"][0]["count"] = "a lot";
    cases.push_back({"wrong-xid-type", r, "", "status.xids[0].count"});
  }
  {
    json r = Report("huge-xids", 79);
    json storm = r["xids"][0];
    for (int i = 0; i < 5000; ++i) r["xids"].push_back(storm);
    cases.push_back({"huge-xids", r, "", "too many entries"});
  }
  {
    json r = Report("huge-gpus", 79);
    for (int i = 0; i < 1000; ++i)
      r["gpus"].push_back({{"index", i + 2}, {"uuid", "GPU-x" + std::to_string(i)}});
    cases.push_back({"huge-gpus", r, "", "too many entries"});
  }
  cases.push_back({"garbage-annotation", nullptr,
                   R"({"v":1,"nodeName":"garbage-annotation","gpus":[{"index":)",
                   "gpuguardian.io/health"});
  for (const auto& c : cases) {
    json annotations =
        c.annotation.empty() ? json(nullptr) : json{{api::kHealthAnnotation, c.annotation}};
    AddNode(c.node, json::object(), annotations);
    AddGpuPod(c.node + "-pod", c.node);
    if (!c.status.is_null()) WriteReport(c.node, c.status);
  }
  StartOperator();
  for (const auto& c : cases) {
    ASSERT_TRUE(Eventually([&] {
      return GpuCondition(Node(c.node)).value("status", "") == "Unknown";
    })) << c.node
        << ": " << Node(c.node).dump();
    std::string msg = GpuCondition(Node(c.node)).value("message", "");
    EXPECT_NE(msg.find(c.why), std::string::npos) << c.node << ": " << msg;
  }
  for (const auto& c : cases) {
    EXPECT_FALSE(Fenced(Node(c.node))) << c.node;
    EXPECT_TRUE(PodRunning(c.node + "-pod")) << c.node;
  }
  EXPECT_EQ(Evictions(), 0);

  // Once a readable report arrives the same node is judged on it (here: healthy).
  WriteReport("wrong-types", Report("wrong-types"));
  EXPECT_TRUE(Eventually([&] {
    return GpuCondition(Node("wrong-types")).value("status", "") == "True";
  })) << Node("wrong-types").dump();
}

// Reports that decode but lie about time or name GPUs the node does not have. A heartbeat
// from the future is clamped to now and flagged (clock skew) instead of keeping the node
// "fresh" forever; facts about a GPU that is not in the report's GPU list cannot fence it.
TEST_F(BadInputSimTest, FutureTimestampsAndUnknownGpusDoNotFence) {
  // Drains on the agent's recommended action, so a mislabeled Xid would be acted on if the
  // ignore list did not win.
  json spec = TaintingSpec();
  spec["rules"] = json::parse(R"([{"name": "fatal-xid", "count": 1, "action": "Drain",
      "xid": {"catalogActions": ["RESET_GPU", "RESTART_BM"], "ignore": [13, 31, 43, 45, 68]}}])");
  CreatePolicy("default", spec);
  AddNode("future");
  AddNode("ghost-gpu");
  AddGpuPod("future-pod", "future");
  AddGpuPod("ghost-pod", "ghost-gpu");
  json future = Report("future");
  future["heartbeatTime"] = "2199-01-01T00:00:00Z";
  future["observedAt"] = "2199-01-01T00:00:00Z";
  WriteReport("future", future);
  // An application Xid storm on a GPU UUID the node does not report, plus a hot phantom GPU.
  json ghost = Report("ghost-gpu");
  for (int xid : {13, 31, 43, 45, 68}) {
    ghost["xids"].push_back({{"xid", xid},
                             {"gpuUUID", "GPU-not-on-this-node"},
                             {"count", 100000},
                             {"firstSeen", ghost["observedAt"]},
                             {"lastSeen", ghost["observedAt"]},
                             {"recommendedAction", "RESET_GPU"}});
  }
  WriteReport("ghost-gpu", ghost);
  StartOperator();
  ASSERT_TRUE(Eventually([&] { return !GpuCondition(Node("future")).empty(); }))
      << Node("future").dump();
  ASSERT_TRUE(Eventually([&] { return !GpuCondition(Node("ghost-gpu")).empty(); }))
      << Node("ghost-gpu").dump();
  json f = GpuCondition(Node("future"));
  EXPECT_EQ(f.value("status", ""), "True") << f.dump();
  EXPECT_NE(f.value("message", "").find("clock skew"), std::string::npos) << f.dump();
  EXPECT_NE(GpuCondition(Node("ghost-gpu")).value("status", ""), "False")
      << Node("ghost-gpu").dump();
  for (const char* n : {"future", "ghost-gpu"}) EXPECT_FALSE(Fenced(Node(n))) << n;
  EXPECT_TRUE(PodRunning("future-pod"));
  EXPECT_TRUE(PodRunning("ghost-pod"));
  EXPECT_EQ(Evictions(), 0);
}

// The operator's own record annotation (gpuguardian.io/remediation) holding garbage: the
// operator cannot know which changes were its own, so it takes none back: the admin's cordon
// stays on a healthy node. A real fault is still fenced despite the garbage.
TEST_F(BadInputSimTest, GarbageRemediationRecordTakesNothingBack) {
  CreatePolicy("default", TaintingSpec());
  AddNode("cordoned-by-admin", json::object(),
          {{api::kRemediationAnnotation, R"({"version":1,"cordoned":"yes","tainted":[1,2)"}}, true);
  AddNode("faulty", json::object(), {{api::kRemediationAnnotation, "\x01\x02 not a record"}});
  AddGpuPod("faulty-pod", "faulty");
  WriteReport("cordoned-by-admin", Report("cordoned-by-admin"));
  WriteReport("faulty", Report("faulty", 79));
  StartOperator();
  ASSERT_TRUE(Eventually([&] {
    return GpuCondition(Node("cordoned-by-admin")).value("status", "") == "True";
  })) << Node("cordoned-by-admin").dump();
  EXPECT_TRUE(Node("cordoned-by-admin").value("/spec/unschedulable"_json_pointer, false))
      << "a cordon of unknown origin is never lifted";
  EXPECT_TRUE(Eventually([&] { return Fenced(Node("faulty")); })) << Node("faulty").dump();
  EXPECT_TRUE(Eventually([&] { return !PodRunning("faulty-pod"); }))
      << "the fatal Xid still drains";
}

// NVSentinel #1710: a repeated application Xid must never look like a hardware fault. A storm
// of Xids 13/31/43/45/68 (100k each, every GPU, some mislabeled RESET_GPU by a buggy agent)
// under the shipped sample policies: no taint, no cordon, no eviction, for several rounds.
TEST_F(BadInputSimTest, ApplicationXidStormNeverDrains) {
  ApplySample("default-policy.yaml");
  ApplySample("aggressive-training.yaml");
  const std::vector<std::string> nodes = {"storm-0", "storm-1", "storm-2"};
  for (const auto& n : nodes) {
    AddNode(n, {{"workload-class", "training"}});
    AddGpuPod(n + "-pod", n);
  }
  auto storm = [&](const std::string& node, int round) {
    json r = Report(node);
    for (const auto& g : r["gpus"])
      for (int xid : {13, 31, 43, 45, 68})
        r["xids"].push_back({{"xid", xid},
                             {"gpuUUID", g["uuid"]},
                             {"count", 100000 * round},
                             {"firstSeen", r["observedAt"]},
                             {"lastSeen", r["observedAt"]},
                             {"category", "Application"},
                             {"recommendedAction", xid == 43 ? "IGNORE" : "RESET_GPU"},
                             {"message", "Graphics Exception"}});
    return r;
  };
  for (const auto& n : nodes) WriteReport(n, storm(n, 1));
  StartOperator();
  // The storm was read: aggressive-training's app-xid-storm rule answers with an Event only.
  for (const auto& n : nodes) {
    ASSERT_TRUE(Eventually([&] { return !GpuCondition(Node(n)).empty(); })) << Node(n).dump();
  }
  for (int round = 2; round <= 4; ++round) {
    for (const auto& n : nodes) WriteReport(n, storm(n, round));
    std::this_thread::sleep_for(500ms);  // pacing only; the assertions below are on state
  }
  for (const auto& n : nodes) {
    json node = Node(n);
    EXPECT_FALSE(Fenced(node)) << node.dump();
    EXPECT_TRUE(PodRunning(n + "-pod")) << n;
    EXPECT_TRUE(Events("NodeCordoned", n).empty()) << n;
    EXPECT_TRUE(Events("NodeDrained", n).empty()) << n;
  }
  EXPECT_EQ(Evictions(), 0);
}

}  // namespace
}  // namespace gg::op
