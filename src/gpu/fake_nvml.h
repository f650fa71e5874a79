// FakeNvml: a scriptable NvmlApi for tests, the `script` source and benchmarks. N GPUs with
// settable identity (UUIDs can follow the simulator's FakeGpuUuid(node, index) convention)
// and telemetry; Xid/ECC events are delivered through EventSetWait; GPUs can be lost, calls
// can hang, and the library can be "missing". Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gpu/nvml_api.h"
#include "gpu/nvml_api_overrides.h"

namespace gg::gpu {

// One MIG device (GPU instance + compute instance) of a partitioned fake GPU.
struct FakeMigDevice {
  std::string uuid;           // default "MIG-<gpu uuid without GPU->-<slot>" style, see FakeNvml
  uint32_t gpu_instance = 0;  // GPU-instance id
  uint32_t compute_instance = 0;  // compute-instance id
  std::string profile;            // "1g.18gb"; the MIG device's name is "<product> MIG <profile>"
  uint64_t memory_mib = 0;        // 0 -> DeviceGetMemoryTotal kNotSupported
};

// Telemetry of one fake GPU. std::nullopt / false `supported` flags make the matching call
// return kNotSupported, as a real GPU of another generation would.
struct FakeGpuState {
  std::string name = "NVIDIA H100 80GB HBM3";
  std::string uuid;    // default "GPU-00000000-0000-0000-0000-00000000000<i>"
  std::string serial;  // empty -> kNotSupported
  PciInfo pci;         // default domain 0, bus 0x18 + i, device 0
  bool mig_enabled = false;
  bool mig_supported = true;
  std::optional<bool> mig_pending;              // pending mode; nullopt: same as mig_enabled
  std::vector<FakeMigDevice> mig_devices;       // slot -> MIG device (only while mig_enabled)
  unsigned max_mig_devices = 7;                 // slots on this GPU
  std::optional<uint64_t> memory_mib = 81'559;  // total framebuffer

  std::optional<int> temperature_c = 35;
  std::optional<int> slowdown_c = 89;
  std::optional<int> shutdown_c = 95;
  std::optional<int> gpu_max_c = 87;
  std::optional<int> mem_max_c = 95;
  uint64_t clock_event_reasons = kClockEventGpuIdle;
  uint64_t supported_clock_event_reasons = 0x1FF;
  std::map<PerfPolicy, uint64_t> violation_ns;  // empty -> kNotSupported
  std::optional<unsigned> power_mw = 81'000;
  std::optional<unsigned> power_limit_mw = 700'000;

  std::optional<bool> ecc_enabled = true;
  uint64_t ecc_corrected_volatile = 0;
  uint64_t ecc_uncorrected_volatile = 0;
  uint64_t ecc_corrected_aggregate = 0;
  uint64_t ecc_uncorrected_aggregate = 0;
  std::optional<RemappedRows> remapped_rows = RemappedRows{};  // nullopt: pre-Ampere
  std::optional<unsigned> retired_sbe;                         // set: pre-Ampere retirement
  std::optional<unsigned> retired_dbe;
  bool retired_pending = false;

  std::optional<unsigned> pcie_replay = 0;
  int nvlink_links = 0;                    // links 0..n-1 exist
  std::vector<bool> nvlink_down;           // index -> down (missing entries: up)
  uint64_t nvlink_errors_per_link = 0;     // returned for every counter of every link
  std::optional<int> recovery_action = 0;  // field 230; nullopt -> per-entry kNotSupported

  uint64_t supported_events = 0xFF9F;
  bool lost = false;  // every device call returns kGpuIsLost
};

class FakeNvml final : public NvmlApi {
 public:
  // `gpus` GPUs with default state; UUIDs "GPU-00000000-0000-0000-0000-0000000000NN".
  explicit FakeNvml(int gpus = 8);
  ~FakeNvml() override;

  // --- scripting (any thread) ---
  void SetGpuCount(int gpus);                            // resizes, keeping existing state
  void SetUuids(const std::vector<std::string>& uuids);  // uuids[i] -> GPU i
  void SetProductName(const std::string& name);          // all GPUs
  int gpu_count() const;
  // Mutates one GPU's state under the lock: Mutate(3, [](FakeGpuState& g){ g.temperature_c = 92;
  // }).
  template <typename Fn>
  void Mutate(int gpu, Fn fn) {
    std::scoped_lock lock(mu_);
    if (gpu >= 0 && gpu < static_cast<int>(gpus_.size())) fn(gpus_[gpu]);
  }
  FakeGpuState Get(int gpu) const;
  // Resets telemetry and fault state of one GPU to healthy defaults (keeps identity).
  void Clear(int gpu);

  // Queues an event for every event set the GPU is registered with (if the type is in the
  // registered mask). InjectXid also bumps nothing else; pair with Mutate for ECC counters.
  void InjectEvent(int gpu, uint64_t event_type, uint64_t event_data,
                   uint32_t gpu_instance_id = kNoInstanceId,
                   uint32_t compute_instance_id = kNoInstanceId);
  void InjectXid(int gpu, int xid) { InjectEvent(gpu, kEventXidCritical, xid); }
  // Double-bit ECC: counts the error (volatile+aggregate) and raises the DBE event.
  void InjectDbe(int gpu);
  void SetLost(int gpu, bool lost);

  // The library "is missing": Init returns kLibraryNotFound and LoadError() explains.
  void SetLibraryMissing(bool missing);
  // Whole-library failure code for every call after Init (e.g. kDriverNotLoaded).
  void SetGlobalError(std::optional<NvmlReturn> error);
  // Makes calls whose name contains `call_substring` ("" = every call except EventSetWait)
  // block for `delay` real time; `delay` of zero removes the rule. Hang(…) blocks until
  // ReleaseHangs().
  void SetCallDelay(const std::string& call_substring, std::chrono::milliseconds delay);
  void Hang(const std::string& call_substring);
  void ReleaseHangs();

  // Number of NVML calls made, by name ("nvmlDeviceGetPcieReplayCounter"), for cost tests.
  uint64_t CallCount(const std::string& call) const;
  bool initialized() const;

  // --- NvmlApi ---
  GG_NVML_API_OVERRIDES;

 private:
  struct EventSet {
    std::map<int, uint64_t> registered;  // gpu -> mask
    std::deque<EventData> queue;
  };
  // Common prologue of device calls: counts the call, applies delays/hangs, checks init,
  // the global error, the handle and the lost flag. Returns kSuccess and the index.
  NvmlReturn Enter(const char* call, DeviceHandle device, int* index,
                   std::unique_lock<std::mutex>& lock);
  NvmlReturn EnterGlobal(const char* call, std::unique_lock<std::mutex>& lock);
  void Delay(const char* call, std::unique_lock<std::mutex>& lock);
  void CountCall(const char* call);
  static DeviceHandle HandleOf(int index) {
    return DeviceHandle{static_cast<uintptr_t>(index) + 0x1000};
  }
  // MIG device handles live above every GPU handle: kMigHandleBase + gpu * 256 + slot.
  static constexpr uintptr_t kMigHandleBase = 0x100000;
  static DeviceHandle MigHandleOf(int gpu, unsigned slot) {
    return DeviceHandle{kMigHandleBase + static_cast<uintptr_t>(gpu) * 256 + slot};
  }
  // Like Enter for a MIG handle: the parent GPU's index and the slot (the slot must hold a
  // device and the parent be in MIG mode).
  NvmlReturn EnterMig(const char* call, DeviceHandle mig, int* gpu, unsigned* slot,
                      std::unique_lock<std::mutex>& lock);
  static bool IsMigHandle(DeviceHandle h) { return h.value >= kMigHandleBase; }
  static FakeGpuState DefaultGpu(int index);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<FakeGpuState> gpus_;
  bool library_missing_ = false;
  std::optional<NvmlReturn> global_error_;
  int init_count_ = 0;
  std::map<uint64_t, EventSet> event_sets_;
  uint64_t next_set_ = 1;
  std::map<std::string, std::chrono::milliseconds> delays_;
  std::vector<std::string> hangs_;
  uint64_t hang_generation_ = 0;
  std::map<std::string, uint64_t, std::less<>> calls_;
};

}  // namespace gg::gpu
