// Fault scripts: parsing errors with line numbers, and playback on FakeClock.
#include "gpu/fault_script.h"

#include <gtest/gtest.h>

#include <mutex>
#include <thread>

#include "gpu/collector.h"

namespace gg::gpu {
namespace {

using std::chrono::seconds;

constexpr char kScript[] = R"(gpus: 8
product: NVIDIA H100 80GB HBM3
timeline:
- {at: 30s, gpu: 3, xid: 79}
- {at: 60s, gpu: 1, temperature: 92, for: 5m}
- {at: 90s, gpu: 2, ecc: {uncorrectable_volatile: 1}}
- {at: 120s, gpu: 4, remap: {failure: true}}
- {at: 150s, gpu: 5, lost: true}
- {at: 200s, gpu: 3, clear: true}   # healthy again
)";

TEST(FaultScriptTest, ParsesTheExample) {
  auto s = ParseFaultScript(kScript);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->gpus, 8);
  EXPECT_EQ(s->product, "NVIDIA H100 80GB HBM3");
  ASSERT_EQ(s->timeline.size(), 6u);
  EXPECT_EQ(s->timeline[0].at, seconds(30));
  EXPECT_EQ(s->timeline[0].xid, 79);
  EXPECT_EQ(s->timeline[0].line, 4);
  EXPECT_EQ(s->timeline[1].duration, seconds(300));
  EXPECT_EQ(s->timeline[2].ecc.at("uncorrectable_volatile"), 1u);
  EXPECT_TRUE(s->timeline[3].remap->failure);
  EXPECT_EQ(s->timeline[4].lost, true);
  EXPECT_TRUE(s->timeline[5].clear);
}

TEST(FaultScriptTest, ErrorsCarryLineNumbers) {
  struct Bad {
    const char* yaml;
    const char* want;
  };
  const Bad kBad[] = {
      {"gpus: 2\ntimeline:\n- {at: 30s, gpu: 1, temprature: 90}\n",
       "line 3: unknown key 'temprature'"},
      {"gpus: 2\ntimeline:\n- {at: 30s, gpu: 2, xid: 79}\n", "line 3: gpu out of range"},
      {"gpus: 2\ntimeline:\n- {gpu: 1, xid: 79}\n", "line 3: timeline entry needs 'at'"},
      {"gpus: 2\ntimeline:\n- {at: soon, gpu: 1, xid: 79}\n", "line 3: at:"},
      {"gpus: 2\ntimeline:\n- {at: 1s, gpu: 1}\n", "nothing to do"},
      {"gpus: 2\ntimeline:\n  - {at: 1s, gpu: 1, ecc: {sbe: 1}}\n",
       "line 3: unknown ecc counter 'sbe'"},
      {"gpus: 2\ntimeline:\n- {at: 1s, gpu: 1, throttle: [Hot]}\n",
       "unknown throttle reason 'Hot'"},
      {"gpus: 2\ntimeline:\n- {at: 1s, gpu: 1, xid: 79\n", "line 4"},
      {"gpus: lots\n", "line 1: gpus must be an integer"},
      {"gpu: 2\n", "line 1: unknown key 'gpu'"},
      {"- 1\n- 2\n", "must be a map"},
      {"gpus: 2\ntimeline:\n- {at: 1s, gpu: 0, recovery_action: Reboot}\n",
       "recovery_action must be"},
  };
  for (const Bad& b : kBad) {
    SCOPED_TRACE(b.yaml);
    auto s = ParseFaultScript(b.yaml);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(b.want), std::string::npos) << s.status().message();
  }
  EXPECT_EQ(LoadFaultScript("/nonexistent/x.yaml").status().code(), StatusCode::kNotFound);
}

TEST(FaultScriptTest, PlaybackDrivesFakeNvmlAndCollector) {
  auto script = ParseFaultScript(kScript);
  ASSERT_TRUE(script.ok());
  FakeNvml fake(0);
  FakeClock clock;
  FaultPlayer player(*script, fake, clock);
  player.Start();
  EXPECT_EQ(fake.gpu_count(), 8);
  EXPECT_EQ(player.total(), 7u);  // 6 events + 1 revert
  CollectorOptions o;
  o.event_wait = std::chrono::milliseconds(20);
  Collector c(fake, clock, o);
  ASSERT_TRUE(c.Init().ok());

  clock.Advance(seconds(61));
  EXPECT_EQ(player.applied(), 2u);
  SweepResult r = c.Sweep();
  EXPECT_EQ(r.gpus[0].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(r.gpus[1].temperature_c, 92);

  clock.Advance(seconds(100));  // t = 161s
  r = c.Sweep();
  EXPECT_EQ(r.gpus[2].ecc_uncorrected_volatile, 1u);
  EXPECT_TRUE(r.gpus[4].remap_failure);
  EXPECT_TRUE(r.gpus[5].lost);
  EXPECT_EQ(r.source.state, api::SourceState::kDegraded);

  clock.Advance(seconds(200));  // t = 361s: the 5-minute thermal event is over
  EXPECT_TRUE(player.done());
  r = c.Sweep();
  EXPECT_EQ(r.gpus[1].temperature_c, 35);
}

TEST(FaultScriptTest, TimeScaleAndAllGpus) {
  auto script = ParseFaultScript(
      "gpus: 2\nuuids: [GPU-a, GPU-b]\ntimeline:\n- {at: 100s, gpu: all, temperature: 80}\n"
      "- {at: 10s, gpu: 1, recovery_action: DrainAndReset}\n");
  ASSERT_TRUE(script.ok()) << script.status();
  EXPECT_EQ(script->timeline[0].at, seconds(10));  // sorted
  FakeNvml fake(0);
  FakeClock clock;
  FaultPlayer player(*script, fake, clock, /*time_scale=*/10.0);
  player.Start();
  EXPECT_EQ(fake.Get(1).uuid, "GPU-b");
  clock.Advance(seconds(10));  // = 100 script seconds
  EXPECT_TRUE(player.done());
  EXPECT_EQ(fake.Get(0).temperature_c, 80);
  EXPECT_EQ(fake.Get(1).temperature_c, 80);
  EXPECT_EQ(fake.Get(1).recovery_action, 4);
}

// A partitioned GPU: the script's mig header gives GPU 1 two MIG devices; the collector
// reports them and a MIG-attributed Xid event carries its GPU instance.
TEST(FaultScriptTest, MigPartitionAndAttributedXid) {
  auto script = ParseFaultScript(R"(gpus: 2
uuids: [GPU-11111111-2222-3333-4444-555555555555, GPU-b]
product: NVIDIA H200
mig:
- {gpu: 1, gpu_instance: 3, compute_instance: 0, profile: 1g.18gb, memory_mib: 16384}
- {gpu: 1, gpu_instance: 5, compute_instance: 0, profile: 3g.71gb, uuid: MIG-fixed}
timeline:
- {at: 10s, gpu: 1, xid: 13, gpu_instance: 3, compute_instance: 0}
)");
  ASSERT_TRUE(script.ok()) << script.status();
  ASSERT_EQ(script->mig.size(), 2u);
  EXPECT_EQ(script->mig[0].line, 5);
  EXPECT_EQ(script->timeline[0].gpu_instance, 3u);
  EXPECT_EQ(FakeMigUuid("GPU-11111111-2222-3333-4444-555555555555", 3, 0),
            "MIG-11111111-2222-3333-4444-555555550300");

  FakeNvml fake(0);
  FakeClock clock;
  FaultPlayer player(*script, fake, clock);
  player.Start();
  CollectorOptions o;
  o.event_wait = std::chrono::milliseconds(20);
  Collector c(fake, clock, o);
  ASSERT_TRUE(c.Init().ok());
  SweepResult r = c.Sweep();
  ASSERT_EQ(r.gpus.size(), 2u);
  EXPECT_FALSE(r.gpus[0].mig_enabled);
  EXPECT_TRUE(r.gpus[0].mig_devices.empty());
  EXPECT_TRUE(r.gpus[1].mig_enabled);
  EXPECT_EQ(r.gpus[1].mig_pending_enabled, true);
  ASSERT_EQ(r.gpus[1].mig_devices.size(), 2u);
  const api::MigDevice& m0 = r.gpus[1].mig_devices[0];
  EXPECT_EQ(m0.index, 0u);
  EXPECT_EQ(m0.uuid, "MIG-b0300");  // derived from a too-short GPU UUID: body + ids
  EXPECT_EQ(m0.gpu_instance, 3u);
  EXPECT_EQ(m0.compute_instance, 0u);
  EXPECT_EQ(m0.profile, "1g.18gb");
  EXPECT_EQ(m0.memory_mib, 16384u);
  const api::MigDevice& m1 = r.gpus[1].mig_devices[1];
  EXPECT_EQ(m1.uuid, "MIG-fixed");
  EXPECT_EQ(m1.gpu_instance, 5u);
  EXPECT_EQ(m1.profile, "3g.71gb");
  EXPECT_FALSE(m1.memory_mib.has_value());  // not given: NOT_SUPPORTED, omitted

  std::mutex mu;
  std::vector<GpuEvent> events;
  ASSERT_TRUE(c.StartEvents([&](const GpuEvent& e) {
                 std::scoped_lock lock(mu);
                 events.push_back(e);
               }).ok());
  clock.Advance(seconds(11));
  for (int i = 0; i < 500; ++i) {
    {
      std::scoped_lock lock(mu);
      if (!events.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  c.StopEvents();
  std::scoped_lock lock(mu);
  ASSERT_EQ(events.size(), 1u);
  XidClassifier classifier;
  auto x = ToXidEvent(events[0], classifier);
  ASSERT_TRUE(x);
  EXPECT_EQ(x->xid, 13);
  EXPECT_EQ(x->gpu_uuid, "GPU-b");
  EXPECT_EQ(x->gpu_instance, 3u);
  EXPECT_EQ(x->compute_instance, 0u);
}

TEST(FaultScriptTest, MigErrors) {
  struct Bad {
    const char* yaml;
    const char* want;
  };
  const Bad kBad[] = {
      {"gpus: 2\nmig:\n- {gpu: 2, gpu_instance: 1}\n", "line 3: gpu out of range"},
      {"gpus: 2\nmig:\n- {gpu: 1}\n", "line 3: mig entry needs 'gpu_instance'"},
      {"gpus: 2\nmig:\n- {gpu: 1, gpu_instance: 1, slices: 2}\n", "unknown mig key 'slices'"},
      {"gpus: 2\nmig:\n- {gpu: 1, gpu_instance: 1, uuid: GPU-x}\n",
       "must be a string starting with MIG-"},
      {"gpus: 2\nmig:\n- {gpu: 1, gpu_instance: 1}\n- {gpu: 1, gpu_instance: 1}\n",
       "line 4: duplicate MIG device"},
      {"gpus: 2\nmig: {gpu: 1}\n", "mig must be a list"},
      {"gpus: 2\ntimeline:\n- {at: 1s, gpu: 1, temperature: 80, gpu_instance: 1}\n",
       "attribute an xid"},
      {"gpus: 2\ntimeline:\n- {at: 1s, gpu: 1, xid: 13, compute_instance: 0}\n",
       "compute_instance needs gpu_instance"},
      {"gpus: 2\ntimeline:\n- {at: 1s, gpu: 1, xid: 13, gpu_instance: -1}\n", "out of range"},
  };
  for (const Bad& b : kBad) {
    SCOPED_TRACE(b.yaml);
    auto s = ParseFaultScript(b.yaml);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.status().message().find(b.want), std::string::npos) << s.status().message();
  }
}

}  // namespace
}  // namespace gg::gpu

// A state file with no events yet ("timeline:" then nothing) is valid: events get appended
// to it while the agent runs (the fake libnvidia-ml.so.1 follows the file).
TEST(FaultScriptTest, EmptyTimelineToAppendTo) {
  using gg::gpu::ParseFaultScript;
  auto s = ParseFaultScript("gpus: 4\nuuids: [GPU-a, GPU-b, GPU-c, GPU-d]\ntimeline:\n");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->gpus, 4);
  EXPECT_TRUE(s->timeline.empty());
  auto appended = ParseFaultScript("gpus: 4\ntimeline:\n  - {at: 0s, gpu: 2, xid: 48}\n");
  ASSERT_TRUE(appended.ok()) << appended.status().ToString();
  ASSERT_EQ(appended->timeline.size(), 1u);
  EXPECT_EQ(appended->timeline[0].line, 3);
  EXPECT_FALSE(ParseFaultScript("gpus: 4\ntimeline: 7\n").ok());
}
