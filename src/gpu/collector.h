// Collector: turns NvmlApi into the report's per-GPU facts. Sweep() reads every GPU through
// one NvmlWorker job (deadline-guarded, buffers reused, expensive counters such as the PCIe
// replay counter on a slower cadence); a dedicated event thread waits on an NVML event set so
// Xid/ECC/recovery-action events reach the callback within milliseconds. GPU_IS_LOST, fewer
// GPUs than the node's nvidia.com/gpu capacity, and hung calls are reported as health
// signals (GpuStatus::lost, SourceStatus Degraded), never as crashes or agent hangs.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api/gpu_node_health.h"
#include "common/clock.h"
#include "common/status.h"
#include "gpu/kmsg_parser.h"
#include "gpu/nvml_api.h"
#include "gpu/nvml_worker.h"
#include "gpu/xid_catalog.h"

namespace gg::gpu {

struct CollectorOptions {
  std::string source_name = "nvml";
  int expected_gpus = 0;  // node's nvidia.com/gpu capacity; 0 = unknown (no check)
  // Expensive counters (PCIe replay: ~172 µs/GPU on an H200; NVLink counters; retired pages;
  // violation times; ECC mode) are read on every Nth sweep, and on the first.
  int slow_every_sweeps = 6;
  std::chrono::milliseconds call_deadline{5000};  // per NVML worker job
  std::chrono::milliseconds event_wait{1000};     // nvmlEventSetWait_v2 timeout per loop
  // How often Sweep() retries nvmlInit after a failure (library missing, driver not loaded).
  std::chrono::seconds init_retry{60};
  uint64_t event_mask = kHealthEventMask;  // ANDed with each GPU's supported mask
};

// Static facts about one GPU, read at Init (for PCI->GPU mapping and metric labels).
struct GpuIdentity {
  int index = 0;
  std::string uuid;
  std::string name;
  std::string serial;
  std::string pci_bus_id;  // NVML form "00000000:3B:00.0"
  uint32_t pci_domain = 0, pci_bus = 0, pci_device = 0;
  uint64_t supported_events = 0;   // from nvmlDeviceGetSupportedEventTypes
  uint64_t registered_events = 0;  // what the event set actually watches (0: no events)
};

// Values the report does not carry but metrics want (per GPU, same order as gpus).
struct GpuExtras {
  uint64_t clock_event_mask = 0;
  // nvmlDeviceGetViolationStatus ns per policy: power, thermal, sync boost, board limit,
  // low utilization, reliability (index = PerfPolicy value 0..5).
  std::array<std::optional<uint64_t>, 6> violation_ns{};
  bool stale = false;  // not read this sweep (worker hung/busy): last known values
};

struct SweepResult {
  std::vector<api::GpuStatus> gpus;
  std::vector<GpuExtras> extras;
  api::SourceStatus source;
  int found_gpus = 0;     // NVML device count
  int expected_gpus = 0;  // options.expected_gpus
  std::string driver_version;
  WallTime at{};
  Duration took{0};    // wall time of the sweep (NVML included)
  uint64_t sweep = 0;  // sweep number, 1-based
};

// Something the event thread saw.
struct GpuEvent {
  enum class Kind {
    kXid,  // XidCriticalError; xid set
    kSingleBitEcc,
    kDoubleBitEcc,
    kEccStorm,
    kDramRetirement,
    kDramRetirementFailure,
    kPoison,  // fatal or non-fatal poison (event_type says which)
    kGpuUnavailable,
    kRecoveryAction,  // GpuRecoveryAction; recovery_action set
    kGpuLost,         // event wait returned GPU_IS_LOST (gpu_index -1: unknown GPU)
    kOther,
  };
  Kind kind = Kind::kOther;
  uint64_t event_type = 0;
  uint64_t event_data = 0;
  int gpu_index = -1;  // -1 when the device could not be mapped
  std::string gpu_uuid;
  std::string pci_bus_id;  // NVML form
  int xid = 0;
  std::optional<RecoveryAction> recovery_action;  // field 230 read right after the event
  uint32_t gpu_instance_id = kNoInstanceId;
  uint32_t compute_instance_id = kNoInstanceId;
  WallTime at{};
};
std::string_view GpuEventKindName(GpuEvent::Kind k);  // "Xid", "DoubleBitEcc", ...

// A report entry (count 1, first = last = at) for an Xid event, classified (the driver's
// recovery action read right after the event wins over the catalog). nullopt for non-Xid
// events: a DBE also produces its own Xid 48 event, so mapping it would double count.
std::optional<api::XidEvent> ToXidEvent(const GpuEvent& e, const XidClassifier& classifier);
// Same for a kernel-log Xid; `gpu_uuid` from Collector::UuidForPci (may be empty).
api::XidEvent ToXidEvent(const KmsgXid& x, std::string_view gpu_uuid, WallTime at, int64_t count,
                         const XidClassifier& classifier);

class Collector {
 public:
  using EventCallback = std::function<void(const GpuEvent&)>;

  Collector(NvmlApi& api, Clock& clock, CollectorOptions options = {});
  ~Collector();  // StopEvents(); nvmlShutdown if initialized
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;

  // nvmlInit + enumeration + static identity. Failure is also reflected in source_status()
  // (Unavailable with the loader's message); Sweep() retries every options.init_retry.
  Status Init();
  bool initialized() const { return initialized_.load(); }

  // Reads every GPU. Reuses `out`'s buffers (no allocations in steady state). Call from one
  // thread at a time.
  void Sweep(SweepResult& out);
  SweepResult Sweep();

  // Starts the event thread (requires Init()). Events whose type the GPU does not support are
  // not registered; a GPU that supports none is noted in source_status().
  Status StartEvents(EventCallback on_event);
  void StopEvents();

  api::SourceStatus source_status() const;
  std::vector<GpuIdentity> identities() const;
  // PCI (integers, as parsed from a kernel-log line) -> GPU; nullopt when unknown.
  std::optional<GpuIdentity> GpuForPci(uint32_t domain, uint32_t bus, uint32_t device) const;
  std::string UuidForPci(uint32_t domain, uint32_t bus, uint32_t device) const;

  NvmlWorker& worker() { return *worker_; }
  uint64_t events_seen() const { return events_seen_.load(); }

 private:
  struct SweepJob;
  struct Device;
  struct Reading;
  static Device IdentifyDevice(NvmlApi& a, unsigned i);
  static void ToReport(const Device& d, const Reading& rd, bool hung, bool stale, api::GpuStatus& g,
                       GpuExtras& x);
  void SetSweepSource(SweepResult& out, std::string problems);
  void EventLoop(std::stop_token stop);
  void SetSource(api::SourceState state, std::string message);
  std::optional<RecoveryAction> ReadRecoveryAction(int index);
  GpuEvent MakeEvent(const EventData& d);

  NvmlApi& api_;
  Clock& clock_;
  CollectorOptions options_;
  std::unique_ptr<NvmlWorker> worker_;
  std::atomic<bool> initialized_{false};
  MonoTime last_init_attempt_{};
  bool init_attempted_ = false;
  std::string driver_version_;

  mutable std::mutex mu_;  // guards devices_ identity, source_
  std::vector<Device> devices_;
  api::SourceStatus source_;
  std::string event_problem_;  // set by the event thread; folded into source status

  std::shared_ptr<SweepJob> job_;  // reused unless abandoned by a hung call
  std::vector<Reading> last_;      // last completed reading per GPU (stale on hang)
  int hung_gpu_ = -1;              // GPU whose read hung (until the call returns)
  uint64_t sweeps_ = 0;
  uint64_t sweeps_since_init_ = 0;

  EventSetHandle event_set_{};
  bool event_set_created_ = false;
  EventCallback on_event_;
  std::atomic<int64_t> event_wait_started_ns_{0};  // steady ns; 0 = not in a wait
  std::atomic<uint64_t> events_seen_{0};
  std::mutex event_mu_;  // event thread's back-off sleeps
  std::condition_variable_any event_cv_;
  std::jthread event_thread_;
};

}  // namespace gg::gpu
