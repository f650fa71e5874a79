// PackedReport: packing is lossless (every field, every string form), equal facts pack to equal
// bytes whatever the timestamps, and a packed 8-GPU report stays a few hundred bytes.
#include "operator/packed_report.h"

#include <gtest/gtest.h>

#include <chrono>

#include "api/test_reports.h"

namespace gg::op {
namespace {

using std::chrono::nanoseconds;
using std::chrono::seconds;

WallTime At(std::int64_t s, std::int64_t ns = 0) {
  return WallTime(std::chrono::duration_cast<WallTime::duration>(seconds(s) + nanoseconds(ns)));
}

api::GpuStatus FullGpu() {
  api::GpuStatus g;
  g.index = 0;
  g.uuid = "GPU-0123abcd-4567-89ef-0123-456789abcdef";  // packed as 16 bytes
  g.name = "NVIDIA H200";
  g.serial = "1650924060000";
  g.pci_bus_id = "00000000:18:00.0";
  g.temperature_c = -3;
  g.slowdown_temperature_c = 87;
  g.shutdown_temperature_c = 92;
  g.throttle_reasons = {"GpuIdle", "HwThermalSlowdown"};
  g.power_watts = 76.53;
  g.power_limit_watts = 700;
  g.ecc_enabled = true;
  g.ecc_corrected_volatile = 0;
  g.ecc_uncorrected_volatile = 2;
  g.ecc_corrected_aggregate = 10;
  g.ecc_uncorrected_aggregate = 18'000'000'000'000'000ULL;
  g.remapped_rows_correctable = 1;
  g.remapped_rows_uncorrectable = 0;
  g.remap_pending = true;
  g.pcie_replay_count = 3;
  g.nvlink_links_total = 18;
  g.nvlink_links_down = 1;
  g.nvlink_error_count = 7;
  g.recovery_action = "None";
  return g;
}

api::GpuStatus LostMigGpu() {
  api::GpuStatus g;
  g.index = 1;
  g.uuid = "GPU-0123ABCD-4567-89ef-0123-456789abcdef";  // upper case: kept as text
  g.lost = true;
  g.mig_enabled = true;
  g.mig_pending_enabled = false;
  g.mig_devices.push_back(api::MigDevice{0, "MIG-aaaa-0300", 3, 0, "3g.71gb", 69632});
  g.mig_devices.push_back(api::MigDevice{1, "MIG-aaaa-0500", 5, 0, "", std::nullopt});
  g.retired_pages_sbe = 2;
  g.retired_pages_dbe = 1;
  g.retired_pages_pending = true;
  g.remap_failure = true;
  return g;
}

api::GpuNodeHealthStatus Full() {
  api::GpuNodeHealthStatus s;
  s.node_name = "gpu-node-1";
  s.agent_version = "0.1.0";
  s.observed_at = At(1'790'000'000, 123'456'789);
  s.heartbeat_time = At(1'790'000'001);
  s.expected_gpus = 8;
  s.gpus = {FullGpu(), LostMigGpu()};
  api::XidEvent x;
  x.xid = 79;
  x.gpu_uuid = s.gpus[0].uuid;
  x.pci_bus_id = "0000:3b:00.0";
  x.count = 3;
  x.first_seen = At(1'789'999'000);
  x.last_seen = At(1'789'999'900, 5);
  x.category = "Bus";
  x.recommended_action = "RESTART_BM";
  x.message = std::string(300, 'm');  // longer than anything interned
  x.gpu_instance = 3;
  x.compute_instance = 0;
  s.xids.push_back(x);
  api::XidEvent sx;
  sx.xid = 12028;
  sx.sxid = true;
  sx.count = -1;
  s.xids.push_back(sx);
  s.sources.push_back({"nvml", api::SourceState::kOk, ""});
  s.sources.push_back({"kmsg", api::SourceState::kDegraded, "overrun: 12 records lost"});
  s.sources.push_back({"file", api::SourceState::kUnavailable, "no such file"});
  return s;
}

TEST(PackedReport, RoundTripKeepsEveryField) {
  const auto in = Full();
  auto packed = PackedReport::Pack(in, "gpu-node-1");
  auto out = packed.Unpack("gpu-node-1");
  // The encoder writes every field; equal JSON = equal facts, including those SameFacts ignores.
  EXPECT_EQ(api::EncodeGpuNodeHealthStatus(out), api::EncodeGpuNodeHealthStatus(in));
  EXPECT_TRUE(api::SameFacts(out, in));
  EXPECT_EQ(out.observed_at, in.observed_at);
  EXPECT_EQ(out.heartbeat_time, in.heartbeat_time);
  EXPECT_EQ(out.gpus[0].power_watts, in.gpus[0].power_watts);
  EXPECT_EQ(out.gpus[0].temperature_c, -3);
  EXPECT_EQ(out.gpus[1].uuid, in.gpus[1].uuid);
  EXPECT_EQ(out.gpus[1].mig_devices[1].memory_mib, std::nullopt);
  EXPECT_EQ(out.xids[0].message, in.xids[0].message);
  EXPECT_EQ(out.xids[0].compute_instance, 0u);
  EXPECT_EQ(out.xids[1].gpu_instance, std::nullopt);
  EXPECT_EQ(out.xids[1].count, -1);
  EXPECT_EQ(out.sources[1].state, api::SourceState::kDegraded);
}

TEST(PackedReport, NodeNameOtherThanTheObjectNameIsKept) {
  auto in = Full();
  in.node_name = "another-node";
  EXPECT_EQ(PackedReport::Pack(in, "gpu-node-1").Unpack("gpu-node-1").node_name, "another-node");
  in.node_name = "";
  EXPECT_EQ(PackedReport::Pack(in, "gpu-node-1").Unpack("gpu-node-1").node_name, "");
}

TEST(PackedReport, EmptyMeansNoStatus) {
  EXPECT_TRUE(PackedReport().empty());
  EXPECT_FALSE(PackedReport::Pack(api::GpuNodeHealthStatus{}, "n").empty());
}

TEST(PackedReport, HeartbeatOnlyChangeIsSameFactsBytes) {
  auto a = Full();
  auto b = a;
  b.observed_at += seconds(300);
  b.heartbeat_time += seconds(300);
  EXPECT_TRUE(PackedReport::Pack(a, "gpu-node-1").SameFactsBytes(PackedReport::Pack(b, "gpu-node-1")));
  b.gpus[1].retired_pages_dbe = 2;
  EXPECT_FALSE(PackedReport::Pack(a, "gpu-node-1").SameFactsBytes(PackedReport::Pack(b, "gpu-node-1")));
  EXPECT_FALSE(PackedReport().SameFactsBytes(PackedReport()));
}

TEST(PackedReport, EightGpuReportIsSmall) {
  auto s = api::testing::HealthyReport("gpu-node-00001", At(1'790'000'000), 8, [](const std::string&, int i) {
    return "GPU-0123abcd-4567-89ef-0123-4567890000" + std::to_string(10 + i);
  });
  auto p = PackedReport::Pack(s, "gpu-node-00001");
  EXPECT_LT(p.size(), 300u) << "a healthy 8-GPU report packs to a few hundred bytes";
  EXPECT_EQ(api::EncodeGpuNodeHealthStatus(p.Unpack("gpu-node-00001")), api::EncodeGpuNodeHealthStatus(s));
}

}  // namespace
}  // namespace gg::op
