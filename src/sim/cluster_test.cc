// The simulated cluster as its users see it: scheduling (resources, terminating pods,
// affinity, Unschedulable, Events), workload status and rollouts, garbage collection, node
// leases and lifecycle, taint eviction, and a start-up without surplus pods. World state
// only: what the API shows, waited for with a deadline.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <map>
#include <thread>

#include "sim/controller_util.h"
#include "sim/controllers.h"
#include "sim/population.h"
#include "sim/server.h"
#include "sim/test_objects.h"
#include "sim/test_util.h"

namespace gg::sim {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

json Node(const std::string& name, int gpus, json labels = json::object(), json taints = nullptr) {
  json n = {
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata", {{"name", name}, {"labels", labels}}},
      {"spec", json::object()},
      {"status",
       {{"capacity",
         {{"cpu", "16"},
          {"memory", "64Gi"},
          {"pods", "110"},
          {"nvidia.com/gpu", std::to_string(gpus)}}},
        {"allocatable",
         {{"cpu", "16"},
          {"memory", "64Gi"},
          {"pods", "110"},
          {"nvidia.com/gpu", std::to_string(gpus)}}},
        {"conditions", {{{"type", "Ready"}, {"status", "True"}, {"reason", "KubeletReady"}}}}}}};
  if (!taints.is_null()) n["spec"]["taints"] = taints;
  return n;
}

json Deployment(const std::string& name, int replicas, const std::string& image = "cuda:1") {
  return {{"apiVersion", "apps/v1"},
          {"kind", "Deployment"},
          {"metadata", {{"name", name}, {"namespace", "ml"}}},
          {"spec",
           {{"replicas", replicas},
            {"selector", {{"matchLabels", {{"app", name}}}}},
            {"template",
             {{"metadata", {{"labels", {{"app", name}}}}},
              {"spec",
               {{"terminationGracePeriodSeconds", 30},
                {"containers",
                 {{{"name", "c"},
                   {"image", image},
                   {"resources",
                    {{"requests", {{"cpu", "1"}, {"nvidia.com/gpu", "1"}}},
                     {"limits", {{"nvidia.com/gpu", "1"}}}}}}}}}}}}}}};
}

class ClusterTest : public ::testing::Test {
 protected:
  void Start(double time_scale = 30, bool defer = false) {
    SimOptions o;
    o.time_scale = time_scale;
    o.defer_controllers = defer;
    auto s = SimServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    sim_ = std::move(*s);
    http_ = std::make_unique<httplib::Client>(sim_->Url());
    http_->set_read_timeout(30, 0);
  }
  void TearDown() override {
    if (sim_) sim_->Stop();
  }
  std::vector<json> Items(const std::string& path) {
    auto l = sim_->List(path);
    if (!l.ok()) return {};
    return (*l)["items"].get<std::vector<json>>();
  }
  std::vector<json> Pods(const std::string& ns = "ml") {
    return Items("/api/v1/namespaces/" + ns + "/pods");
  }
  json Get(const std::string& path) {
    auto g = sim_->Get(path);
    return g.ok() ? *g : json();
  }
  // DELETE over HTTP, as a client sends it (propagationPolicy in the body).
  int HttpDelete(const std::string& path, const json& opts = json::object()) {
    auto r = http_->Delete(path, opts.dump(), "application/json");
    return r ? r->status : -1;
  }
  int HttpPatch(const std::string& path, const json& patch,
                const std::string& ct = "application/merge-patch+json") {
    auto r = http_->Patch(path, patch.dump(), ct);
    return r ? r->status : -1;
  }
  // GPUs requested by live pods bound to each node.
  std::map<std::string, long> GpusInUse() {
    std::map<std::string, long> out;
    for (const auto& p : Pods())
      if (p["spec"].contains("nodeName") && p["status"].value("phase", "") != "Succeeded" &&
          p["status"].value("phase", "") != "Failed")
        out[p["spec"]["nodeName"].get<std::string>()] += PodGpuRequest(p);
    return out;
  }
  static std::string Condition(const json& o, const std::string& type,
                               const char* field = "status") {
    for (const auto& c : o.value("/status/conditions"_json_pointer, json::array()))
      if (c.value("type", "") == type) return c.value(field, "");
    return "";
  }
  std::vector<json> EventsFor(const std::string& ns, const std::string& name,
                              const std::string& reason) {
    std::vector<json> out;
    for (const auto& e : Items("/apis/events.k8s.io/v1/namespaces/" + ns + "/events"))
      if (e["regarding"].value("name", "") == name && e.value("reason", "") == reason)
        out.push_back(e);
    return out;
  }
  std::unique_ptr<SimServer> sim_;
  std::unique_ptr<httplib::Client> http_;
};

// ---- pure helpers ----

TEST(ClusterHelpers, QuantitiesParseAsTheApiServerReadsThem) {
  using internal::ParseQuantityMilli;
  EXPECT_EQ(ParseQuantityMilli(json("500m")), 500);
  EXPECT_EQ(ParseQuantityMilli(json("2")), 2000);
  EXPECT_EQ(ParseQuantityMilli(json(8)), 8000);
  EXPECT_EQ(ParseQuantityMilli(json("1Ki")), 1024000);
  EXPECT_EQ(ParseQuantityMilli(json("64Gi")), 64LL * 1024 * 1024 * 1024 * 1000);
  EXPECT_EQ(ParseQuantityMilli(json("1e3")), 1000000);
  EXPECT_EQ(ParseQuantityMilli(json("191450m")), 191450);
  EXPECT_FALSE(ParseQuantityMilli(json("eight")).has_value());
  EXPECT_FALSE(ParseQuantityMilli(json("8 GPUs")).has_value());
}

TEST(ClusterHelpers, PodRequestsTakeInitContainersAndLimitsIntoAccount) {
  json pod = json::parse(R"({"spec":{
    "containers":[{"name":"a","resources":{"requests":{"cpu":"1"},"limits":{"nvidia.com/gpu":"2"}}},
                  {"name":"b","resources":{"requests":{"cpu":"500m","memory":"1Gi"}}}],
    "initContainers":[{"name":"i","resources":{"requests":{"cpu":"4"}}}],
    "overhead":{"cpu":"100m"}}})");
  auto r = internal::PodRequests(pod);
  EXPECT_EQ(r["cpu"], 4100);             // max(1.5, 4) + overhead
  EXPECT_EQ(r["nvidia.com/gpu"], 2000);  // the limit stands in for the missing request
  EXPECT_EQ(r["memory"], 1024LL * 1024 * 1024 * 1000);
  EXPECT_EQ(r["pods"], 1000);
}

TEST(ClusterHelpers, NodeAffinityOperators) {
  json node = {{"metadata", {{"name", "n1"}, {"labels", {{"zone", "a"}, {"gpus", "8"}}}}}};
  auto req = [](const std::string& exprs) {
    return json::parse(
        R"({"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":
      {"nodeSelectorTerms":[{"matchExpressions":)" +
        exprs + "}]}}}}");
  };
  EXPECT_TRUE(internal::NodeSelectorMatches(
      req(R"([{"key":"zone","operator":"In","values":["a","b"]}])"), node));
  EXPECT_FALSE(internal::NodeSelectorMatches(
      req(R"([{"key":"zone","operator":"NotIn","values":["a"]}])"), node));
  EXPECT_TRUE(internal::NodeSelectorMatches(
      req(R"([{"key":"gpus","operator":"Gt","values":["4"]}])"), node));
  EXPECT_FALSE(internal::NodeSelectorMatches(
      req(R"([{"key":"gpus","operator":"Lt","values":["4"]}])"), node));
  EXPECT_TRUE(internal::NodeSelectorMatches(req(R"([{"key":"zone","operator":"Exists"}])"), node));
  EXPECT_FALSE(internal::NodeSelectorMatches(
      req(R"([{"key":"nvidia.com/gpu.present","operator":"Exists"}])"), node));
  EXPECT_TRUE(internal::NodeSelectorMatches(
      req(R"([{"key":"nvidia.com/gpu.present","operator":"DoesNotExist"}])"), node));
  // Terms are ORed, expressions ANDed; matchFields on metadata.name.
  json two =
      json::parse(R"({"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":
    {"nodeSelectorTerms":[{"matchExpressions":[{"key":"zone","operator":"In","values":["b"]}]},
                          {"matchFields":[{"key":"metadata.name","operator":"In","values":["n1"]}]}]}}}})");
  EXPECT_TRUE(internal::NodeSelectorMatches(two, node));
  json empty_terms =
      json::parse(R"({"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":
    {"nodeSelectorTerms":[{}]}}}})");
  EXPECT_FALSE(internal::NodeSelectorMatches(empty_terms, node));
}

TEST(ClusterHelpers, UnschedulableMessageHasTheRealShape) {
  EXPECT_EQ(
      UnschedulableMessage(3, {"Insufficient nvidia.com/gpu", "node(s) were unschedulable",
                               "Insufficient nvidia.com/gpu"}),
      "0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient nvidia.com/gpu.");
  EXPECT_EQ(UnschedulableMessage(0, {}), "no nodes available to schedule pods");
}

TEST(ClusterHelpers, DefaultTolerationSecondsAddsOnlyWhatIsMissing) {
  json pod = json::parse(R"({"spec":{"tolerations":[
    {"key":"node.kubernetes.io/unreachable","operator":"Exists","effect":"NoExecute","tolerationSeconds":5}]}})");
  AddDefaultTolerationSeconds(pod);
  ASSERT_EQ(pod["spec"]["tolerations"].size(), 2u);
  EXPECT_EQ(pod["spec"]["tolerations"][0]["tolerationSeconds"], 5);
  EXPECT_EQ(pod["spec"]["tolerations"][1]["key"], "node.kubernetes.io/not-ready");
  EXPECT_EQ(pod["spec"]["tolerations"][1]["tolerationSeconds"], 300);
  json all = json::parse(R"({"spec":{"tolerations":[{"operator":"Exists"}]}})");
  AddDefaultTolerationSeconds(all);
  EXPECT_EQ(all["spec"]["tolerations"].size(), 1u);
}

// ---- scheduler ----

TEST_F(ClusterTest, GpusAreNeverOvercommittedAndPendingPodsSayWhy) {
  Start();
  ASSERT_TRUE(sim_->Insert(Node("gpu-a", 8)).ok());
  ASSERT_TRUE(sim_->Insert(Node("gpu-b", 8)).ok());
  ASSERT_TRUE(sim_->Insert(GpuReplicaSet("train", "ml", 20)).ok());
  auto bound = [&] {
    int n = 0;
    for (const auto& p : Pods()) n += p["spec"].contains("nodeName");
    return n;
  };
  ASSERT_TRUE(WaitFor([&] { return bound() == 16 && Pods().size() == 20; })) << bound();
  std::this_thread::sleep_for(500ms);  // nothing more may fit later
  EXPECT_EQ(bound(), 16);
  for (const auto& [node, gpus] : GpusInUse()) EXPECT_LE(gpus, 8) << node;
  json pending;
  ASSERT_TRUE(WaitFor([&] {
    for (const auto& p : Pods())
      if (!p["spec"].contains("nodeName") &&
          Condition(p, "PodScheduled", "reason") == "Unschedulable") {
        pending = p;
        return true;
      }
    return false;
  }));
  EXPECT_EQ(Condition(pending, "PodScheduled"), "False");
  EXPECT_EQ(Condition(pending, "PodScheduled", "message")
                .rfind("0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: 0/2 "
                       "nodes are available:",
                       0),
            0u)
      << Condition(pending, "PodScheduled", "message");
  std::string name = pending["metadata"]["name"];
  ASSERT_TRUE(WaitFor([&] { return !EventsFor("ml", name, "FailedScheduling").empty(); }));
  json ev = EventsFor("ml", name, "FailedScheduling")[0];
  EXPECT_EQ(ev["type"], "Warning");
  EXPECT_EQ(ev["reportingController"], "default-scheduler");
  EXPECT_EQ(ev["action"], "Scheduling");
  // Bound pods got a Scheduled event naming their node.
  for (const auto& p : Pods()) {
    if (!p["spec"].contains("nodeName")) continue;
    std::string pn = p["metadata"]["name"];
    ASSERT_TRUE(WaitFor([&] { return !EventsFor("ml", pn, "Scheduled").empty(); })) << pn;
    EXPECT_EQ(EventsFor("ml", pn, "Scheduled")[0]["note"],
              "Successfully assigned ml/" + pn + " to " + p["spec"]["nodeName"].get<std::string>());
    break;
  }
  // Room on a new node: the pending pods get scheduled there.
  ASSERT_TRUE(sim_->Insert(Node("gpu-c", 8)).ok());
  ASSERT_TRUE(WaitFor([&] { return bound() == 20; }));
  for (const auto& [node, gpus] : GpusInUse()) EXPECT_LE(gpus, 8) << node;
}

TEST_F(ClusterTest, ATerminatingPodKeepsItsGpusUntilItIsGone) {
  Start(/*time_scale=*/30);
  ASSERT_TRUE(sim_->Insert(Node("gpu-a", 8)).ok());
  // 90 s grace: 3 s of wall time at time scale 30.
  ASSERT_TRUE(sim_->Insert(GpuReplicaSet("train", "ml", 8, /*grace_seconds=*/90)).ok());
  ASSERT_TRUE(WaitFor([&] {
    int running = 0;
    for (const auto& p : Pods()) running += p["status"].value("phase", "") == "Running";
    return running == 8;
  }));
  std::string victim = Pods()[0]["metadata"]["name"];
  ASSERT_EQ(HttpDelete("/api/v1/namespaces/ml/pods/" + victim), 200);
  // The replacement exists at once but waits: the node's 8 GPUs are still held.
  ASSERT_TRUE(WaitFor([&] { return Pods().size() == 9; }));
  auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < 1500ms) {
    EXPECT_LE(GpusInUse()["gpu-a"], 8);
    std::this_thread::sleep_for(100ms);
  }
  json replacement;
  for (const auto& p : Pods())
    if (p["metadata"]["name"] != victim && !p["spec"].contains("nodeName")) replacement = p;
  ASSERT_TRUE(replacement.is_object())
      << "the replacement was bound while the old pod held its GPU";
  // Once the old pod is gone, the replacement is bound.
  ASSERT_TRUE(WaitFor([&] {
    auto r =
        Get("/api/v1/namespaces/ml/pods/" + replacement["metadata"]["name"].get<std::string>());
    return r.is_object() && r["spec"].contains("nodeName");
  }));
  EXPECT_FALSE(Get("/api/v1/namespaces/ml/pods/" + victim).is_object());
}

TEST_F(ClusterTest, NodeAffinityRequiredAndPreferred) {
  Start();
  ASSERT_TRUE(
      sim_->Insert(Node("gpu-a", 8, {{"nvidia.com/gpu.present", "true"}, {"zone", "a"}})).ok());
  ASSERT_TRUE(sim_->Insert(Node("cpu-b", 0, {{"zone", "b"}})).ok());
  ASSERT_TRUE(sim_->Insert(Node("cpu-c", 0, {{"zone", "c"}})).ok());
  auto pod = [](const std::string& name, const json& affinity) {
    return json{
        {"apiVersion", "v1"},
        {"kind", "Pod"},
        {"metadata", {{"name", name}, {"namespace", "ml"}}},
        {"spec", {{"affinity", affinity}, {"containers", {{{"name", "c"}, {"image", "x"}}}}}}};
  };
  // Required: not on GPU nodes. Preferred: zone c.
  json off_gpu = json::parse(R"({"nodeAffinity":{
    "requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[
      {"matchExpressions":[{"key":"nvidia.com/gpu.present","operator":"DoesNotExist"}]}]},
    "preferredDuringSchedulingIgnoredDuringExecution":[
      {"weight":50,"preference":{"matchExpressions":[{"key":"zone","operator":"In","values":["c"]}]}}]}})");
  ASSERT_TRUE(sim_->Create("/api/v1/namespaces/ml/pods", pod("op", off_gpu)).ok());
  ASSERT_TRUE(WaitFor([&] {
    return Get("/api/v1/namespaces/ml/pods/op").value("/spec/nodeName"_json_pointer, "") == "cpu-c";
  })) << Get("/api/v1/namespaces/ml/pods/op").dump();
  // Required on GPU nodes with zone b: nothing matches.
  json nowhere = json::parse(
      R"({"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[
      {"matchExpressions":[{"key":"nvidia.com/gpu.present","operator":"Exists"},
                           {"key":"zone","operator":"In","values":["b"]}]}]}}})");
  ASSERT_TRUE(sim_->Create("/api/v1/namespaces/ml/pods", pod("lost", nowhere)).ok());
  ASSERT_TRUE(WaitFor([&] {
    return Condition(Get("/api/v1/namespaces/ml/pods/lost"), "PodScheduled", "message")
               .rfind(
                   "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.",
                   0) == 0;
  })) << Get("/api/v1/namespaces/ml/pods/lost").dump();
}

TEST_F(ClusterTest, TaintsAndCordonKeepPodsAway) {
  Start();
  ASSERT_TRUE(
      sim_
          ->Insert(Node(
              "gpu-a", 8, json::object(),
              {{{"key", "gpuguardian.io/unhealthy"}, {"value", "xid"}, {"effect", "NoSchedule"}}}))
          .ok());
  ASSERT_TRUE(sim_->Insert(Node("gpu-b", 8)).ok());
  ASSERT_EQ(HttpPatch("/api/v1/nodes/gpu-b", {{"spec", {{"unschedulable", true}}}}), 200);
  // The node lifecycle controller adds the unschedulable taint to the cordoned node.
  ASSERT_TRUE(WaitFor([&] {
    for (const auto& t :
         Get("/api/v1/nodes/gpu-b").value("/spec/taints"_json_pointer, json::array()))
      if (t.value("key", "") == "node.kubernetes.io/unschedulable" &&
          t.value("effect", "") == "NoSchedule")
        return true;
    return false;
  }));
  ASSERT_TRUE(sim_->Insert(GpuReplicaSet("train", "ml", 1)).ok());
  ASSERT_TRUE(WaitFor([&] {
    auto p = Pods();
    return p.size() == 1 && Condition(p[0], "PodScheduled", "reason") == "Unschedulable";
  }));
  std::string msg = Condition(Pods()[0], "PodScheduled", "message");
  EXPECT_NE(msg.find("1 node(s) had untolerated taint {gpuguardian.io/unhealthy: xid}"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("1 node(s) were unschedulable"), std::string::npos) << msg;
  // Uncordon: the taint goes and the pod is scheduled there.
  ASSERT_EQ(HttpPatch("/api/v1/nodes/gpu-b", {{"spec", {{"unschedulable", false}}}}), 200);
  ASSERT_TRUE(
      WaitFor([&] { return Pods()[0].value("/spec/nodeName"_json_pointer, "") == "gpu-b"; }));
  EXPECT_TRUE(Get("/api/v1/nodes/gpu-b").value("/spec/taints"_json_pointer, json::array()).empty());
}

// ---- workloads ----

TEST_F(ClusterTest, DeploymentStatusAndRollingUpdate) {
  Start();
  for (const char* n : {"gpu-a", "gpu-b"}) ASSERT_TRUE(sim_->Insert(Node(n, 8)).ok());
  ASSERT_TRUE(sim_->Create("/apis/apps/v1/namespaces/ml/deployments", Deployment("infer", 4)).ok());
  auto dep = [&] { return Get("/apis/apps/v1/namespaces/ml/deployments/infer"); };
  auto complete = [&](const json& d) {
    const json& st = d.value("status", json::object());
    return st.value("observedGeneration", 0) == d["metadata"].value("generation", -1) &&
           st.value("replicas", 0) == 4 && st.value("updatedReplicas", 0) == 4 &&
           st.value("readyReplicas", 0) == 4 && st.value("availableReplicas", 0) == 4 &&
           !st.contains("unavailableReplicas");
  };
  ASSERT_TRUE(WaitFor([&] { return complete(dep()); })) << dep()["status"].dump();
  EXPECT_EQ(Condition(dep(), "Available"), "True");
  ASSERT_TRUE(WaitFor(
      [&] { return Condition(dep(), "Progressing", "reason") == "NewReplicaSetAvailable"; }));
  auto rss = Items("/apis/apps/v1/namespaces/ml/replicasets");
  ASSERT_EQ(rss.size(), 1u);
  EXPECT_EQ(rss[0]["status"].value("readyReplicas", 0), 4);
  EXPECT_EQ(rss[0]["status"].value("availableReplicas", 0), 4);
  EXPECT_EQ(rss[0]["status"].value("observedGeneration", 0), 1);
  std::string old_rs = rss[0]["metadata"]["name"];
  // A new image: a second ReplicaSet takes over within maxSurge 25% (1) / maxUnavailable 25% (1).
  ASSERT_EQ(HttpPatch("/apis/apps/v1/namespaces/ml/deployments/infer",
                      {{"spec",
                        {{"template",
                          {{"spec",
                            {{"containers",
                              {{{"name", "c"},
                                {"image", "cuda:2"},
                                {"resources",
                                 {{"requests", {{"cpu", "1"}, {"nvidia.com/gpu", "1"}}},
                                  {"limits", {{"nvidia.com/gpu", "1"}}}}}}}}}}}}}}},
                      "application/strategic-merge-patch+json"),
            200);
  long max_total = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        long active = 0;
        for (const auto& p : Pods()) active += !p["metadata"].contains("deletionTimestamp");
        max_total = std::max(max_total, active);
        return complete(dep()) && Items("/apis/apps/v1/namespaces/ml/replicasets").size() == 2;
      },
      30s))
      << dep()["status"].dump();
  EXPECT_LE(max_total, 5);  // replicas + maxSurge
  for (const auto& rs : Items("/apis/apps/v1/namespaces/ml/replicasets")) {
    EXPECT_EQ(rs["spec"]["replicas"], rs["metadata"]["name"] == old_rs ? 0 : 4);
  }
  ASSERT_TRUE(WaitFor([&] {
    for (const auto& p : Pods())
      if (p["spec"]["containers"][0]["image"] != "cuda:2") return false;
    return Pods().size() == 4;
  }));
}

TEST_F(ClusterTest, DaemonSetRunsWhereItShouldWithStatus) {
  Start();
  ASSERT_TRUE(sim_->Insert(Node("gpu-a", 8, {{"gpu", "true"}})).ok());
  ASSERT_TRUE(sim_->Insert(Node("gpu-b", 8, {{"gpu", "true"}},
                                {{{"key", "dedicated"}, {"value", "x"}, {"effect", "NoSchedule"}}}))
                  .ok());
  ASSERT_TRUE(sim_->Insert(Node("cpu-c", 0)).ok());
  json ds = {{"apiVersion", "apps/v1"},
             {"kind", "DaemonSet"},
             {"metadata", {{"name", "agent"}, {"namespace", "kube-system"}}},
             {"spec",
              {{"selector", {{"matchLabels", {{"app", "agent"}}}}},
               {"template",
                {{"metadata", {{"labels", {{"app", "agent"}}}}},
                 {"spec",
                  {{"nodeSelector", {{"gpu", "true"}}},
                   {"containers",
                    {{{"name", "a"},
                      {"image", "agent:1"},
                      {"resources", {{"requests", {{"cpu", "100m"}}}}}}}}}}}}}}};
  ASSERT_TRUE(sim_->Create("/apis/apps/v1/namespaces/kube-system/daemonsets", ds).ok());
  auto get = [&] { return Get("/apis/apps/v1/namespaces/kube-system/daemonsets/agent"); };
  ASSERT_TRUE(WaitFor([&] {
    json st = get().value("status", json::object());
    return st.value("desiredNumberScheduled", -1) == 1 &&
           st.value("currentNumberScheduled", -1) == 1 && st.value("numberReady", -1) == 1 &&
           st.value("updatedNumberScheduled", -1) == 1 && st.value("numberAvailable", -1) == 1 &&
           st.value("numberMisscheduled", -1) == 0 && st.value("observedGeneration", 0) == 1;
  })) << get().dump();
  auto pods = Pods("kube-system");
  ASSERT_EQ(pods.size(), 1u);
  EXPECT_EQ(pods[0]["spec"]["nodeName"], "gpu-a");  // bound by the scheduler through its affinity
  bool tolerates_unreachable = false;
  for (const auto& t : pods[0]["spec"]["tolerations"])
    tolerates_unreachable |=
        t.value("key", "") == "node.kubernetes.io/unreachable" && !t.contains("tolerationSeconds");
  EXPECT_TRUE(tolerates_unreachable);
  // Tolerating the taint brings the second node in.
  json patch = {
      {"spec",
       {{"template",
         {{"spec", {{"tolerations", {{{"key", "dedicated"}, {"operator", "Exists"}}}}}}}}}}};
  ASSERT_EQ(HttpPatch("/apis/apps/v1/namespaces/kube-system/daemonsets/agent", patch), 200);
  ASSERT_TRUE(WaitFor([&] {
    json st = get().value("status", json::object());
    return st.value("desiredNumberScheduled", -1) == 2 &&
           st.value("updatedNumberScheduled", -1) == 2 && st.value("numberAvailable", -1) == 2 &&
           st.value("observedGeneration", 0) == 2;
  })) << get().dump();
}

TEST_F(ClusterTest, StartUpWithASeededPopulationCreatesNoExtraPods) {
  Start(/*time_scale=*/30, /*defer=*/true);
  PopulationSpec spec;
  spec.nodes = 12;
  spec.pods_per_node = 2;
  spec.nodes_per_workload = 4;
  ASSERT_TRUE(GeneratePopulation(spec, [&](json&& o) { return sim_->Insert(o); }).ok());
  sim_->StartControllers();
  auto count = [&] {
    return Pods(spec.workload_namespace).size() + Pods(spec.system_namespace).size();
  };
  std::size_t want = static_cast<std::size_t>(CountPopulation(spec).pods);
  auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < 2500ms) {
    EXPECT_EQ(count(), want);
    std::this_thread::sleep_for(100ms);
  }
  for (const auto& rs :
       Items("/apis/apps/v1/namespaces/" + spec.workload_namespace + "/replicasets"))
    EXPECT_EQ(rs["spec"]["replicas"], rs.value("/status/replicas"_json_pointer, -1)) << rs.dump();
  EXPECT_EQ(Items("/apis/apps/v1/namespaces/" + spec.workload_namespace + "/replicasets").size(),
            static_cast<std::size_t>(CountPopulation(spec).replicasets));
}

// ---- garbage collection ----

TEST_F(ClusterTest, GarbageCollectionFollowsOwnerReferences) {
  Start();
  ASSERT_TRUE(sim_->Insert(Node("gpu-a", 8)).ok());
  ASSERT_TRUE(sim_->Create("/apis/apps/v1/namespaces/ml/deployments", Deployment("bg", 2)).ok());
  ASSERT_TRUE(sim_->Create("/apis/apps/v1/namespaces/ml/deployments", Deployment("fg", 2)).ok());
  ASSERT_TRUE(
      sim_->Create("/apis/apps/v1/namespaces/ml/deployments", Deployment("orphan", 2)).ok());
  auto rs_of = [&](const std::string& d) {
    std::vector<json> out;
    for (const auto& rs : Items("/apis/apps/v1/namespaces/ml/replicasets"))
      if (rs["metadata"]["labels"].value("app", "") == d) out.push_back(rs);
    return out;
  };
  auto pods_of = [&](const std::string& d) {
    int n = 0;
    for (const auto& p : Pods()) n += p["metadata"]["labels"].value("app", "") == d;
    return n;
  };
  ASSERT_TRUE(
      WaitFor([&] { return pods_of("bg") == 2 && pods_of("fg") == 2 && pods_of("orphan") == 2; }));
  // Background (kubectl's default): the Deployment goes at once, its ReplicaSet and pods after.
  ASSERT_EQ(HttpDelete("/apis/apps/v1/namespaces/ml/deployments/bg",
                       {{"propagationPolicy", "Background"}}),
            200);
  ASSERT_TRUE(WaitFor([&] { return rs_of("bg").empty() && pods_of("bg") == 0; }));
  // Foreground: the Deployment stays (deletionTimestamp, foregroundDeletion) until its
  // ReplicaSet is gone, which waits for its pods.
  ASSERT_EQ(HttpDelete("/apis/apps/v1/namespaces/ml/deployments/fg",
                       {{"propagationPolicy", "Foreground"}}),
            200);
  json fg = Get("/apis/apps/v1/namespaces/ml/deployments/fg");
  ASSERT_TRUE(fg.is_object());
  EXPECT_TRUE(fg["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(fg["metadata"]["finalizers"], json::array({"foregroundDeletion"}));
  ASSERT_TRUE(
      WaitFor([&] { return !Get("/apis/apps/v1/namespaces/ml/deployments/fg").is_object(); }));
  EXPECT_TRUE(rs_of("fg").empty());
  EXPECT_EQ(pods_of("fg"), 0);
  // Orphan: the ReplicaSet stays, without its owner reference, and keeps its pods.
  ASSERT_EQ(HttpDelete("/apis/apps/v1/namespaces/ml/deployments/orphan",
                       {{"propagationPolicy", "Orphan"}}),
            200);
  ASSERT_TRUE(
      WaitFor([&] { return !Get("/apis/apps/v1/namespaces/ml/deployments/orphan").is_object(); }));
  auto left = rs_of("orphan");
  ASSERT_EQ(left.size(), 1u);
  EXPECT_FALSE(left[0]["metadata"].contains("ownerReferences")) << left[0]["metadata"].dump();
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(pods_of("orphan"), 2);
}

TEST_F(ClusterTest, DeletingANodeCollectsWhatItOwnedAndItsPods) {
  Start(/*time_scale=*/100);
  ASSERT_TRUE(sim_->Create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                           GuardianCrd("gpunodehealths", "GPUNodeHealth"))
                  .ok());
  ASSERT_TRUE(sim_->Insert(Node("gpu-a", 8)).ok());
  ASSERT_TRUE(sim_->Insert(Node("gpu-b", 8)).ok());
  json node = Get("/api/v1/nodes/gpu-a");
  json report = {{"apiVersion", "gpuguardian.io/v1alpha1"},
                 {"kind", "GPUNodeHealth"},
                 {"metadata",
                  {{"name", "gpu-a"},
                   {"ownerReferences",
                    {{{"apiVersion", "v1"},
                      {"kind", "Node"},
                      {"name", "gpu-a"},
                      {"uid", node["metadata"]["uid"]}}}}}}};
  ASSERT_TRUE(sim_->Create("/apis/gpuguardian.io/v1alpha1/gpunodehealths", report).ok());
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", "stray"}, {"namespace", "ml"}}},
              {"spec", {{"nodeName", "gpu-a"}, {"containers", {{{"name", "c"}, {"image", "x"}}}}}}};
  ASSERT_TRUE(sim_->Create("/api/v1/namespaces/ml/pods", pod).ok());
  ASSERT_TRUE(WaitFor([&] {
    return Get("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/gpu-a").is_object();
  }));
  std::this_thread::sleep_for(300ms);
  EXPECT_TRUE(
      Get("/apis/gpuguardian.io/v1alpha1/gpunodehealths/gpu-a").is_object());  // owner alive: kept
  ASSERT_EQ(HttpDelete("/api/v1/nodes/gpu-a"), 200);
  ASSERT_TRUE(WaitFor(
      [&] { return !Get("/apis/gpuguardian.io/v1alpha1/gpunodehealths/gpu-a").is_object(); }));
  ASSERT_TRUE(WaitFor([&] {
    return !Get("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/gpu-a").is_object();
  }));
  ASSERT_TRUE(
      WaitFor([&] { return !Get("/api/v1/namespaces/ml/pods/stray").is_object(); }));  // pod GC
  EXPECT_TRUE(
      Get("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/gpu-b").is_object());
}

// ---- node lifecycle ----

TEST_F(ClusterTest, NodeLeasesAreRenewedAndAStoppedNodeGoesUnknownThenEvicts) {
  Start(/*time_scale=*/100);  // renew every 100 ms; grace floor 3 s; 300 s toleration -> 3 s
  ASSERT_TRUE(sim_->Insert(Node("gpu-a", 8)).ok());
  ASSERT_TRUE(sim_->Insert(Node("gpu-b", 8)).ok());
  auto lease = [&] {
    return Get("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/gpu-a");
  };
  ASSERT_TRUE(WaitFor([&] { return lease().is_object(); }));
  EXPECT_EQ(lease()["spec"]["holderIdentity"], "gpu-a");
  EXPECT_EQ(lease()["spec"]["leaseDurationSeconds"], 40);
  EXPECT_EQ(lease()["metadata"]["ownerReferences"][0]["kind"], "Node");
  std::string t1 = lease()["spec"]["renewTime"];
  ASSERT_TRUE(WaitFor([&] { return lease()["spec"]["renewTime"] != t1; }, 3s));
  // Pods on gpu-a: one with the default 300 s toleration, one tolerating unreachable for long.
  auto pod = [](const std::string& name, json tolerations) {
    json p = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}, {"namespace", "ml"}}},
              {"spec", {{"nodeName", "gpu-a"}, {"containers", {{{"name", "c"}, {"image", "x"}}}}}}};
    if (!tolerations.is_null()) p["spec"]["tolerations"] = tolerations;
    return p;
  };
  // Created over HTTP, so the API server's admission defaults their tolerations.
  ASSERT_TRUE(
      sim_->Insert({{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "ml"}}}})
          .ok());
  auto post = [&](const json& p) {
    auto r = http_->Post("/api/v1/namespaces/ml/pods", p.dump(), "application/json");
    return r ? r->status : -1;
  };
  ASSERT_EQ(post(pod("short", nullptr)), 201);
  ASSERT_EQ(post(pod("patient", {{{"key", "node.kubernetes.io/unreachable"},
                                  {"operator", "Exists"},
                                  {"effect", "NoExecute"},
                                  {"tolerationSeconds", 100000}}})),
            201);
  json short_pod = Get("/api/v1/namespaces/ml/pods/short");
  bool defaulted = false;
  for (const auto& t : short_pod["spec"]["tolerations"])
    defaulted |= t.value("key", "") == "node.kubernetes.io/unreachable" &&
                 t.value("tolerationSeconds", 0) == 300;
  EXPECT_TRUE(defaulted) << short_pod["spec"].dump();
  ASSERT_TRUE(WaitFor([&] {
    return Get("/api/v1/namespaces/ml/pods/short").value("/status/phase"_json_pointer, "") ==
           "Running";
  }));
  // The node's heartbeat stops.
  ASSERT_EQ(HttpPatch("/api/v1/nodes/gpu-a",
                      {{"metadata", {{"annotations", {{kHeartbeatAnnotation, "stopped"}}}}}}),
            200);
  auto node = [&] { return Get("/api/v1/nodes/gpu-a"); };
  auto has_taint = [&](const json& n, const std::string& key, const std::string& effect) {
    for (const auto& t : n.value("/spec/taints"_json_pointer, json::array()))
      if (t.value("key", "") == key && t.value("effect", "") == effect) return true;
    return false;
  };
  ASSERT_TRUE(WaitFor([&] { return Condition(node(), "Ready") == "Unknown"; }, 10s))
      << node().dump();
  EXPECT_EQ(Condition(node(), "Ready", "reason"), "NodeStatusUnknown");
  ASSERT_TRUE(WaitFor([&] {
    json n = node();
    return has_taint(n, "node.kubernetes.io/unreachable", "NoSchedule") &&
           has_taint(n, "node.kubernetes.io/unreachable", "NoExecute");
  }));
  for (const auto& t : node()["spec"]["taints"])
    if (t.value("effect", "") == "NoExecute") {
      EXPECT_TRUE(t.contains("timeAdded"));
    }
  EXPECT_EQ(Condition(Get("/api/v1/nodes/gpu-b"), "Ready"),
            "True");  // the other node is unaffected
  // After its 300 s (3 s here) the default-tolerating pod is evicted; the patient one stays.
  ASSERT_TRUE(WaitFor(
      [&] {
        json p = Get("/api/v1/namespaces/ml/pods/short");
        return !p.is_object() || p["metadata"].contains("deletionTimestamp");
      },
      10s));
  json patient = Get("/api/v1/namespaces/ml/pods/patient");
  ASSERT_TRUE(patient.is_object());
  EXPECT_FALSE(patient["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(Condition(patient, "Ready"), "False");  // marked not ready with its node
  // Heartbeat back: Ready again, taints gone.
  ASSERT_EQ(HttpPatch("/api/v1/nodes/gpu-a",
                      {{"metadata", {{"annotations", {{kHeartbeatAnnotation, nullptr}}}}}}),
            200);
  ASSERT_TRUE(WaitFor(
      [&] {
        json n = node();
        return Condition(n, "Ready") == "True" &&
               !has_taint(n, "node.kubernetes.io/unreachable", "NoExecute") &&
               !has_taint(n, "node.kubernetes.io/unreachable", "NoSchedule");
      },
      10s))
      << node().dump();
}

TEST_F(ClusterTest, NoExecuteTaintEvictsPodsThatDoNotTolerateIt) {
  Start(/*time_scale=*/10);
  ASSERT_TRUE(sim_->Insert(Node("gpu-a", 8)).ok());
  auto pod = [](const std::string& name, json tolerations) {
    json p = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}, {"namespace", "ml"}}},
              {"spec",
               {{"nodeName", "gpu-a"},
                {"terminationGracePeriodSeconds", 0},
                {"containers", {{{"name", "c"}, {"image", "x"}}}}}}};
    if (!tolerations.is_null()) p["spec"]["tolerations"] = tolerations;
    return p;
  };
  ASSERT_TRUE(sim_->Create("/api/v1/namespaces/ml/pods", pod("plain", nullptr)).ok());
  ASSERT_TRUE(
      sim_->Create("/api/v1/namespaces/ml/pods", pod("brief", {{{"key", "gpuguardian.io/unhealthy"},
                                                                {"operator", "Exists"},
                                                                {"effect", "NoExecute"},
                                                                {"tolerationSeconds", 20}}}))
          .ok());
  ASSERT_TRUE(
      sim_->Create("/api/v1/namespaces/ml/pods",
                   pod("forever", {{{"key", "gpuguardian.io/unhealthy"}, {"operator", "Exists"}}}))
          .ok());
  ASSERT_EQ(HttpPatch("/api/v1/nodes/gpu-a", {{"spec",
                                               {{"taints",
                                                 {{{"key", "gpuguardian.io/unhealthy"},
                                                   {"value", "xid"},
                                                   {"effect", "NoExecute"}}}}}}}),
            200);
  auto gone = [&](const std::string& n) {
    return !Get("/api/v1/namespaces/ml/pods/" + n).is_object();
  };
  ASSERT_TRUE(WaitFor([&] { return gone("plain"); }, 5s));
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(gone("brief"));  // 20 s at time scale 10: 2 s
  ASSERT_TRUE(WaitFor([&] { return gone("brief"); }, 10s));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 1000ms);
  std::this_thread::sleep_for(500ms);
  EXPECT_FALSE(gone("forever"));
  ASSERT_TRUE(WaitFor([&] { return !EventsFor("ml", "plain", "TaintManagerEviction").empty(); }));
}

}  // namespace
}  // namespace gg::sim
