// Never orphan a fence, remember repeat offenders, with the real binaries: the
// simulator, the operator, an agent playing a fault script and the kubectl plugin, over
// loopback HTTP. A node fenced under a policy that is then deleted is released once its
// report has been healthy for the policy's healthyFor; the exclude label releases a fenced
// node at once; a node fenced three times within the window stays fenced (Quarantined) until
// `kubectl gpu-guardian release` hands it back, with an Event.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <thread>

#include "api/gpu_node_health.h"
#include "common/clock.h"
#include "e2e/process.h"
#include "k8s/codec.h"
#include "k8s/config.h"
#include "k8s/resource.h"
#include "k8s/rest_client.h"

namespace gg::e2e {
namespace {

using namespace std::chrono_literals;
using Clk = std::chrono::steady_clock;

const std::string kBinDir = GG_BIN_DIR;
const std::string kSourceDir = GG_SOURCE_DIR;

// Cordon on a fatal Xid (3 s window) or a lost GPU; recovered after 3 s healthy; quarantined
// at the third fence within an hour.
constexpr char kFencePolicy[] = R"(apiVersion: gpuguardian.io/v1alpha1
kind: GPUHealthPolicy
metadata: {name: fences}
spec:
  nodeSelector: {matchLabels: {nvidia.com/gpu.present: "true"}}
  rules:
    - {name: fatal-xid, xid: {codes: [79]}, count: 1, window: 3s, action: Cordon}
    - {name: gpu-lost, gpuLost: true, action: Cordon}
  recovery: {healthyFor: 3s, quarantine: {after: 3, within: 1h}}
  safety: {maxUnhealthy: "50%"}
)";

// Agent fault scripts (flow YAML): lost from 1 s to 14 s; lost for good; three short faults,
// each over (window + healthyFor) before the next.
constexpr char kLostThenBack[] =
    "{gpus: 8, timeline: [{at: 1s, gpu: 2, xid: 79}, {at: 1s, gpu: 2, lost: true},"
    " {at: 14s, gpu: 2, clear: true}]}";
constexpr char kLost[] = "{gpus: 8, timeline: [{at: 1s, gpu: 2, lost: true}]}";
constexpr char kFlapping[] =
    "{gpus: 8, timeline: [{at: 1s, gpu: 5, xid: 79}, {at: 13s, gpu: 5, xid: 79},"
    " {at: 25s, gpu: 5, xid: 79}]}";

bool Until(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto end = Clk::now() + limit;
  for (; Clk::now() < end; std::this_thread::sleep_for(100ms)) {
    if (done()) return true;
  }
  return done();
}

class Fences : public ::testing::Test {
 protected:
  void SetUp() override {
    Save("policy.yaml", kFencePolicy);
    sim_ = std::make_unique<Process>(
        std::vector<std::string>{kBinDir + "/gpu-guardian-sim", "--listen", "127.0.0.1:0",
                                 "--scenario", kSourceDir + "/deploy/demo/cluster.yaml", "--apply",
                                 kSourceDir + "/deploy/namespace.yaml", "--apply",
                                 kSourceDir + "/deploy/crds", "--apply", At("policy.yaml"),
                                 "--write-kubeconfig", At("kubeconfig")},
        At("sim.log"));
    ASSERT_NE(sim_->WaitForLog("listening on", 30s), "") << sim_->Log();
    auto cfg = k8s::LoadKubeconfig(At("kubeconfig"));
    ASSERT_TRUE(cfg.ok()) << cfg.status();
    auto c = k8s::RestClient::Create(*cfg, RealClock::Default());
    ASSERT_TRUE(c.ok()) << c.status();
    api_ = std::move(*c);
    op_ = std::make_unique<Process>(
        std::vector<std::string>{kBinDir + "/gpu-guardian-operator", "--kubeconfig",
                                 At("kubeconfig"), "--metrics-addr", "127.0.0.1:0"},
        At("operator.log"));
  }

  std::string At(const std::string& f) const { return dir_.path() + "/" + f; }
  void Save(const std::string& f, const std::string& text) { std::ofstream(At(f)) << text; }

  void Agent(const char* script) {
    Save("script.yaml", script);
    agent_ = std::make_unique<Process>(
        std::vector<std::string>{kBinDir + "/gpu-guardian-agent", "--node-name", kNode,
                                 "--kubeconfig", At("kubeconfig"), "--source", "script", "--script",
                                 At("script.yaml"), "--heartbeat", "30s", "--sweep-interval",
                                 "500ms", "--metrics-addr", "0"},
        At("agent.log"));
  }

  std::optional<k8s::Node> Node() {
    auto body = api_->Get(k8s::kNodes, "", kNode);
    if (!body.ok()) return std::nullopt;
    auto n = k8s::ParseObject<k8s::Node>(*body);
    return n.ok() ? std::optional(*n) : std::nullopt;
  }
  // Our taint, the cordon and the GPUHealthy reason together (separate writes: wait for all).
  bool NodeIs(bool fenced, const std::string& reason = "") {
    auto n = Node();
    if (!n) return false;
    const bool ours = n->FindTaint(api::kTaintKey) != nullptr;
    const auto* c = n->FindCondition(api::kConditionType);
    return n->unschedulable == fenced && ours == fenced &&
           (reason.empty() || (c != nullptr && c->reason == reason));
  }
  int Events(const std::string& reason) {
    k8s::ListOptions lo;
    lo.field_selector = "involvedObject.name=" + std::string(kNode);
    auto body = api_->List(k8s::kEvents, "", lo);
    if (!body.ok()) return -1;
    auto list = k8s::ParseList<k8s::Event>(*body);
    if (!list.ok()) return -1;
    return static_cast<int>(std::count_if(list->items.begin(), list->items.end(),
                                          [&](const k8s::Event& e) { return e.reason == reason; }));
  }
  std::string Logs() { return "--- operator\n" + op_->Log() + "\n--- agent\n" + agent_->Log(); }

  static constexpr char kNode[] = "dgx-4";
  TempDir dir_;
  std::unique_ptr<Process> sim_, op_, agent_;
  std::unique_ptr<k8s::RestClient> api_;
};

TEST_F(Fences, DeletedPolicysFenceIsReleasedAfterItsHealthyFor) {
  Agent(kLostThenBack);
  ASSERT_TRUE(Until([&] { return NodeIs(true, "RulesMatched"); }, 60s)) << Logs();
  ASSERT_TRUE(api_->Delete(k8s::kGpuHealthPolicies, "", "fences").ok());
  // Held while the GPU is still lost, and says why once.
  ASSERT_TRUE(
      Until([&] { return NodeIs(true, "Ungoverned") && Events("NodeUngoverned") == 1; }, 10s))
      << Logs();
  // Back at 14 s: released 3 s (healthyFor) later, plus one pass.
  const auto t0 = Clk::now();
  ASSERT_TRUE(Until([&] { return NodeIs(false, "Ungoverned"); }, 45s)) << Logs();
  std::printf("ungoverned node released %.1f s after the policy was deleted\n",
              std::chrono::duration<double>(Clk::now() - t0).count());
  EXPECT_EQ(Events("NodeUngoverned"), 1);
  // The recorder writes Events on its own thread, after the Node write they describe.
  EXPECT_TRUE(Until([&] { return Events("GPURecovered") >= 1; }, 10s));
}

TEST_F(Fences, ExcludeLabelReleasesAFencedNodeWithinTenSeconds) {
  Agent(kLost);
  ASSERT_TRUE(Until([&] { return NodeIs(true, "RulesMatched"); }, 60s)) << Logs();
  const auto t0 = Clk::now();
  ASSERT_TRUE(api_->Patch(k8s::kNodes, "", kNode, k8s::PatchType::kMerge,
                          R"({"metadata":{"labels":{"gpuguardian.io/exclude":"true"}}})")
                  .ok());
  ASSERT_TRUE(Until([&] { return NodeIs(false, "Excluded"); }, 10s)) << Logs();
  std::printf("exclude label: fences released in %.2f s\n",
              std::chrono::duration<double>(Clk::now() - t0).count());
  EXPECT_TRUE(Until([&] { return Events("NodeReleased") == 1; }, 5s));
  std::this_thread::sleep_for(2s);
  EXPECT_TRUE(NodeIs(false)) << "an excluded node is never fenced again";
}

TEST_F(Fences, ThirdFenceWithinTheWindowQuarantinesUntilReleased) {
  Agent(kFlapping);
  ASSERT_TRUE(Until([&] { return NodeIs(true, "Quarantined"); }, 90s)) << Logs();
  EXPECT_TRUE(Until([&] { return Events("NodeQuarantined") == 1; }, 5s));
  // Healthy again long past window + healthyFor: still held.
  std::this_thread::sleep_for(9s);
  ASSERT_TRUE(NodeIs(true, "Quarantined")) << Logs();
  const std::string cmd = kBinDir + "/kubectl-gpu_guardian --kubeconfig " + At("kubeconfig") +
                          " release " + kNode + " --reason 'GPU 5 reseated' > " + At("rel.out") +
                          " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << std::ifstream(At("rel.out")).rdbuf();
  EXPECT_TRUE(NodeIs(false)) << "handed back by the command itself";
  EXPECT_TRUE(Until([&] { return Events("NodeReleased") == 1; }, 5s));
  std::this_thread::sleep_for(3s);
  EXPECT_TRUE(NodeIs(false)) << "the operator leaves a released node alone: " << Logs();
}

}  // namespace
}  // namespace gg::e2e
