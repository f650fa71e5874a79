// End-to-end: gpu-guardian-sim + one gpu-guardian-agent per node (scripted faults) +
// gpu-guardian-operator, as real processes over loopback HTTP — the same binaries and the
// same deploy/ CRDs a cluster gets. Asserts world state: taints, cordons, conditions, Events,
// evictions, recovery; and that the kubectl plugin reads it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
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

using nlohmann::json;
using namespace std::chrono_literals;

const std::string kBin = GG_BIN_DIR;
const std::string kSrc = GG_SOURCE_DIR;

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

// Polls `fn` until it returns true or the timeout passes.
bool Eventually(const std::function<bool()>& fn, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (fn()) return true;
    std::this_thread::sleep_for(200ms);
  }
  return fn();
}

constexpr char kPolicy[] = R"(apiVersion: gpuguardian.io/v1alpha1
kind: GPUHealthPolicy
metadata:
  name: e2e
spec:
  nodeSelector:
    matchLabels: {nvidia.com/gpu.present: "true"}
  rules:
    - name: fatal-xid
      xid: {catalogActions: [RESET_GPU, RESTART_BM], ignore: [13, 31, 43, 45, 68]}
      count: 1
      window: 10s
      action: Drain
    - {name: gpu-lost, gpuLost: true, action: Drain}
  unknown: {after: 5m, action: Event}
  remediation:
    taint: {effect: NoSchedule}
    drain: {scope: GPUPods, timeout: 2m}
  recovery: {automatic: true, healthyFor: 5s}
  safety: {maxUnhealthy: "50%", maxNodesPerHour: 20, maxConcurrentDrains: 2}
)";

constexpr char kBadNodeScript[] = R"(gpus: 8
product: NVIDIA H100 80GB HBM3
timeline:
  - {at: 2s, gpu: 3, xid: 79}
  - {at: 2s, gpu: 3, lost: true}
  - {at: 14s, gpu: 3, clear: true}
)";

constexpr char kAppXidScript[] = R"(gpus: 8
product: NVIDIA H100 80GB HBM3
timeline:
  - {at: 1s, gpu: 1, xid: 13}
  - {at: 2s, gpu: 1, xid: 13}
  - {at: 3s, gpu: 1, xid: 43}
)";

constexpr char kHealthyScript[] = R"(gpus: 8
product: NVIDIA H100 80GB HBM3
timeline: []
)";

class E2E : public ::testing::Test {
 protected:
  virtual std::vector<std::string> ExtraSimArgs() const { return {}; }

  void SetUp() override {
    dir_ = std::make_unique<TempDir>();
    WriteFile(Path("policy.yaml"), kPolicy);
    std::vector<std::string> args{kBin + "/gpu-guardian-sim",
                                  "--listen",
                                  "127.0.0.1:0",
                                  "--scenario",
                                  kSrc + "/deploy/demo/cluster.yaml",
                                  "--apply",
                                  kSrc + "/deploy/namespace.yaml",
                                  "--apply",
                                  kSrc + "/deploy/crds",
                                  "--apply",
                                  Path("policy.yaml"),
                                  "--write-kubeconfig",
                                  Path("kubeconfig")};
    for (const auto& a : ExtraSimArgs()) args.push_back(a);
    sim_ = std::make_unique<Process>(args, Path("sim.log"));
    ASSERT_TRUE(sim_->Started());
    ASSERT_NE(sim_->WaitForLog("listening on", 30s), "") << sim_->Log();
    auto cfg = k8s::LoadKubeconfig(Path("kubeconfig"));
    ASSERT_TRUE(cfg.ok()) << cfg.status();
    auto client = k8s::RestClient::Create(*cfg, RealClock::Default());
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }

  std::string Path(const std::string& name) const { return dir_->path() + "/" + name; }

  // Kubeconfig files per identity; the admin one is written by the simulator.
  virtual std::string OperatorKubeconfig() { return Path("kubeconfig"); }
  virtual std::string AgentKubeconfig() { return Path("kubeconfig"); }
  virtual std::string LeaseNamespace() const { return "default"; }

  std::unique_ptr<Process> StartOperator(const std::string& id) {
    return std::make_unique<Process>(
        std::vector<std::string>{kBin + "/gpu-guardian-operator", "--kubeconfig",
                                 OperatorKubeconfig(), "--metrics-addr", "127.0.0.1:0",
                                 "--leader-elect", "--leader-election-namespace", LeaseNamespace(),
                                 "--leader-election-identity", id},
        Path("operator-" + id + ".log"));
  }

  std::unique_ptr<Process> StartAgent(const std::string& node, const char* script) {
    WriteFile(Path(node + ".yaml"), script);
    return std::make_unique<Process>(
        std::vector<std::string>{kBin + "/gpu-guardian-agent", "--node-name", node, "--kubeconfig",
                                 AgentKubeconfig(), "--source", "script", "--script",
                                 Path(node + ".yaml"), "--heartbeat", "30s", "--sweep-interval",
                                 "500ms", "--metrics-addr", "0"},
        Path("agent-" + node + ".log"));
  }

  StatusOr<k8s::Node> GetNode(const std::string& name) {
    GG_ASSIGN_OR_RETURN(auto body, client_->Get(k8s::kNodes, "", name));
    return k8s::ParseObject<k8s::Node>(body);
  }

  // Pods on `node` that request GPUs and are not terminating.
  int GpuPodsOn(const std::string& node) {
    k8s::ListOptions lo;
    lo.field_selector = "spec.nodeName=" + node;
    auto body = client_->List(k8s::kPods, "", lo);
    if (!body.ok()) return -1;
    auto list = k8s::ParseList<k8s::Pod>(*body);
    if (!list.ok()) return -1;
    int n = 0;
    for (const auto& p : list->items)
      if (p.gpu_requests > 0 && !p.meta.deletion_timestamp && !p.IsFinished()) ++n;
    return n;
  }

  std::vector<std::string> EventReasonsFor(const std::string& node) {
    k8s::ListOptions lo;
    lo.field_selector = "involvedObject.name=" + node;
    std::vector<std::string> out;
    auto body = client_->List(k8s::kEvents, "", lo);
    if (!body.ok()) return out;
    auto list = k8s::ParseList<k8s::Event>(*body);
    if (!list.ok()) return out;
    for (const auto& e : list->items) out.push_back(e.reason);
    return out;
  }

  std::string Logs() {
    std::string all = "--- sim\n" + sim_->Log();
    for (const char* f : {"operator-a.log", "agent-dgx-4.log", "agent-dgx-1.log"}) {
      std::ifstream in(Path(f));
      std::stringstream ss;
      ss << in.rdbuf();
      all += std::string("--- ") + f + "\n" +
             ss.str().substr(ss.str().size() > 6000 ? ss.str().size() - 6000 : 0);
    }
    return all;
  }

  void RunFatalXid();
  std::unique_ptr<TempDir> dir_;
  std::unique_ptr<Process> sim_;
  std::unique_ptr<k8s::RestClient> client_;
  friend void RunFatalXidScenario(E2E& t);
};

void RunFatalXidScenario(E2E& t);

TEST_F(E2E, FatalXidFencesDrainsAndRecoversTheNodeOnly) { RunFatalXidScenario(*this); }

// The same story with the simulator enforcing RBAC from deploy/rbac/: the operator and the
// agents authenticate as their service accounts, so a verb missing from the shipped roles
// fails this test.
class E2ERbac : public E2E {
 protected:
  std::vector<std::string> ExtraSimArgs() const override {
    return {"--authz",      "rbac",
            "--rbac",       kSrc + "/deploy/rbac/operator.yaml",
            "--rbac",       kSrc + "/deploy/rbac/agent.yaml",
            "--user-token", "op-token=system:serviceaccount:gpu-guardian:gpu-guardian-operator",
            "--user-token", "agent-token=system:serviceaccount:gpu-guardian:gpu-guardian-agent"};
  }
  // Written once, atomically: every agent start asks for the file, and rewriting it in place
  // while an earlier agent was reading it gave that agent a half-written kubeconfig ("not a
  // YAML mapping"), a flake of the RBAC tests.
  std::string WithToken(const std::string& name, const std::string& token) {
    if (std::filesystem::exists(Path(name))) return Path(name);
    std::ifstream in(Path("kubeconfig"));
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    auto pos = text.find("token: ");
    if (pos != std::string::npos) {
      auto eol = text.find('\n', pos);
      text.replace(pos, eol - pos, "token: " + token);
    }
    WriteFile(Path(name + ".tmp"), text);
    std::filesystem::rename(Path(name + ".tmp"), Path(name));
    return Path(name);
  }
  std::string OperatorKubeconfig() override { return WithToken("kubeconfig-operator", "op-token"); }
  std::string AgentKubeconfig() override { return WithToken("kubeconfig-agent", "agent-token"); }
  std::string LeaseNamespace() const override { return "gpu-guardian"; }
};

TEST_F(E2ERbac, ShippedRbacIsSufficient) { RunFatalXidScenario(*this); }

// Permissions deploy/rbac grants that this story does not use, each with the test that
// does. `permission` is written as `kubectl auth can-i` would: "verb resource[/sub][.group]";
// "*" as the verb allows every verb on that resource.
struct UnusedGrant {
  const char* user;  // service account name
  const char* permission;
  const char* exercised_by;
};
constexpr UnusedGrant kAllowedUnused[] = {
    // DRA device-level remediation: the e2e cluster runs no DRA driver, so which of these the
    // story touches depends on discovery; the DRA path runs against the simulator.
    {"gpu-guardian-operator", "* resourceslices.resource.k8s.io", "src/operator/dra_sim_test.cc"},
    {"gpu-guardian-operator", "* resourceclaims.resource.k8s.io", "src/operator/dra_sim_test.cc"},
    {"gpu-guardian-operator", "* devicetaintrules.resource.k8s.io", "src/operator/dra_sim_test.cc"},
    // Aggregating a repeated Event patches it; the story emits no repeats.
    {"gpu-guardian-operator", "patch events",
     "src/operator/operator_sim_test.cc OperatorSimTest.RecorderAggregatesRepeatsIntoOneEvent"},
    // The agent renews its Lease only after a heartbeat interval (30 s here) without a change;
    // the story may end before one.
    {"gpu-guardian-agent", "update leases.coordination.k8s.io",
     "src/agent/agent_sim_test.cc AgentSimTest.HeartbeatRenewsTheNodeLeaseNotTheReport"},
    // --publish annotation (the Node annotation of the original gpu-guardian-operator design); the
    // story publishes resources.
    {"gpu-guardian-agent", "patch nodes",
     "src/agent/agent_sim_test.cc AgentSimTest.ReportCreatedWithOwnerAndUpdatedOnlyOnChange"},
};

bool Allowlisted(const std::string& sa, const std::string& permission, const UnusedGrant& g) {
  if (sa != g.user) return false;
  std::string want = g.permission;
  if (want.rfind("* ", 0) == 0)
    return permission.substr(permission.find(' ') + 1) == want.substr(2);
  return permission == want;
}

std::string CanIString(const json& p) {
  std::string s = p.value("verb", "") + " " + p.value("resource", "");
  if (!p.value("subresource", "").empty()) s += "/" + p.value("subresource", "");
  if (!p.value("apiGroup", "").empty()) s += "." + p.value("apiGroup", "");
  return s;
}

// The second half of least privilege: after the whole story, every permission deploy/rbac
// grants was used by someone, or it is allowlisted above with the test that uses it.
TEST_F(E2ERbac, NoGrantedPermissionGoesUnused) {
  RunFatalXidScenario(*this);
  if (HasFatalFailure()) return;
  auto body = client_->RawGet("/_sim/rbac");
  ASSERT_TRUE(body.ok()) << body.status();
  json usage = json::parse(*body, nullptr, false);
  ASSERT_TRUE(usage.is_object()) << *body;
  ASSERT_EQ(usage["users"].size(), 2u) << *body;
  std::vector<std::string> unexpected, allowlisted_but_used;
  for (const auto& u : usage["users"]) {
    std::string user = u.value("user", "");
    std::string sa = user.substr(user.rfind(':') + 1);
    EXPECT_FALSE(u["used"].empty()) << user << " made no authorized request at all";
    for (const auto& p : u["grantedButUnused"]) {
      std::string perm = CanIString(p);
      bool allowed = std::any_of(std::begin(kAllowedUnused), std::end(kAllowedUnused),
                                 [&](const UnusedGrant& g) { return Allowlisted(sa, perm, g); });
      if (!allowed) unexpected.push_back(sa + ": " + perm);
    }
    // Exact entries the story did use can leave the allowlist (a hint, not a failure: usage
    // of the DRA group follows discovery).
    for (const auto& p : u["used"]) {
      std::string perm = CanIString(p);
      for (const auto& g : kAllowedUnused)
        if (sa == g.user && perm == g.permission) allowlisted_but_used.push_back(sa + ": " + perm);
    }
  }
  std::string msg;
  for (const auto& x : unexpected) msg += "\n  " + x;
  EXPECT_TRUE(unexpected.empty())
      << "granted by deploy/rbac but never used (remove it, or allowlist it with its test):" << msg;
  for (const auto& x : allowlisted_but_used)
    std::printf("allowlisted as unused, but the story used it: %s\n", x.c_str());
}

void RunFatalXidScenario(E2E& t) { t.RunFatalXid(); }

void E2E::RunFatalXid() {
  auto op = StartOperator("a");
  ASSERT_TRUE(op->Started());
  int gpu_pods_before = GpuPodsOn("dgx-4");
  ASSERT_GT(gpu_pods_before, 0);
  auto bad = StartAgent("dgx-4", kBadNodeScript);
  auto noisy = StartAgent("dgx-1", kAppXidScript);
  auto fine = StartAgent("dgx-3", kHealthyScript);

  // Reports are published as GPUNodeHealth objects owned by their Node.
  ASSERT_TRUE(Eventually([&] { return client_->Get(k8s::kGpuNodeHealths, "", "dgx-3").ok(); }, 60s))
      << Logs();

  // The Xid 79 node gets our taint, a cordon and the GPUHealthy=False condition. The taint and
  // cordon (spec) and the condition (status subresource) are two writes, as with any controller,
  // so a reader may see one before the other: wait for the whole state.
  ASSERT_TRUE(Eventually(
      [&] {
        auto n = GetNode("dgx-4");
        if (!n.ok() || !n->unschedulable || n->FindTaint(api::kTaintKey) == nullptr) return false;
        const k8s::NodeCondition* c = n->FindCondition(api::kConditionType);
        return c != nullptr && c->status == "False";
      },
      60s))
      << Logs();
  auto n = GetNode("dgx-4");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->FindTaint(api::kTaintKey)->effect, "NoSchedule");

  // Its GPU pods are evicted (the PDB paces the inference ones).
  EXPECT_TRUE(Eventually([&] { return GpuPodsOn("dgx-4") == 0; }, 90s)) << Logs();

  // The application-Xid node is left alone.
  auto quiet = GetNode("dgx-1");
  ASSERT_TRUE(quiet.ok());
  EXPECT_FALSE(quiet->unschedulable);
  EXPECT_EQ(quiet->FindTaint(api::kTaintKey), nullptr);

  // The GPU comes back (script "clear"); after healthyFor the node is recovered.
  EXPECT_TRUE(Eventually(
      [&] {
        auto n2 = GetNode("dgx-4");
        if (!n2.ok()) return false;
        const k8s::NodeCondition* c = n2->FindCondition(api::kConditionType);
        return !n2->unschedulable && n2->FindTaint(api::kTaintKey) == nullptr && c &&
               c->status == "True";
      },
      90s))
      << Logs();

  // Events are written by the operator's recorder after the Node write that they describe (as
  // client-go's broadcaster does), so a reader can see the uncordon before its Event: wait.
  std::vector<std::string> reasons;
  auto has = [&](const char* r) {
    return std::find(reasons.begin(), reasons.end(), r) != reasons.end();
  };
  Eventually(
      [&] {
        reasons = EventReasonsFor("dgx-4");
        return has("GPUUnhealthy") && has("NodeCordoned") &&
               (has("GPURecovered") || has("NodeUncordoned"));
      },
      30s);
  EXPECT_TRUE(has("GPUUnhealthy"));
  EXPECT_TRUE(has("NodeCordoned"));
  EXPECT_TRUE(has("GPURecovered") || has("NodeUncordoned"));

  // The plugin sees the same world as the Node's condition.
  auto now_node = GetNode("dgx-4");
  ASSERT_TRUE(now_node.ok());
  const k8s::NodeCondition* now_cond = now_node->FindCondition(api::kConditionType);
  ASSERT_NE(now_cond, nullptr);
  std::string want_state = now_cond->status == "True"    ? "Healthy"
                           : now_cond->status == "False" ? "Unhealthy"
                                                         : "Unknown";
  std::string out_path = Path("status.json");
  std::string cmd = kBin + "/kubectl-gpu_guardian --kubeconfig " + Path("kubeconfig") +
                    " status -o json > " + out_path;
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream in(out_path);
  json status = json::parse(in, nullptr, false);
  ASSERT_TRUE(status.is_object());
  bool found = false;
  for (const auto& item : status["items"])
    if (item["node"] == "dgx-4") {
      found = true;
      EXPECT_EQ(item["state"], want_state);
    }
  EXPECT_TRUE(found);
}

TEST_F(E2E, OperatorExitsCleanlyOnSigterm) {
  auto op = StartOperator("a");
  ASSERT_TRUE(op->Started());
  // Wait until it has taken the lease, then stop it: it must exit 0 promptly.
  ASSERT_TRUE(Eventually(
      [&] {
        auto body = client_->List(k8s::kLeases, "default");
        return body.ok() && body->find("holderIdentity") != std::string::npos &&
               body->find("\"a\"") != std::string::npos;
      },
      60s))
      << op->Log();
  EXPECT_EQ(op->Stop(SIGTERM, 10s), 0) << op->Log();
}

}  // namespace
}  // namespace gg::e2e
