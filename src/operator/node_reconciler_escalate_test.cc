// NodeReconciler and remediation.escalate on the fakes: after the drain the remediation object
// exists (once), the record says so, and recovery takes it away; a failed create changes
// nothing and is retried.
#include <gtest/gtest.h>

#include "api/test_reports.h"
#include "events/fake.h"
#include "metrics/registry.h"
#include "operator/fakes.h"
#include "operator/node_reconciler.h"

namespace gg::op {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

struct EscalateWorld {
  FakeClock clock{WallTime(seconds(1'800'000'000))};
  FakeCluster cluster;
  FakeDrains drains;
  FakeEscalation escalation;
  events::FakeRecorder recorder;
  metrics::Registry registry;
  OperatorMetrics metrics{registry};
  FleetIndex index;
  std::unique_ptr<NodeReconciler> reconciler;

  EscalateWorld() {
    api::GpuHealthPolicy p;
    p.name = "gpu";
    p.spec = api::DefaultPolicySpec();
    p.spec.node_selector = {};
    api::Rule r;
    r.name = "fatal-xid";
    r.xid = api::XidMatcher{{}, {79}, {}, false};
    r.action = api::Action::kDrain;
    p.spec.rules = {r};
    p.spec.safety.max_unhealthy = api::IntOrPercent{100, true};
    p.spec.recovery.healthy_for = minutes(2);
    p.spec.remediation.escalate = api::EscalationTemplate{
        "remediation.example.com/v1alpha1", "RebootRemediationTemplate", "ops", "reboot"};
    cluster.PutPolicy(p);
    k8s::Node n;
    n.meta.name = "gpu-1";
    n.meta.uid = "uid-gpu-1";
    cluster.PutNode(n);
    index.OnNode(*cluster.Node("gpu-1"));
    reconciler = std::make_unique<NodeReconciler>(NodeReconcilerDeps{
        cluster, cluster, recorder, drains, index, metrics, clock, [](const std::string&) {},
        Logger().WithName("node-reconciler"), nullptr, &escalation});
  }
  void Report(bool xid79) {
    auto r = api::testing::HealthyReport("gpu-1", clock.Now(), 8);
    if (xid79) api::testing::AddXid(r, 79, 3);
    cluster.PutReport("gpu-1", r);
  }
  Status Pass() {
    auto r = reconciler->Reconcile("gpu-1", {});
    index.OnNode(*cluster.Node("gpu-1"));
    return r.status();
  }
  std::optional<remediation::RemediationRecord> Record() {
    auto a = cluster.Node("gpu-1")->meta.annotations.Get(api::kRemediationAnnotation);
    if (!a) return std::nullopt;
    auto r = remediation::DecodeRecord(*a);
    return r.ok() ? std::optional(*r) : std::nullopt;
  }
  // Fenced (a pass, again harmless when already fenced), drained (Done), and the pass that
  // records the drain.
  Status FenceAndDrain() {
    Report(true);
    GG_RETURN_IF_ERROR(Pass());
    remediation::DrainResult d;
    d.state = remediation::DrainState::kDone;
    d.message = "evicted 1 pod(s)";
    drains.Finish("gpu-1", d);
    clock.Advance(seconds(30));
    return Pass();
  }
};

TEST(NodeReconcilerEscalate, ObjectAfterTheDrainOnceThenGoneOnRecovery) {
  EscalateWorld w;
  w.escalation.PutTemplate("ops", "reboot");
  w.Report(true);
  ASSERT_TRUE(w.Pass().ok());
  EXPECT_FALSE(w.escalation.Get("ops", "gpu-1")) << "not before the drain ends";
  ASSERT_TRUE(w.FenceAndDrain().ok());
  auto obj = w.escalation.Get("ops", "gpu-1");
  ASSERT_TRUE(obj);
  EXPECT_EQ(obj->kind, "RebootRemediation");
  EXPECT_EQ(obj->template_name, "reboot");
  EXPECT_EQ(obj->owner.policy, "gpu");
  ASSERT_TRUE(w.Record());
  EXPECT_EQ(obj->owner.occurrence, w.Record()->occurrence);
  ASSERT_TRUE(w.Record()->escalation);
  EXPECT_EQ(w.Record()->escalation->name, "gpu-1");
  EXPECT_EQ(w.recorder.Count(events::kRemediationEscalated, "gpu-1"), 1);
  ASSERT_TRUE(w.Pass().ok());
  EXPECT_EQ(w.escalation.creates, 1) << "one per occurrence";
  w.clock.Advance(minutes(1));
  w.Report(false);
  ASSERT_TRUE(w.Pass().ok());
  EXPECT_TRUE(w.escalation.Get("ops", "gpu-1")) << "held until healthyFor";
  w.clock.Advance(minutes(3));
  w.Report(false);
  ASSERT_TRUE(w.Pass().ok());
  EXPECT_FALSE(w.escalation.Get("ops", "gpu-1"));
  EXPECT_FALSE(w.Record()->escalation);
  EXPECT_FALSE(w.Record()->Active());
}

TEST(NodeReconcilerEscalate, MissingTemplateFailsThePassAndIsRetried) {
  EscalateWorld w;
  Status s = w.FenceAndDrain();
  EXPECT_TRUE(IsNotFound(s)) << s;
  EXPECT_FALSE(w.escalation.Get("ops", "gpu-1"));
  ASSERT_TRUE(w.Record());
  EXPECT_FALSE(w.Record()->escalation) << "the record claims only what exists";
  w.escalation.PutTemplate("ops", "reboot");
  ASSERT_TRUE(w.Pass().ok());
  EXPECT_TRUE(w.escalation.Get("ops", "gpu-1"));
  EXPECT_TRUE(w.Record()->escalation);
}

}  // namespace
}  // namespace gg::op
