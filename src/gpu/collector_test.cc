// Collector scenarios on FakeNvml: sweep facts, events, lost GPUs, hangs, missing library.
#include "gpu/collector.h"

#include <gtest/gtest.h>

#include <mutex>
#include <thread>

#include "gpu/fake_nvml.h"
#include "gpu/kmsg_parser.h"

namespace gg::gpu {
namespace {

using std::chrono::milliseconds;

template <typename Pred>
bool WaitFor(Pred p, milliseconds limit = milliseconds(10000)) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (p()) return true;
    std::this_thread::sleep_for(milliseconds(2));
  }
  return p();
}

struct EventLog {
  std::mutex mu;
  std::vector<GpuEvent> events;
  Collector::EventCallback Callback() {
    return [this](const GpuEvent& e) {
      std::scoped_lock lock(mu);
      events.push_back(e);
    };
  }
  size_t size() {
    std::scoped_lock lock(mu);
    return events.size();
  }
  GpuEvent at(size_t i) {
    std::scoped_lock lock(mu);
    return events.at(i);
  }
};

CollectorOptions FastOptions() {
  CollectorOptions o;
  o.call_deadline = milliseconds(2000);
  o.event_wait = milliseconds(20);
  return o;
}

TEST(CollectorTest, SweepReportsFacts) {
  FakeNvml fake(8);
  fake.SetUuids({"GPU-aaaaaaaa-0000-0000-0000-000000000000"});
  fake.Mutate(2, [](FakeGpuState& g) {
    g.clock_event_reasons = kClockEventSwPowerCap | kClockEventHwSlowdown;
    g.recovery_action = 1;
    g.nvlink_links = 18;
    g.nvlink_down = {true, false, true};
    g.nvlink_errors_per_link = 1;
  });
  FakeClock clock;
  CollectorOptions o = FastOptions();
  o.expected_gpus = 8;
  Collector c(fake, clock, o);
  ASSERT_TRUE(c.Init().ok());
  SweepResult r = c.Sweep();
  EXPECT_EQ(r.source.name, "nvml");
  EXPECT_EQ(r.source.state, api::SourceState::kOk) << r.source.message;
  ASSERT_EQ(r.gpus.size(), 8u);
  EXPECT_EQ(r.found_gpus, 8);
  EXPECT_EQ(r.gpus[0].uuid, "GPU-aaaaaaaa-0000-0000-0000-000000000000");
  EXPECT_EQ(r.gpus[1].uuid, "GPU-00000000-0000-0000-0000-000000000001");
  EXPECT_EQ(r.gpus[1].pci_bus_id, "00000000:19:00.0");
  EXPECT_EQ(r.gpus[1].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(r.gpus[1].temperature_c, 35);
  EXPECT_EQ(r.gpus[1].slowdown_temperature_c, 89);
  EXPECT_EQ(r.gpus[1].shutdown_temperature_c, 95);
  EXPECT_DOUBLE_EQ(r.gpus[1].power_watts.value_or(0), 81.0);
  EXPECT_DOUBLE_EQ(r.gpus[1].power_limit_watts.value_or(0), 700.0);
  EXPECT_TRUE(r.gpus[1].ecc_enabled);
  EXPECT_EQ(r.gpus[1].ecc_uncorrected_volatile, 0u);
  EXPECT_EQ(r.gpus[1].remapped_rows_uncorrectable, 0u);
  EXPECT_EQ(r.gpus[1].pcie_replay_count, 0u);
  EXPECT_EQ(r.gpus[1].recovery_action, "None");
  EXPECT_FALSE(r.gpus[1].nvlink_links_total.has_value());  // no NVLink on this GPU
  EXPECT_EQ(r.gpus[2].recovery_action, "GpuReset");
  EXPECT_EQ(r.gpus[2].throttle_reasons, (std::vector<std::string>{"SwPowerCap", "HwSlowdown"}));
  EXPECT_EQ(r.gpus[2].nvlink_links_total, 18);
  EXPECT_EQ(r.gpus[2].nvlink_links_down, 2);
  EXPECT_EQ(r.gpus[2].nvlink_error_count, 18u * 3u);
  EXPECT_EQ(r.extras[2].clock_event_mask, kClockEventSwPowerCap | kClockEventHwSlowdown);
  auto id = c.GpuForPci(0, 0x1b, 0);
  ASSERT_TRUE(id);
  EXPECT_EQ(id->index, 3);
  EXPECT_EQ(c.UuidForPci(0, 0x99, 0), "");
}

TEST(CollectorTest, PcieReplayOnSlowCadence) {
  FakeNvml fake(2);
  FakeClock clock;
  CollectorOptions o = FastOptions();
  o.slow_every_sweeps = 6;
  Collector c(fake, clock, o);
  ASSERT_TRUE(c.Init().ok());
  SweepResult r;
  for (int i = 0; i < 12; ++i) c.Sweep(r);
  EXPECT_EQ(fake.CallCount("nvmlDeviceGetPcieReplayCounter"), 2u * 2u);
  EXPECT_EQ(fake.CallCount("nvmlDeviceGetTemperature"), 12u * 2u);
  fake.Mutate(0, [](FakeGpuState& g) { g.pcie_replay = 7; });
  for (int i = 0; i < 6; ++i) c.Sweep(r);
  EXPECT_EQ(r.gpus[0].pcie_replay_count, 7u);
}

TEST(CollectorTest, XidEventDeliveredThroughEventWait) {
  FakeNvml fake(4);
  FakeClock clock;
  Collector c(fake, clock, FastOptions());
  ASSERT_TRUE(c.Init().ok());
  EventLog log;
  ASSERT_TRUE(c.StartEvents(log.Callback()).ok());
  for (const auto& id : c.identities()) EXPECT_NE(id.registered_events & kEventXidCritical, 0u);
  fake.Mutate(3, [](FakeGpuState& g) { g.recovery_action = 2; });
  fake.InjectXid(3, 79);
  ASSERT_TRUE(WaitFor([&] { return log.size() >= 1; }));
  GpuEvent e = log.at(0);
  EXPECT_EQ(e.kind, GpuEvent::Kind::kXid);
  EXPECT_EQ(e.xid, 79);
  EXPECT_EQ(e.gpu_index, 3);
  EXPECT_EQ(e.gpu_uuid, "GPU-00000000-0000-0000-0000-000000000003");
  EXPECT_EQ(e.recovery_action, RecoveryAction::kNodeReboot);
  XidClassifier classifier;
  auto x = ToXidEvent(e, classifier);
  ASSERT_TRUE(x);
  EXPECT_EQ(x->xid, 79);
  EXPECT_EQ(x->pci_bus_id, "0000:1b:00.0");
  EXPECT_EQ(x->recommended_action, "RESTART_BM");
  EXPECT_EQ(x->category, "pcie");
  EXPECT_EQ(x->count, 1);
  c.StopEvents();
}

TEST(CollectorTest, DoubleBitEccEventAndCounters) {
  FakeNvml fake(2);
  FakeClock clock;
  Collector c(fake, clock, FastOptions());
  ASSERT_TRUE(c.Init().ok());
  EventLog log;
  ASSERT_TRUE(c.StartEvents(log.Callback()).ok());
  fake.InjectDbe(1);
  ASSERT_TRUE(WaitFor([&] { return log.size() >= 1; }));
  EXPECT_EQ(log.at(0).kind, GpuEvent::Kind::kDoubleBitEcc);
  EXPECT_EQ(log.at(0).gpu_index, 1);
  EXPECT_FALSE(ToXidEvent(log.at(0), XidClassifier()).has_value());
  SweepResult r = c.Sweep();
  EXPECT_EQ(r.gpus[1].ecc_uncorrected_volatile, 1u);
  EXPECT_EQ(r.gpus[1].ecc_uncorrected_aggregate, 1u);
  EXPECT_EQ(r.gpus[0].ecc_uncorrected_volatile, 0u);
}

TEST(CollectorTest, RemapFailureAndThermal) {
  FakeNvml fake(2);
  FakeClock clock;
  Collector c(fake, clock, FastOptions());
  ASSERT_TRUE(c.Init().ok());
  fake.Mutate(0, [](FakeGpuState& g) { g.remapped_rows = RemappedRows{3, 1, true, true}; });
  fake.Mutate(1, [](FakeGpuState& g) {
    g.temperature_c = 92;
    g.clock_event_reasons = kClockEventSwThermalSlowdown | kClockEventHwThermalSlowdown;
  });
  SweepResult r = c.Sweep();
  EXPECT_TRUE(r.gpus[0].remap_failure);
  EXPECT_TRUE(r.gpus[0].remap_pending);
  EXPECT_EQ(r.gpus[0].remapped_rows_correctable, 3u);
  EXPECT_EQ(r.gpus[0].remapped_rows_uncorrectable, 1u);
  EXPECT_EQ(r.gpus[1].temperature_c, 92);
  EXPECT_GT(*r.gpus[1].temperature_c, *r.gpus[1].slowdown_temperature_c);
  EXPECT_EQ(r.gpus[1].throttle_reasons,
            (std::vector<std::string>{"SwThermalSlowdown", "HwThermalSlowdown"}));
}

TEST(CollectorTest, RetiredPagesOnOlderGpus) {
  FakeNvml fake(1);
  fake.Mutate(0, [](FakeGpuState& g) {
    g.remapped_rows.reset();
    g.retired_sbe = 2;
    g.retired_dbe = 1;
    g.retired_pending = true;
  });
  FakeClock clock;
  Collector c(fake, clock, FastOptions());
  ASSERT_TRUE(c.Init().ok());
  SweepResult r = c.Sweep();
  EXPECT_FALSE(r.gpus[0].remapped_rows_correctable.has_value());
  EXPECT_EQ(r.gpus[0].retired_pages_sbe, 2u);
  EXPECT_EQ(r.gpus[0].retired_pages_dbe, 1u);
  EXPECT_TRUE(r.gpus[0].retired_pages_pending);
}

TEST(CollectorTest, GpuLostIsAHealthSignal) {
  FakeNvml fake(8);
  FakeClock clock;
  Collector c(fake, clock, FastOptions());
  ASSERT_TRUE(c.Init().ok());
  EventLog log;
  ASSERT_TRUE(c.StartEvents(log.Callback()).ok());
  fake.SetLost(5, true);
  SweepResult r = c.Sweep();
  EXPECT_TRUE(r.gpus[5].lost);
  EXPECT_FALSE(r.gpus[4].lost);
  EXPECT_EQ(r.gpus[4].temperature_c, 35);
  EXPECT_EQ(r.source.state, api::SourceState::kDegraded);
  EXPECT_NE(r.source.message.find("1 GPU(s) lost"), std::string::npos) << r.source.message;
  ASSERT_TRUE(WaitFor([&] { return log.size() >= 1; }));
  EXPECT_EQ(log.at(0).kind, GpuEvent::Kind::kGpuLost);
  fake.SetLost(5, false);
  r = c.Sweep();
  EXPECT_FALSE(r.gpus[5].lost);
  EXPECT_EQ(r.source.state, api::SourceState::kOk) << r.source.message;
}

TEST(CollectorTest, FewerGpusThanCapacity) {
  FakeNvml fake(7);
  FakeClock clock;
  CollectorOptions o = FastOptions();
  o.expected_gpus = 8;
  Collector c(fake, clock, o);
  ASSERT_TRUE(c.Init().ok());
  SweepResult r = c.Sweep();
  EXPECT_EQ(r.found_gpus, 7);
  EXPECT_EQ(r.expected_gpus, 8);
  EXPECT_EQ(r.source.state, api::SourceState::kDegraded);
  EXPECT_NE(r.source.message.find("found 7 of 8 expected GPUs"), std::string::npos);
}

TEST(CollectorTest, HungCallDegradesButCollectorKeepsGoing) {
  FakeNvml fake(4);
  FakeClock clock;
  CollectorOptions o = FastOptions();
  o.call_deadline = milliseconds(100);
  Collector c(fake, clock, o);
  ASSERT_TRUE(c.Init().ok());
  SweepResult r;
  c.Sweep(r);  // first sweep (slow cadence) completes
  ASSERT_EQ(r.source.state, api::SourceState::kOk);
  fake.Mutate(2, [](FakeGpuState& g) { g.temperature_c = 50; });
  fake.Hang("nvmlDeviceGetTemperature");
  c.Sweep(r);
  EXPECT_EQ(r.source.state, api::SourceState::kDegraded);
  EXPECT_EQ(r.source.message, "NVML call nvmlDeviceGetTemperature hung > 100ms");
  EXPECT_TRUE(r.gpus[0].lost);  // the GPU whose read hung
  EXPECT_FALSE(r.gpus[1].lost);
  EXPECT_TRUE(r.extras[1].stale);
  EXPECT_EQ(r.gpus[2].temperature_c, 35);  // last known value
  // Still hung: the next sweep returns promptly, still degraded.
  auto t0 = std::chrono::steady_clock::now();
  c.Sweep(r);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(r.source.state, api::SourceState::kDegraded);
  fake.ReleaseHangs();
  ASSERT_TRUE(WaitFor([&] { return !c.worker().hung(); }));
  c.Sweep(r);
  EXPECT_EQ(r.source.state, api::SourceState::kOk) << r.source.message;
  EXPECT_FALSE(r.gpus[0].lost);
  EXPECT_EQ(r.gpus[2].temperature_c, 50);
}

TEST(CollectorTest, LibraryMissingIsUnavailable) {
  FakeNvml fake(8);
  fake.SetLibraryMissing(true);
  FakeClock clock;
  Collector c(fake, clock, FastOptions());
  Status s = c.Init();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  SweepResult r = c.Sweep();
  EXPECT_TRUE(r.gpus.empty());
  EXPECT_EQ(r.source.state, api::SourceState::kUnavailable);
  EXPECT_EQ(r.source.message,
            "libnvidia-ml.so.1: cannot open shared object file: No such file or directory");
  EXPECT_FALSE(c.StartEvents(nullptr).ok());
  // Retried after init_retry once the library shows up.
  fake.SetLibraryMissing(false);
  r = c.Sweep();
  EXPECT_EQ(r.source.state, api::SourceState::kUnavailable);
  clock.Advance(std::chrono::seconds(61));
  r = c.Sweep();
  EXPECT_EQ(r.source.state, api::SourceState::kOk);
  EXPECT_EQ(r.gpus.size(), 8u);
}

TEST(CollectorTest, KmsgXidToReport) {
  KmsgXid k;
  k.xid = 154;
  k.pci_bus_id = "0000:3b:00.0";
  k.message = "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)";
  XidClassifier classifier;
  api::XidEvent x = ToXidEvent(k, "GPU-x", WallTime{}, 3, classifier);
  EXPECT_EQ(x.recommended_action, "RESET_GPU");
  EXPECT_EQ(x.count, 3);
  EXPECT_EQ(x.gpu_uuid, "GPU-x");
  EXPECT_FALSE(x.gpu_instance.has_value());
  // The contract of the MIG report: GPU-I/GPU-CI from the kernel line land on the Xid.
  auto mig = ParseKmsgLine(
      "NVRM: Xid (PCI:0000:86:00 GPU-I:03 GPU-CI:00): 13, pid=4242, name=python3, Graphics "
      "SM Warp Exception on (GPC 0, TPC 1, SM 0): Out Of Range Address");
  ASSERT_TRUE(mig);
  x = ToXidEvent(*mig, "GPU-m", WallTime{}, 1, classifier);
  EXPECT_EQ(x.xid, 13);
  EXPECT_EQ(x.pci_bus_id, "0000:86:00.0");
  EXPECT_EQ(x.gpu_instance, 3u);
  EXPECT_EQ(x.compute_instance, 0u);
  KmsgXid s;
  s.sxid = true;
  s.xid = 20034;
  s.fatal = true;
  s.message = std::string(1000, 'm');
  x = ToXidEvent(s, "", WallTime{}, 1, classifier);
  EXPECT_TRUE(x.sxid);
  EXPECT_EQ(x.category, "nvswitch");
  EXPECT_EQ(x.message.size(), 256u);
}

}  // namespace
}  // namespace gg::gpu
