// Real NVML (label `gpu`): loads libnvidia-ml.so.1, sweeps every GPU, registers events.
// Skips cleanly when the library or driver is absent. Prints what it saw (and sweep costs)
// so scripts/gpu-check.sh logs carry the facts.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "common/clock.h"
#include "gpu/collector.h"
#include "gpu/nvml_loader.h"

namespace gg::gpu {
namespace {

class NvmlRealTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status s = loader_.Load();
    if (!s.ok()) GTEST_SKIP() << "NVML not available: " << loader_.LoadError();
    NvmlReturn r = loader_.Init();
    if (r != NvmlReturn::kSuccess)
      GTEST_SKIP() << "nvmlInit_v2: " << NvmlReturnName(r) << " (" << loader_.ErrorString(r) << ")";
    inited_ = true;
    if (!loader_.MissingOptionalSymbols().empty())
      std::printf("optional NVML symbols missing: %s\n", loader_.MissingOptionalSymbols().c_str());
  }
  void TearDown() override {
    if (inited_) (void)loader_.Shutdown();
  }
  NvmlLoader loader_;
  bool inited_ = false;
};

TEST_F(NvmlRealTest, SweepsAllGpus) {
  unsigned n = 0;
  ASSERT_EQ(loader_.DeviceGetCount(&n), NvmlReturn::kSuccess);
  if (n == 0) GTEST_SKIP() << "no GPUs";
  RealClock clock;
  Collector c(loader_, clock);
  ASSERT_TRUE(c.Init().ok()) << c.source_status().message;
  SweepResult r = c.Sweep();  // first sweep includes the slow-cadence counters
  std::printf("driver %s, %d GPU(s), first sweep %.1f us, source %s %s\n", r.driver_version.c_str(),
              r.found_gpus, std::chrono::duration<double, std::micro>(r.took).count(),
              std::string(api::SourceStateName(r.source.state)).c_str(), r.source.message.c_str());
  ASSERT_EQ(r.gpus.size(), n);
  for (const api::GpuStatus& g : r.gpus) {
    std::printf(
        "gpu %d %s %s pci=%s temp=%d slowdown=%d shutdown=%d power=%.1fW/%.1fW ecc=%d "
        "dbe_vol=%llu remap(c/u/p/f)=%u/%u/%d/%d pcie_replay=%llu nvlink=%d recovery=%s lost=%d\n",
        g.index, g.uuid.c_str(), g.name.c_str(), g.pci_bus_id.c_str(), g.temperature_c.value_or(-1),
        g.slowdown_temperature_c.value_or(-1), g.shutdown_temperature_c.value_or(-1),
        g.power_watts.value_or(-1), g.power_limit_watts.value_or(-1), g.ecc_enabled,
        static_cast<unsigned long long>(g.ecc_uncorrected_volatile.value_or(0)),
        g.remapped_rows_correctable.value_or(0), g.remapped_rows_uncorrectable.value_or(0),
        g.remap_pending, g.remap_failure,
        static_cast<unsigned long long>(g.pcie_replay_count.value_or(0)),
        g.nvlink_links_total.value_or(0), g.recovery_action.c_str(), g.lost);
    EXPECT_EQ(g.uuid.rfind("GPU-", 0), 0u) << g.uuid;
    EXPECT_FALSE(g.pci_bus_id.empty());
    ASSERT_TRUE(g.temperature_c.has_value());
    EXPECT_GT(*g.temperature_c, 0);
    EXPECT_LT(*g.temperature_c, 120);
    EXPECT_FALSE(g.lost);
    if (g.slowdown_temperature_c) {
      EXPECT_GT(*g.slowdown_temperature_c, *g.temperature_c);
    }
  }
  // Costs of fast and slow sweeps (printed, not asserted: benchmarks own the targets).
  const int kSweeps = 200;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kSweeps; ++i) c.Sweep(r);
  auto per =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0) / kSweeps;
  std::printf("average sweep (1 in %d slow) %.1f us = %.1f us per GPU\n",
              CollectorOptions{}.slow_every_sweeps, per.count(), per.count() / n);
  EXPECT_EQ(r.source.state, api::SourceState::kOk) << r.source.message;
}

TEST_F(NvmlRealTest, EventSetRegistersAndTimesOut) {
  unsigned n = 0;
  ASSERT_EQ(loader_.DeviceGetCount(&n), NvmlReturn::kSuccess);
  if (n == 0) GTEST_SKIP() << "no GPUs";
  DeviceHandle d;
  ASSERT_EQ(loader_.DeviceGetHandleByIndex(0, &d), NvmlReturn::kSuccess);
  uint64_t supported = 0;
  ASSERT_EQ(loader_.DeviceGetSupportedEventTypes(d, &supported), NvmlReturn::kSuccess);
  std::printf("supported event mask 0x%llx\n", static_cast<unsigned long long>(supported));
  EventSetHandle set;
  ASSERT_EQ(loader_.EventSetCreate(&set), NvmlReturn::kSuccess);
  const uint64_t mask = kHealthEventMask & supported;
  EXPECT_NE(mask & kEventXidCritical, 0u);
  EXPECT_EQ(loader_.DeviceRegisterEvents(d, mask, set), NvmlReturn::kSuccess);
  EventData e;
  auto t0 = std::chrono::steady_clock::now();
  NvmlReturn r = loader_.EventSetWait(set, 200, &e);
  auto waited = std::chrono::steady_clock::now() - t0;
  std::printf("event wait -> %s after %lld ms\n", std::string(NvmlReturnName(r)).c_str(),
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()));
  EXPECT_TRUE(r == NvmlReturn::kTimeout || r == NvmlReturn::kSuccess) << NvmlReturnName(r);
  EXPECT_EQ(loader_.EventSetFree(set), NvmlReturn::kSuccess);

  // The collector's event thread starts and stops cleanly on the real driver.
  RealClock clock;
  CollectorOptions o;
  o.event_wait = std::chrono::milliseconds(100);
  Collector c(loader_, clock, o);
  ASSERT_TRUE(c.Init().ok());
  ASSERT_TRUE(c.StartEvents([](const GpuEvent& ev) {
                 std::printf("event %s xid=%d gpu=%d\n",
                             std::string(GpuEventKindName(ev.kind)).c_str(), ev.xid, ev.gpu_index);
               }).ok());
  for (const auto& id : c.identities())
    EXPECT_NE(id.registered_events & kEventXidCritical, 0u) << "GPU " << id.index;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  c.StopEvents();
  EXPECT_EQ(c.Sweep().source.state, api::SourceState::kOk);
}

TEST_F(NvmlRealTest, PcieReplayCounterCost) {
  unsigned n = 0;
  ASSERT_EQ(loader_.DeviceGetCount(&n), NvmlReturn::kSuccess);
  if (n == 0) GTEST_SKIP() << "no GPUs";
  DeviceHandle d;
  ASSERT_EQ(loader_.DeviceGetHandleByIndex(0, &d), NvmlReturn::kSuccess);
  auto time_it = [](auto fn) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 200; ++i) fn();
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
               .count() /
           200;
  };
  unsigned v = 0;
  int t = 0;
  FieldValue f;
  f.field_id = kFieldGpuRecoveryAction;
  double pcie = time_it([&] { (void)loader_.DeviceGetPcieReplayCounter(d, &v); });
  double temp = time_it([&] { (void)loader_.DeviceGetTemperature(d, &t); });
  double field =
      time_it([&] { (void)loader_.DeviceGetFieldValues(d, std::span<FieldValue>(&f, 1)); });
  std::printf(
      "cost per call: pcie replay %.1f us, temperature %.2f us, field 230 %.2f us (=%llu)\n", pcie,
      temp, field, static_cast<unsigned long long>(f.u64));
  SUCCEED();
}

}  // namespace
}  // namespace gg::gpu
