// The admission chain with real clients (kubectl 1.32, python3-kubernetes): the CRD contract
// (a policy breaking a CEL rule fails with the rule's message, an incomplete one reads back
// with the schema defaults), priorities from classes, and the shipped agent-own-node policy
// refusing an agent token's write to another node. Skipped when the client is absent.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "sim/server.h"
#include "sim/test_util.h"
#include "sim/tls.h"

namespace gg::sim {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const std::string kAgent = "system:serviceaccount:gpu-guardian:gpu-guardian-agent";

class AdmissionClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists("/usr/bin/kubectl")) GTEST_SKIP() << "kubectl not installed";
    dir_ = fs::temp_directory_path() /
           ("gg-sim-admission-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_ / "cache");
  }
  void Start(SimOptions o) {
    o.time_scale = 30;
    o.scheduler = false;
    auto s = SimServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    sim_ = std::move(*s);
  }
  std::string Config(const std::string& name, const std::string& token) {
    std::string path = (dir_ / ("kubeconfig-" + name)).string();
    EXPECT_TRUE(WriteKubeconfig(path, sim_->Url(), sim_->CaCertPem(), token, name).ok());
    return path;
  }
  void TearDown() override {
    if (sim_) sim_->Stop();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  CmdResult Kubectl(const std::string& kubeconfig, const std::string& args) {
    return RunCmd("KUBECONFIG=" + kubeconfig + " KUBECACHEDIR=" + (dir_ / "cache").string() +
                  " HOME=" + dir_.string() + " timeout 120 /usr/bin/kubectl " + args);
  }
  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  std::unique_ptr<SimServer> sim_;
  fs::path dir_;
};

TEST_F(AdmissionClientTest, CrdRulesAndDefaultsWithKubectl) {
  Start(SimOptions{});
  const std::string admin = Config("admin", "");
  const std::string src = GG_SOURCE_DIR;
  auto r = Kubectl(admin, "apply -f " + src + "/deploy/crds/");
  ASSERT_EQ(r.rc, 0) << r.out;
  // Breaks "exactly one matcher per rule": refused with the rule's message, nothing stored.
  r = Kubectl(admin, "apply -f " + Write("two-matchers.yaml", R"(apiVersion: gpuguardian.io/v1alpha1
kind: GPUHealthPolicy
metadata: {name: two-matchers}
spec:
  rules:
  - {name: both, gpuLost: true, ecc: {uncorrectableVolatileAbove: 0}, action: Cordon}
)"));
  EXPECT_NE(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("exactly one matcher per rule"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("spec.rules[0]"), std::string::npos) << r.out;
  EXPECT_NE(Kubectl(admin, "get ghp two-matchers").rc, 0);
  r = Kubectl(admin, "apply -f " + Write("window.yaml", R"(apiVersion: gpuguardian.io/v1alpha1
kind: GPUHealthPolicy
metadata: {name: window}
spec:
  rules:
  - {name: x, xid: {codes: [79]}, window: 1m, for: 5m, action: Cordon}
)"));
  EXPECT_NE(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("window is shorter than for: the rule could never fire"), std::string::npos)
      << r.out;

  // observe-only.yaml omits the optional fields: it reads back with the schema's defaults.
  r = Kubectl(admin, "apply -f " + src + "/deploy/samples/observe-only.yaml");
  ASSERT_EQ(r.rc, 0) << r.out;
  r = Kubectl(admin, "get ghp observe-only -o json");
  ASSERT_EQ(r.rc, 0) << r.out;
  json p = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(p.is_object()) << r.out;
  EXPECT_EQ(p["spec"]["rules"].size(), 9u) << p["spec"];
  EXPECT_EQ(p["spec"]["remediation"]["drain"]["order"],
            json::parse(R"([{"priorityBelow":1000},{}])"));
  EXPECT_EQ(p["spec"]["safety"]["maxUnhealthy"], "10%");
  EXPECT_EQ(p["spec"]["recovery"]["healthyFor"], "10m");
  EXPECT_EQ(p["spec"]["dryRun"], true);
  // A later edit that breaks a rule is refused as well (kubectl patch: a merge patch).
  r = Kubectl(
      admin,
      R"(patch ghp observe-only --type=merge -p '{"spec":{"nodeSelector":{"matchExpressions":[{"key":"a","operator":"In"}]}}}')");
  EXPECT_NE(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("In/NotIn need values"), std::string::npos) << r.out;
}

TEST_F(AdmissionClientTest, PrioritiesFromClassesWithKubectlAndPython) {
  Start(SimOptions{});
  const std::string admin = Config("admin", "");
  auto r = Kubectl(admin, "get priorityclass system-node-critical -o jsonpath={.value}");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(r.out, "2000001000");
  // --validate=false: client-side validation of scheduling.k8s.io needs its /openapi/v3
  // document, which is not what this test is about.
  r = Kubectl(admin,
              "apply --validate=false -f " + Write("pc.yaml", R"(apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: gpu-inference-high}
value: 1000000
---
apiVersion: v1
kind: Pod
metadata: {name: server, namespace: default}
spec:
  priorityClassName: gpu-inference-high
  containers:
  - name: c
    image: nvcr.io/nvidia/tritonserver:25.01-py3
    resources: {limits: {cpu: "1", memory: 1Gi, nvidia.com/gpu: "1"}}
)"));
  ASSERT_EQ(r.rc, 0) << r.out;
  r = Kubectl(
      admin,
      "get pod server -o jsonpath={.spec.priority}/{.spec.preemptionPolicy}/{.status.qosClass}");
  EXPECT_EQ(r.out, "1000000/PreemptLowerPriority/Guaranteed");
  r = Kubectl(admin, "apply -f " + Write("bad.yaml", R"(apiVersion: v1
kind: Pod
metadata: {name: orphan, namespace: default}
spec:
  priorityClassName: no-such-class
  containers: [{name: c, image: busybox}]
)"));
  EXPECT_NE(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("no PriorityClass with name no-such-class was found"), std::string::npos)
      << r.out;

  if (RunCmd("/usr/bin/python3 -c 'import kubernetes'").rc != 0)
    GTEST_SKIP() << "python3-kubernetes missing";
  Write("t.py", R"(import sys
from kubernetes import client, config
config.load_kube_config(sys.argv[1])
v1 = client.CoreV1Api()
pod = client.V1Pod(metadata=client.V1ObjectMeta(name="py"),
    spec=client.V1PodSpec(priority_class_name="system-cluster-critical",
        containers=[client.V1Container(name="c", image="busybox:1.36")]))
got = v1.create_namespaced_pod("default", pod)
assert got.spec.priority == 2000000000, got.spec.priority
assert got.spec.containers[0].image_pull_policy == "IfNotPresent"
assert got.spec.dns_policy == "ClusterFirst" and got.spec.service_account_name == "default"
assert got.status.qos_class == "BestEffort"
keys = sorted(t.key for t in got.spec.tolerations)
assert keys == ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"], keys
print("PYOK")
)");
  auto py = RunCmd("/usr/bin/python3 " + (dir_ / "t.py").string() + " " + admin);
  EXPECT_EQ(py.rc, 0) << py.out;
  EXPECT_NE(py.out.find("PYOK"), std::string::npos) << py.out;
}

// --authz rbac over TLS (kubectl sends bearer tokens only over https): the agent's own RBAC
// lets it patch any node; the shipped policy confines it to its own.
TEST_F(AdmissionClientTest, AgentTokenMayNotPatchAnotherNode) {
  SimOptions o;
  o.tls = true;
  o.tls_dir = (dir_ / "tls").string();
  o.authz = "rbac";
  o.rbac_files = {std::string(GG_SOURCE_DIR) + "/deploy/rbac/agent.yaml"};
  o.token_users = {{"agent-node-1", kAgent + ",node=gpu-node-1"}};
  Start(o);
  const std::string admin = Config("admin", "admin");
  const std::string agent = Config("agent", "agent-node-1");
  const std::string src = GG_SOURCE_DIR;
  auto r = Kubectl(admin, "apply -f " + src + "/deploy/admission/agent-own-node.yaml");
  ASSERT_EQ(r.rc, 0) << r.out;
  r = Kubectl(admin, "apply -f " + Write("nodes.yaml", R"(apiVersion: v1
kind: Node
metadata: {name: gpu-node-1}
---
apiVersion: v1
kind: Node
metadata: {name: gpu-node-2}
)"));
  ASSERT_EQ(r.rc, 0) << r.out;
  r = Kubectl(agent, "annotate node gpu-node-1 gpuguardian.io/health={}");
  EXPECT_EQ(r.rc, 0) << "its own node: " << r.out;
  r = Kubectl(agent, "annotate node gpu-node-2 gpuguardian.io/health={}");
  EXPECT_NE(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("gpu-guardian-agent may only write objects of its own node, not gpu-node-2"),
            std::string::npos)
      << r.out;
  r = Kubectl(agent, "label node gpu-node-1 x=y");
  EXPECT_NE(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("may only change the gpuguardian.io/health annotation"), std::string::npos)
      << r.out;
  r = Kubectl(admin, "get node gpu-node-2 -o jsonpath={.metadata.annotations}");
  EXPECT_EQ(r.out.find("gpuguardian.io/health"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace gg::sim
