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

// Every field set, and each string form the packer has: a canonical uuid (16 bytes), one in
// upper case (kept as text), a message longer than anything interned, negative numbers.
api::GpuNodeHealthStatus Full() {
  auto s = api::testing::EveryFieldReport();
  s.observed_at = At(1'790'000'000, 123'456'789);
  s.gpus[0].uuid = "GPU-0123abcd-4567-89ef-0123-456789abcdef";
  s.gpus[0].temperature_c = -3;
  s.gpus[0].power_watts = 76.53;
  s.gpus[0].ecc_uncorrected_aggregate = 18'000'000'000'000'000ULL;
  s.gpus[1].uuid = "GPU-0123ABCD-4567-89ef-0123-456789abcdef";
  s.gpus[1].remap_failure = true;
  s.xids[0].gpu_uuid = s.gpus[0].uuid;
  s.xids[0].message = std::string(300, 'm');
  s.xids[2].count = -1;
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
  EXPECT_EQ(out.xids[1].gpu_instance, 3u);
  EXPECT_EQ(out.xids[1].compute_instance, 0u);
  EXPECT_EQ(out.xids[0].gpu_instance, std::nullopt);
  EXPECT_EQ(out.xids[2].count, -1);
  EXPECT_TRUE(out.xids[2].sxid);
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
  EXPECT_TRUE(
      PackedReport::Pack(a, "gpu-node-1").SameFactsBytes(PackedReport::Pack(b, "gpu-node-1")));
  b.gpus[1].retired_pages_dbe = 2;
  EXPECT_FALSE(
      PackedReport::Pack(a, "gpu-node-1").SameFactsBytes(PackedReport::Pack(b, "gpu-node-1")));
  EXPECT_FALSE(PackedReport().SameFactsBytes(PackedReport()));
}

TEST(PackedReport, EightGpuReportIsSmall) {
  auto s = api::testing::HealthyReport(
      "gpu-node-00001", At(1'790'000'000), 8, [](const std::string&, int i) {
        return "GPU-0123abcd-4567-89ef-0123-4567890000" + std::to_string(10 + i);
      });
  auto p = PackedReport::Pack(s, "gpu-node-00001");
  EXPECT_LT(p.size(), 300u) << "a healthy 8-GPU report packs to a few hundred bytes";
  EXPECT_EQ(api::EncodeGpuNodeHealthStatus(p.Unpack("gpu-node-00001")),
            api::EncodeGpuNodeHealthStatus(s));
}

}  // namespace
}  // namespace gg::op
