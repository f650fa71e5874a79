// Real clients against the simulator: kubectl (get, label, cordon, taint, drain, apply CRD +
// CR, apply -k deploy/) and the Python kubernetes client. Skipped when the client is absent.
// GG_KUBECTL names the kubectl to run (e.g. the 1.20 of Debian's kubernetes-client package,
// which validates with /openapi/v2); the default is the one on PATH.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "sim/server.h"
#include "sim/test_util.h"
#include "sim/tls.h"

namespace gg::sim {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// The kubectl the tests run: $GG_KUBECTL when set (a missing one fails the tests rather than
// skipping them), else `kubectl` on PATH; "" when there is none.
const std::string& KubectlPath() {
  static const std::string path = [] {
    if (const char* e = std::getenv("GG_KUBECTL"); e && *e) return std::string(e);
    std::string found = RunCmd("command -v kubectl").out;
    while (!found.empty() && (found.back() == '\n' || found.back() == ' ')) found.pop_back();
    return found.find('/') == std::string::npos ? std::string() : found;
  }();
  return path;
}

// The kubectl's minor version (20 for 1.20), 0 when it cannot say. Newer commands and flags
// (auth whoami: 1.27, --validate=strict: 1.25) are checked only where they exist.
int KubectlMinor() {
  static const int minor = [] {
    auto r = RunCmd("timeout 30 " + KubectlPath() + " version --client -o json");
    json v = json::parse(r.out, nullptr, false);
    if (!v.is_object() || !v.contains("clientVersion")) return 0;
    return std::atoi(v["clientVersion"].value("minor", "0").c_str());
  }();
  return minor;
}

class RealClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SimOptions o;
    o.time_scale = 30;
    auto s = SimServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    sim_ = std::move(*s);
    dir_ = fs::temp_directory_path() /
           ("gg-sim-kubectl-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_ / "cache");
    kubeconfig_ = (dir_ / "kubeconfig").string();
    ASSERT_TRUE(WriteKubeconfig(kubeconfig_, sim_->Url(), "", "admin").ok());
  }
  void TearDown() override {
    if (sim_) sim_->Stop();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  CmdResult Kubectl(const std::string& args) {
    return RunCmd("KUBECONFIG=" + kubeconfig_ + " KUBECACHEDIR=" + (dir_ / "cache").string() +
                  " HOME=" + dir_.string() + " timeout 120 " + KubectlPath() + " " + args);
  }
  std::unique_ptr<SimServer> sim_;
  fs::path dir_;
  std::string kubeconfig_;
};

json GpuNode(const std::string& name) {
  return json::parse(R"({"apiVersion":"v1","kind":"Node","metadata":{"name":")" + name +
                     R"(","labels":{"nvidia.com/gpu.product":"NVIDIA-H100-80GB-HBM3"}},"spec":{},
    "status":{"capacity":{"nvidia.com/gpu":"8"},"allocatable":{"nvidia.com/gpu":"8"},
      "conditions":[{"type":"Ready","status":"True"}],
      "nodeInfo":{"architecture":"amd64","bootID":"","containerRuntimeVersion":"","kernelVersion":"",
        "kubeProxyVersion":"","kubeletVersion":"v1.35.0","machineID":"","operatingSystem":"linux",
        "osImage":"","systemUUID":""}}})");
}

TEST_F(RealClientTest, KubectlNodeOperationsAndDrain) {
  if (KubectlPath().empty()) GTEST_SKIP() << "kubectl not installed";
  ASSERT_TRUE(sim_->Insert(GpuNode("gpu-node-1")).ok());
  auto r = Kubectl("get nodes");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("gpu-node-1"), std::string::npos) << r.out;
  r = Kubectl("label node gpu-node-1 team=ml");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ((*sim_->Get("/api/v1/nodes/gpu-node-1"))["metadata"]["labels"]["team"], "ml");
  r = Kubectl("taint nodes gpu-node-1 gpu=bad:NoSchedule");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ((*sim_->Get("/api/v1/nodes/gpu-node-1"))["spec"]["taints"][0]["key"], "gpu");
  r = Kubectl("taint nodes gpu-node-1 gpu=bad:NoSchedule-");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_FALSE((*sim_->Get("/api/v1/nodes/gpu-node-1"))["spec"].contains("taints"));
  r = Kubectl("uncordon gpu-node-1");
  ASSERT_EQ(r.rc, 0) << r.out;
  // Pods: a DaemonSet pod, a ReplicaSet pod with emptyDir.
  json ds = json::parse(
      R"({"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"agent","namespace":"kube-system"},
    "spec":{"selector":{"matchLabels":{"app":"agent"}},"template":{"metadata":{"labels":{"app":"agent"}},
      "spec":{"containers":[{"name":"a","image":"agent"}]}}}})");
  ASSERT_TRUE(sim_->Insert(ds).ok());
  json rs = json::parse(
      R"({"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"train","namespace":"default"},
    "spec":{"replicas":1,"selector":{"matchLabels":{"app":"train"}},"template":{"metadata":{"labels":{"app":"train"}},
      "spec":{"containers":[{"name":"t","image":"train"}],"volumes":[{"name":"scratch","emptyDir":{}}]}}}})");
  ASSERT_TRUE(sim_->Insert(rs).ok());
  // The simulated controllers create and run both pods.
  for (int i = 0; i < 200; ++i) {
    auto l = sim_->List("/api/v1/pods");
    int running = 0;
    for (auto& p : (*l)["items"])
      if (p["status"].value("phase", "") == "Running") ++running;
    if (running >= 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  r = Kubectl("drain gpu-node-1 --ignore-daemonsets --delete-emptydir-data --timeout=90s");
  ASSERT_EQ(r.rc, 0) << r.out;
  // kubectl before 1.23 ends with "node/NAME evicted" (its own wording, fixed upstream in 1.23).
  EXPECT_TRUE(r.out.find("drained") != std::string::npos ||
              (KubectlMinor() < 23 && r.out.find("node/gpu-node-1 evicted") != std::string::npos))
      << r.out;
  EXPECT_EQ((*sim_->Get("/api/v1/nodes/gpu-node-1"))["spec"]["unschedulable"], true);
  r = Kubectl("cordon gpu-node-1");
  EXPECT_NE(r.out.find("already cordoned"), std::string::npos) << r.out;
  r = Kubectl("uncordon gpu-node-1");
  ASSERT_EQ(r.rc, 0) << r.out;
}

TEST_F(RealClientTest, KubectlApplyCrdAndCustomResource) {
  if (KubectlPath().empty()) GTEST_SKIP() << "kubectl not installed";
  std::ofstream(dir_ / "crd.yaml") << R"(apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gpuhealthpolicies.gpuguardian.io
spec:
  group: gpuguardian.io
  scope: Cluster
  names: {plural: gpuhealthpolicies, singular: gpuhealthpolicy, kind: GPUHealthPolicy, shortNames: [ghp]}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              maxUnhealthy: {type: integer, minimum: 0}
)";
  std::ofstream(dir_ / "cr.yaml") << R"(apiVersion: gpuguardian.io/v1alpha1
kind: GPUHealthPolicy
metadata: {name: default}
spec: {maxUnhealthy: 2}
)";
  auto r = Kubectl("apply -f " + (dir_ / "crd.yaml").string());
  ASSERT_EQ(r.rc, 0) << r.out;
  r = Kubectl("apply -f " + (dir_ / "cr.yaml").string());
  ASSERT_EQ(r.rc, 0) << r.out;
  r = Kubectl("get gpuhealthpolicies");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("default"), std::string::npos) << r.out;
  r = Kubectl("patch ghp default --type=merge -p '{\"spec\":{\"maxUnhealthy\":5}}'");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ((*sim_->Get(
                "/apis/gpuguardian.io/v1alpha1/gpuhealthpolicies/default"))["spec"]["maxUnhealthy"],
            5);
  r = Kubectl("delete ghp default");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_FALSE(sim_->Get("/apis/gpuguardian.io/v1alpha1/gpuhealthpolicies/default").ok());
}

// Server-side printing: kubectl get asks for a meta.k8s.io Table and prints the server's
// columns (built-in printers; the CRDs' additionalPrinterColumns), in get -w as well.
TEST_F(RealClientTest, KubectlGetShowsServerSideColumns) {
  if (KubectlPath().empty()) GTEST_SKIP() << "kubectl not installed";
  json node = GpuNode("gpu-node-1");
  node["metadata"]["labels"]["node-role.kubernetes.io/gpu-worker"] = "";
  node["status"]["addresses"] = json::array({{{"type", "InternalIP"}, {"address", "10.1.2.3"}}});
  ASSERT_TRUE(sim_->Insert(node).ok());
  auto r = Kubectl("get nodes");
  ASSERT_EQ(r.rc, 0) << r.out;
  for (const char* want : {"NAME", "STATUS", "ROLES", "AGE", "VERSION", "gpu-node-1", "Ready",
                           "gpu-worker", "v1.35.0"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << " in\n" << r.out;
  EXPECT_EQ(r.out.find("INTERNAL-IP"), std::string::npos) << "wide column without -o wide\n"
                                                          << r.out;
  r = Kubectl("get node gpu-node-1 -o wide");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("INTERNAL-IP"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("10.1.2.3"), std::string::npos) << r.out;
  ASSERT_EQ(Kubectl("cordon gpu-node-1").rc, 0);
  r = Kubectl("get nodes");
  EXPECT_NE(r.out.find("Ready,SchedulingDisabled"), std::string::npos) << r.out;

  // PDB and core Events columns.
  ASSERT_TRUE(sim_->Insert(json::parse(R"({"apiVersion":"policy/v1","kind":"PodDisruptionBudget",
    "metadata":{"name":"train-pdb","namespace":"default"},
    "spec":{"minAvailable":"50%","selector":{"matchLabels":{"app":"train"}}}})"))
                  .ok());
  ASSERT_TRUE(sim_->Insert(json::parse(R"({"apiVersion":"v1","kind":"Event",
    "metadata":{"name":"gpu-node-1.1","namespace":"default"},
    "involvedObject":{"kind":"Node","name":"gpu-node-1"},"reason":"GPUUnhealthy",
    "message":"XID 79 on GPU 3","type":"Warning","count":1,
    "firstTimestamp":"2026-01-01T00:00:00Z","lastTimestamp":"2026-01-01T00:00:00Z"})"))
                  .ok());
  r = Kubectl("get pdb -A");
  ASSERT_EQ(r.rc, 0) << r.out;
  for (const char* want : {"MIN AVAILABLE", "MAX UNAVAILABLE", "ALLOWED DISRUPTIONS", "50%", "N/A"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << " in\n" << r.out;
  r = Kubectl("get events -A");
  ASSERT_EQ(r.rc, 0) << r.out;
  for (const char* want :
       {"LAST SEEN", "REASON", "OBJECT", "node/gpu-node-1", "GPUUnhealthy", "XID 79 on GPU 3"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << " in\n" << r.out;

  // Our CRDs: their printer columns.
  const std::string src = GG_SOURCE_DIR;
  r = Kubectl("apply -f " + src + "/deploy/crds/gpuhealthpolicies.yaml -f " + src +
              "/deploy/crds/gpunodehealths.yaml");
  ASSERT_EQ(r.rc, 0) << r.out;
  r = Kubectl("apply -f " + src + "/deploy/samples/default-policy.yaml");
  ASSERT_EQ(r.rc, 0) << r.out;
  auto st = sim_->MergePatch("/apis/gpuguardian.io/v1alpha1/gpuhealthpolicies/default",
                             json::parse(R"({"status":{"matchedNodes":12,"unhealthyNodes":1,
      "unknownNodes":0,"remediatingNodes":1,"conditions":[
        {"type":"Ready","status":"True","reason":"Evaluated","message":"ok","lastTransitionTime":"2026-01-01T00:00:00Z"},
        {"type":"BrakeEngaged","status":"False","reason":"WithinBudget","message":"ok","lastTransitionTime":"2026-01-01T00:00:00Z"}]}})"));
  ASSERT_TRUE(st.ok()) << st.status();
  r = Kubectl("get ghp");
  ASSERT_EQ(r.rc, 0) << r.out;
  for (const char* want : {"NAME", "READY", "BRAKE", "MATCHED", "UNHEALTHY", "REMEDIATING", "AGE",
                           "default", "True", "False", "12"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << " in\n" << r.out;
  EXPECT_EQ(r.out.find("DRYRUN"), std::string::npos) << "priority-1 column shown\n" << r.out;
  ASSERT_TRUE(
      sim_->Insert(json::parse(R"({"apiVersion":"gpuguardian.io/v1alpha1","kind":"GPUNodeHealth",
    "metadata":{"name":"gpu-node-1"},"spec":{},
    "status":{"nodeName":"gpu-node-1","agentVersion":"v9.8.7","expectedGPUs":8,
      "heartbeatTime":"2026-01-01T00:00:00Z","observedAt":"2026-01-01T00:00:00Z"}})"))
          .ok());
  r = Kubectl("get gpunodehealths");
  ASSERT_EQ(r.rc, 0) << r.out;
  for (const char* want : {"EXPECTED", "AGENT", "WRITTEN", "gpu-node-1", "v9.8.7", " 8 "})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << " in\n" << r.out;

  // get -w: watch events are Tables too, and each arrives while the stream is open.
  std::size_t before = sim_->ActiveWatches();
  const std::string wfile = (dir_ / "watch.out").string();
  std::thread watcher([&] { Kubectl("get nodes -w --watch-only > " + wfile); });
  for (int i = 0; i < 600 && sim_->ActiveWatches() <= before; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(sim_->MergePatch("/api/v1/nodes/gpu-node-1",
                               json::parse(R"({"spec":{"unschedulable":false}})"))
                  .ok());
  std::string seen;
  for (int i = 0; i < 600 && seen.find("gpu-node-1") == std::string::npos; ++i) {
    // Another watch opening can raise the count before kubectl's own is open (it lists first,
    // then watches from the list's resourceVersion), so a change made in between is in the
    // list, not the stream: change a label every 2 s until the stream shows one.
    if (i % 20 == 19) {
      ASSERT_TRUE(
          sim_->MergePatch("/api/v1/nodes/gpu-node-1",
                           json{{"metadata", {{"labels", {{"test/tick", std::to_string(i)}}}}}})
              .ok());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::ifstream in(wfile);
    seen.assign(std::istreambuf_iterator<char>(in), {});
  }
  sim_->Stop();  // ends the stream; kubectl exits
  watcher.join();
  EXPECT_EQ(seen.find("no kind"), std::string::npos) << seen;
  EXPECT_NE(seen.find("gpu-node-1"), std::string::npos) << seen;
  EXPECT_NE(seen.find("Ready"), std::string::npos) << seen;
  EXPECT_EQ(seen.find("SchedulingDisabled"), std::string::npos) << seen;
}

// Generated OpenAPI v3 for CRDs: kubectl explain reads the CRD's schema; apply validates
// (fieldValidation=Strict) and an unknown field is refused with nothing stored.
TEST_F(RealClientTest, KubectlExplainAndStrictApplyOfCustomResources) {
  if (KubectlPath().empty()) GTEST_SKIP() << "kubectl not installed";
  const std::string src = GG_SOURCE_DIR;
  auto r = Kubectl("apply -f " + src + "/deploy/crds/gpuhealthpolicies.yaml");
  ASSERT_EQ(r.rc, 0) << r.out;
  r = Kubectl("explain gpuhealthpolicies.spec");
  ASSERT_EQ(r.rc, 0) << r.out;
  for (const char* want : {"GPUHealthPolicy", "nodeSelector", "Nodes this policy covers"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << " in\n" << r.out;
  std::ofstream(dir_ / "bad.yaml") << R"(apiVersion: gpuguardian.io/v1alpha1
kind: GPUHealthPolicy
metadata: {name: bad}
spec: {bogusField: 1}
)";
  // Before 1.25 kubectl has no --validate=strict; its --validate=true checks the CRD's
  // schema from /openapi/v2 on the client.
  const char* validate = KubectlMinor() >= 25 ? "--validate=strict" : "--validate=true";
  r = Kubectl(std::string("apply ") + validate + " -f " + (dir_ / "bad.yaml").string());
  EXPECT_NE(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("bogusField"), std::string::npos) << r.out;
  EXPECT_FALSE(sim_->Get("/apis/gpuguardian.io/v1alpha1/gpuhealthpolicies/bad").ok());
  r = Kubectl("apply -f " + src + "/deploy/samples/default-policy.yaml");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(sim_->Get("/apis/gpuguardian.io/v1alpha1/gpuhealthpolicies/default").ok());
}

// kubectl's generators send protobuf bodies ("k8s\0" + runtime.Unknown); each lands as the
// object it describes.
TEST_F(RealClientTest, KubectlCreateGeneratorsSendProtobuf) {
  if (KubectlPath().empty()) GTEST_SKIP() << "kubectl not installed";
  for (const char* cmd :
       {"create namespace team-a", "create configmap cfg -n team-a --from-literal=mode=fast",
        "create secret generic creds -n team-a --from-literal=token=s3cr3t",
        "create serviceaccount runner -n team-a",
        "create role reader -n team-a --verb=get,list --resource=pods",
        "create deployment web -n team-a --image=nginx:1.27 --replicas=0",
        "create service clusterip web -n team-a --tcp=80:8080",
        "create priorityclass gpu-high --value=1000"}) {
    auto r = Kubectl(cmd);
    ASSERT_EQ(r.rc, 0) << cmd << "\n" << r.out;
  }
  auto ns = sim_->Get("/api/v1/namespaces/team-a");
  ASSERT_TRUE(ns.ok()) << ns.status();
  EXPECT_EQ((*ns)["status"]["phase"], "Active");
  auto cm = sim_->Get("/api/v1/namespaces/team-a/configmaps/cfg");
  ASSERT_TRUE(cm.ok());
  EXPECT_EQ((*cm)["data"]["mode"], "fast");
  auto sec = sim_->Get("/api/v1/namespaces/team-a/secrets/creds");
  ASSERT_TRUE(sec.ok());
  EXPECT_EQ((*sec)["data"]["token"], "czNjcjN0");  // base64("s3cr3t")
  EXPECT_EQ((*sec)["type"], "Opaque");
  EXPECT_TRUE(sim_->Get("/api/v1/namespaces/team-a/serviceaccounts/runner").ok());
  auto role = sim_->Get("/apis/rbac.authorization.k8s.io/v1/namespaces/team-a/roles/reader");
  ASSERT_TRUE(role.ok());
  EXPECT_EQ((*role)["rules"][0]["verbs"], json::array({"get", "list"}));
  auto dep = sim_->Get("/apis/apps/v1/namespaces/team-a/deployments/web");
  ASSERT_TRUE(dep.ok());
  EXPECT_EQ((*dep)["spec"]["replicas"], 0);  // an explicit zero survives decoding
  EXPECT_EQ((*dep)["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:1.27");
  auto svc = sim_->Get("/api/v1/namespaces/team-a/services/web");
  ASSERT_TRUE(svc.ok());
  EXPECT_EQ((*svc)["spec"]["ports"][0]["targetPort"], 8080);
  std::string ip = (*svc)["spec"].value("clusterIP", "");
  EXPECT_EQ(ip.rfind("10.96.", 0), 0u) << ip;
  EXPECT_EQ((*sim_->Get("/apis/scheduling.k8s.io/v1/priorityclasses/gpu-high"))["value"], 1000);
  // The cluster's own Service.
  auto k = sim_->Get("/api/v1/namespaces/default/services/kubernetes");
  ASSERT_TRUE(k.ok());
  EXPECT_EQ((*k)["spec"]["clusterIP"], "10.96.0.1");
}

TEST_F(RealClientTest, KubectlServerDryRunChangesNothing) {
  if (KubectlPath().empty()) GTEST_SKIP() << "kubectl not installed";
  ASSERT_TRUE(sim_->Insert(GpuNode("gpu-node-1")).ok());
  auto r = Kubectl("delete node gpu-node-1 --dry-run=server");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("server dry run"), std::string::npos) << r.out;
  EXPECT_TRUE(sim_->Get("/api/v1/nodes/gpu-node-1").ok());
  r = Kubectl("create configmap ghost --dry-run=server");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_FALSE(sim_->Get("/api/v1/namespaces/default/configmaps/ghost").ok());
  json rs = json::parse(
      R"({"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"train","namespace":"default"},
    "spec":{"replicas":2,"selector":{"matchLabels":{"app":"train"}},"template":{"metadata":{"labels":{"app":"train"}},
      "spec":{"containers":[{"name":"t","image":"train"}]}}}})");
  ASSERT_TRUE(sim_->Insert(rs).ok());
  std::vector<std::string> pods;
  for (int i = 0; i < 200 && pods.size() < 2; ++i) {
    pods.clear();
    auto list = sim_->List("/api/v1/pods");
    ASSERT_TRUE(list.ok()) << list.status();
    for (auto& p : (*list)["items"])
      if (p["status"].value("phase", "") == "Running") pods.push_back(p["metadata"]["name"]);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(pods.size(), 2u);
  r = Kubectl("drain gpu-node-1 --dry-run=server --ignore-daemonsets --timeout=30s");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("drained (server dry run)"), std::string::npos) << r.out;
  auto node = sim_->Get("/api/v1/nodes/gpu-node-1");
  EXPECT_FALSE((*node)["spec"].value("unschedulable", false)) << node->dump();
  for (const auto& p : pods) {
    auto pod = sim_->Get("/api/v1/namespaces/default/pods/" + p);
    ASSERT_TRUE(pod.ok()) << p << " was evicted by a dry run";
    EXPECT_FALSE((*pod)["metadata"].contains("deletionTimestamp")) << pod->dump();
  }
  // A bad dryRun value is refused, not ignored.
  r = RunCmd("curl -s -X DELETE '" + sim_->Url() + "/api/v1/nodes/gpu-node-1?dryRun=Some'");
  EXPECT_NE(r.out.find("\"code\":400"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("supported values: \\\"All\\\""), std::string::npos) << r.out;
  EXPECT_TRUE(sim_->Get("/api/v1/nodes/gpu-node-1").ok());
}

TEST_F(RealClientTest, KubectlAuthCanIAndWhoamiWithoutAuthz) {
  if (KubectlPath().empty()) GTEST_SKIP() << "kubectl not installed";
  auto r = Kubectl("auth can-i list nodes");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("yes"), std::string::npos) << r.out;
  if (KubectlMinor() < 27) GTEST_SKIP() << "kubectl 1." << KubectlMinor() << " has no auth whoami";
  r = Kubectl("auth whoami");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("system:masters"), std::string::npos) << r.out;
}

TEST_F(RealClientTest, KubectlAuthCanIThroughRbac) {
  if (KubectlPath().empty()) GTEST_SKIP() << "kubectl not installed";
  sim_->Stop();
  std::ofstream(dir_ / "rbac.yaml") << R"(apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pod-reader, namespace: team-a}
rules:
- {apiGroups: [""], resources: [pods], verbs: [get, list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: runner-reads, namespace: team-a}
subjects:
- {kind: ServiceAccount, name: runner, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-reader}
)";
  SimOptions o;
  o.tls = true;  // kubectl (client-go's kubeconfig loader) sends credentials to https only
  o.tls_dir = (dir_ / "tls").string();
  o.authz = "rbac";
  o.rbac_files = {(dir_ / "rbac.yaml").string()};
  o.token_users = {{"runner-token", "system:serviceaccount:team-a:runner"}};
  auto s = SimServer::Start(o);
  ASSERT_TRUE(s.ok()) << s.status();
  sim_ = std::move(*s);
  ASSERT_TRUE(WriteKubeconfig(kubeconfig_, sim_->Url(), sim_->CaCertPem(), "runner-token").ok());
  auto r = Kubectl("auth can-i list pods -n team-a");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("yes"), std::string::npos) << r.out;
  r = Kubectl("auth can-i list nodes");
  EXPECT_NE(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("no"), std::string::npos) << r.out;
  r = Kubectl("auth can-i delete pods -n team-a");
  EXPECT_NE(r.rc, 0) << r.out;
  if (KubectlMinor() < 27) GTEST_SKIP() << "kubectl 1." << KubectlMinor() << " has no auth whoami";
  r = Kubectl("auth whoami");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("system:serviceaccount:team-a:runner"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("system:serviceaccounts:team-a"), std::string::npos) << r.out;
}

// kubectl apply --dry-run=server -k deploy/: client-side validation needs /openapi/v3 for
// every kind in deploy/, the server answers each object without storing it.
TEST_F(RealClientTest, KubectlServerDryRunApplyOfDeployKustomization) {
  if (KubectlPath().empty()) GTEST_SKIP() << "kubectl not installed";
  const std::string src = GG_SOURCE_DIR;
  auto r = Kubectl("apply -f " + src + "/deploy/namespace.yaml -f " + src + "/deploy/crds/");
  ASSERT_EQ(r.rc, 0) << r.out;
  r = Kubectl("apply --dry-run=server -k " + src + "/deploy/");
  for (const char* want :
       {"clusterrole.rbac.authorization.k8s.io/gpu-guardian-operator created (server dry run)",
        "deployment.apps/gpu-guardian-operator created (server dry run)",
        "serviceaccount/gpu-guardian-agent created (server dry run)"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << " in\n" << r.out;
  // ValidatingAdmissionPolicy is served once the admission chain lands; until then its
  // document is the one thing missing.
  auto d = RunCmd("curl -s " + sim_->Url() + "/apis/admissionregistration.k8s.io/v1");
  if (d.out.find("validatingadmissionpolicies") != std::string::npos) {
    EXPECT_EQ(r.rc, 0) << r.out;
  }
  EXPECT_FALSE(
      sim_->Get("/apis/apps/v1/namespaces/gpu-guardian/deployments/gpu-guardian-operator").ok());
  EXPECT_FALSE(
      sim_->Get("/apis/rbac.authorization.k8s.io/v1/clusterroles/gpu-guardian-operator").ok());
}

// kubectl apply -k deploy/ as `make demo` runs it: the first pass creates the CRDs and
// everything else, the second the policy (its CRD is established by then). kubectl before
// 1.27 validates each object against /openapi/v2 first; later ones leave it to the server
// (fieldValidation=Strict). Either way an unknown field is refused and nothing is stored.
TEST_F(RealClientTest, KubectlApplyKustomizationAndValidation) {
  if (KubectlPath().empty()) GTEST_SKIP() << "kubectl not installed";
  const std::string src = GG_SOURCE_DIR;
  auto r = Kubectl("apply -k " + src + "/deploy/");
  EXPECT_NE(r.out.find("deployment.apps/gpu-guardian-operator created"), std::string::npos)
      << r.out;
  r = Kubectl("apply -k " + src + "/deploy/");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(
      sim_->Get("/apis/apps/v1/namespaces/gpu-guardian/deployments/gpu-guardian-operator").ok());
  EXPECT_TRUE(
      sim_->Get("/apis/apps/v1/namespaces/gpu-guardian/daemonsets/gpu-guardian-agent").ok());
  EXPECT_TRUE(sim_->Get("/apis/gpuguardian.io/v1alpha1/gpuhealthpolicies/default").ok());
  std::ofstream(dir_ / "bad-deploy.yaml") << R"(apiVersion: apps/v1
kind: Deployment
metadata: {name: bad, namespace: default}
spec: {replicaz: 1, selector: {matchLabels: {app: bad}},
  template: {metadata: {labels: {app: bad}}, spec: {containers: [{name: c, image: busybox}]}}}
)";
  r = Kubectl("apply -f " + (dir_ / "bad-deploy.yaml").string());
  EXPECT_NE(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("replicaz"), std::string::npos) << r.out;
  EXPECT_FALSE(sim_->Get("/apis/apps/v1/namespaces/default/deployments/bad").ok());
  std::ofstream(dir_ / "bad-policy.yaml") << R"(apiVersion: gpuguardian.io/v1alpha1
kind: GPUHealthPolicy
metadata: {name: bad}
spec: {bogusField: 1}
)";
  r = Kubectl("apply -f " + (dir_ / "bad-policy.yaml").string());
  EXPECT_NE(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("bogusField"), std::string::npos) << r.out;
  EXPECT_FALSE(sim_->Get("/apis/gpuguardian.io/v1alpha1/gpuhealthpolicies/bad").ok());
}

TEST_F(RealClientTest, KubectlNamespaceDeletionTerminatesThenEmptiesAndGoes) {
  if (KubectlPath().empty()) GTEST_SKIP() << "kubectl not installed";
  ASSERT_TRUE(sim_->Insert(GpuNode("gpu-node-1")).ok());
  ASSERT_EQ(Kubectl("create namespace doomed").rc, 0);
  ASSERT_EQ(Kubectl("create configmap c -n doomed").rc, 0);
  ASSERT_TRUE(
      sim_->Create("/api/v1/namespaces/doomed/pods", json::parse(R"({"apiVersion":"v1","kind":"Pod",
    "metadata":{"name":"p","namespace":"doomed"},
    "spec":{"terminationGracePeriodSeconds":60,"containers":[{"name":"c","image":"x"}]}})"))
          .ok());
  for (int i = 0; i < 100; ++i) {
    auto p = sim_->Get("/api/v1/namespaces/doomed/pods/p");
    if (p.ok() && p->value("status", json::object()).value("phase", "") == "Running") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  auto r = Kubectl("delete namespace doomed --wait=false");
  ASSERT_EQ(r.rc, 0) << r.out;
  auto ns = sim_->Get("/api/v1/namespaces/doomed");
  ASSERT_TRUE(ns.ok()) << "a namespace with a running pod vanished at once";
  EXPECT_EQ((*ns)["status"]["phase"], "Terminating");
  EXPECT_FALSE(sim_->Get("/api/v1/namespaces/doomed/configmaps/c").ok());
  r = Kubectl("create configmap late -n doomed");
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("because it is being terminated"), std::string::npos) << r.out;
  r = Kubectl("delete namespace doomed --wait=false");
  EXPECT_EQ(r.out.find("deleted"), std::string::npos) << r.out;  // 409 while terminating
  // The pod's grace period (60 s / time scale 30) ends, the kubelet removes it, the
  // namespace finishes.
  bool gone = false;
  for (int i = 0; i < 150 && !gone; ++i) {
    gone = !sim_->Get("/api/v1/namespaces/doomed").ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(gone);
}

TEST_F(RealClientTest, SecondSimulatorOnTheSamePortIsRefused) {
  SimOptions o;
  o.listen = "127.0.0.1:" + std::to_string(sim_->Port());
  auto second = SimServer::Start(o);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("address already in use"), std::string::npos)
      << second.status();
  EXPECT_NE(second.status().message().find(std::to_string(sim_->Port())), std::string::npos);
  // The binary: non-zero exit, the same words; bad flags refused before anything binds.
  const std::string bin = std::string(GG_BIN_DIR) + "/gpu-guardian-sim";
  if (!fs::exists(bin)) GTEST_SKIP() << "gpu-guardian-sim not built";
  auto r = RunCmd("timeout 20 " + bin + " --listen " + o.listen);
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("address already in use"), std::string::npos) << r.out;
  for (const char* bad : {"--listen 127.0.0.1:99999", "--nodes -3", "--time-scale 0",
                          "--kube-version 1.31", "--listen nohostport"}) {
    r = RunCmd("timeout 20 " + bin + " " + bad);
    EXPECT_NE(r.rc, 0) << bad << "\n" << r.out;
    EXPECT_EQ(r.out.find("listening on"), std::string::npos) << bad << "\n" << r.out;
  }
  r = RunCmd(bin + " --help");
  EXPECT_NE(r.out.find("(1.32-1.36)"), std::string::npos) << r.out;
}

// Server-side apply: managedFields per manager, a 409 naming the other manager and field,
// --force-conflicts taking it over, and a field its sole applier dropped removed.
TEST_F(RealClientTest, KubectlServerSideApplyOwnershipAndConflicts) {
  if (KubectlPath().empty()) GTEST_SKIP() << "kubectl not installed";
  const std::string v1 = R"(apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {tier: front, team: ml}}
spec:
  replicas: 0
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: main, image: "nginx:1"}
      - {name: sidecar, image: "proxy:1"}
)";
  std::ofstream(dir_ / "v1.yaml") << v1;
  auto r = Kubectl("apply --server-side -f " + (dir_ / "v1.yaml").string());
  ASSERT_EQ(r.rc, 0) << r.out;
  const std::string path = "/apis/apps/v1/namespaces/default/deployments/web";
  auto d = sim_->Get(path);
  ASSERT_TRUE(d.ok());
  const json& mf = (*d)["metadata"]["managedFields"];
  ASSERT_EQ(mf.size(), 1u) << mf.dump();
  EXPECT_EQ(mf[0]["manager"], "kubectl");
  EXPECT_EQ(mf[0]["operation"], "Apply");
  EXPECT_EQ(mf[0]["fieldsType"], "FieldsV1");
  const json& containers = mf[0]["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"];
  EXPECT_TRUE(containers.contains("k:{\"name\":\"sidecar\"}")) << containers.dump();
  // Another manager changes replicas: an Update entry, and the next apply conflicts.
  r = Kubectl("patch deployment web -p '{\"spec\":{\"replicas\":2}}'");
  ASSERT_EQ(r.rc, 0) << r.out;
  d = sim_->Get(path);
  bool patch_owns = false;
  for (const auto& e : (*d)["metadata"]["managedFields"])
    if (e["manager"] == "kubectl-patch" && e["operation"] == "Update" &&
        e["fieldsV1"]["f:spec"].contains("f:replicas"))
      patch_owns = true;
  EXPECT_TRUE(patch_owns) << (*d)["metadata"]["managedFields"].dump();
  r = Kubectl("apply --server-side -f " + (dir_ / "v1.yaml").string());
  EXPECT_NE(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("Apply failed with 1 conflict: conflict with \"kubectl-patch\""),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(".spec.replicas"), std::string::npos) << r.out;
  EXPECT_EQ((*sim_->Get(path))["spec"]["replicas"], 2);
  r = Kubectl("apply --server-side --force-conflicts -f " + (dir_ / "v1.yaml").string());
  ASSERT_EQ(r.rc, 0) << r.out;
  d = sim_->Get(path);
  EXPECT_EQ((*d)["spec"]["replicas"], 0);
  for (const auto& e : (*d)["metadata"]["managedFields"])
    EXPECT_NE(e["manager"], "kubectl-patch") << "forced apply left the patcher owning nothing";
  // The applier drops the sidecar and a label it alone owned: both go; a label another
  // manager also set stays.
  r = Kubectl("label deployment web team=data --overwrite");
  ASSERT_EQ(r.rc, 0) << r.out;
  std::string v2 = v1;
  v2.erase(v2.find("      - {name: sidecar"),
           std::string("      - {name: sidecar, image: \"proxy:1\"}\n").size());
  v2.replace(v2.find("labels: {tier: front, team: ml}"),
             std::string("labels: {tier: front, team: ml}").size(), "labels: {}");
  std::ofstream(dir_ / "v2.yaml") << v2;
  r = Kubectl("apply --server-side -f " + (dir_ / "v2.yaml").string());
  ASSERT_EQ(r.rc, 0) << r.out;
  d = sim_->Get(path);
  const json& cs = (*d)["spec"]["template"]["spec"]["containers"];
  ASSERT_EQ(cs.size(), 1u) << cs.dump();
  EXPECT_EQ(cs[0]["name"], "main");
  EXPECT_FALSE((*d)["metadata"]["labels"].contains("tier")) << (*d)["metadata"].dump();
  EXPECT_EQ((*d)["metadata"]["labels"].value("team", ""), "data") << (*d)["metadata"].dump();
  // Apply without a field manager is refused.
  r = RunCmd(
      "curl -s -X PATCH -H 'Content-Type: application/apply-patch+yaml' --data-binary "
      "'{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"x\"}}' '" +
      sim_->Url() + "/api/v1/namespaces/default/configmaps/x'");
  EXPECT_NE(r.out.find("fieldManager: Required value"), std::string::npos) << r.out;
  EXPECT_FALSE(sim_->Get("/api/v1/namespaces/default/configmaps/x").ok());
}

TEST_F(RealClientTest, KubectlScaleUsesTheScaleSubresource) {
  if (KubectlPath().empty()) GTEST_SKIP() << "kubectl not installed";
  ASSERT_EQ(Kubectl("create deployment web --image=nginx --replicas=1").rc, 0);
  auto r = Kubectl("scale deployment web --replicas=3");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ((*sim_->Get("/apis/apps/v1/namespaces/default/deployments/web"))["spec"]["replicas"],
            3);
  r = Kubectl("get --raw /apis/apps/v1/namespaces/default/deployments/web/scale");
  ASSERT_EQ(r.rc, 0) << r.out;
  json scale = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(scale.is_object()) << r.out;
  EXPECT_EQ(scale["kind"], "Scale");
  EXPECT_EQ(scale["apiVersion"], "autoscaling/v1");
  EXPECT_EQ(scale["spec"]["replicas"], 3);
  EXPECT_EQ(scale["status"]["selector"], "app=web");
  // A stale resourceVersion in a replaced Scale is a conflict; nothing changes.
  r = RunCmd(
      "curl -s -X PUT -H 'Content-Type: application/json' --data-binary "
      "'{\"apiVersion\":\"autoscaling/v1\",\"kind\":\"Scale\",\"metadata\":{\"name\":\"web\","
      "\"namespace\":\"default\",\"resourceVersion\":\"1\"},\"spec\":{\"replicas\":7}}' '" +
      sim_->Url() + "/apis/apps/v1/namespaces/default/deployments/web/scale'");
  EXPECT_NE(r.out.find("\"code\":409"), std::string::npos) << r.out;
  EXPECT_EQ((*sim_->Get("/apis/apps/v1/namespaces/default/deployments/web"))["spec"]["replicas"],
            3);
}

// The Python client on the new surface: reviews, Services, server-side apply with a conflict,
// managedFields, dry run on delete, namespace termination.
TEST_F(RealClientTest, PythonClientReviewsServicesApplyAndDryRun) {
  if (RunCmd("/usr/bin/python3 -c 'import kubernetes'").rc != 0)
    GTEST_SKIP() << "python3-kubernetes missing";
  std::ofstream(dir_ / "t2.py") << R"(import sys, json
from kubernetes import client, config
from kubernetes.client.rest import ApiException
config.load_kube_config(sys.argv[1])
v1 = client.CoreV1Api()
ssar = client.V1SelfSubjectAccessReview(spec=client.V1SelfSubjectAccessReviewSpec(
    resource_attributes=client.V1ResourceAttributes(verb="list", resource="nodes")))
assert client.AuthorizationV1Api().create_self_subject_access_review(ssar).status.allowed
svc = v1.create_namespaced_service("default", client.V1Service(metadata=client.V1ObjectMeta(name="web"),
    spec=client.V1ServiceSpec(selector={"app": "web"}, ports=[client.V1ServicePort(port=80)])))
assert svc.spec.cluster_ip.startswith("10.96."), svc.spec.cluster_ip
assert svc.spec.ports[0].target_port == 80, svc.spec.ports
cm = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "1"}})
def apply():  # the 22.6 client has no apply helper: a raw PATCH (JSON is YAML)
    return v1.api_client.call_api("/api/v1/namespaces/default/configmaps/cfg", "PATCH",
        query_params=[("fieldManager", "py-apply")], body=cm, response_type="object",
        header_params={"Content-Type": "application/apply-patch+yaml", "Accept": "application/json"},
        auth_settings=["BearerToken"], _return_http_data_only=True)
apply()
v1.patch_namespaced_config_map("cfg", "default", {"data": {"a": "2"}}, field_manager="py-edit")
try:
    apply()
    raise SystemExit("no conflict")
except ApiException as e:
    assert e.status == 409, e
    body = json.loads(e.body)
    assert body["details"]["causes"][0]["field"] == ".data.a", body
managers = sorted((m.manager, m.operation) for m in v1.read_namespaced_config_map("cfg", "default").metadata.managed_fields)
# The update took the applier's only field, so the applier's entry is gone.
assert managers == [("py-edit", "Update")], managers
v1.delete_namespaced_config_map("cfg", "default", dry_run="All")
assert v1.read_namespaced_config_map("cfg", "default").data["a"] == "2"
v1.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="py-ns")))
ns = v1.delete_namespace("py-ns")
print("PYOK2")
)";
  auto r = RunCmd("/usr/bin/python3 " + (dir_ / "t2.py").string() + " " + kubeconfig_);
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("PYOK2"), std::string::npos) << r.out;
  EXPECT_FALSE(sim_->Get("/api/v1/namespaces/py-ns").ok());  // empty: finalized at once
}

TEST_F(RealClientTest, PythonClientListWatchPatchEvents) {
  if (RunCmd("/usr/bin/python3 -c 'import kubernetes'").rc != 0)
    GTEST_SKIP() << "python3-kubernetes missing";
  ASSERT_TRUE(sim_->Insert(GpuNode("gpu-node-1")).ok());
  std::ofstream(dir_ / "t.py") << R"(import sys
from kubernetes import client, config, watch
config.load_kube_config(sys.argv[1])
v1 = client.CoreV1Api()
nodes = v1.list_node(label_selector="nvidia.com/gpu.product")
assert [n.metadata.name for n in nodes.items] == ["gpu-node-1"], nodes
v1.patch_node("gpu-node-1", {"metadata": {"labels": {"py": "yes"}}})
assert v1.read_node("gpu-node-1").metadata.labels["py"] == "yes"
ev = client.CoreV1Event(metadata=client.V1ObjectMeta(generate_name="gpu-node-1."),
    involved_object=client.V1ObjectReference(kind="Node", name="gpu-node-1"),
    reason="GPUUnhealthy", message="XID 79", type="Warning")
v1.create_namespaced_event("default", ev)
evs = v1.list_namespaced_event("default")
assert len(evs.items) == 1
ev1 = client.EventsV1Api().list_namespaced_event("default")
assert ev1.items[0].reason == "GPUUnhealthy"
w = watch.Watch()
seen = [e["type"] for e in w.stream(v1.list_node, resource_version=nodes.metadata.resource_version,
                                     timeout_seconds=2)]
assert "MODIFIED" in seen or seen == [], seen
print("PYOK")
)";
  auto r = RunCmd("/usr/bin/python3 " + (dir_ / "t.py").string() + " " + kubeconfig_);
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("PYOK"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace gg::sim
