// `kubectl gpu-guardian` run through kubectl (which finds kubectl-gpu_guardian on PATH), as a
// user would, against the simulator: kubectl's global flags after the command, -o formats, an
// unknown command, and `status` failing with the fix when the CRDs are missing or no operator
// holds a fresh Lease; the brake and held-back nodes shown; POLICY agreeing with WHY.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/time_util.h"
#include "docs/harness.h"

namespace gg::docs_test {
namespace {

using nlohmann::json;

class PluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveKubectl()) GTEST_SKIP() << "kubectl not installed";
    sim_ = std::make_unique<Sim>(dir_.path(), std::vector<std::string>{"--nodes", "2"});
    ASSERT_TRUE(sim_->ready()) << sim_->Log();
  }
  Ran Kubectl(const std::string& args) {
    return Sh("kubectl --kubeconfig " + sim_->kubeconfig() + " " + args, dir_.path());
  }
  // The plugin exactly as typed by a user.
  Ran Plugin(const std::string& args) { return Sh("kubectl gpu-guardian " + args, dir_.path()); }
  std::string KC() const { return sim_->kubeconfig(); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_.path() + "/" + name) << text;
  }
  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }

  // The operator's Lease as a running operator keeps it (renewed `age` ago).
  // (A long duration for a fresh Lease keeps a slow machine from seeing it expire mid-test.)
  void PutLease(const std::string& ns, std::chrono::seconds age, int duration_s = 3600) {
    const std::string renew = FormatRfc3339Micro(std::chrono::system_clock::now() - age);
    Write("lease.yaml",
          "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + ns +
              "\n---\napiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: "
              "gpu-guardian-operator\n  namespace: " +
              ns + "\nspec:\n  holderIdentity: op-1\n  leaseDurationSeconds: " +
              std::to_string(duration_s) +
              "\n"
              "  renewTime: \"" +
              renew + "\"\n");
    auto r = Kubectl("apply -f " + Path("lease.yaml"));
    ASSERT_EQ(r.rc, 0) << r.err;
  }
  void InstallCrds() {
    auto r = Kubectl("apply -f " + kSrc + "/deploy/crds/");
    ASSERT_EQ(r.rc, 0) << r.err;
  }

  e2e::TempDir dir_;
  std::unique_ptr<Sim> sim_;
};

TEST_F(PluginTest, UsageUnknownCommandAndNoCommand) {
  auto help = Plugin("--help");
  EXPECT_EQ(help.rc, 0);
  EXPECT_NE(help.out.find("Usage: kubectl gpu-guardian"), std::string::npos) << help.out;
  EXPECT_EQ(help.out.find(kBin), std::string::npos) << "usage shows the binary's path";

  auto unknown = Plugin("stauts --kubeconfig " + KC());
  EXPECT_NE(unknown.rc, 0);
  EXPECT_NE(unknown.err.find("unknown command \"stauts\""), std::string::npos) << unknown.err;
  EXPECT_NE(unknown.err.find("status, explain, timeline"), std::string::npos) << unknown.err;

  auto none = Plugin("--kubeconfig " + KC());
  EXPECT_NE(none.rc, 0);
  EXPECT_NE(none.err.find("status, explain, timeline"), std::string::npos) << none.err;
}

TEST_F(PluginTest, StatusWithoutCrdsFailsWithTheFix) {
  auto r = Plugin("status --kubeconfig " + KC());
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("kubectl apply -f deploy/crds/"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("gpuguardian.io"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("NotEvaluated"), std::string::npos) << "no table of guesses: " << r.out;
}

TEST_F(PluginTest, StatusWithoutALeadingOperatorFails) {
  InstallCrds();
  auto none = Plugin("status --kubeconfig " + KC());
  EXPECT_EQ(none.rc, 1) << none.out << none.err;
  EXPECT_NE(none.err.find("no operator is leading"), std::string::npos) << none.err;

  PutLease("gpu-guardian", std::chrono::seconds(600), 15);  // operator gone for 10 minutes
  auto stale = Plugin("status --kubeconfig " + KC());
  EXPECT_EQ(stale.rc, 1) << stale.err;
  EXPECT_NE(stale.err.find("last renewed"), std::string::npos) << stale.err;
  EXPECT_NE(stale.err.find("op-1"), std::string::npos) << stale.err;
}

TEST_F(PluginTest, GlobalFlagsAnywhereAndOutputFormats) {
  InstallCrds();
  PutLease("gpu-guardian-system", std::chrono::seconds(1));
  // The issue's contract: the kubeconfig flag after the command.
  auto after = Plugin("status --kubeconfig " + KC());
  EXPECT_EQ(after.rc, 0) << after.err;
  EXPECT_NE(after.out.find("gpu-node-00000"), std::string::npos) << after.out;
  auto eq_form = Plugin("status --kubeconfig=" + KC() + " -o json --request-timeout=5s");
  ASSERT_EQ(eq_form.rc, 0) << eq_form.err;
  json j = json::parse(eq_form.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << eq_form.out;
  EXPECT_EQ(j["items"].size(), 2u);
  EXPECT_EQ(j["operator"]["holder"], "op-1");
  auto before = Plugin("--kubeconfig " + KC() + " -n gpu-guardian-system -o yaml status");
  EXPECT_EQ(before.rc, 0) << before.err;
  EXPECT_NE(before.out.find("kind: GPUNodeStatusList"), std::string::npos) << before.out;
  EXPECT_NE(before.out.find("node: gpu-node-00001"), std::string::npos) << before.out;
  // -n names the Lease's namespace: a wrong one is a clear failure.
  auto wrong_ns = Plugin("status --kubeconfig " + KC() + " --namespace nowhere");
  EXPECT_EQ(wrong_ns.rc, 1);
  EXPECT_NE(wrong_ns.err.find("namespace nowhere"), std::string::npos) << wrong_ns.err;
  // $KUBECONFIG and --context as kubectl reads them.
  auto ctx = Sh("KUBECONFIG=" + KC() + " kubectl gpu-guardian status --context no-such-context",
                dir_.path());
  EXPECT_NE(ctx.rc, 0);
  EXPECT_NE(ctx.err.find("no-such-context"), std::string::npos) << ctx.err;
  auto env = Sh("KUBECONFIG=" + KC() + " kubectl gpu-guardian status -o wide", dir_.path());
  EXPECT_EQ(env.rc, 0) << env.err;
  EXPECT_NE(env.out.find("REPORTED"), std::string::npos) << env.out;
  auto bad_output = Plugin("status --kubeconfig " + KC() + " -o xml");
  EXPECT_NE(bad_output.rc, 0);
}

TEST_F(PluginTest, BrakeAndHeldBackNodesAndPolicyColumn) {
  InstallCrds();
  PutLease("gpu-guardian", std::chrono::seconds(1));
  Write("policy.yaml", R"(apiVersion: gpuguardian.io/v1alpha1
kind: GPUHealthPolicy
metadata: {name: fleet}
spec:
  rules:
  - {name: gpu-lost, gpuLost: true, action: Drain}
)");
  ASSERT_EQ(Kubectl("apply -f " + Path("policy.yaml")).rc, 0);
  const std::string now = FormatRfc3339(std::chrono::system_clock::now());
  auto st = Kubectl(
      "patch gpuhealthpolicy fleet --subresource=status --type=merge -p '{\"status\":"
      "{\"conditions\":[{\"type\":\"BrakeEngaged\",\"status\":\"True\",\"reason\":"
      "\"MaxUnhealthy\",\"message\":\"1 of 2 nodes fenced; maxUnhealthy 50% reached\","
      "\"lastTransitionTime\":\"" +
      now + "\"}]}}'");
  ASSERT_EQ(st.rc, 0) << st.err;
  // What the operator writes for a node it holds back: the verdict condition and the record.
  const std::string long_reason =
      "brake: maxUnhealthy 50% reached (1 of 2 nodes fenced); this node waits until a fenced "
      "node recovers or the limit is raised";
  auto cond = Kubectl(
      "patch node gpu-node-00001 --subresource=status --type=merge -p '{\"status\":"
      "{\"conditions\":[{\"type\":\"GPUHealthy\",\"status\":\"False\",\"reason\":"
      "\"RulesMatched\",\"message\":\"GPU 3: lost [policy fleet]\",\"lastTransitionTime\":\"" +
      now + "\"}]}}'");
  ASSERT_EQ(cond.rc, 0) << cond.err;
  auto ann =
      Kubectl("annotate node gpu-node-00001 'gpuguardian.io/remediation={\"v\":1,\"skipped\":\"" +
              long_reason + "\"}'");
  ASSERT_EQ(ann.rc, 0) << ann.err;

  auto r = Plugin("status --kubeconfig " + KC());
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("Brake engaged on policy fleet: 1 of 2 nodes fenced"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("gpu-node-00001: " + long_reason), std::string::npos)
      << "held-back reason in full: " << r.out;
  EXPECT_NE(r.out.find("held-back"), std::string::npos) << r.out;
  // POLICY says what WHY's verdict came from (the record names no policy here).
  std::istringstream lines(r.out);
  bool row_seen = false;
  for (std::string l; std::getline(lines, l);) {
    if (l.rfind("gpu-node-00001", 0) != 0) continue;
    row_seen = true;
    EXPECT_NE(l.find(" fleet "), std::string::npos) << l;
    EXPECT_EQ(l.find("[policy"), std::string::npos) << "POLICY has its own column: " << l;
  }
  EXPECT_TRUE(row_seen) << r.out;
}

// `explain` judges a report's freshness as the operator does: the later of the report's
// heartbeatTime (written only when facts change) and the agent's heartbeat Lease renewTime.
TEST_F(PluginTest, ExplainShowsTheAgentLeaseHeartbeat) {
  InstallCrds();
  const auto now = std::chrono::system_clock::now();
  const std::string old = FormatRfc3339Micro(now - std::chrono::hours(4));
  Write("report.yaml",
        "apiVersion: gpuguardian.io/v1alpha1\nkind: GPUNodeHealth\nmetadata: {name: "
        "gpu-node-00001}\n");
  ASSERT_EQ(Kubectl("apply -f " + Path("report.yaml")).rc, 0);
  auto st = Kubectl(
      "patch gnh gpu-node-00001 --subresource=status --type=merge -p '{\"status\":{\"nodeName\":"
      "\"gpu-node-00001\",\"agentVersion\":\"t\",\"observedAt\":\"" +
      old + "\",\"heartbeatTime\":\"" + old + "\",\"expectedGPUs\":0,\"gpus\":[]}}'");
  ASSERT_EQ(st.rc, 0) << st.err;

  auto before = Plugin("explain gpu-node-00001 --kubeconfig " + KC());
  ASSERT_EQ(before.rc, 0) << before.err;
  EXPECT_NE(before.out.find("heartbeat 4h0m ago (the report's; no agent Lease found)"),
            std::string::npos)
      << before.out;

  const std::string renew = FormatRfc3339Micro(now - std::chrono::seconds(5));
  Write("agent-lease.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: gpu-guardian}\n---\n"
        "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n"
        "  name: gpu-guardian-agent-gpu-node-00001\n  namespace: gpu-guardian\n"
        "spec:\n  holderIdentity: gpu-node-00001\n  leaseDurationSeconds: 900\n"
        "  renewTime: \"" +
            renew + "\"\n");
  ASSERT_EQ(Kubectl("apply -f " + Path("agent-lease.yaml")).rc, 0);
  auto after = Plugin("explain gpu-node-00001 --kubeconfig " + KC());
  ASSERT_EQ(after.rc, 0) << after.err;
  EXPECT_NE(after.out.find("observed 4h0m ago"), std::string::npos) << after.out;
  EXPECT_NE(after.out.find("ago (Lease gpu-guardian/gpu-guardian-agent-gpu-node-00001)"),
            std::string::npos)
      << after.out;
  EXPECT_EQ(after.out.find("heartbeat 4h"), std::string::npos) << after.out;
}

}  // namespace
}  // namespace gg::docs_test
