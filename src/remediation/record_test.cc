// RemediationRecord codec: round trip, strict types, garbage never crashes.
#include "remediation/record.h"

#include <gtest/gtest.h>

namespace gg::remediation {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

const WallTime kNow = WallTime(seconds(1'800'000'000));

TEST(Record, RoundTrip) {
  RemediationRecord r;
  r.state = "Unhealthy";
  r.occurrence = "node-a-1800000000";
  r.policy = "default";
  r.action = api::Action::kDrain;
  r.rules = {"fatal-xid"};
  r.reason = "fatal-xid: GPU 3 (GPU-1): Xid 79 (fallen off the bus, RESTART_BM) x1 in 10m";
  r.bad_gpus = {"GPU-1"};
  r.node_wide = true;
  r.started_at = kNow;
  r.updated_at = kNow + minutes(1);
  r.tainted = true;
  r.taint_effect = "NoSchedule";
  r.cordoned = true;
  r.drain = {DrainPhase::kBlocked, kNow, kNow + minutes(60), "pod a/b: PDB x refused"};
  r.device_taints = {
      {"GPU-2", "NoSchedule", "gg-node-a-gpu-2", kNow, "gpu.nvidia.com/node-a/gpu-2"}};
  r.cancelled = true;
  r.cancelled_at = kNow;
  r.skipped = "brake";
  r.recovered_at = kNow - minutes(100);
  policy::EvalMemory m;
  m.state = policy::HealthState::kUnhealthy;
  m.since = kNow;
  m.matches = {{"hot", "GPU-1", kNow, false}};
  r.memory["default"] = m;
  r.healthy_for = minutes(5);
  r.automatic_recovery = false;
  r.ungoverned_since = kNow;
  r.fences = {kNow - minutes(90), kNow - minutes(30), kNow};
  r.quarantined = true;
  r.quarantined_at = kNow;
  r.released_reason = "RMA done";
  r.released_at = kNow - minutes(200);
  auto back = DecodeRecord(EncodeRecord(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, r);
  EXPECT_TRUE(DecodeRecord(EncodeRecord(RemediationRecord{}))->memory.empty());
}

TEST(Record, DrainOutcomes) {
  RemediationRecord r;
  r.drain.phase = DrainPhase::kRunning;
  EXPECT_EQ(MarkDrainCompleted(r, kNow), "NodeDrained");
  EXPECT_EQ(r.drain.phase, DrainPhase::kCompleted);
  EXPECT_EQ(MarkDrainBlocked(r, "3 pods left", kNow), "DrainBlocked");
  EXPECT_EQ(r.drain.message, "3 pods left");
}

TEST(Record, GarbageIsAnError) {
  for (const char* bad :
       {"", "x", "[]", "{}", R"({"v":2})", R"({"v":"1"})", R"({"v":1,"action":"Explode"})",
        R"({"v":1,"tainted":"yes"})", R"({"v":1,"drain":{"phase":"Sideways"}})",
        R"({"v":1,"startedAt":"yesterday"})", R"({"v":1,"memory":{"p":{"state":7}}})",
        R"({"v":1,"rules":[1]})", R"({"v":1,"deviceTaints":[5]})",
        R"({"v":1,"recovery":{"healthyFor":"soon"}})", R"({"v":1,"recovery":7})",
        R"({"v":1,"fences":["noon"]})", R"({"v":1,"fences":[1,2,3,4,5,6,7,8,9,10,11]})",
        R"({"v":1,"quarantined":1})"}) {
    auto r = DecodeRecord(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
  std::string base = EncodeRecord([] {
    RemediationRecord r;
    r.occurrence = "o";
    r.tainted = true;
    r.memory["p"].state = policy::HealthState::kUnknown;
    return r;
  }());
  for (size_t i = 0; i < base.size(); ++i) {
    (void)DecodeRecord(base.substr(0, i));
    std::string f = base;
    f[i] = static_cast<char>(f[i] ^ 0x21);
    (void)DecodeRecord(f);
  }
  (void)DecodeRecord(std::string(5000, '{'));
}

}  // namespace
}  // namespace gg::remediation
