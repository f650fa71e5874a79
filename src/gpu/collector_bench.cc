// Collector sweep cost per GPU: our own overhead (StubNvml answers instantly, no locks) and
// with FakeNvml. Target: <= 5 us per GPU on top of NVML.
#include <benchmark/benchmark.h>
#include <time.h>

#include "common/clock.h"
#include "gpu/collector.h"
#include "gpu/fake_nvml.h"
#include "gpu/nvml_worker.h"

namespace gg::gpu {
namespace {

// Answers every call with constants: what is left in a sweep is the collector's own cost
// (worker hand-off, conversion into api::GpuStatus).
class StubNvml final : public NvmlApi {
 public:
  explicit StubNvml(unsigned n) : n_(n) {}
  NvmlReturn Init() override { return NvmlReturn::kSuccess; }
  NvmlReturn Shutdown() override { return NvmlReturn::kSuccess; }
  std::string LoadError() const override { return {}; }
  std::string ErrorString(NvmlReturn r) override { return std::string(NvmlReturnName(r)); }
  NvmlReturn SystemGetDriverVersion(std::string* v) override {
    *v = "stub";
    return NvmlReturn::kSuccess;
  }
  NvmlReturn DeviceGetCount(unsigned* c) override {
    *c = n_;
    return NvmlReturn::kSuccess;
  }
  NvmlReturn DeviceGetHandleByIndex(unsigned i, DeviceHandle* d) override {
    d->value = i + 1;
    return NvmlReturn::kSuccess;
  }
  NvmlReturn DeviceGetName(DeviceHandle, std::string* s) override {
    *s = "NVIDIA H200";
    return NvmlReturn::kSuccess;
  }
  NvmlReturn DeviceGetUuid(DeviceHandle d, std::string* s) override {
    *s = "GPU-00000000-0000-0000-0000-00000000000" + std::to_string(d.value % 10);
    return NvmlReturn::kSuccess;
  }
  NvmlReturn DeviceGetSerial(DeviceHandle, std::string* s) override {
    *s = "1652";
    return NvmlReturn::kSuccess;
  }
  NvmlReturn DeviceGetPciInfo(DeviceHandle d, PciInfo* p) override {
    p->bus = static_cast<uint32_t>(d.value);
    p->bus_id = "00000000:0" + std::to_string(d.value % 10) + ":00.0";
    return NvmlReturn::kSuccess;
  }
  NvmlReturn DeviceGetMigMode(DeviceHandle, bool* c, bool* p) override {
    *c = *p = false;
    return NvmlReturn::kSuccess;
  }
  NvmlReturn DeviceGetTemperature(DeviceHandle, int* c) override {
    *c = 34;
    return NvmlReturn::kSuccess;
  }
  NvmlReturn DeviceGetTemperatureThreshold(DeviceHandle, TemperatureThreshold, int* c) override {
    *c = 89;
    return NvmlReturn::kSuccess;
  }
  NvmlReturn DeviceGetCurrentClocksEventReasons(DeviceHandle, uint64_t* r) override {
    *r = 1;
    return NvmlReturn::kSuccess;
  }
  NvmlReturn DeviceGetSupportedClocksEventReasons(DeviceHandle, uint64_t* r) override {
    *r = 0x1FF;
    return NvmlReturn::kSuccess;
  }
  NvmlReturn DeviceGetViolationStatus(DeviceHandle, PerfPolicy, ViolationTime* o) override {
    o->violation_time_ns = 5;
    return NvmlReturn::kSuccess;
  }
  NvmlReturn DeviceGetPowerUsage(DeviceHandle, unsigned* m) override {
    *m = 81302;
    return NvmlReturn::kSuccess;
  }
  NvmlReturn DeviceGetEnforcedPowerLimit(DeviceHandle, unsigned* m) override {
    *m = 700000;
    return NvmlReturn::kSuccess;
  }
  NvmlReturn DeviceGetEccMode(DeviceHandle, bool* c, bool* p) override {
    *c = *p = true;
    return NvmlReturn::kSuccess;
  }
  NvmlReturn DeviceGetTotalEccErrors(DeviceHandle, EccErrorType, EccCounterType,
                                     uint64_t* n) override {
    *n = 0;
    return NvmlReturn::kSuccess;
  }
  NvmlReturn DeviceGetRemappedRows(DeviceHandle, RemappedRows* r) override {
    *r = {};
    return NvmlReturn::kSuccess;
  }
  NvmlReturn DeviceGetRetiredPagesCount(DeviceHandle, RetirementCause, unsigned*) override {
    return NvmlReturn::kNotSupported;
  }
  NvmlReturn DeviceGetRetiredPagesPendingStatus(DeviceHandle, bool*) override {
    return NvmlReturn::kNotSupported;
  }
  NvmlReturn DeviceGetPcieReplayCounter(DeviceHandle, unsigned* v) override {
    *v = 1;
    return NvmlReturn::kSuccess;
  }
  NvmlReturn DeviceGetNvLinkState(DeviceHandle, unsigned, bool*) override {
    return NvmlReturn::kNotSupported;
  }
  NvmlReturn DeviceGetNvLinkErrorCounter(DeviceHandle, unsigned, NvLinkErrorCounter,
                                         uint64_t*) override {
    return NvmlReturn::kNotSupported;
  }
  NvmlReturn DeviceGetFieldValues(DeviceHandle, std::span<FieldValue> v) override {
    for (auto& f : v) {
      f.result = NvmlReturn::kSuccess;
      f.u64 = 0;
    }
    return NvmlReturn::kSuccess;
  }
  NvmlReturn EventSetCreate(EventSetHandle* s) override {
    s->value = 1;
    return NvmlReturn::kSuccess;
  }
  NvmlReturn DeviceGetSupportedEventTypes(DeviceHandle, uint64_t* m) override {
    *m = 0xFF9F;
    return NvmlReturn::kSuccess;
  }
  NvmlReturn DeviceRegisterEvents(DeviceHandle, uint64_t, EventSetHandle) override {
    return NvmlReturn::kSuccess;
  }
  NvmlReturn EventSetWait(EventSetHandle, unsigned, EventData*) override {
    return NvmlReturn::kTimeout;
  }
  NvmlReturn EventSetFree(EventSetHandle) override { return NvmlReturn::kSuccess; }

 private:
  unsigned n_;
};

// CPU time of the whole process (caller + NVML worker thread), robust to a loaded machine
// where wall time is dominated by run-queue waits.
double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void BM_SweepOverheadStub(benchmark::State& state) {
  const int gpus = static_cast<int>(state.range(0));
  StubNvml stub(static_cast<unsigned>(gpus));
  FakeClock clock;
  Collector c(stub, clock);
  if (!c.Init().ok()) state.SkipWithError("init");
  SweepResult r;
  const double cpu0 = ProcessCpuSeconds();
  for (auto _ : state) {
    c.Sweep(r);
    benchmark::DoNotOptimize(r.gpus.data());
  }
  // Process CPU seconds per GPU per sweep, both threads (e.g. "2.1u" = 2.1 µs).
  state.counters["cpu_per_gpu"] =
      (ProcessCpuSeconds() - cpu0) / (static_cast<double>(state.iterations()) * gpus);
  // Seconds per GPU per sweep (printed with an SI prefix, e.g. "2.9u" = 2.9 µs).
  state.counters["per_gpu"] = benchmark::Counter(
      gpus, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_SweepOverheadStub)->Arg(1)->Arg(8)->Arg(16)->UseRealTime();

void BM_SweepFakeNvml(benchmark::State& state) {
  const int gpus = static_cast<int>(state.range(0));
  FakeNvml fake(gpus);
  FakeClock clock;
  Collector c(fake, clock);
  if (!c.Init().ok()) state.SkipWithError("init");
  SweepResult r;
  for (auto _ : state) {
    c.Sweep(r);
    benchmark::DoNotOptimize(r.gpus.data());
  }
  // Seconds per GPU per sweep (printed with an SI prefix, e.g. "2.9u" = 2.9 µs).
  state.counters["per_gpu"] = benchmark::Counter(
      gpus, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_SweepFakeNvml)->Arg(8)->UseRealTime();

// The fixed cost of one deadline-guarded hand-off to the NVML worker (one per sweep).
void BM_WorkerRoundTrip(benchmark::State& state) {
  StubNvml stub(1);
  NvmlWorker worker(stub);
  struct Empty final : NvmlJob {
    void Run(NvmlApi&) override {}
  };
  auto job = std::make_shared<Empty>();
  for (auto _ : state) benchmark::DoNotOptimize(worker.Run(job));
}
BENCHMARK(BM_WorkerRoundTrip)->UseRealTime();

}  // namespace
}  // namespace gg::gpu
