// libnvidia-ml.so.1 without a GPU: the C entry points the agent's NvmlLoader resolves,
// answered by one process-wide FakeNvml. The GPUs and their faults come from a fault-script
// file (src/gpu/fault_script.h format) named by GG_FAKE_NVML_FILE — in the simulator that is
// ROOT/<node>/nvml.yaml, written by the pod runner with the node's GPU count and UUIDs.
//
// Timeline `at` offsets count from the first nvmlInit (the agent's start). The file is
// re-read when it changes: events on lines not seen before are played (an `at` already past
// fires at once), so appending `- {at: 0s, gpu: 3, xid: 79}` injects a fault into a running
// agent. Events already played are not replayed; a file that no longer parses is reported on
// stderr and the previous state is kept.
//
// The struct layouts are written here from NVIDIA's public ABI (LP64), the same facts
// nvml_loader.cc pins with static_asserts; no NVIDIA header is used.
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "gpu/fake_nvml.h"
#include "gpu/fault_script.h"
#include "gpu/nvml_abi.h"
#include "gpu/nvml_api.h"

namespace {

using gg::gpu::NvmlReturn;

using namespace gg::gpu::nvml_abi;  // NOLINT: the ABI types, local to this file

int R(NvmlReturn r) { return static_cast<int>(r); }
gg::gpu::DeviceHandle H(nvmlDevice_t d) { return {reinterpret_cast<std::uintptr_t>(d)}; }
gg::gpu::EventSetHandle Set(nvmlEventSet_t s) { return {reinterpret_cast<std::uintptr_t>(s)}; }

// Copies `s` into a C buffer of `cap` bytes (NUL included); kInsufficientSize when too small.
int CopyOut(const std::string& s, char* buf, unsigned cap) {
  if (buf == nullptr) return R(NvmlReturn::kInvalidArgument);
  if (s.size() + 1 > cap) return R(NvmlReturn::kInsufficientSize);
  std::memcpy(buf, s.c_str(), s.size() + 1);
  return 0;
}

struct FileId {
  long long mtime_ns = -1;
  long long size = -1;
  unsigned long long ino = 0;
  bool operator==(const FileId&) const = default;
};

FileId Stat(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return {static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec,
          static_cast<long long>(st.st_size), static_cast<unsigned long long>(st.st_ino)};
}

// Process-wide state; deliberately never destroyed (NVML calls may race with exit()).
struct Library {
  std::mutex mu;
  std::unique_ptr<gg::gpu::FakeNvml> nvml;
  std::vector<std::unique_ptr<gg::gpu::FaultPlayer>> players;
  std::set<int> played_lines;
  std::string path;
  FileId seen;
  std::chrono::steady_clock::time_point start;
  double time_scale = 1.0;
  std::string last_error;
  std::jthread watcher;

  // Plays the events of `script` not played yet. Caller holds mu.
  void PlayNew(const gg::gpu::FaultScript& script) {
    gg::gpu::FaultScript fresh = script;
    fresh.timeline.clear();
    const double elapsed_script_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() *
        time_scale;
    const auto elapsed =
        std::chrono::duration_cast<gg::Duration>(std::chrono::duration<double>(elapsed_script_s));
    for (const auto& e : script.timeline) {
      if (!played_lines.insert(e.line).second) continue;
      gg::gpu::FaultEvent ev = e;
      ev.at = std::max(gg::Duration(0), e.at - elapsed);
      fresh.timeline.push_back(ev);
    }
    auto player = std::make_unique<gg::gpu::FaultPlayer>(std::move(fresh), *nvml,
                                                         gg::RealClock::Default(), time_scale);
    player->Start();
    players.push_back(std::move(player));
  }

  // (Re)reads the file; false with last_error set when it cannot be used. Caller holds mu.
  bool Load() {
    auto script = gg::gpu::LoadFaultScript(path);
    if (!script.ok()) {
      std::string msg = script.status().ToString();
      if (msg != last_error)
        std::fprintf(stderr, "fake libnvidia-ml: %s: %s\n", path.c_str(), msg.c_str());
      last_error = msg;
      return false;
    }
    last_error.clear();
    if (!nvml) nvml = std::make_unique<gg::gpu::FakeNvml>(script->gpus);
    PlayNew(*script);
    return true;
  }

  void Watch(std::stop_token stop) {
    while (!stop.stop_requested()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      std::scoped_lock lock(mu);
      FileId now = Stat(path);
      if (now == seen || now.mtime_ns < 0) continue;
      seen = now;
      Load();
    }
  }

  // First init: read the file and start following it. Caller holds mu.
  int Open() {
    if (nvml) return 0;
    const char* p = std::getenv("GG_FAKE_NVML_FILE");
    path = p && *p ? p : "/run/nvidia/fake-nvml/nvml.yaml";
    if (const char* s = std::getenv("GG_FAKE_NVML_TIME_SCALE")) {
      double v = std::atof(s);
      if (v > 0) time_scale = v;
    }
    seen = Stat(path);
    if (seen.mtime_ns < 0) {
      // No state file: as on a host without the driver.
      std::fprintf(stderr, "fake libnvidia-ml: no GPU state file %s\n", path.c_str());
      return R(NvmlReturn::kDriverNotLoaded);
    }
    start = std::chrono::steady_clock::now();
    if (!Load()) return R(NvmlReturn::kUnknown);
    watcher = std::jthread([this](std::stop_token st) { Watch(st); });
    return 0;
  }
};

Library& Lib() {
  static Library* lib = new Library();
  return *lib;
}

gg::gpu::FakeNvml* Nvml() {
  Library& l = Lib();
  std::scoped_lock lock(l.mu);
  return l.nvml.get();
}

#define GG_NVML()                 \
  gg::gpu::FakeNvml* nv = Nvml(); \
  if (nv == nullptr) return R(NvmlReturn::kUninitialized)

}  // namespace

#define GG_EXPORT extern "C" __attribute__((visibility("default")))

GG_EXPORT nvmlReturn_t nvmlInit_v2() {
  Library& l = Lib();
  {
    std::scoped_lock lock(l.mu);
    if (int r = l.Open(); r != 0) return r;
  }
  return R(Nvml()->Init());
}
GG_EXPORT nvmlReturn_t nvmlInit() { return nvmlInit_v2(); }
GG_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned) { return nvmlInit_v2(); }
GG_EXPORT nvmlReturn_t nvmlShutdown() {
  GG_NVML();
  return R(nv->Shutdown());
}
GG_EXPORT const char* nvmlErrorString(nvmlReturn_t r) {
  static std::mutex mu;
  static std::map<int, std::string>* names = new std::map<int, std::string>();
  std::scoped_lock lock(mu);
  auto it = names->find(r);
  if (it == names->end())
    it = names->emplace(r, std::string(gg::gpu::NvmlReturnName(static_cast<NvmlReturn>(r)))).first;
  return it->second.c_str();
}
GG_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* buf, unsigned cap) {
  GG_NVML();
  std::string v;
  if (auto r = nv->SystemGetDriverVersion(&v); r != NvmlReturn::kSuccess) return R(r);
  return CopyOut(v, buf, cap);
}
GG_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned* count) {
  GG_NVML();
  if (count == nullptr) return R(NvmlReturn::kInvalidArgument);
  return R(nv->DeviceGetCount(count));
}
GG_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_t* device) {
  GG_NVML();
  if (device == nullptr) return R(NvmlReturn::kInvalidArgument);
  gg::gpu::DeviceHandle h;
  auto r = nv->DeviceGetHandleByIndex(index, &h);
  if (r == NvmlReturn::kSuccess) *device = reinterpret_cast<nvmlDevice_t>(h.value);
  return R(r);
}
GG_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* buf, unsigned cap) {
  GG_NVML();
  std::string s;
  if (auto r = nv->DeviceGetName(H(d), &s); r != NvmlReturn::kSuccess) return R(r);
  return CopyOut(s, buf, cap);
}
GG_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* buf, unsigned cap) {
  GG_NVML();
  std::string s;
  if (auto r = nv->DeviceGetUuid(H(d), &s); r != NvmlReturn::kSuccess) return R(r);
  return CopyOut(s, buf, cap);
}
GG_EXPORT nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t d, char* buf, unsigned cap) {
  GG_NVML();
  std::string s;
  if (auto r = nv->DeviceGetSerial(H(d), &s); r != NvmlReturn::kSuccess) return R(r);
  return CopyOut(s, buf, cap);
}
GG_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t* out) {
  GG_NVML();
  if (out == nullptr) return R(NvmlReturn::kInvalidArgument);
  gg::gpu::PciInfo p;
  if (auto r = nv->DeviceGetPciInfo(H(d), &p); r != NvmlReturn::kSuccess) return R(r);
  std::memset(out, 0, sizeof(*out));
  out->domain = p.domain;
  out->bus = p.bus;
  out->device = p.device;
  out->pciDeviceId = p.pci_device_id;
  std::snprintf(out->busId, sizeof(out->busId), "%s", p.bus_id.c_str());
  std::snprintf(out->busIdLegacy, sizeof(out->busIdLegacy), "%04x:%02x:%02x.0", p.domain, p.bus,
                p.device);
  return 0;
}
GG_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned* current, unsigned* pending) {
  GG_NVML();
  if (!current || !pending) return R(NvmlReturn::kInvalidArgument);
  bool c = false, p = false;
  auto r = nv->DeviceGetMigMode(H(d), &c, &p);
  if (r == NvmlReturn::kSuccess) {
    *current = c ? 1 : 0;
    *pending = p ? 1 : 0;
  }
  return R(r);
}
GG_EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t d, unsigned* count) {
  GG_NVML();
  if (count == nullptr) return R(NvmlReturn::kInvalidArgument);
  return R(nv->DeviceGetMaxMigDeviceCount(H(d), count));
}
GG_EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t d, unsigned index,
                                                           nvmlDevice_t* mig) {
  GG_NVML();
  if (mig == nullptr) return R(NvmlReturn::kInvalidArgument);
  gg::gpu::DeviceHandle h;
  auto r = nv->DeviceGetMigDeviceHandleByIndex(H(d), index, &h);
  if (r == NvmlReturn::kSuccess) *mig = reinterpret_cast<nvmlDevice_t>(h.value);
  return R(r);
}
GG_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t d, unsigned* id) {
  GG_NVML();
  if (id == nullptr) return R(NvmlReturn::kInvalidArgument);
  return R(nv->DeviceGetGpuInstanceId(H(d), id));
}
GG_EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t d, unsigned* id) {
  GG_NVML();
  if (id == nullptr) return R(NvmlReturn::kInvalidArgument);
  return R(nv->DeviceGetComputeInstanceId(H(d), id));
}
GG_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t* out) {
  GG_NVML();
  if (out == nullptr) return R(NvmlReturn::kInvalidArgument);
  uint64_t total = 0;
  auto r = nv->DeviceGetMemoryTotal(H(d), &total);
  if (r == NvmlReturn::kSuccess) {
    out->total = total;
    out->free = total;  // nothing runs on a fake GPU
    out->used = 0;
  }
  return R(r);
}
GG_EXPORT nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t d, nvmlTemperature_t* t) {
  GG_NVML();
  if (t == nullptr) return R(NvmlReturn::kInvalidArgument);
  if (t->version != kTemperatureV1) return R(NvmlReturn::kArgumentVersionMismatch);
  if (t->sensorType != 0) return R(NvmlReturn::kInvalidArgument);
  int c = 0;
  auto r = nv->DeviceGetTemperature(H(d), &c);
  if (r == NvmlReturn::kSuccess) t->temperature = c;
  return R(r);
}
GG_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned* out) {
  GG_NVML();
  if (out == nullptr || sensor != 0) return R(NvmlReturn::kInvalidArgument);
  int c = 0;
  auto r = nv->DeviceGetTemperature(H(d), &c);
  if (r == NvmlReturn::kSuccess) *out = static_cast<unsigned>(c);
  return R(r);
}
GG_EXPORT nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t d, int which, unsigned* out) {
  GG_NVML();
  if (out == nullptr || which < 0 || which > 3) return R(NvmlReturn::kInvalidArgument);
  int c = 0;
  auto r = nv->DeviceGetTemperatureThreshold(H(d),
                                             static_cast<gg::gpu::TemperatureThreshold>(which), &c);
  if (r == NvmlReturn::kSuccess) *out = static_cast<unsigned>(c);
  return R(r);
}
GG_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d,
                                                              unsigned long long* out) {
  GG_NVML();
  if (out == nullptr) return R(NvmlReturn::kInvalidArgument);
  uint64_t v = 0;
  auto r = nv->DeviceGetCurrentClocksEventReasons(H(d), &v);
  if (r == NvmlReturn::kSuccess) *out = v;
  return R(r);
}
GG_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d,
                                                                 unsigned long long* out) {
  return nvmlDeviceGetCurrentClocksEventReasons(d, out);
}
GG_EXPORT nvmlReturn_t nvmlDeviceGetSupportedClocksEventReasons(nvmlDevice_t d,
                                                                unsigned long long* out) {
  GG_NVML();
  if (out == nullptr) return R(NvmlReturn::kInvalidArgument);
  uint64_t v = 0;
  auto r = nv->DeviceGetSupportedClocksEventReasons(H(d), &v);
  if (r == NvmlReturn::kSuccess) *out = v;
  return R(r);
}
GG_EXPORT nvmlReturn_t nvmlDeviceGetSupportedClocksThrottleReasons(nvmlDevice_t d,
                                                                   unsigned long long* out) {
  return nvmlDeviceGetSupportedClocksEventReasons(d, out);
}
GG_EXPORT nvmlReturn_t nvmlDeviceGetViolationStatus(nvmlDevice_t d, int policy,
                                                    nvmlViolationTime_t* out) {
  GG_NVML();
  if (out == nullptr) return R(NvmlReturn::kInvalidArgument);
  gg::gpu::ViolationTime v;
  auto r = nv->DeviceGetViolationStatus(H(d), static_cast<gg::gpu::PerfPolicy>(policy), &v);
  if (r == NvmlReturn::kSuccess) {
    out->referenceTime = v.reference_time_us;
    out->violationTime = v.violation_time_ns;
  }
  return R(r);
}
GG_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned* mw) {
  GG_NVML();
  if (mw == nullptr) return R(NvmlReturn::kInvalidArgument);
  return R(nv->DeviceGetPowerUsage(H(d), mw));
}
GG_EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned* mw) {
  GG_NVML();
  if (mw == nullptr) return R(NvmlReturn::kInvalidArgument);
  return R(nv->DeviceGetEnforcedPowerLimit(H(d), mw));
}
GG_EXPORT nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t d, nvmlEnableState_t* current,
                                            nvmlEnableState_t* pending) {
  GG_NVML();
  if (!current || !pending) return R(NvmlReturn::kInvalidArgument);
  bool c = false, p = false;
  auto r = nv->DeviceGetEccMode(H(d), &c, &p);
  if (r == NvmlReturn::kSuccess) {
    *current = c ? 1 : 0;
    *pending = p ? 1 : 0;
  }
  return R(r);
}
GG_EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, int type, int counter,
                                                   unsigned long long* out) {
  GG_NVML();
  if (out == nullptr || type < 0 || type > 1 || counter < 0 || counter > 1)
    return R(NvmlReturn::kInvalidArgument);
  uint64_t v = 0;
  auto r = nv->DeviceGetTotalEccErrors(H(d), static_cast<gg::gpu::EccErrorType>(type),
                                       static_cast<gg::gpu::EccCounterType>(counter), &v);
  if (r == NvmlReturn::kSuccess) *out = v;
  return R(r);
}
GG_EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t d, unsigned* corr, unsigned* unc,
                                                 unsigned* pending, unsigned* failure) {
  GG_NVML();
  if (!corr || !unc || !pending || !failure) return R(NvmlReturn::kInvalidArgument);
  gg::gpu::RemappedRows rows;
  auto r = nv->DeviceGetRemappedRows(H(d), &rows);
  if (r == NvmlReturn::kSuccess) {
    *corr = rows.correctable;
    *unc = rows.uncorrectable;
    *pending = rows.pending ? 1 : 0;
    *failure = rows.failure ? 1 : 0;
  }
  return R(r);
}
GG_EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t d, int cause, unsigned* count,
                                                 unsigned long long* addresses) {
  GG_NVML();
  if (count == nullptr || cause < 0 || cause > 1) return R(NvmlReturn::kInvalidArgument);
  unsigned n = 0;
  auto r = nv->DeviceGetRetiredPagesCount(H(d), static_cast<gg::gpu::RetirementCause>(cause), &n);
  if (r != NvmlReturn::kSuccess) return R(r);
  const unsigned room = *count;
  *count = n;
  if (n > room || (n > 0 && addresses == nullptr)) return R(NvmlReturn::kInsufficientSize);
  for (unsigned i = 0; i < n; ++i) addresses[i] = 0x100000ULL * (i + 1);
  return 0;
}
GG_EXPORT nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t d,
                                                              nvmlEnableState_t* p) {
  GG_NVML();
  if (p == nullptr) return R(NvmlReturn::kInvalidArgument);
  bool v = false;
  auto r = nv->DeviceGetRetiredPagesPendingStatus(H(d), &v);
  if (r == NvmlReturn::kSuccess) *p = v ? 1 : 0;
  return R(r);
}
GG_EXPORT nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t d, unsigned* v) {
  GG_NVML();
  if (v == nullptr) return R(NvmlReturn::kInvalidArgument);
  return R(nv->DeviceGetPcieReplayCounter(H(d), v));
}
GG_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned link,
                                                nvmlEnableState_t* a) {
  GG_NVML();
  if (a == nullptr) return R(NvmlReturn::kInvalidArgument);
  bool v = false;
  auto r = nv->DeviceGetNvLinkState(H(d), link, &v);
  if (r == NvmlReturn::kSuccess) *a = v ? 1 : 0;
  return R(r);
}
GG_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t d, unsigned link, int counter,
                                                       unsigned long long* out) {
  GG_NVML();
  if (out == nullptr || counter < 0 || counter > 4) return R(NvmlReturn::kInvalidArgument);
  uint64_t v = 0;
  auto r = nv->DeviceGetNvLinkErrorCounter(H(d), link,
                                           static_cast<gg::gpu::NvLinkErrorCounter>(counter), &v);
  if (r == NvmlReturn::kSuccess) *out = v;
  return R(r);
}
GG_EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t d, int count, nvmlFieldValue_t* raw) {
  GG_NVML();
  if (raw == nullptr || count < 0) return R(NvmlReturn::kInvalidArgument);
  std::vector<gg::gpu::FieldValue> vals(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    vals[i].field_id = raw[i].fieldId;
    vals[i].scope_id = raw[i].scopeId;
  }
  auto r = nv->DeviceGetFieldValues(H(d), vals);
  if (r != NvmlReturn::kSuccess) return R(r);
  for (int i = 0; i < count; ++i) {
    const auto& v = vals[i];
    raw[i].nvmlReturn = R(v.result);
    raw[i].valueType = static_cast<int>(v.type);
    raw[i].timestamp = v.timestamp_us;
    raw[i].latencyUsec = 0;
    std::memset(&raw[i].value, 0, sizeof(raw[i].value));
    using T = gg::gpu::FieldValueType;
    switch (v.type) {
      case T::kDouble:
        raw[i].value.dVal = v.dbl;
        break;
      case T::kUnsignedInt:
        raw[i].value.uiVal = static_cast<unsigned>(v.u64);
        break;
      case T::kUnsignedLong:
        raw[i].value.ulVal = static_cast<unsigned long>(v.u64);
        break;
      case T::kSignedLongLong:
        raw[i].value.sllVal = v.i64;
        break;
      case T::kSignedInt:
        raw[i].value.siVal = static_cast<int>(v.i64);
        break;
      case T::kUnsignedShort:
        raw[i].value.usVal = static_cast<unsigned short>(v.u64);
        break;
      default:
        raw[i].value.ullVal = v.u64;
        break;
    }
  }
  return 0;
}
GG_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  GG_NVML();
  if (set == nullptr) return R(NvmlReturn::kInvalidArgument);
  gg::gpu::EventSetHandle h;
  auto r = nv->EventSetCreate(&h);
  if (r == NvmlReturn::kSuccess) *set = reinterpret_cast<nvmlEventSet_t>(h.value);
  return R(r);
}
GG_EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t d, unsigned long long* mask) {
  GG_NVML();
  if (mask == nullptr) return R(NvmlReturn::kInvalidArgument);
  uint64_t v = 0;
  auto r = nv->DeviceGetSupportedEventTypes(H(d), &v);
  if (r == NvmlReturn::kSuccess) *mask = v;
  return R(r);
}
GG_EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long mask,
                                                nvmlEventSet_t s) {
  GG_NVML();
  return R(nv->DeviceRegisterEvents(H(d), mask, Set(s)));
}
GG_EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t s, nvmlEventData_t* out,
                                           unsigned timeout_ms) {
  GG_NVML();
  if (out == nullptr) return R(NvmlReturn::kInvalidArgument);
  gg::gpu::EventData e;
  auto r = nv->EventSetWait(Set(s), timeout_ms, &e);
  if (r == NvmlReturn::kSuccess) {
    out->device = reinterpret_cast<nvmlDevice_t>(e.device.value);
    out->eventType = e.event_type;
    out->eventData = e.event_data;
    out->gpuInstanceId = e.gpu_instance_id;
    out->computeInstanceId = e.compute_instance_id;
  }
  return R(r);
}
GG_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t s) {
  GG_NVML();
  return R(nv->EventSetFree(Set(s)));
}
