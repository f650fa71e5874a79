// Fence units: what a device-level decision fences on a MIG-partitioned GPU — the MIG devices
// of the instance an Xid was confined to, or the whole GPU (every MIG device, the parent where
// published) — and the plan that follows from them.
#include "remediation/fence_units.h"

#include <gtest/gtest.h>

#include "api/test_reports.h"
#include "remediation/plan.h"

namespace gg::remediation {
namespace {

using std::chrono::seconds;

const WallTime kNow = WallTime(seconds(1'800'000'000));

api::GpuHealthPolicy MigPolicy() {
  api::GpuHealthPolicy p;
  p.name = "mig";
  p.spec = api::DefaultPolicySpec();
  api::Rule xid;
  xid.name = "bad-xid";
  xid.xid = api::XidMatcher{{}, {13, 95}, {}, false};
  xid.action = api::Action::kTaint;
  api::Rule ecc;
  ecc.name = "ecc";
  ecc.ecc = api::EccMatcher{0, std::nullopt, std::nullopt};
  ecc.action = api::Action::kTaint;
  p.spec.rules = {xid, ecc};
  p.spec.remediation.device_level = api::DeviceLevelMode::kAuto;
  return p;
}

// GPU 1 of an 8-GPU report partitioned into GPU instances 1..4 (one compute instance each,
// GPU instance 4 holding two: compute instances 0 and 1).
api::GpuNodeHealthStatus MigReport() {
  auto r = api::testing::HealthyReport("node-a", kNow, 8);
  auto& g = r.gpus[1];
  g.mig_enabled = true;
  uint32_t slot = 0;
  for (auto [gi, ci] : {std::pair<uint32_t, uint32_t>{1, 0}, {2, 0}, {3, 0}, {4, 0}, {4, 1}}) {
    api::MigDevice d;
    d.index = slot++;
    d.gpu_instance = gi;
    d.compute_instance = ci;
    d.uuid = "MIG-" + std::to_string(gi) + "-" + std::to_string(ci);
    d.profile = "1g.10gb";
    g.mig_devices.push_back(d);
  }
  return r;
}

void AddMigXid(api::GpuNodeHealthStatus& r, int xid, const std::string& action,
               std::optional<uint32_t> gi, std::optional<uint32_t> ci) {
  api::testing::AddXid(r, xid, 1, "application", action, "Xid");
  r.xids.back().gpu_instance = gi;
  r.xids.back().compute_instance = ci;
}

// The node's input with an Xid 13 confined to GPU instance 2 of GPU 1.
NodeInput MigInput(const api::GpuHealthPolicy& p) {
  NodeInput in;
  in.node.name = "node-a";
  auto r = MigReport();
  AddMigXid(r, 13, "RESTART_APP", 2, 0);
  in.report = r;
  in.policies = {&p};
  return in;
}

std::vector<std::string> Uuids(const std::vector<FenceUnit>& units) {
  std::vector<std::string> out;
  for (const auto& u : units) out.push_back(u.uuid + (u.optional ? "?" : ""));
  return out;
}

std::vector<FenceUnit> UnitsFor(const api::GpuNodeHealthStatus& r) {
  auto p = MigPolicy();
  auto v = policy::Evaluate(p, r, {}, kNow);
  return FenceUnitsFor(v, r);
}

TEST(FenceUnits, AGpuWithoutMigIsOneUnit) {
  auto r = MigReport();
  api::testing::AddXid(r, 13, 3, "application", "RESTART_APP", "Xid");
  EXPECT_EQ(Uuids(UnitsFor(r)), std::vector<std::string>{"GPU-node-a-3"});
}

TEST(FenceUnits, AnXidConfinedToOneInstanceFencesThatMigDeviceOnly) {
  auto r = MigReport();
  AddMigXid(r, 13, "RESTART_APP", 3, 0);
  EXPECT_EQ(Uuids(UnitsFor(r)), std::vector<std::string>{"MIG-3-0"});
}

TEST(FenceUnits, AGpuInstanceWithoutComputeInstanceCoversAllItsComputeInstances) {
  auto r = MigReport();
  AddMigXid(r, 13, "RESTART_APP", 4, std::nullopt);
  EXPECT_EQ(Uuids(UnitsFor(r)), (std::vector<std::string>{"MIG-4-0", "MIG-4-1"}));
}

TEST(FenceUnits, GpuWideFaultsFenceTheParentAndEveryMigDevice) {
  const std::vector<std::string> whole = {"GPU-node-a-1?", "MIG-1-0", "MIG-2-0",
                                          "MIG-3-0",       "MIG-4-0", "MIG-4-1"};
  {
    SCOPED_TRACE("an Xid whose recovery resets the GPU, though the driver named an instance");
    auto r = MigReport();
    AddMigXid(r, 95, "RESET_GPU", 3, 0);
    EXPECT_EQ(Uuids(UnitsFor(r)), whole);
  }
  {
    SCOPED_TRACE("an Xid without a GPU instance");
    auto r = MigReport();
    AddMigXid(r, 13, "RESTART_APP", std::nullopt, std::nullopt);
    EXPECT_EQ(Uuids(UnitsFor(r)), whole);
  }
  {
    SCOPED_TRACE("a GPU-level signal beside a confined Xid");
    auto r = MigReport();
    AddMigXid(r, 13, "RESTART_APP", 3, 0);
    r.gpus[1].ecc_uncorrected_volatile = 2;
    EXPECT_EQ(Uuids(UnitsFor(r)), whole);
  }
  {
    SCOPED_TRACE("an instance the report does not list");
    auto r = MigReport();
    AddMigXid(r, 13, "RESTART_APP", 9, 0);
    EXPECT_EQ(Uuids(UnitsFor(r)), whole);
  }
}

TEST(FenceUnits, PublishedUnitsTolerateAnUnpublishedParentOnly) {
  std::vector<FenceUnit> units = {
      {"GPU-1", "GPU-1", true}, {"MIG-a", "GPU-1", false}, {"MIG-b", "GPU-1", false}};
  std::vector<std::string> missing;
  auto got = PublishedFenceUnits(units, {"MIG-a", "MIG-b"}, &missing);
  EXPECT_TRUE(missing.empty());
  EXPECT_EQ(Uuids(got), (std::vector<std::string>{"MIG-a", "MIG-b"}));
  got = PublishedFenceUnits(units, {"GPU-1", "MIG-a"}, &missing);
  EXPECT_EQ(missing, std::vector<std::string>{"MIG-b"});
  EXPECT_EQ(Uuids(got), (std::vector<std::string>{"GPU-1?", "MIG-a"}));
}

// The plan for a confined Xid: one DeviceTaintRule for the MIG device, the node neither
// tainted nor cordoned; the next pass has nothing left to fence.
TEST(FenceUnits, PlanFencesTheMigDeviceAndLeavesTheNodeSchedulable) {
  auto p = MigPolicy();
  NodeInput in = MigInput(p);
  Assessment a = Assess(in, kNow);
  ASSERT_TRUE(a.verdict);
  EXPECT_FALSE(a.verdict->node_wide);
  EXPECT_EQ(a.GpusToFence(), std::vector<std::string>{"MIG-2-0"});
  Lookups l;
  l.dra_devices = true;
  l.fence_units = PublishedFenceUnits(a.fence_units, {"MIG-2-0"}, nullptr);
  NodeChange c = Plan(in, a, l, kNow);
  ASSERT_EQ(c.create_device_taints.size(), 1u);
  EXPECT_EQ(c.create_device_taints[0].gpu_uuid, "MIG-2-0");
  EXPECT_EQ(c.create_device_taints[0].reason, "bad-xid");
  EXPECT_FALSE(c.set_taint);
  EXPECT_FALSE(c.unschedulable);
  in.node = ApplyChange(in.node, c);
  Assessment b = Assess(in, kNow + seconds(5));
  EXPECT_TRUE(b.GpusToFence().empty());
  EXPECT_TRUE(Plan(in, b, Lookups{BrakeAllowAll(), true, std::nullopt}, kNow + seconds(5))
                  .create_device_taints.empty());
}

// A GPU-wide fault after a confined one on the same GPU: the other MIG devices are added, the
// one already fenced is neither looked up again nor missing.
TEST(FenceUnits, AGpuWideFaultAfterAConfinedOneAddsTheOtherMigDevices) {
  auto p = MigPolicy();
  NodeInput in = MigInput(p);
  Assessment a = Assess(in, kNow);
  Lookups l;
  l.dra_devices = true;
  l.fence_units = PublishedFenceUnits(a.UnfencedUnits(), {"MIG-2-0"}, nullptr);
  in.node = ApplyChange(in.node, Plan(in, a, l, kNow));

  auto r = MigReport();
  AddMigXid(r, 95, "RESET_GPU", 2, 0);
  in.report = r;
  Assessment b = Assess(in, kNow + seconds(5));
  EXPECT_EQ(b.GpusToFence(),
            (std::vector<std::string>{"MIG-1-0", "MIG-3-0", "MIG-4-0", "MIG-4-1"}));
  EXPECT_EQ(b.DevicesToMap(),
            (std::vector<std::string>{"GPU-node-a-1", "MIG-1-0", "MIG-3-0", "MIG-4-0", "MIG-4-1"}));
  std::vector<std::string> missing;
  l.fence_units = PublishedFenceUnits(b.UnfencedUnits(),
                                      {"MIG-1-0", "MIG-3-0", "MIG-4-0", "MIG-4-1"}, &missing);
  EXPECT_TRUE(missing.empty()) << missing[0];
  NodeChange c = Plan(in, b, l, kNow + seconds(5));
  EXPECT_EQ(c.create_device_taints.size(), 4u);
  EXPECT_FALSE(c.set_taint);
}

}  // namespace
}  // namespace gg::remediation
