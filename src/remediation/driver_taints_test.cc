// The DRA driver's own device taints as evidence: which taints count, what the verdict and
// the fence units become, and the plan that follows (no rule of ours where the driver's taint
// covers the device, the record noting the driver's taint, the drain of its pods, and a
// recovery that deletes only our rules).
#include "remediation/driver_taints.h"

#include <gtest/gtest.h>

#include "api/test_reports.h"

namespace gg::remediation {
namespace {

using std::chrono::seconds;

const WallTime kNow = WallTime(seconds(1'800'000'000));

api::GpuHealthPolicy Policy(api::DeviceTaintEffect effect = api::DeviceTaintEffect::kNoSchedule) {
  api::GpuHealthPolicy p;
  p.name = "dra";
  p.spec = api::DefaultPolicySpec();
  api::Rule xid;
  xid.name = "uncontained-ecc";
  xid.xid = api::XidMatcher{{}, {95}, {}, false};
  xid.action = api::Action::kDrain;
  p.spec.rules = {xid};
  p.spec.remediation.device_level = api::DeviceLevelMode::kAuto;
  p.spec.remediation.device_taint_effect = effect;
  return p;
}

DriverTaint Taint(int gpu, const std::string& effect, const std::string& uuid = "") {
  return DriverTaint{DeviceRef{"gpu.nvidia.com", "node-a", "gpu-" + std::to_string(gpu)},
                     uuid.empty() ? "GPU-node-a-" + std::to_string(gpu) : uuid,
                     "gpu.nvidia.com/xid",
                     "48",
                     effect,
                     kNow - seconds(30)};
}

NodeInput Input(const api::GpuHealthPolicy& p, std::optional<std::string> record = {}) {
  NodeInput in;
  in.node.name = "node-a";
  in.node.record_annotation = std::move(record);
  in.report = api::testing::HealthyReport("node-a", kNow, 8);
  in.policies = {&p};
  return in;
}

// Assess + fold + plan as the reconciler does, with every GPU published through DRA.
NodeChange Decide(const NodeInput& in, const std::vector<DriverTaint>& taints, Assessment* out) {
  Assessment a = Assess(in, kNow);
  FoldDriverTaints(a, taints, &*in.report, kNow);
  Lookups l;
  l.dra_devices = true;
  NodeChange c = Plan(in, a, l, kNow);
  if (out) *out = std::move(a);
  return c;
}

TEST(DriverTaints, OnlyTaintsThatKeepPodsOffADeviceWithAUuidAreEvidence) {
  auto report = api::testing::HealthyReport("node-a", kNow, 8);
  DriverTaint no_uuid = Taint(4, "NoSchedule");
  no_uuid.uuid.clear();
  auto ev = DriverTaintEvidence(
      {Taint(1, "None"), Taint(2, "Unknown"), no_uuid, Taint(3, "NoSchedule")}, &report);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].rule, kDriverTaintRule);
  EXPECT_EQ(ev[0].action, api::Action::kDrain);
  EXPECT_EQ(ev[0].gpu_uuid, "GPU-node-a-3");
  EXPECT_EQ(ev[0].gpu_index, 3);
  EXPECT_NE(ev[0].message.find("gpu.nvidia.com/xid=48:NoSchedule by the DRA driver"),
            std::string::npos)
      << ev[0].message;
}

TEST(DriverTaints, AMigDeviceTaintIsConfinedToItsInstance) {
  auto report = api::testing::HealthyReport("node-a", kNow, 8);
  auto& g = report.gpus[2];
  g.mig_enabled = true;
  g.mig_devices = {{0, "MIG-a", 1, 0, "1g.10gb", std::nullopt},
                   {1, "MIG-b", 2, 0, "1g.10gb", std::nullopt}};
  auto ev = DriverTaintEvidence({Taint(2, "NoSchedule", "MIG-b")}, &report);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].gpu_uuid, "GPU-node-a-2");
  EXPECT_EQ(ev[0].mig_instances, (std::vector<policy::MigInstance>{{2, 0}}));
  auto p = Policy();
  Assessment a = Assess(Input(p), kNow);
  FoldDriverTaints(a, {Taint(2, "NoSchedule", "MIG-b")}, &report, kNow);
  ASSERT_EQ(a.fence_units.size(), 1u);
  EXPECT_EQ(a.fence_units[0].uuid, "MIG-b");
}

TEST(DriverTaints, AHealthyReportBecomesUnhealthyWithTheDriversEvidence) {
  auto p = Policy();
  Assessment a;
  Decide(Input(p), {Taint(3, "NoSchedule")}, &a);
  ASSERT_TRUE(a.verdict);
  EXPECT_EQ(a.verdict->state, policy::HealthState::kUnhealthy);
  EXPECT_EQ(a.verdict->action, api::Action::kDrain);
  EXPECT_EQ(a.verdict->bad_gpus, std::vector<std::string>{"GPU-node-a-3"});
  EXPECT_FALSE(a.verdict->node_wide);
  EXPECT_FALSE(a.verdict->recovered);
  EXPECT_EQ(a.memories["dra"].state, policy::HealthState::kUnhealthy);
  EXPECT_EQ(a.GpusToFence(), std::vector<std::string>{"GPU-node-a-3"});
  // More tainted GPUs than maxBadGPUsForDeviceLevel (2): node-wide.
  Assessment wide;
  Decide(Input(p), {Taint(1, "NoSchedule"), Taint(2, "NoSchedule"), Taint(3, "NoExecute")}, &wide);
  EXPECT_TRUE(wide.verdict->node_wide);
}

TEST(DriverTaints, ACoveredDeviceGetsNoRuleOfOursButIsRecordedAndDrained) {
  auto p = Policy();
  NodeChange c = Decide(Input(p), {Taint(3, "NoSchedule")}, nullptr);
  EXPECT_TRUE(c.create_device_taints.empty());
  ASSERT_TRUE(c.record);
  ASSERT_EQ(c.record->device_taints.size(), 1u);
  const DeviceTaintRecord& r = c.record->device_taints[0];
  EXPECT_EQ(r.gpu_uuid, "GPU-node-a-3");
  EXPECT_EQ(r.driver_taint, "gpu.nvidia.com/xid=48:NoSchedule");
  EXPECT_EQ(r.device, "gpu.nvidia.com/node-a/gpu-3");
  EXPECT_TRUE(r.rule_name.empty());
  EXPECT_FALSE(c.set_taint);
  EXPECT_FALSE(c.unschedulable);
  ASSERT_TRUE(c.drain);
  EXPECT_EQ(c.drain->gpu_uuids, std::vector<std::string>{"GPU-node-a-3"});
  bool announced = false;
  for (const auto& e : c.events) announced = announced || e.reason == "DeviceTaintedByDriver";
  EXPECT_TRUE(announced);
}

TEST(DriverTaints, AWeakerDriverTaintDoesNotStopOurRule) {
  auto p = Policy(api::DeviceTaintEffect::kNoExecute);
  NodeChange c = Decide(Input(p), {Taint(3, "NoSchedule")}, nullptr);
  ASSERT_EQ(c.create_device_taints.size(), 1u);
  EXPECT_EQ(c.create_device_taints[0].gpu_uuid, "GPU-node-a-3");
  EXPECT_EQ(c.create_device_taints[0].effect, "NoExecute");
  EXPECT_EQ(c.create_device_taints[0].reason, kDriverTaintRule);
}

TEST(DriverTaints, TheOccurrenceHoldsWhileTheTaintStaysAndRecoveryDeletesOnlyOurRules) {
  auto p = Policy();
  auto in = Input(p);
  api::testing::AddXid(*in.report, 95, 5, "Memory", "RESET_GPU", "Uncontained ECC error");
  NodeChange first = Decide(in, {Taint(3, "NoSchedule")}, nullptr);
  ASSERT_EQ(first.create_device_taints.size(), 1u);  // GPU 5: ours
  ASSERT_TRUE(first.record);
  first.record->device_taints[1].rule_name = "gpuguardian-node-a-gpu-5-x";  // as applied
  first.record->device_taints[0].claims = {"ml/holds-gpu-3-gpu"};
  const std::string rec = EncodeRecord(*first.record);
  auto decoded = DecodeRecord(rec);  // the driver's entry survives the annotation
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->device_taints, first.record->device_taints);
  EXPECT_EQ(decoded->device_taints[0].driver_taint, "gpu.nvidia.com/xid=48:NoSchedule");
  // The report is healthy again but the driver's taint stays: the occurrence holds (the
  // record notes the evidence now left once, then nothing more is written).
  Assessment a;
  NodeChange hold = Decide(Input(p, rec), {Taint(3, "NoSchedule")}, &a);
  EXPECT_EQ(a.verdict->state, policy::HealthState::kUnhealthy);
  EXPECT_TRUE(hold.delete_device_taints.empty());
  auto healthy = Input(p, hold.record ? EncodeRecord(*hold.record) : rec);
  NodeChange again = Decide(healthy, {Taint(3, "NoSchedule")}, &a);
  EXPECT_FALSE(again.record) << "a pass while the taint stays writes nothing";
  EXPECT_TRUE(again.delete_device_taints.empty());
  // The driver drops its taint: healthy since now; healthyFor later only our rule goes.
  NodeChange gone = Decide(healthy, {}, &a);
  EXPECT_EQ(a.verdict->state, policy::HealthState::kHealthy);
  ASSERT_TRUE(gone.record);
  auto later = Input(p, EncodeRecord(*gone.record));
  Assessment b = Assess(later, kNow + p.spec.recovery.healthy_for + seconds(1));
  Lookups l;
  l.dra_devices = true;
  NodeChange done = Plan(later, b, l, kNow + p.spec.recovery.healthy_for + seconds(1));
  ASSERT_EQ(done.delete_device_taints.size(), 2u);
  int with_rule = 0;
  for (const auto& d : done.delete_device_taints) with_rule += d.rule_name.empty() ? 0 : 1;
  EXPECT_EQ(with_rule, 1);  // only ours names a rule to delete; the driver's entry is forgotten
  ASSERT_TRUE(done.record);
  EXPECT_TRUE(done.record->device_taints.empty());
}

}  // namespace
}  // namespace gg::remediation
