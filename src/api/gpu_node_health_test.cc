// Tests for the GPUNodeHealth codecs (round trip, strict types, bounds, garbage) and
// SameFacts (what counts as a change worth an API write).
#include "api/gpu_node_health.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "api/test_reports.h"
#include "common/time_util.h"

namespace gg::api {
namespace {

using std::chrono::seconds;

GpuNodeHealthStatus Sample() { return testing::EveryFieldReport(); }

void ExpectEqualReports(const GpuNodeHealthStatus& a, const GpuNodeHealthStatus& b) {
  EXPECT_TRUE(SameFacts(a, b));
  EXPECT_EQ(a.observed_at, b.observed_at);
  EXPECT_EQ(a.heartbeat_time, b.heartbeat_time);
  ASSERT_EQ(a.gpus.size(), b.gpus.size());
  for (size_t i = 0; i < a.gpus.size(); ++i) {
    EXPECT_EQ(a.gpus[i].power_watts, b.gpus[i].power_watts);
    EXPECT_EQ(a.gpus[i].temperature_c, b.gpus[i].temperature_c);
    EXPECT_EQ(a.gpus[i].throttle_reasons, b.gpus[i].throttle_reasons);
  }
}

TEST(GpuNodeHealthCodec, RoundTripStatus) {
  auto s = Sample();
  auto json = EncodeGpuNodeHealthStatus(s);
  auto back = DecodeGpuNodeHealthStatus(json);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectEqualReports(s, *back);
  // Encoding is deterministic, so re-encoding gives the same bytes.
  EXPECT_EQ(EncodeGpuNodeHealthStatus(*back), json);
}

TEST(GpuNodeHealthCodec, RoundTripAnnotation) {
  auto s = Sample();
  auto json = EncodeHealthAnnotation(s);
  EXPECT_EQ(json.rfind("{\"v\":1,", 0), 0u) << json;
  auto back = DecodeHealthAnnotation(json);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectEqualReports(s, *back);
}

TEST(GpuNodeHealthCodec, EncodesCamelCaseAndOmitsAbsentOptionals) {
  GpuNodeHealthStatus s;
  s.node_name = "n";
  GpuStatus g;
  g.index = 2;
  g.uuid = "GPU-x";
  s.gpus.push_back(g);
  auto json = EncodeGpuNodeHealthStatus(s);
  EXPECT_NE(json.find("\"nodeName\":\"n\""), std::string::npos);
  EXPECT_NE(json.find("\"expectedGPUs\":0"), std::string::npos);
  EXPECT_EQ(json.find("temperatureC"), std::string::npos) << json;
  EXPECT_EQ(json.find("remappedRows"), std::string::npos) << json;
  EXPECT_EQ(json.find("observedAt"), std::string::npos) << json;
  EXPECT_EQ(json.find("\"ecc\""), std::string::npos) << json;
  auto full = EncodeGpuNodeHealthStatus(Sample());
  for (const char* key : {"agentVersion",
                          "observedAt",
                          "heartbeatTime",
                          "pciBusId",
                          "migEnabled",
                          "migPendingEnabled",
                          "migDevices",
                          "gpuInstance",
                          "computeInstance",
                          "memoryMiB",
                          "slowdownTemperatureC",
                          "shutdownTemperatureC",
                          "throttleReasons",
                          "powerLimitWatts",
                          "correctedVolatile",
                          "uncorrectedAggregate",
                          "remappedRows",
                          "retiredPages",
                          "pcieReplayCount",
                          "linksDown",
                          "recoveryAction",
                          "gpuUUID",
                          "firstSeen",
                          "lastSeen",
                          "recommendedAction",
                          "\"sxid\":true",
                          "\"state\":\"Degraded\""}) {
    EXPECT_NE(full.find(key), std::string::npos) << key;
  }
}

TEST(GpuNodeHealthCodec, InvalidUtf8IsReplacedNotThrown) {
  GpuNodeHealthStatus s;
  XidEvent x;
  x.xid = 13;
  x.message = std::string("bad \xff\xfe bytes");
  s.xids.push_back(x);
  auto json = EncodeGpuNodeHealthStatus(s);
  auto back = DecodeGpuNodeHealthStatus(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->xids.at(0).xid, 13);
}

TEST(GpuNodeHealthCodec, UnknownFieldsAndNullsAreIgnored) {
  auto r = DecodeGpuNodeHealthStatus(
      R"({"nodeName":"n","future":{"x":[1,2]},"expectedGPUs":null,
          "gpus":[{"index":3,"temperatureC":null,"newField":true}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->node_name, "n");
  EXPECT_EQ(r->expected_gpus, 0);
  ASSERT_EQ(r->gpus.size(), 1u);
  EXPECT_EQ(r->gpus[0].index, 3);
  EXPECT_FALSE(r->gpus[0].temperature_c.has_value());
}

TEST(GpuNodeHealthCodec, WrongTypesNameTheFieldPath) {
  struct Case {
    const char* json;
    const char* message;
  };
  const Case cases[] = {
      {R"({"gpus":[{},{},{"temperatureC":"hot"}]})",
       "status.gpus[2].temperatureC: expected integer"},
      {R"({"gpus":[{"temperatureC":41.5}]})", "status.gpus[0].temperatureC: expected integer"},
      {R"({"nodeName":5})", "status.nodeName: expected string"},
      {R"({"gpus":[{"lost":"yes"}]})", "status.gpus[0].lost: expected boolean"},
      {R"({"gpus":[{"powerWatts":"1"}]})", "status.gpus[0].powerWatts: expected number"},
      {R"({"gpus":[{"ecc":[]}]})", "status.gpus[0].ecc: expected object"},
      {R"({"gpus":[{"ecc":{"uncorrectedVolatile":-1}}]})",
       "status.gpus[0].ecc.uncorrectedVolatile: expected unsigned integer in range"},
      {R"({"gpus":[{"remappedRows":{"correctable":4294967296}}]})",
       "status.gpus[0].remappedRows.correctable: expected unsigned integer in range"},
      {R"({"gpus":[{"throttleReasons":["a",1]}]})",
       "status.gpus[0].throttleReasons[1]: expected string"},
      {R"({"gpus":{}})", "status.gpus: expected array"},
      {R"({"gpus":[7]})", "status.gpus[0]: expected object"},
      {R"({"xids":[{"xid":79,"count":"3"}]})", "status.xids[0].count: expected integer"},
      {R"({"xids":[{"lastSeen":"yesterday"}]})", "status.xids[0].lastSeen: invalid RFC 3339 time"},
      {R"({"sources":[{"name":"nvml","state":"Fine"}]})",
       "status.sources[0].state: expected one of OK, Degraded, Unavailable"},
      {R"({"expectedGPUs":-1})", "status.expectedGPUs: must not be negative"},
      {R"({"expectedGPUs":99999999999})", "status.expectedGPUs: integer out of range"},
      {R"([1,2])", "status: expected object"},
  };
  for (const auto& c : cases) {
    auto r = DecodeGpuNodeHealthStatus(c.json);
    ASSERT_FALSE(r.ok()) << c.json;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.json;
    EXPECT_EQ(r.status().message(), c.message) << c.json;
  }
}

TEST(GpuNodeHealthCodec, GarbageIsAnErrorNotACrash) {
  for (std::string_view bad : {"", "{", "null", "\"x\"", "{\"gpus\":[", "{\"a\":1}}", "\xff\xff",
                               "{\"nodeName\":\"\xc3\"}", "{\"gpus\":[{\"index\":1e400}]}"}) {
    auto r = DecodeGpuNodeHealthStatus(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(GpuNodeHealthCodec, HugeArraysAreRejected) {
  std::string gpus = "{\"gpus\":[";
  for (int i = 0; i < 257; ++i) gpus += (i ? ",{}" : "{}");
  gpus += "]}";
  auto r = DecodeGpuNodeHealthStatus(gpus);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "status.gpus: too many entries (257 > 256)");

  std::string xids = "{\"xids\":[";
  for (int i = 0; i < 1025; ++i) xids += (i ? ",{\"xid\":13}" : "{\"xid\":13}");
  xids += "]}";
  r = DecodeGpuNodeHealthStatus(xids);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "status.xids: too many entries (1025 > 1024)");

  // At the bound is fine.
  std::string ok = "{\"gpus\":[";
  for (int i = 0; i < 256; ++i) ok += (i ? ",{}" : "{}");
  ok += "]}";
  EXPECT_TRUE(DecodeGpuNodeHealthStatus(ok).ok());

  std::string big(5u << 20, ' ');
  big[0] = '{';
  big.back() = '}';
  r = DecodeGpuNodeHealthStatus(big);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("too large"), std::string::npos);
}

TEST(GpuNodeHealthCodec, AnnotationVersion) {
  EXPECT_TRUE(DecodeHealthAnnotation(R"({"nodeName":"n"})").ok());  // absent v = 1
  auto r = DecodeHealthAnnotation(R"({"v":2,"nodeName":"n"})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "annotation.v: unsupported version 2");
  r = DecodeHealthAnnotation(R"({"v":1,"gpus":[{"index":"0"}]})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "annotation.gpus[0].index: expected integer");
}

TEST(GpuNodeHealthCodec, TimestampsAcceptOffsetsAndFuture) {
  auto r = DecodeGpuNodeHealthStatus(
      R"({"observedAt":"2026-11-29T23:00:00+01:00","heartbeatTime":"2200-01-01T00:00:00Z"})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(FormatRfc3339(r->observed_at), "2026-11-29T22:00:00Z");
  EXPECT_GT(r->heartbeat_time, std::chrono::system_clock::now());
  r = DecodeGpuNodeHealthStatus(R"({"observedAt":"9999-01-01T00:00:00Z"})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "status.observedAt: time out of range");
}

TEST(SameFacts, IgnoresTimestampsAndPower) {
  auto a = Sample();
  auto b = a;
  b.observed_at += seconds(10);
  b.heartbeat_time += seconds(300);
  b.gpus[0].power_watts = 650.0;
  EXPECT_TRUE(SameFacts(a, b));
}

TEST(SameFacts, DetectsHealthChanges) {
  const auto a = Sample();
  auto b = a;
  b.gpus[0].ecc_uncorrected_volatile = 3;
  EXPECT_FALSE(SameFacts(a, b));
  b = a;
  b.gpus[1].lost = false;
  EXPECT_FALSE(SameFacts(a, b));
  b = a;
  b.xids[0].count = 4;
  EXPECT_FALSE(SameFacts(a, b));
  b = a;
  b.xids.pop_back();
  EXPECT_FALSE(SameFacts(a, b));
  b = a;
  b.sources[0].state = SourceState::kDegraded;
  EXPECT_FALSE(SameFacts(a, b));
  b = a;
  b.gpus[0].remap_failure = true;
  EXPECT_FALSE(SameFacts(a, b));
  b = a;
  b.gpus[0].throttle_reasons.push_back("SwThermalSlowdown");
  EXPECT_FALSE(SameFacts(a, b));
  b = a;
  b.expected_gpus = 7;
  EXPECT_FALSE(SameFacts(a, b));
}

TEST(SameFacts, TemperatureDeadbandOnlyWhenCool) {
  const auto a = Sample();  // 41 C, slowdown 87
  auto b = a;
  b.gpus[0].temperature_c = 43;
  EXPECT_TRUE(SameFacts(a, b));
  b.gpus[0].temperature_c = 44;
  EXPECT_FALSE(SameFacts(a, b));
  auto hot = a;
  hot.gpus[0].temperature_c = 83;
  b = hot;
  b.gpus[0].temperature_c = 84;  // near slowdown: every degree counts
  EXPECT_FALSE(SameFacts(hot, b));
  b = a;
  b.gpus[0].temperature_c.reset();
  EXPECT_FALSE(SameFacts(a, b));
}

TEST(SameFacts, BenignThrottleReasonsDoNotCount) {
  const auto a = Sample();
  auto b = a;
  b.gpus[0].throttle_reasons = {"HwThermalSlowdown", "SwPowerCap"};  // GpuIdle gone, cap on
  EXPECT_TRUE(SameFacts(a, b));
}

TEST(SourceStateName, Names) {
  EXPECT_EQ(SourceStateName(SourceState::kOk), "OK");
  EXPECT_EQ(SourceStateName(SourceState::kDegraded), "Degraded");
  EXPECT_EQ(SourceStateName(SourceState::kUnavailable), "Unavailable");
}

TEST(GpuNodeHealthCodec, MigFieldsDecodeAndAreOmittedWhenAbsent) {
  auto r = DecodeGpuNodeHealthStatus(
      R"({"gpus":[{"index":0,"migEnabled":true,"migPendingEnabled":true,"migDevices":[)"
      R"({"index":2,"uuid":"MIG-x","gpuInstance":3,"computeInstance":0,"profile":"1g.18gb",)"
      R"("memoryMiB":16384}]}],"xids":[{"xid":13,"count":1,"gpuInstance":3,"computeInstance":0},)"
      R"({"xid":79,"count":1}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->gpus[0].mig_devices.size(), 1u);
  const MigDevice& m = r->gpus[0].mig_devices[0];
  EXPECT_EQ(m.index, 2u);
  EXPECT_EQ(m.uuid, "MIG-x");
  EXPECT_EQ(m.gpu_instance, 3u);
  EXPECT_EQ(m.profile, "1g.18gb");
  EXPECT_EQ(m.memory_mib, 16384u);
  EXPECT_EQ(r->gpus[0].mig_pending_enabled, true);
  EXPECT_EQ(r->xids[0].gpu_instance, 3u);
  EXPECT_EQ(r->xids[0].compute_instance, 0u);
  EXPECT_FALSE(r->xids[1].gpu_instance.has_value());
  // A whole-GPU Xid encodes no instance keys at all (not 0, not 4294967295).
  GpuNodeHealthStatus s;
  XidEvent x;
  x.xid = 79;
  s.xids.push_back(x);
  auto json = EncodeGpuNodeHealthStatus(s);
  EXPECT_EQ(json.find("Instance"), std::string::npos) << json;
  EXPECT_EQ(json.find("mig"), std::string::npos) << json;
  for (const char* bad :
       {R"({"xids":[{"xid":13,"gpuInstance":-1}]})", R"({"xids":[{"xid":13,"gpuInstance":"3"}]})",
        R"({"gpus":[{"migDevices":{}}]})", R"({"gpus":[{"migDevices":[{"gpuInstance":true}]}]})",
        R"({"gpus":[{"migPendingEnabled":1}]})"}) {
    auto b = DecodeGpuNodeHealthStatus(bad);
    EXPECT_FALSE(b.ok()) << bad;
  }
}

TEST(SameFacts, MigChangesCount) {
  auto a = Sample();
  auto b = Sample();
  b.gpus[1].mig_devices.pop_back();
  EXPECT_FALSE(SameFacts(a, b));
  b = Sample();
  b.xids[1].gpu_instance = 5;
  EXPECT_FALSE(SameFacts(a, b));
  b = Sample();
  b.gpus[1].mig_pending_enabled = true;
  EXPECT_FALSE(SameFacts(a, b));
}

TEST(AgentLease, NameAndNodeRoundTripAndForeignNamesSpeakForNone) {
  EXPECT_EQ(AgentLeaseName("dgx-4"), "gpu-guardian-agent-dgx-4");
  EXPECT_EQ(AgentLeaseNode(AgentLeaseName("dgx-4")), "dgx-4");
  EXPECT_EQ(AgentLeaseNode("gpu-guardian-agent-"), "");
  EXPECT_EQ(AgentLeaseNode("gpu-guardian-operator"), "");
  EXPECT_EQ(AgentLeaseNode("kube-node-lease-dgx-4"), "");
}

}  // namespace
}  // namespace gg::api
