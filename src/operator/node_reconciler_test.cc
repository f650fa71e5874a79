// NodeReconciler on the fakes (fakes.h): table-driven passes from one world to the next,
// asserting the world afterwards (the Node's taints, cordon, record and condition, the Events,
// the drains, the log), never the calls made.
#include "operator/node_reconciler.h"

#include <gtest/gtest.h>

#include "api/test_reports.h"
#include "events/fake.h"
#include "metrics/registry.h"
#include "operator/fakes.h"

namespace gg::op {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

class LogCapture final : public LogSink {
 public:
  void Write(std::string_view line) override {
    std::scoped_lock lock(mu_);
    lines_.emplace_back(line);
  }
  // The first line containing every one of `parts`, or "".
  std::string Find(std::initializer_list<std::string_view> parts) const {
    std::scoped_lock lock(mu_);
    for (const auto& l : lines_) {
      bool all = true;
      for (auto p : parts) all = all && l.find(p) != std::string::npos;
      if (all) return l;
    }
    return "";
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

api::GpuHealthPolicy Policy(api::Action action) {
  api::GpuHealthPolicy p;
  p.name = "default";
  p.spec = api::DefaultPolicySpec();
  p.spec.node_selector = {};
  api::Rule r;
  r.name = "fatal-xid";
  r.xid = api::XidMatcher{{}, {79}, {}, false};
  r.action = action;
  p.spec.rules = {r};
  p.spec.safety.max_unhealthy = api::IntOrPercent{100, true};
  return p;
}

struct World {
  FakeClock clock{WallTime(seconds(1'800'000'000))};
  FakeCluster cluster;
  FakeDrains drains;
  FakeDra dra;
  FakeEscalation escalation;
  events::FakeRecorder recorder;
  metrics::Registry registry;
  OperatorMetrics metrics{registry};
  FleetIndex index;
  std::shared_ptr<LogCapture> logs = std::make_shared<LogCapture>();
  std::unique_ptr<NodeReconciler> reconciler;
  bool with_dra = false;

  void Start() {
    reconciler = std::make_unique<NodeReconciler>(NodeReconcilerDeps{
        cluster, cluster, recorder, drains, index, metrics, clock, [](const std::string&) {},
        Logger(logs).WithName("node-reconciler"), with_dra ? &dra : nullptr, &escalation});
  }
  void AddNode(const std::string& name, bool unschedulable = false,
               std::map<std::string, std::string> labels = {}) {
    k8s::Node n;
    n.meta.name = name;
    n.meta.uid = "uid-" + name;
    for (const auto& [k, v] : labels) n.meta.labels.Set(k, v);
    n.unschedulable = unschedulable;
    cluster.PutNode(n);
    index.OnNode(*cluster.Node(name));
  }
  void Report(const std::string& node, bool xid79) {
    auto r = api::testing::HealthyReport(node, clock.Now(), 8);
    if (xid79) api::testing::AddXid(r, 79, 3);
    cluster.PutReport(node, r);
  }
  StatusOr<runtime::Result> Pass(const std::string& node) {
    auto r = reconciler->Reconcile(node, {});
    if (auto n = cluster.Node(node)) index.OnNode(*n);  // the informer delivers our write
    return r;
  }
  std::shared_ptr<const k8s::Node> Node(const std::string& name) { return cluster.Node(name); }
  std::optional<remediation::RemediationRecord> Record(const std::string& name) {
    auto a = Node(name)->meta.annotations.Get(api::kRemediationAnnotation);
    if (!a) return std::nullopt;
    auto r = remediation::DecodeRecord(*a);
    return r.ok() ? std::optional(*r) : std::nullopt;
  }
  bool OurTaint(const std::string& name) {
    return Node(name)->FindTaint(api::kTaintKey) != nullptr;
  }
  // gpu-1 with Xid 79 under Policy(action), after the pass that fences it.
  // gpu-1 with an Xid 79 report under a policy whose action is `action`, not reconciled yet.
  void Faulty(api::Action action, bool admin_cordoned = false) {
    AddNode("gpu-1", admin_cordoned);
    Report("gpu-1", true);
    cluster.PutPolicy(Policy(action));
    Start();
  }
  void FenceUnder(api::Action action, bool admin_cordoned = false) {
    Faulty(action, admin_cordoned);
    ASSERT_TRUE(Pass("gpu-1").ok());
  }
  std::string Condition(const std::string& name) {
    const auto* c = Node(name)->FindCondition(api::kConditionType);
    return c ? c->status : "";
  }
};

// One pass from a given world: what the node, the Events, the drains and the log look like.
struct Case {
  std::string name;
  api::Action action = api::Action::kCordon;
  bool xid79 = true;
  std::function<void(api::GpuHealthPolicy&)> policy = [](api::GpuHealthPolicy&) {};
  std::map<std::string, std::string> labels;
  bool admin_cordoned = false;
  // Expected world after one pass.
  bool cordoned = false;
  bool tainted = false;
  std::string condition;  // "" = none written
  bool record_active = false;
  std::vector<std::string> events;  // reasons, in order
  bool drain_started = false;
  std::vector<std::string> log;  // parts of one line (empty: not checked)
  bool brake_requeue = false;
};
// gtest prints a parameter it cannot format as its bytes; the test name already says which.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class ReconcileTable : public ::testing::TestWithParam<Case> {};

TEST_P(ReconcileTable, OnePassGivesTheExpectedWorld) {
  const Case& c = GetParam();
  World w;
  w.AddNode("gpu-1", c.admin_cordoned, c.labels);
  w.Report("gpu-1", c.xid79);
  api::GpuHealthPolicy p = Policy(c.action);
  c.policy(p);
  w.cluster.PutPolicy(p);
  w.Start();
  auto r = w.Pass("gpu-1");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(w.Node("gpu-1")->unschedulable, c.cordoned);
  EXPECT_EQ(w.OurTaint("gpu-1"), c.tainted);
  EXPECT_EQ(w.Condition("gpu-1"), c.condition);
  auto rec = w.Record("gpu-1");
  EXPECT_EQ(rec && rec->Active(), c.record_active);
  std::vector<std::string> reasons;
  for (const auto& e : w.recorder.Events()) {
    reasons.push_back(e.reason);
    EXPECT_EQ(e.type, events::TypeOfReason(e.reason))
        << e.reason << " is typed as the catalog says";
    EXPECT_EQ(e.object.name, "gpu-1");
  }
  EXPECT_EQ(reasons, c.events);
  EXPECT_EQ(w.drains.Get("gpu-1").has_value(), c.drain_started);
  if (!c.log.empty()) {
    for (const auto& part : c.log) {
      EXPECT_NE(w.logs->Find({part, "node=gpu-1"}), "") << "no log line with " << part;
    }
  }
  if (c.brake_requeue) {
    EXPECT_GT(r->requeue_after.count(), 0);
    EXPECT_LE(r->requeue_after, NodeReconciler::kBrakeRecheck);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Passes, ReconcileTable,
    ::testing::Values(
        Case{.name = "HealthyNodeGetsOnlyTheCondition", .xid79 = false, .condition = "True"},
        Case{.name = "XidCordonsAndTaints",
             .cordoned = true,
             .tainted = true,
             .condition = "False",
             .record_active = true,
             .events = {"GPUUnhealthy", "NodeCordoned", "NodeTainted"},
             .log = {"node cordoned", "action=cordon", "policy=default", "rule=fatal-xid"}},
        Case{.name = "TaintOnly",
             .action = api::Action::kTaint,
             .tainted = true,
             .condition = "False",
             .record_active = true,
             .events = {"GPUUnhealthy", "NodeTainted"},
             .log = {"node tainted", "action=taint"}},
        Case{.name = "DrainStartsTheDrain",
             .action = api::Action::kDrain,
             .cordoned = true,
             .tainted = true,
             .condition = "False",
             .record_active = true,
             .events = {"GPUUnhealthy", "NodeCordoned", "NodeTainted"},
             .drain_started = true,
             .log = {"drain started", "action=drain"}},
        Case{.name = "ExcludedNodeIsLeftAlone", .labels = {{"gpuguardian.io/exclude", "true"}}},
        Case{.name = "ExcludeLabelOtherValueIsNotExcluded",
             .labels = {{"gpuguardian.io/exclude", "false"}},
             .cordoned = true,
             .tainted = true,
             .condition = "False",
             .record_active = true,
             .events = {"GPUUnhealthy", "NodeCordoned", "NodeTainted"}},
        Case{.name = "NoPolicySelectsTheNode",
             .policy =
                 [](api::GpuHealthPolicy& p) {
                   p.spec.node_selector.match_labels = {{"pool", "a"}};
                 }},
        Case{.name = "InvalidPolicyActsOnNothing",
             .policy = [](api::GpuHealthPolicy& p) { p.spec.rules[0].name = "Not Valid!"; }},
        Case{.name = "DryRunChangesNothingButSaysWhatItWouldDo",
             .policy = [](api::GpuHealthPolicy& p) { p.spec.dry_run = true; },
             .record_active = true,
             .events = {"GPUUnhealthy", "RemediationSkipped"},
             .log = {"remediation skipped", "would Cordon"}},
        Case{.name = "PausedWritesNothing",
             .policy = [](api::GpuHealthPolicy& p) { p.spec.paused = true; }},
        Case{.name = "BrakeHoldsTheFenceBackAndSaysSo",
             .policy =
                 [](api::GpuHealthPolicy& p) {
                   p.spec.safety.max_unhealthy = api::IntOrPercent{0, false};
                 },
             .condition = "False",
             .record_active = true,
             .events = {"GPUUnhealthy", "RemediationSkipped"},
             .log = {"remediation skipped", "held back by the brake"},
             .brake_requeue = true},
        Case{.name = "AdminCordonIsNotOursButTheTaintIs",
             .admin_cordoned = true,
             .cordoned = true,
             .tainted = true,
             .condition = "False",
             .record_active = true,
             .events = {"GPUUnhealthy", "NodeTainted"}}),
    [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

TEST(NodeReconciler, SecondPassChangesNothing) {
  World w;
  w.AddNode("gpu-1");
  w.Report("gpu-1", true);
  w.cluster.PutPolicy(Policy(api::Action::kCordon));
  w.Start();
  ASSERT_TRUE(w.Pass("gpu-1").ok());
  const int writes = w.cluster.Writes();
  const auto events = w.recorder.Events().size();
  w.clock.Advance(seconds(5));
  ASSERT_TRUE(w.Pass("gpu-1").ok());
  EXPECT_EQ(w.cluster.Writes(), writes);
  EXPECT_EQ(w.recorder.Events().size(), events);
}

TEST(NodeReconciler, RecoveryUncordonsAfterHealthyFor) {
  World w;
  w.AddNode("gpu-1");
  w.Report("gpu-1", true);
  w.cluster.PutPolicy(Policy(api::Action::kCordon));
  w.Start();
  ASSERT_TRUE(w.Pass("gpu-1").ok());
  ASSERT_TRUE(w.Node("gpu-1")->unschedulable);
  w.clock.Advance(minutes(1));
  w.Report("gpu-1", false);
  ASSERT_TRUE(w.Pass("gpu-1").ok());
  EXPECT_TRUE(w.Node("gpu-1")->unschedulable) << "held until healthyFor";
  w.clock.Advance(minutes(11));
  w.Report("gpu-1", false);
  ASSERT_TRUE(w.Pass("gpu-1").ok());
  EXPECT_FALSE(w.Node("gpu-1")->unschedulable);
  EXPECT_FALSE(w.OurTaint("gpu-1"));
  EXPECT_FALSE(w.Record("gpu-1")->Active());
  EXPECT_EQ(w.recorder.Count(events::kGPURecovered, "gpu-1"), 1);
  EXPECT_NE(w.logs->Find({"node uncordoned", "node=gpu-1", "action=uncordon"}), "");
  EXPECT_NE(w.logs->Find({"node untainted", "node=gpu-1"}), "");
}

TEST(NodeReconciler, FinishedDrainIsRecordedOnceAndLogged) {
  for (bool done : {true, false}) {
    World w;
    w.AddNode("gpu-1");
    w.Report("gpu-1", true);
    w.cluster.PutPolicy(Policy(api::Action::kDrain));
    w.Start();
    ASSERT_TRUE(w.Pass("gpu-1").ok());
    ASSERT_TRUE(w.drains.Running("gpu-1"));
    remediation::DrainResult r;
    r.state = done ? remediation::DrainState::kDone : remediation::DrainState::kBlocked;
    r.timed_out = !done;
    r.message = done ? "evicted 2 pod(s)" : "drain timed out with 1 pod(s) left";
    if (!done)
      r.blocking = {"ml/train-0: Cannot evict pod as it would violate the pod's disruption budget"};
    w.drains.Finish("gpu-1", r);
    w.clock.Advance(seconds(30));
    ASSERT_TRUE(w.Pass("gpu-1").ok());
    auto rec = w.Record("gpu-1");
    ASSERT_TRUE(rec);
    EXPECT_EQ(rec->drain.phase,
              done ? remediation::DrainPhase::kCompleted : remediation::DrainPhase::kBlocked);
    EXPECT_EQ(w.recorder.Count(done ? events::kNodeDrained : events::kDrainBlocked, "gpu-1"), 1);
    EXPECT_NE(
        w.logs->Find({done ? "drain finished" : "drain timed out", "node=gpu-1", "policy=default"}),
        "");
    // The outcome is recorded: the next pass forgets it and starts nothing again.
    ASSERT_TRUE(w.Pass("gpu-1").ok());
    EXPECT_FALSE(w.drains.Get("gpu-1").has_value());
    EXPECT_EQ(w.drains.started, 1);
    EXPECT_EQ(w.recorder.Count(done ? events::kNodeDrained : events::kDrainBlocked, "gpu-1"), 1);
  }
}

TEST(NodeReconciler, FailedWriteChangesNothingAndIsRetried) {
  World w;
  w.Faulty(api::Action::kCordon);
  w.cluster.FailWrites(UnavailableError("apiserver down"));
  EXPECT_FALSE(w.Pass("gpu-1").ok());
  EXPECT_FALSE(w.Node("gpu-1")->unschedulable);
  EXPECT_FALSE(w.Record("gpu-1").has_value());
  EXPECT_EQ(w.recorder.Count(events::kNodeCordoned), 0) << "no Event for a fence not made";
  w.cluster.FailWrites(OkStatus());
  ASSERT_TRUE(w.Pass("gpu-1").ok());
  EXPECT_TRUE(w.Node("gpu-1")->unschedulable);
  EXPECT_EQ(w.recorder.Count(events::kNodeCordoned), 1);
}

// The fence (and later the recovery) reached the Node but its condition write failed: the
// record is committed, so the next pass decides nothing new. Its Events are not lost, and the
// retry that writes the condition does not repeat them.
TEST(NodeReconciler, EventsOfACommittedNodeWriteSurviveAFailedConditionWrite) {
  World w;
  w.Faulty(api::Action::kCordon);
  w.cluster.FailConditionWrites(UnavailableError("status write refused"));
  EXPECT_FALSE(w.Pass("gpu-1").ok());
  ASSERT_TRUE(w.Node("gpu-1")->unschedulable);
  EXPECT_EQ(w.recorder.Count(events::kGPUUnhealthy, "gpu-1"), 1);
  EXPECT_EQ(w.recorder.Count(events::kNodeCordoned, "gpu-1"), 1);
  w.cluster.FailConditionWrites(OkStatus());
  ASSERT_TRUE(w.Pass("gpu-1").ok());
  EXPECT_EQ(w.Condition("gpu-1"), "False");
  EXPECT_EQ(w.recorder.Count(events::kGPUUnhealthy, "gpu-1"), 1);
  EXPECT_EQ(w.recorder.Count(events::kNodeCordoned, "gpu-1"), 1);

  // Healthy again: the condition (True, fence held for healthyFor) cannot be written, so it is
  // still due when healthyFor has passed and the fence comes off.
  w.cluster.FailConditionWrites(UnavailableError("status write refused"));
  w.clock.Advance(minutes(1));
  w.Report("gpu-1", false);
  EXPECT_FALSE(w.Pass("gpu-1").ok());
  EXPECT_TRUE(w.Node("gpu-1")->unschedulable);
  w.clock.Advance(minutes(11));
  w.Report("gpu-1", false);
  EXPECT_FALSE(w.Pass("gpu-1").ok());
  ASSERT_FALSE(w.Node("gpu-1")->unschedulable);
  EXPECT_EQ(w.recorder.Count(events::kGPURecovered, "gpu-1"), 1);
  w.cluster.FailConditionWrites(OkStatus());
  ASSERT_TRUE(w.Pass("gpu-1").ok());
  EXPECT_EQ(w.Condition("gpu-1"), "True");
  EXPECT_EQ(w.recorder.Count(events::kGPURecovered, "gpu-1"), 1);
}

TEST(NodeReconciler, ExcludingANodeReleasesOurFencesAndStopsItsDrain) {
  World w;
  w.FenceUnder(api::Action::kDrain);
  ASSERT_TRUE(w.drains.Running("gpu-1"));
  ASSERT_TRUE(w.Node("gpu-1")->unschedulable);
  k8s::Node n = *w.Node("gpu-1");
  n.meta.labels.Set(api::kExcludeLabel, "true");
  w.cluster.PutNode(n);
  ASSERT_TRUE(w.Pass("gpu-1").ok());
  EXPECT_FALSE(w.drains.Running("gpu-1"));
  EXPECT_FALSE(w.Node("gpu-1")->unschedulable) << "our cordon is released at once";
  EXPECT_FALSE(w.OurTaint("gpu-1"));
  EXPECT_FALSE(w.Record("gpu-1")->Active());
  EXPECT_EQ(w.Node("gpu-1")->FindCondition(api::kConditionType)->reason, "Excluded");
  EXPECT_EQ(w.recorder.Count(events::kNodeReleased, "gpu-1"), 1);
  EXPECT_EQ(w.recorder.Count(events::kNodeUncordoned, "gpu-1"), 1);
  const int writes = w.cluster.Writes();
  ASSERT_TRUE(w.Pass("gpu-1").ok());
  EXPECT_EQ(w.cluster.Writes(), writes) << "once released, an excluded node is never written";
}

TEST(NodeReconciler, ExcludingLeavesAnAdminCordonAlone) {
  World w;
  w.FenceUnder(api::Action::kCordon, /*admin_cordoned=*/true);
  ASSERT_TRUE(w.OurTaint("gpu-1"));
  k8s::Node n = *w.Node("gpu-1");
  n.meta.labels.Set(api::kExcludeLabel, "true");
  w.cluster.PutNode(n);
  ASSERT_TRUE(w.Pass("gpu-1").ok());
  EXPECT_FALSE(w.OurTaint("gpu-1"));
  EXPECT_TRUE(w.Node("gpu-1")->unschedulable) << "the administrator's cordon was never ours";
  EXPECT_EQ(w.recorder.Count(events::kNodeUncordoned, "gpu-1"), 0);
}

// A fenced node no policy governs any more (policy deleted, or its selector edited away) is
// held, says Ungoverned once, and is released once healthy for the recorded healthyFor.
TEST(NodeReconciler, UngovernedNodeIsReleasedAfterTheRecordedHealthyFor) {
  for (bool deleted : {true, false}) {
    SCOPED_TRACE(deleted ? "policy deleted" : "selector edited");
    World w;
    w.AddNode("gpu-1", false, {{"pool", "a"}});
    w.Report("gpu-1", true);
    api::GpuHealthPolicy p = Policy(api::Action::kCordon);
    p.spec.recovery.healthy_for = minutes(3);
    w.cluster.PutPolicy(p);
    w.Start();
    ASSERT_TRUE(w.Pass("gpu-1").ok());
    ASSERT_TRUE(w.Node("gpu-1")->unschedulable);
    if (deleted) {
      w.cluster.DeletePolicy("default");
    } else {
      p.spec.node_selector.match_labels = {{"pool", "b"}};
      w.cluster.PutPolicy(p);
    }
    w.Report("gpu-1", false);
    ASSERT_TRUE(w.Pass("gpu-1").ok());
    ASSERT_TRUE(w.Pass("gpu-1").ok());
    EXPECT_TRUE(w.Node("gpu-1")->unschedulable) << "held until healthy for healthyFor";
    EXPECT_TRUE(w.OurTaint("gpu-1"));
    const auto* c = w.Node("gpu-1")->FindCondition(api::kConditionType);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->reason, "Ungoverned");
    EXPECT_EQ(w.recorder.Count(events::kNodeUngoverned, "gpu-1"), 1) << "one Event says why";
    w.clock.Advance(minutes(2));
    auto r = w.Pass("gpu-1");
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(w.Node("gpu-1")->unschedulable);
    EXPECT_GT(r->requeue_after.count(), 0) << "looked at again when healthyFor ends";
    w.clock.Advance(minutes(1));
    ASSERT_TRUE(w.Pass("gpu-1").ok());
    EXPECT_FALSE(w.Node("gpu-1")->unschedulable);
    EXPECT_FALSE(w.OurTaint("gpu-1"));
    EXPECT_FALSE(w.Record("gpu-1")->Active());
    EXPECT_EQ(w.recorder.Count(events::kGPURecovered, "gpu-1"), 1);
    EXPECT_EQ(w.recorder.Count(events::kNodeUngoverned, "gpu-1"), 1);
  }
}

TEST(NodeReconciler, UngovernedNodeWithAFaultyReportStaysFenced) {
  World w;
  w.FenceUnder(api::Action::kDrain);
  ASSERT_TRUE(w.drains.Running("gpu-1"));
  w.cluster.DeletePolicy("default");
  ASSERT_TRUE(w.Pass("gpu-1").ok());
  EXPECT_FALSE(w.drains.Running("gpu-1")) << "no policy asks for the drain any more";
  w.clock.Advance(std::chrono::hours(2));
  auto lost = api::testing::HealthyReport("gpu-1", w.clock.Now(), 8);
  lost.gpus[2].lost = true;  // a GPU still lost: unhealthy under the built-in level rules
  w.cluster.PutReport("gpu-1", lost);
  ASSERT_TRUE(w.Pass("gpu-1").ok());
  EXPECT_TRUE(w.Node("gpu-1")->unschedulable);
  EXPECT_TRUE(w.OurTaint("gpu-1"));
  EXPECT_EQ(w.drains.started, 1) << "nothing new is started for an ungoverned node";
}

// A node fenced quarantine.after times within the window stays fenced when healthy, until a
// `release`; the gauge counts it.
TEST(NodeReconciler, RepeatOffenderIsQuarantinedUntilReleased) {
  World w;
  w.AddNode("gpu-1");
  api::GpuHealthPolicy p = Policy(api::Action::kCordon);
  p.spec.recovery.healthy_for = minutes(1);
  p.spec.recovery.quarantine = {3, std::chrono::hours(1)};
  w.cluster.PutPolicy(p);
  w.Start();
  for (int i = 1; i <= 3; ++i) {
    SCOPED_TRACE("fence " + std::to_string(i));
    w.Report("gpu-1", true);
    ASSERT_TRUE(w.Pass("gpu-1").ok());
    ASSERT_TRUE(w.Node("gpu-1")->unschedulable);
    w.clock.Advance(seconds(10));
    w.Report("gpu-1", false);
    ASSERT_TRUE(w.Pass("gpu-1").ok());
    w.clock.Advance(minutes(2));
    ASSERT_TRUE(w.Pass("gpu-1").ok());
    EXPECT_EQ(w.Node("gpu-1")->unschedulable, i == 3) << "quarantined at the third fence";
  }
  const auto* c = w.Node("gpu-1")->FindCondition(api::kConditionType);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->reason, "Quarantined");
  EXPECT_EQ(c->status, "False");
  EXPECT_EQ(w.recorder.Count(events::kNodeQuarantined, "gpu-1"), 1);
  EXPECT_EQ(w.Record("gpu-1")->fences.size(), 3u);
  EXPECT_TRUE(w.Record("gpu-1")->quarantined);
  EXPECT_EQ(w.index.StateCounts()["Quarantined"], 1) << "gpu_guardian_nodes_quarantined";
  // `kubectl gpu-guardian release` writes PlanRelease's change; the operator then leaves it.
  k8s::Node n = *w.Node("gpu-1");
  remediation::NodeView view;
  view.name = "gpu-1";
  view.unschedulable = n.unschedulable;
  for (const auto& t : n.taints) view.taints.push_back({t.key, t.value, t.effect});
  view.record_annotation = std::string(*n.meta.annotations.Get(api::kRemediationAnnotation));
  remediation::NodeChange rel = remediation::PlanRelease(view, "GPU replaced", w.clock.Now());
  ASSERT_TRUE(rel.record && rel.unschedulable && rel.remove_taint);
  n.unschedulable = *rel.unschedulable;
  std::erase_if(n.taints, [](const k8s::Taint& t) { return t.key == api::kTaintKey; });
  n.meta.annotations.Set(api::kRemediationAnnotation, remediation::EncodeRecord(*rel.record));
  w.cluster.PutNode(n);
  ASSERT_TRUE(w.Pass("gpu-1").ok());
  ASSERT_TRUE(w.Pass("gpu-1").ok());
  EXPECT_FALSE(w.Node("gpu-1")->unschedulable);
  EXPECT_FALSE(w.OurTaint("gpu-1"));
  EXPECT_FALSE(w.Record("gpu-1")->quarantined);
  EXPECT_EQ(w.Record("gpu-1")->released_reason, "GPU replaced");
  EXPECT_TRUE(w.Record("gpu-1")->fences.empty()) << "a release forgets the fence history";
  EXPECT_EQ(w.index.StateCounts()["Quarantined"], 0);
}

TEST(NodeReconciler, GoneNodeCancelsItsDrain) {
  World w;
  w.AddNode("gpu-1");
  w.Report("gpu-1", true);
  w.cluster.PutPolicy(Policy(api::Action::kDrain));
  w.Start();
  ASSERT_TRUE(w.Pass("gpu-1").ok());
  w.cluster.DeleteNode("gpu-1");
  ASSERT_TRUE(w.reconciler->Reconcile("gpu-1", {}).ok());
  EXPECT_EQ(w.drains.cancelled, 1);
}

TEST(NodeReconciler, DeviceLevelFencesTheGpuNotTheNode) {
  World w;
  w.with_dra = true;
  w.AddNode("gpu-1");
  auto report = api::testing::HealthyReport("gpu-1", w.clock.Now(), 8);
  api::testing::AddXid(report, 48, 3, "Memory", "RESET_GPU", "DBE");  // confined to the GPU
  w.cluster.PutReport("gpu-1", report);
  const std::string uuid = report.gpus[3].uuid;
  w.dra.devices["gpu-1/" + uuid] = remediation::DeviceRef{"gpu.nvidia.com", "gpu-1", "gpu-3"};
  api::GpuHealthPolicy p = Policy(api::Action::kCordon);
  p.spec.rules[0].xid->codes = {48};
  p.spec.remediation.device_level = api::DeviceLevelMode::kAuto;
  w.cluster.PutPolicy(p);
  w.Start();
  auto r = w.Pass("gpu-1");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(w.Node("gpu-1")->unschedulable);
  EXPECT_FALSE(w.OurTaint("gpu-1"));
  ASSERT_EQ(w.dra.rules.size(), 1u);
  EXPECT_EQ(w.dra.rules.begin()->second, uuid);
  auto rec = w.Record("gpu-1");
  ASSERT_TRUE(rec);
  ASSERT_EQ(rec->device_taints.size(), 1u);
  EXPECT_EQ(rec->device_taints[0].rule_name, w.dra.rules.begin()->first);
  EXPECT_NE(w.logs->Find({"device taint created", "node=gpu-1", uuid}), "");
  // Recovered: the rule goes.
  w.clock.Advance(minutes(20));
  w.Report("gpu-1", false);
  ASSERT_TRUE(w.Pass("gpu-1").ok());
  w.clock.Advance(minutes(11));
  w.Report("gpu-1", false);
  ASSERT_TRUE(w.Pass("gpu-1").ok());
  EXPECT_TRUE(w.dra.rules.empty());
  EXPECT_NE(w.logs->Find({"device taint removed", "node=gpu-1"}), "");
}

}  // namespace
}  // namespace gg::op

namespace gg::op {
namespace {

// Another detector's Node condition reaches the rules through the Node the reconciler reads.
TEST(NodeReconciler, NodeConditionRuleFencesOnAnotherDetectorsCondition) {
  World w;
  w.AddNode("gpu-1");
  w.Report("gpu-1", false);
  api::GpuHealthPolicy p = Policy(api::Action::kCordon);
  api::Rule r;
  r.name = "npd-xid";
  r.node_condition = api::NodeConditionMatcher{"GPUXidError", "True"};
  r.for_ = minutes(1);
  r.action = api::Action::kCordon;
  p.spec.rules = {r};
  w.cluster.PutPolicy(p);
  w.Start();
  ASSERT_TRUE(w.Pass("gpu-1").ok());
  EXPECT_EQ(w.Condition("gpu-1"), "True");
  // The detector set its condition two minutes ago: past `for` at once.
  k8s::Node n = *w.Node("gpu-1");
  n.conditions.push_back(
      {"GPUXidError", "True", "XidCritical", "", w.clock.Now() - minutes(2), std::nullopt});
  w.cluster.PutNode(n);
  ASSERT_TRUE(w.Pass("gpu-1").ok());
  EXPECT_TRUE(w.Node("gpu-1")->unschedulable);
  EXPECT_EQ(w.Condition("gpu-1"), "False");
  ASSERT_TRUE(w.Record("gpu-1").has_value());
  EXPECT_EQ(w.Record("gpu-1")->rules, std::vector<std::string>{"npd-xid"});
}

// remediation.escalate: after the drain the remediation object exists (once), the record says
// so, and recovery takes it away; a failed create is logged, not recorded, and retried.
api::GpuHealthPolicy EscalatingPolicy() {
  api::GpuHealthPolicy p = Policy(api::Action::kDrain);
  p.spec.recovery.healthy_for = minutes(2);
  p.spec.remediation.escalate = api::EscalationTemplate{
      "remediation.example.com/v1alpha1", "RebootRemediationTemplate", "ops", "reboot"};
  return p;
}

// gpu-1 fenced and drained (Done) under EscalatingPolicy, and the pass that records the drain.
Status FenceAndDrain(World& w) {
  w.AddNode("gpu-1");
  w.Report("gpu-1", true);
  w.cluster.PutPolicy(EscalatingPolicy());
  w.Start();
  GG_RETURN_IF_ERROR(w.Pass("gpu-1").status());
  if (w.escalation.Get("ops", "gpu-1")) return InternalError("escalated before the drain ended");
  remediation::DrainResult d;
  d.state = remediation::DrainState::kDone;
  d.message = "evicted 1 pod(s)";
  w.drains.Finish("gpu-1", d);
  w.clock.Advance(seconds(30));
  return w.Pass("gpu-1").status();
}

TEST(NodeReconcilerEscalate, ObjectAfterTheDrainOnceThenGoneOnRecovery) {
  World w;
  w.escalation.PutTemplate("ops", "reboot");
  ASSERT_TRUE(FenceAndDrain(w).ok());
  auto obj = w.escalation.Get("ops", "gpu-1");
  ASSERT_TRUE(obj);
  EXPECT_EQ(obj->kind, "RebootRemediation");
  EXPECT_EQ(obj->template_name, "reboot");
  EXPECT_EQ(obj->owner.policy, "default");
  ASSERT_TRUE(w.Record("gpu-1"));
  EXPECT_EQ(obj->owner.occurrence, w.Record("gpu-1")->occurrence);
  ASSERT_TRUE(w.Record("gpu-1")->escalation);
  EXPECT_EQ(w.Record("gpu-1")->escalation->name, "gpu-1");
  EXPECT_EQ(w.recorder.Count(events::kRemediationEscalated, "gpu-1"), 1);
  EXPECT_NE(w.logs->Find({"remediation object created", "node=gpu-1", "action=escalate"}), "");
  ASSERT_TRUE(w.Pass("gpu-1").ok());
  EXPECT_EQ(w.escalation.creates, 1) << "one per occurrence";
  w.clock.Advance(minutes(1));
  w.Report("gpu-1", false);
  ASSERT_TRUE(w.Pass("gpu-1").ok());
  EXPECT_TRUE(w.escalation.Get("ops", "gpu-1")) << "held until healthyFor";
  w.clock.Advance(minutes(3));
  w.Report("gpu-1", false);
  ASSERT_TRUE(w.Pass("gpu-1").ok());
  EXPECT_FALSE(w.escalation.Get("ops", "gpu-1"));
  EXPECT_FALSE(w.Record("gpu-1")->escalation);
  EXPECT_FALSE(w.Record("gpu-1")->Active());
}

TEST(NodeReconcilerEscalate, MissingTemplateIsLoggedAndRetriedWithoutLosingThePass) {
  World w;
  ASSERT_TRUE(FenceAndDrain(w).ok());
  EXPECT_FALSE(w.escalation.Get("ops", "gpu-1"));
  auto rec = w.Record("gpu-1");
  ASSERT_TRUE(rec);
  EXPECT_EQ(rec->drain.phase, remediation::DrainPhase::kCompleted) << "the drain is recorded";
  EXPECT_FALSE(rec->escalation) << "the record claims only what exists";
  EXPECT_EQ(w.recorder.Count(events::kNodeDrained, "gpu-1"), 1);
  EXPECT_EQ(w.recorder.Count(events::kRemediationEscalated, "gpu-1"), 0);
  EXPECT_NE(w.logs->Find({"remediation object not created", "node=gpu-1", "not found"}), "");
  w.escalation.PutTemplate("ops", "reboot");
  auto again = w.Pass("gpu-1");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(w.escalation.Get("ops", "gpu-1"));
  EXPECT_TRUE(w.Record("gpu-1")->escalation);
  EXPECT_EQ(w.recorder.Count(events::kRemediationEscalated, "gpu-1"), 1);
}

}  // namespace
}  // namespace gg::op
