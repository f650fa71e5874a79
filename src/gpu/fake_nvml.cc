// FakeNvml: in-memory NVML with scripted faults.
#include "gpu/fake_nvml.h"

#include <cstdio>

namespace gg::gpu {

FakeGpuState FakeNvml::DefaultGpu(int index) {
  FakeGpuState g;
  char uuid[64];
  std::snprintf(uuid, sizeof(uuid), "GPU-00000000-0000-0000-0000-%012d", index);
  g.uuid = uuid;
  char serial[32];
  std::snprintf(serial, sizeof(serial), "16523%08d", index);
  g.serial = serial;
  g.pci.domain = 0;
  g.pci.bus = 0x18 + static_cast<uint32_t>(index);
  g.pci.device = 0;
  g.pci.pci_device_id = 0x233010DE;
  char bus_id[32];
  std::snprintf(bus_id, sizeof(bus_id), "%08X:%02X:%02X.0", g.pci.domain, g.pci.bus, g.pci.device);
  g.pci.bus_id = bus_id;
  return g;
}

FakeNvml::FakeNvml(int gpus) { SetGpuCount(gpus); }

FakeNvml::~FakeNvml() { ReleaseHangs(); }

void FakeNvml::SetGpuCount(int gpus) {
  std::scoped_lock lock(mu_);
  if (gpus < 0) gpus = 0;
  while (static_cast<int>(gpus_.size()) < gpus)
    gpus_.push_back(DefaultGpu(static_cast<int>(gpus_.size())));
  gpus_.resize(static_cast<size_t>(gpus));
}

void FakeNvml::SetUuids(const std::vector<std::string>& uuids) {
  std::scoped_lock lock(mu_);
  for (size_t i = 0; i < uuids.size() && i < gpus_.size(); ++i) gpus_[i].uuid = uuids[i];
}

void FakeNvml::SetProductName(const std::string& name) {
  std::scoped_lock lock(mu_);
  for (auto& g : gpus_) g.name = name;
}

int FakeNvml::gpu_count() const {
  std::scoped_lock lock(mu_);
  return static_cast<int>(gpus_.size());
}

FakeGpuState FakeNvml::Get(int gpu) const {
  std::scoped_lock lock(mu_);
  if (gpu < 0 || gpu >= static_cast<int>(gpus_.size())) return {};
  return gpus_[gpu];
}

void FakeNvml::Clear(int gpu) {
  std::scoped_lock lock(mu_);
  if (gpu < 0 || gpu >= static_cast<int>(gpus_.size())) return;
  FakeGpuState fresh = DefaultGpu(gpu);
  FakeGpuState& g = gpus_[gpu];
  fresh.name = g.name;
  fresh.uuid = g.uuid;
  fresh.serial = g.serial;
  fresh.pci = g.pci;
  fresh.nvlink_links = g.nvlink_links;
  // The MIG layout is configuration, not a fault: it survives a reset.
  fresh.mig_supported = g.mig_supported;
  fresh.mig_enabled = g.mig_enabled;
  fresh.mig_pending = g.mig_pending;
  fresh.mig_devices = g.mig_devices;
  fresh.max_mig_devices = g.max_mig_devices;
  fresh.memory_mib = g.memory_mib;
  // Aggregate (lifetime) ECC counts survive a reset, as on real hardware.
  fresh.ecc_corrected_aggregate = g.ecc_corrected_aggregate;
  fresh.ecc_uncorrected_aggregate = g.ecc_uncorrected_aggregate;
  g = std::move(fresh);
}

void FakeNvml::InjectEvent(int gpu, uint64_t event_type, uint64_t event_data,
                           uint32_t gpu_instance_id, uint32_t compute_instance_id) {
  {
    std::scoped_lock lock(mu_);
    for (auto& [id, set] : event_sets_) {
      auto it = set.registered.find(gpu);
      if (it == set.registered.end() || (it->second & event_type) == 0) continue;
      EventData d;
      d.device = HandleOf(gpu);
      d.event_type = event_type;
      d.event_data = event_data;
      d.gpu_instance_id = gpu_instance_id;
      d.compute_instance_id = compute_instance_id;
      set.queue.push_back(d);
    }
  }
  cv_.notify_all();
}

void FakeNvml::InjectDbe(int gpu) {
  Mutate(gpu, [](FakeGpuState& g) {
    ++g.ecc_uncorrected_volatile;
    ++g.ecc_uncorrected_aggregate;
  });
  InjectEvent(gpu, kEventDoubleBitEcc, 0);
}

void FakeNvml::SetLost(int gpu, bool lost) {
  Mutate(gpu, [lost](FakeGpuState& g) { g.lost = lost; });
  cv_.notify_all();
}

void FakeNvml::SetLibraryMissing(bool missing) {
  std::scoped_lock lock(mu_);
  library_missing_ = missing;
}

void FakeNvml::SetGlobalError(std::optional<NvmlReturn> error) {
  std::scoped_lock lock(mu_);
  global_error_ = error;
}

void FakeNvml::SetCallDelay(const std::string& call_substring, std::chrono::milliseconds delay) {
  std::scoped_lock lock(mu_);
  if (delay.count() <= 0) {
    delays_.erase(call_substring);
  } else {
    delays_[call_substring] = delay;
  }
}

void FakeNvml::Hang(const std::string& call_substring) {
  std::scoped_lock lock(mu_);
  hangs_.push_back(call_substring);
}

void FakeNvml::ReleaseHangs() {
  {
    std::scoped_lock lock(mu_);
    hangs_.clear();
    delays_.clear();
    ++hang_generation_;
  }
  cv_.notify_all();
}

uint64_t FakeNvml::CallCount(const std::string& call) const {
  std::scoped_lock lock(mu_);
  auto it = calls_.find(call);
  return it == calls_.end() ? 0 : it->second;
}

bool FakeNvml::initialized() const {
  std::scoped_lock lock(mu_);
  return init_count_ > 0;
}

void FakeNvml::CountCall(const char* call) {
  auto it = calls_.find(std::string_view(call));
  if (it == calls_.end()) it = calls_.emplace(call, 0).first;
  ++it->second;
}

namespace {
bool Matches(const std::string& rule, const char* call) {
  std::string_view c(call);
  if (rule.empty()) return c != "nvmlEventSetWait_v2";
  return c.find(rule) != std::string_view::npos;
}
}  // namespace

void FakeNvml::Delay(const char* call, std::unique_lock<std::mutex>& lock) {
  for (const auto& [rule, d] : delays_) {
    if (!Matches(rule, call)) continue;
    auto until = std::chrono::steady_clock::now() + d;
    uint64_t gen = hang_generation_;
    cv_.wait_until(lock, until, [&] { return hang_generation_ != gen; });
    break;
  }
  for (;;) {
    bool hang = false;
    for (const auto& rule : hangs_) hang = hang || Matches(rule, call);
    if (!hang) break;
    uint64_t gen = hang_generation_;
    cv_.wait(lock, [&] { return hang_generation_ != gen; });
  }
}

NvmlReturn FakeNvml::EnterGlobal(const char* call, std::unique_lock<std::mutex>& lock) {
  CountCall(call);
  if (!delays_.empty() || !hangs_.empty()) Delay(call, lock);
  if (library_missing_) return NvmlReturn::kUninitialized;
  if (init_count_ == 0) return NvmlReturn::kUninitialized;
  if (global_error_) return *global_error_;
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::Enter(const char* call, DeviceHandle device, int* index,
                           std::unique_lock<std::mutex>& lock) {
  NvmlReturn r = EnterGlobal(call, lock);
  if (r != NvmlReturn::kSuccess) return r;
  if (device.value < 0x1000) return NvmlReturn::kInvalidArgument;
  size_t i = device.value - 0x1000;
  if (i >= gpus_.size()) return NvmlReturn::kInvalidArgument;
  if (gpus_[i].lost) return NvmlReturn::kGpuIsLost;
  *index = static_cast<int>(i);
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::EnterMig(const char* call, DeviceHandle mig, int* gpu, unsigned* slot,
                              std::unique_lock<std::mutex>& lock) {
  NvmlReturn r = EnterGlobal(call, lock);
  if (r != NvmlReturn::kSuccess) return r;
  if (!IsMigHandle(mig)) return NvmlReturn::kInvalidArgument;
  const uintptr_t off = mig.value - kMigHandleBase;
  const size_t i = off / 256;
  const unsigned s = static_cast<unsigned>(off % 256);
  if (i >= gpus_.size()) return NvmlReturn::kInvalidArgument;
  const FakeGpuState& g = gpus_[i];
  if (g.lost) return NvmlReturn::kGpuIsLost;
  // A handle of a slot that was emptied (or MIG turned off) is no longer valid.
  if (!g.mig_enabled || s >= g.mig_devices.size()) return NvmlReturn::kInvalidArgument;
  *gpu = static_cast<int>(i);
  *slot = s;
  return NvmlReturn::kSuccess;
}

#define FAKE_ENTER(name)                                                                   \
  std::unique_lock<std::mutex> lock(mu_);                                                  \
  int idx = 0;                                                                             \
  if (NvmlReturn r = Enter(name, device, &idx, lock); r != NvmlReturn::kSuccess) return r; \
  FakeGpuState& g = gpus_[static_cast<size_t>(idx)];

NvmlReturn FakeNvml::Init() {
  std::unique_lock<std::mutex> lock(mu_);
  CountCall("nvmlInit_v2");
  if (!delays_.empty() || !hangs_.empty()) Delay("nvmlInit_v2", lock);
  if (library_missing_) return NvmlReturn::kLibraryNotFound;
  if (global_error_ == NvmlReturn::kDriverNotLoaded) return NvmlReturn::kDriverNotLoaded;
  ++init_count_;
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::Shutdown() {
  std::scoped_lock lock(mu_);
  CountCall("nvmlShutdown");
  if (init_count_ == 0) return NvmlReturn::kUninitialized;
  --init_count_;
  return NvmlReturn::kSuccess;
}

std::string FakeNvml::LoadError() const {
  std::scoped_lock lock(mu_);
  if (library_missing_)
    return "libnvidia-ml.so.1: cannot open shared object file: No such file or directory";
  return {};
}

std::string FakeNvml::ErrorString(NvmlReturn r) { return std::string(NvmlReturnName(r)); }

NvmlReturn FakeNvml::SystemGetDriverVersion(std::string* version) {
  std::unique_lock<std::mutex> lock(mu_);
  if (NvmlReturn r = EnterGlobal("nvmlSystemGetDriverVersion", lock); r != NvmlReturn::kSuccess)
    return r;
  *version = "580.00.00-fake";
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::DeviceGetCount(unsigned* count) {
  std::unique_lock<std::mutex> lock(mu_);
  if (NvmlReturn r = EnterGlobal("nvmlDeviceGetCount_v2", lock); r != NvmlReturn::kSuccess)
    return r;
  *count = static_cast<unsigned>(gpus_.size());
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::DeviceGetHandleByIndex(unsigned index, DeviceHandle* device) {
  std::unique_lock<std::mutex> lock(mu_);
  if (NvmlReturn r = EnterGlobal("nvmlDeviceGetHandleByIndex_v2", lock); r != NvmlReturn::kSuccess)
    return r;
  if (index >= gpus_.size()) return NvmlReturn::kInvalidArgument;
  *device = HandleOf(static_cast<int>(index));
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::DeviceGetName(DeviceHandle device, std::string* name) {
  if (IsMigHandle(device)) {
    std::unique_lock<std::mutex> lock(mu_);
    int gi = 0;
    unsigned slot = 0;
    if (NvmlReturn r = EnterMig("nvmlDeviceGetName", device, &gi, &slot, lock);
        r != NvmlReturn::kSuccess)
      return r;
    const FakeGpuState& g = gpus_[static_cast<size_t>(gi)];
    *name = g.name + " MIG " + g.mig_devices[slot].profile;
    return NvmlReturn::kSuccess;
  }
  FAKE_ENTER("nvmlDeviceGetName");
  *name = g.name;
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::DeviceGetUuid(DeviceHandle device, std::string* uuid) {
  if (IsMigHandle(device)) {
    std::unique_lock<std::mutex> lock(mu_);
    int gi = 0;
    unsigned slot = 0;
    if (NvmlReturn r = EnterMig("nvmlDeviceGetUUID", device, &gi, &slot, lock);
        r != NvmlReturn::kSuccess)
      return r;
    *uuid = gpus_[static_cast<size_t>(gi)].mig_devices[slot].uuid;
    return NvmlReturn::kSuccess;
  }
  FAKE_ENTER("nvmlDeviceGetUUID");
  *uuid = g.uuid;
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::DeviceGetSerial(DeviceHandle device, std::string* serial) {
  FAKE_ENTER("nvmlDeviceGetSerial");
  if (g.serial.empty()) return NvmlReturn::kNotSupported;
  *serial = g.serial;
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::DeviceGetPciInfo(DeviceHandle device, PciInfo* pci) {
  FAKE_ENTER("nvmlDeviceGetPciInfo_v3");
  *pci = g.pci;
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::DeviceGetMigMode(DeviceHandle device, bool* current, bool* pending) {
  FAKE_ENTER("nvmlDeviceGetMigMode");
  if (!g.mig_supported) return NvmlReturn::kNotSupported;
  *current = g.mig_enabled;
  *pending = g.mig_pending.value_or(g.mig_enabled);
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::DeviceGetMaxMigDeviceCount(DeviceHandle device, unsigned* count) {
  FAKE_ENTER("nvmlDeviceGetMaxMigDeviceCount");
  if (!g.mig_supported) return NvmlReturn::kNotSupported;
  *count = g.mig_enabled ? g.max_mig_devices : 0;
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::DeviceGetMigDeviceHandleByIndex(DeviceHandle device, unsigned index,
                                                     DeviceHandle* mig) {
  FAKE_ENTER("nvmlDeviceGetMigDeviceHandleByIndex");
  if (!g.mig_supported) return NvmlReturn::kNotSupported;
  if (!g.mig_enabled) return NvmlReturn::kInvalidArgument;
  if (index >= g.max_mig_devices) return NvmlReturn::kInvalidArgument;
  if (index >= g.mig_devices.size()) return NvmlReturn::kNotFound;  // empty slot
  *mig = MigHandleOf(idx, index);
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::DeviceGetGpuInstanceId(DeviceHandle mig, unsigned* id) {
  std::unique_lock<std::mutex> lock(mu_);
  int gi = 0;
  unsigned slot = 0;
  if (NvmlReturn r = EnterMig("nvmlDeviceGetGpuInstanceId", mig, &gi, &slot, lock);
      r != NvmlReturn::kSuccess)
    return r;
  *id = gpus_[static_cast<size_t>(gi)].mig_devices[slot].gpu_instance;
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::DeviceGetComputeInstanceId(DeviceHandle mig, unsigned* id) {
  std::unique_lock<std::mutex> lock(mu_);
  int gi = 0;
  unsigned slot = 0;
  if (NvmlReturn r = EnterMig("nvmlDeviceGetComputeInstanceId", mig, &gi, &slot, lock);
      r != NvmlReturn::kSuccess)
    return r;
  *id = gpus_[static_cast<size_t>(gi)].mig_devices[slot].compute_instance;
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::DeviceGetMemoryTotal(DeviceHandle device, uint64_t* bytes) {
  if (IsMigHandle(device)) {
    std::unique_lock<std::mutex> lock(mu_);
    int gi = 0;
    unsigned slot = 0;
    if (NvmlReturn r = EnterMig("nvmlDeviceGetMemoryInfo", device, &gi, &slot, lock);
        r != NvmlReturn::kSuccess)
      return r;
    const uint64_t mib = gpus_[static_cast<size_t>(gi)].mig_devices[slot].memory_mib;
    if (mib == 0) return NvmlReturn::kNotSupported;
    *bytes = mib << 20;
    return NvmlReturn::kSuccess;
  }
  FAKE_ENTER("nvmlDeviceGetMemoryInfo");
  if (!g.memory_mib) return NvmlReturn::kNotSupported;
  *bytes = *g.memory_mib << 20;
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::DeviceGetTemperature(DeviceHandle device, int* celsius) {
  FAKE_ENTER("nvmlDeviceGetTemperature");
  if (!g.temperature_c) return NvmlReturn::kNotSupported;
  *celsius = *g.temperature_c;
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::DeviceGetTemperatureThreshold(DeviceHandle device, TemperatureThreshold which,
                                                   int* celsius) {
  FAKE_ENTER("nvmlDeviceGetTemperatureThreshold");
  std::optional<int> v;
  switch (which) {
    case TemperatureThreshold::kShutdown:
      v = g.shutdown_c;
      break;
    case TemperatureThreshold::kSlowdown:
      v = g.slowdown_c;
      break;
    case TemperatureThreshold::kMemMax:
      v = g.mem_max_c;
      break;
    case TemperatureThreshold::kGpuMax:
      v = g.gpu_max_c;
      break;
  }
  if (!v) return NvmlReturn::kNotSupported;
  *celsius = *v;
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::DeviceGetCurrentClocksEventReasons(DeviceHandle device, uint64_t* reasons) {
  FAKE_ENTER("nvmlDeviceGetCurrentClocksEventReasons");
  *reasons = g.clock_event_reasons;
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::DeviceGetSupportedClocksEventReasons(DeviceHandle device, uint64_t* reasons) {
  FAKE_ENTER("nvmlDeviceGetSupportedClocksEventReasons");
  *reasons = g.supported_clock_event_reasons;
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::DeviceGetViolationStatus(DeviceHandle device, PerfPolicy policy,
                                              ViolationTime* out) {
  FAKE_ENTER("nvmlDeviceGetViolationStatus");
  auto it = g.violation_ns.find(policy);
  if (it == g.violation_ns.end()) return NvmlReturn::kNotSupported;
  out->reference_time_us = 0;
  out->violation_time_ns = it->second;
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::DeviceGetPowerUsage(DeviceHandle device, unsigned* milliwatts) {
  FAKE_ENTER("nvmlDeviceGetPowerUsage");
  if (!g.power_mw) return NvmlReturn::kNotSupported;
  *milliwatts = *g.power_mw;
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::DeviceGetEnforcedPowerLimit(DeviceHandle device, unsigned* milliwatts) {
  FAKE_ENTER("nvmlDeviceGetEnforcedPowerLimit");
  if (!g.power_limit_mw) return NvmlReturn::kNotSupported;
  *milliwatts = *g.power_limit_mw;
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::DeviceGetEccMode(DeviceHandle device, bool* current, bool* pending) {
  FAKE_ENTER("nvmlDeviceGetEccMode");
  if (!g.ecc_enabled) return NvmlReturn::kNotSupported;
  *current = *g.ecc_enabled;
  *pending = *g.ecc_enabled;
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::DeviceGetTotalEccErrors(DeviceHandle device, EccErrorType type,
                                             EccCounterType counter, uint64_t* count) {
  FAKE_ENTER("nvmlDeviceGetTotalEccErrors");
  if (!g.ecc_enabled || !*g.ecc_enabled) return NvmlReturn::kNotSupported;
  const bool corrected = type == EccErrorType::kCorrected;
  const bool vol = counter == EccCounterType::kVolatile;
  *count = corrected ? (vol ? g.ecc_corrected_volatile : g.ecc_corrected_aggregate)
                     : (vol ? g.ecc_uncorrected_volatile : g.ecc_uncorrected_aggregate);
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::DeviceGetRemappedRows(DeviceHandle device, RemappedRows* rows) {
  FAKE_ENTER("nvmlDeviceGetRemappedRows");
  if (!g.remapped_rows) return NvmlReturn::kNotSupported;
  *rows = *g.remapped_rows;
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::DeviceGetRetiredPagesCount(DeviceHandle device, RetirementCause cause,
                                                unsigned* count) {
  FAKE_ENTER("nvmlDeviceGetRetiredPages");
  const auto& v = cause == RetirementCause::kDoubleBit ? g.retired_dbe : g.retired_sbe;
  if (!v) return NvmlReturn::kNotSupported;
  *count = *v;
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::DeviceGetRetiredPagesPendingStatus(DeviceHandle device, bool* pending) {
  FAKE_ENTER("nvmlDeviceGetRetiredPagesPendingStatus");
  if (!g.retired_sbe && !g.retired_dbe) return NvmlReturn::kNotSupported;
  *pending = g.retired_pending;
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::DeviceGetPcieReplayCounter(DeviceHandle device, unsigned* value) {
  FAKE_ENTER("nvmlDeviceGetPcieReplayCounter");
  if (!g.pcie_replay) return NvmlReturn::kNotSupported;
  *value = *g.pcie_replay;
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::DeviceGetNvLinkState(DeviceHandle device, unsigned link, bool* active) {
  FAKE_ENTER("nvmlDeviceGetNvLinkState");
  if (static_cast<int>(link) >= g.nvlink_links) return NvmlReturn::kNotSupported;
  *active = !(link < g.nvlink_down.size() && g.nvlink_down[link]);
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::DeviceGetNvLinkErrorCounter(DeviceHandle device, unsigned link,
                                                 NvLinkErrorCounter counter, uint64_t* value) {
  FAKE_ENTER("nvmlDeviceGetNvLinkErrorCounter");
  (void)counter;
  if (static_cast<int>(link) >= g.nvlink_links) return NvmlReturn::kNotSupported;
  *value = g.nvlink_errors_per_link;
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::DeviceGetFieldValues(DeviceHandle device, std::span<FieldValue> values) {
  FAKE_ENTER("nvmlDeviceGetFieldValues");
  for (FieldValue& v : values) {
    v.result = NvmlReturn::kNotSupported;
    if (v.field_id == kFieldGpuRecoveryAction && g.recovery_action) {
      v.result = NvmlReturn::kSuccess;
      v.type = FieldValueType::kUnsignedInt;
      v.u64 = static_cast<uint64_t>(*g.recovery_action);
      v.i64 = *g.recovery_action;
    } else if (v.field_id == kFieldPcieReplayCounter && g.pcie_replay) {
      v.result = NvmlReturn::kSuccess;
      v.type = FieldValueType::kUnsignedLongLong;
      v.u64 = *g.pcie_replay;
      v.i64 = static_cast<int64_t>(*g.pcie_replay);
    }
  }
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::EventSetCreate(EventSetHandle* set) {
  std::unique_lock<std::mutex> lock(mu_);
  if (NvmlReturn r = EnterGlobal("nvmlEventSetCreate", lock); r != NvmlReturn::kSuccess) return r;
  uint64_t id = next_set_++;
  event_sets_[id] = EventSet{};
  set->value = id;
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::DeviceGetSupportedEventTypes(DeviceHandle device, uint64_t* mask) {
  FAKE_ENTER("nvmlDeviceGetSupportedEventTypes");
  *mask = g.supported_events;
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::DeviceRegisterEvents(DeviceHandle device, uint64_t mask, EventSetHandle set) {
  FAKE_ENTER("nvmlDeviceRegisterEvents");
  auto it = event_sets_.find(set.value);
  if (it == event_sets_.end()) return NvmlReturn::kInvalidArgument;
  if ((mask & ~g.supported_events) != 0) return NvmlReturn::kNotSupported;  // like old drivers
  if (mask == 0) return NvmlReturn::kNotSupported;
  it->second.registered[idx] |= mask;
  return NvmlReturn::kSuccess;
}

NvmlReturn FakeNvml::EventSetWait(EventSetHandle set, unsigned timeout_ms, EventData* data) {
  std::unique_lock<std::mutex> lock(mu_);
  if (NvmlReturn r = EnterGlobal("nvmlEventSetWait_v2", lock); r != NvmlReturn::kSuccess) return r;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    auto it = event_sets_.find(set.value);
    if (it == event_sets_.end()) return NvmlReturn::kInvalidArgument;
    if (!it->second.queue.empty()) {
      *data = it->second.queue.front();
      it->second.queue.pop_front();
      return NvmlReturn::kSuccess;
    }
    // A registered GPU that fell off makes the wait fail, as the real driver does.
    for (const auto& [gpu, mask] : it->second.registered)
      if (gpu < static_cast<int>(gpus_.size()) && gpus_[static_cast<size_t>(gpu)].lost)
        return NvmlReturn::kGpuIsLost;
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
      auto again = event_sets_.find(set.value);
      if (again != event_sets_.end() && !again->second.queue.empty()) continue;
      return NvmlReturn::kTimeout;
    }
  }
}

NvmlReturn FakeNvml::EventSetFree(EventSetHandle set) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    CountCall("nvmlEventSetFree");
    if (event_sets_.erase(set.value) == 0) return NvmlReturn::kInvalidArgument;
  }
  cv_.notify_all();
  return NvmlReturn::kSuccess;
}

#undef FAKE_ENTER

}  // namespace gg::gpu
