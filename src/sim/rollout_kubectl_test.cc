// `kubectl rollout status` (the real kubectl) against the simulator's workload controllers:
// it reads observedGeneration, updated/ready/available counts and the Progressing condition,
// so it finishes only when the simulated rollout really has. Skipped without kubectl.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "sim/server.h"
#include "sim/test_util.h"
#include "sim/tls.h"

namespace gg::sim {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

class RolloutStatusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists("/usr/bin/kubectl")) GTEST_SKIP() << "kubectl not installed";
    SimOptions o;
    o.time_scale = 30;
    auto s = SimServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    sim_ = std::move(*s);
    dir_ = fs::temp_directory_path() /
           ("gg-sim-rollout-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_ / "cache");
    kubeconfig_ = (dir_ / "kubeconfig").string();
    ASSERT_TRUE(WriteKubeconfig(kubeconfig_, sim_->Url(), "", "admin").ok());
    for (const char* n : {"gpu-a", "gpu-b"})
      ASSERT_TRUE(
          sim_->Insert(
                  {{"apiVersion", "v1"},
                   {"kind", "Node"},
                   {"metadata", {{"name", n}, {"labels", {{"nvidia.com/gpu.present", "true"}}}}},
                   {"status",
                    {{"allocatable",
                      {{"cpu", "8"}, {"memory", "32Gi"}, {"pods", "110"}, {"nvidia.com/gpu", "8"}}},
                     {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}})
              .ok());
  }
  void TearDown() override {
    if (sim_) sim_->Stop();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  CmdResult Kubectl(const std::string& args) {
    return RunCmd("KUBECONFIG=" + kubeconfig_ + " KUBECACHEDIR=" + (dir_ / "cache").string() +
                  " HOME=" + dir_.string() + " timeout 120 /usr/bin/kubectl " + args);
  }
  CmdResult Apply(const std::string& yaml) {
    fs::path f = dir_ / "obj.yaml";
    FILE* out = std::fopen(f.c_str(), "w");
    std::fputs(yaml.c_str(), out);
    std::fclose(out);
    return Kubectl("apply -f " + f.string());
  }
  std::unique_ptr<SimServer> sim_;
  fs::path dir_;
  std::string kubeconfig_;
};

std::string DeploymentYaml(const std::string& image) {
  return R"(apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: web
          image: )" +
         image + R"(
          resources: {requests: {cpu: 100m, nvidia.com/gpu: "1"}, limits: {nvidia.com/gpu: "1"}}
)";
}

TEST_F(RolloutStatusTest, DeploymentRolloutStatusFollowsTheRollout) {
  CmdResult a = Apply(DeploymentYaml("nginx:1"));
  ASSERT_EQ(a.rc, 0) << a.out;
  CmdResult s = Kubectl("rollout status deployment/web --timeout=60s");
  EXPECT_EQ(s.rc, 0) << s.out;
  EXPECT_NE(s.out.find("deployment \"web\" successfully rolled out"), std::string::npos) << s.out;
  // A changed template: a new ReplicaSet; rollout status waits for it and says so.
  a = Apply(DeploymentYaml("nginx:2"));
  ASSERT_EQ(a.rc, 0) << a.out;
  s = Kubectl("rollout status deployment/web --timeout=60s");
  EXPECT_EQ(s.rc, 0) << s.out;
  EXPECT_NE(s.out.find("successfully rolled out"), std::string::npos) << s.out;
  CmdResult rs =
      Kubectl("get rs -l app=web -o jsonpath='{range .items[*]}{.spec.replicas}{\" \"}{end}'");
  EXPECT_EQ(rs.rc, 0) << rs.out;
  EXPECT_TRUE(rs.out == "0 3 " || rs.out == "3 0 ") << rs.out;
  CmdResult hist = Kubectl("rollout history deployment/web");
  EXPECT_EQ(hist.rc, 0) << hist.out;
  EXPECT_NE(hist.out.find("2 "), std::string::npos) << hist.out;
}

TEST_F(RolloutStatusTest, DeploymentThatCannotFitTimesOut) {
  // 20 GPUs per pod: nothing fits; rollout status must not claim success.
  std::string y = DeploymentYaml("nginx:1");
  y.replace(y.find("\"1\"}, limits: {nvidia.com/gpu: \"1\"}"), 35,
            "\"20\"}, limits: {nvidia.com/gpu: \"20\"}");
  CmdResult a = Apply(y);
  ASSERT_EQ(a.rc, 0) << a.out;
  CmdResult s = Kubectl("rollout status deployment/web --timeout=3s");
  EXPECT_NE(s.rc, 0) << s.out;
  EXPECT_NE(s.out.find("Waiting for deployment \"web\" rollout to finish: 0 of 3 updated replicas "
                       "are available"),
            std::string::npos)
      << s.out;
  CmdResult pods =
      Kubectl("get pods -l app=web -o jsonpath='{.items[0].status.conditions[0].message}'");
  EXPECT_NE(pods.out.find("0/2 nodes are available: 2 Insufficient nvidia.com/gpu."),
            std::string::npos)
      << pods.out;
}

TEST_F(RolloutStatusTest, DaemonSetRolloutStatus) {
  CmdResult a = Apply(R"(apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: default}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      nodeSelector: {nvidia.com/gpu.present: "true"}
      containers: [{name: agent, image: agent:1}]
)");
  ASSERT_EQ(a.rc, 0) << a.out;
  CmdResult s = Kubectl("rollout status daemonset/agent --timeout=60s");
  EXPECT_EQ(s.rc, 0) << s.out;
  EXPECT_NE(s.out.find("daemon set \"agent\" successfully rolled out"), std::string::npos) << s.out;
  CmdResult get = Kubectl("get ds agent --no-headers");
  // NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE
  std::string cols;
  for (char c : get.out) {
    if (c == ' ' && !cols.empty() && cols.back() == ' ') continue;
    cols += c;
  }
  EXPECT_EQ(cols.rfind("agent 2 2 2 2 2 ", 0), 0u) << get.out;
}

}  // namespace
}  // namespace gg::sim
