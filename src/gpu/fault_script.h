// Scripted fault timelines (YAML) that drive a FakeNvml: the `script` source of the agent,
// the demo and scenario tests. Example:
//   gpus: 8
//   product: NVIDIA H100 80GB HBM3
//   uuids: [GPU-..., ...]          # optional; else FakeNvml defaults / SetUuids by the caller
//   timeline:
//   - {at: 30s, gpu: 3, xid: 79}
//   - {at: 60s, gpu: 1, temperature: 92, for: 5m}
//   - {at: 90s, gpu: 2, ecc: {uncorrectable_volatile: 1}}
//   - {at: 120s, gpu: 4, remap: {failure: true}}
//   - {at: 150s, gpu: 5, lost: true}
//   - {at: 200s, gpu: 3, clear: true}
// MIG: a header list partitions GPUs (each entry one MIG device; the GPU's MIG mode turns on):
//   mig:
//   - {gpu: 0, gpu_instance: 3, compute_instance: 0, profile: 1g.18gb, memory_mib: 16384}
//   (optional uuid: MIG-...; default derived from the GPU's UUID and the ids)
// and an Xid event can be attributed to one: {at: 5s, gpu: 0, xid: 13, gpu_instance: 3,
// compute_instance: 0}.
// Other event keys: power (W), throttle: [HwThermalSlowdown, ...], pcie_replay, nvlink_down,
// recovery_action (None|GpuReset|NodeReboot|DrainP2P|DrainAndReset), hang: {ms, call},
// library_missing. `gpu: all` applies to every GPU. `for` reverts what the event set.
// Errors carry the YAML line ("line 7: unknown key 'temprature'").
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "gpu/fake_nvml.h"

namespace gg::gpu {

struct FaultEvent {
  int line = 0;  // 1-based YAML line, for messages
  Duration at{0};
  int gpu = -1;                      // -1: every GPU ("gpu: all")
  std::optional<Duration> duration;  // "for": revert the set telemetry afterwards

  std::optional<int> xid;                // injects an Xid event
  std::optional<uint32_t> gpu_instance;  // MIG attribution of that Xid event
  std::optional<uint32_t> compute_instance;
  std::optional<int> temperature_c;
  std::optional<double> power_watts;
  std::optional<std::vector<std::string>> throttle;  // clock-event reason names
  // ECC increments: keys corrected_volatile, uncorrectable_volatile (alias
  // uncorrected_volatile), corrected_aggregate, uncorrectable_aggregate; an uncorrectable
  // increment also raises a DBE event, a corrected one an SBE event.
  std::map<std::string, uint64_t> ecc;
  std::optional<RemappedRows> remap;  // absolute values
  std::optional<unsigned> pcie_replay;
  std::optional<int> nvlink_down;              // number of links to mark down
  std::optional<std::string> recovery_action;  // "None", "GpuReset", "NodeReboot", ...
  std::optional<bool> lost;
  bool clear = false;  // back to healthy defaults
  // NVML calls whose name contains `hang_call` (empty: every call but the event wait) block
  // for hang_ms real milliseconds, node-wide (a hung driver is not per GPU).
  // YAML: hang: {ms: 8000, call: nvmlDeviceGetPcieReplayCounter}
  std::optional<int> hang_ms;
  std::string hang_call;
  std::optional<bool> library_missing;
};

struct FaultMig {
  int line = 0;
  int gpu = 0;
  FakeMigDevice device;  // uuid empty: derived by ApplyFaultScriptSetup
};

struct FaultScript {
  int gpus = 8;
  std::string product;
  std::vector<std::string> uuids;
  std::vector<FaultMig> mig;         // in file order; a GPU's devices take slots 0, 1, ...
  std::vector<FaultEvent> timeline;  // sorted by `at` (stable)
};

StatusOr<FaultScript> ParseFaultScript(std::string_view yaml);
StatusOr<FaultScript> LoadFaultScript(const std::string& path);

// "MIG-" UUID for a fake MIG device: the GPU's UUID body with its last four hex digits
// replaced by the GPU-instance and compute-instance ids (two hex digits each).
std::string FakeMigUuid(const std::string& gpu_uuid, uint32_t gpu_instance,
                        uint32_t compute_instance);

// Applies the script's header (gpu count, product, uuids, mig) to a FakeNvml.
void ApplyFaultScriptSetup(const FaultScript& script, FakeNvml& nvml);
// Applies one event now (the player's unit of work; also handy in tests).
void ApplyFaultEvent(const FaultEvent& event, FakeNvml& nvml);

// Plays a timeline against a FakeNvml as `clock` advances: events are scheduled with
// Clock::ScheduleAfter(at / time_scale), so FakeClock::Advance applies them synchronously and
// RealClock in real time. time_scale 10 plays a 10-minute script in 1 minute.
class FaultPlayer {
 public:
  FaultPlayer(FaultScript script, FakeNvml& nvml, Clock& clock, double time_scale = 1.0);
  ~FaultPlayer();  // cancels pending events
  FaultPlayer(const FaultPlayer&) = delete;
  FaultPlayer& operator=(const FaultPlayer&) = delete;

  void Start();  // applies setup, schedules every event (and each "for" revert)
  void Stop();
  size_t applied() const { return applied_.load(); }  // events applied so far (incl. reverts)
  size_t total() const { return total_; }             // events + reverts scheduled
  bool done() const { return applied() >= total_; }

 private:
  void Schedule(Duration at, std::function<void()> fn);

  FaultScript script_;
  FakeNvml& nvml_;
  Clock& clock_;
  double time_scale_;
  std::mutex mu_;
  std::vector<TimerId> timers_;
  std::atomic<size_t> applied_{0};
  size_t total_ = 0;
};

}  // namespace gg::gpu
