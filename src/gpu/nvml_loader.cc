// NvmlLoader: dlopen("libnvidia-ml.so.1") and one table of dlsym'd symbols.
//
// The NVML types and layouts are in gpu/nvml_abi.h (hand-written from NVIDIA's public ABI
// facts, pinned by static_asserts).
#include "gpu/nvml_loader.h"

#include <dlfcn.h>

#include <cstddef>
#include <cstring>
#include <mutex>

#include "gpu/nvml_abi.h"

namespace gg::gpu {

using namespace nvml_abi;  // NOLINT: local to this file

// One table of every symbol we use. Required ones fail Load(); optional ones degrade.
struct NvmlSymbols {
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*driver_version)(char*, unsigned) = nullptr;
  nvmlReturn_t (*count)(unsigned*) = nullptr;
  nvmlReturn_t (*handle_by_index)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*serial)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*pci_info)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*mig_mode)(nvmlDevice_t, unsigned*, unsigned*) = nullptr;
  nvmlReturn_t (*max_mig_count)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*mig_handle_by_index)(nvmlDevice_t, unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*gpu_instance_id)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*compute_instance_id)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*memory_info)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*temperature_v)(nvmlDevice_t, nvmlTemperature_t*) = nullptr;
  nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*temperature_threshold)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*current_clock_reasons)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*supported_clock_reasons)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*violation_status)(nvmlDevice_t, int, nvmlViolationTime_t*) = nullptr;
  nvmlReturn_t (*power_usage)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*enforced_power_limit)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*ecc_mode)(nvmlDevice_t, nvmlEnableState_t*, nvmlEnableState_t*) = nullptr;
  nvmlReturn_t (*total_ecc)(nvmlDevice_t, int, int, unsigned long long*) = nullptr;
  nvmlReturn_t (*remapped_rows)(nvmlDevice_t, unsigned*, unsigned*, unsigned*, unsigned*) = nullptr;
  nvmlReturn_t (*retired_pages)(nvmlDevice_t, int, unsigned*, unsigned long long*) = nullptr;
  nvmlReturn_t (*retired_pending)(nvmlDevice_t, nvmlEnableState_t*) = nullptr;
  nvmlReturn_t (*pcie_replay)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*nvlink_state)(nvmlDevice_t, unsigned, nvmlEnableState_t*) = nullptr;
  nvmlReturn_t (*nvlink_error)(nvmlDevice_t, unsigned, int, unsigned long long*) = nullptr;
  nvmlReturn_t (*field_values)(nvmlDevice_t, int, nvmlFieldValue_t*) = nullptr;
  nvmlReturn_t (*event_set_create)(nvmlEventSet_t*) = nullptr;
  nvmlReturn_t (*supported_events)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*register_events)(nvmlDevice_t, unsigned long long, nvmlEventSet_t) = nullptr;
  nvmlReturn_t (*event_set_wait)(nvmlEventSet_t, nvmlEventData_t*, unsigned) = nullptr;
  nvmlReturn_t (*event_set_free)(nvmlEventSet_t) = nullptr;
  std::string missing_optional;
};

namespace {

nvmlDevice_t Dev(DeviceHandle h) { return reinterpret_cast<nvmlDevice_t>(h.value); }
NvmlReturn Ret(nvmlReturn_t r) { return static_cast<NvmlReturn>(r); }

// Resolves the first name that exists (highest version first, as go-nvml does).
template <typename Fn>
bool Resolve(void* lib, Fn& out, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (void* p = dlsym(lib, n)) {
      out = reinterpret_cast<Fn>(p);
      return true;
    }
  }
  return false;
}

std::string CString(const char* buf, size_t cap) { return std::string(buf, strnlen(buf, cap)); }

}  // namespace

NvmlLoader::NvmlLoader(std::string library)
    : library_(std::move(library)), sym_(std::make_unique<NvmlSymbols>()) {}

NvmlLoader::~NvmlLoader() {
  // Deliberately no dlclose: a hung call on the NVML worker may still be inside the library.
}

namespace {

// Appends `name` to a ", "-separated list when `ok` is false.
void NoteMissing(bool ok, const char* name, std::string& list) {
  if (!ok) list += (list.empty() ? "" : ", ") + std::string(name);
}

// The symbols nothing works without; returns the names missing. Versioned names first:
// plain names are the legacy v1 ABI (docs/reference/nvml-abi.md, "Loading").
std::string ResolveRequired(void* lib, NvmlSymbols& s) {
  std::string missing;
  auto need = [&](bool ok, const char* name) { NoteMissing(ok, name, missing); };
  need(Resolve(lib, s.init, {"nvmlInit_v2"}), "nvmlInit_v2");
  need(Resolve(lib, s.shutdown, {"nvmlShutdown"}), "nvmlShutdown");
  need(Resolve(lib, s.count, {"nvmlDeviceGetCount_v2"}), "nvmlDeviceGetCount_v2");
  need(Resolve(lib, s.handle_by_index, {"nvmlDeviceGetHandleByIndex_v2"}),
       "nvmlDeviceGetHandleByIndex_v2");
  need(Resolve(lib, s.uuid, {"nvmlDeviceGetUUID"}), "nvmlDeviceGetUUID");
  return missing;
}

// Identity, MIG and memory: missing ones leave the fields empty.
void ResolveIdentity(void* lib, NvmlSymbols& s) {
  auto want = [&](bool ok, const char* name) { NoteMissing(ok, name, s.missing_optional); };
  want(Resolve(lib, s.error_string, {"nvmlErrorString"}), "nvmlErrorString");
  want(Resolve(lib, s.driver_version, {"nvmlSystemGetDriverVersion"}),
       "nvmlSystemGetDriverVersion");
  want(Resolve(lib, s.name, {"nvmlDeviceGetName"}), "nvmlDeviceGetName");
  want(Resolve(lib, s.serial, {"nvmlDeviceGetSerial"}), "nvmlDeviceGetSerial");
  want(Resolve(lib, s.pci_info, {"nvmlDeviceGetPciInfo_v3"}), "nvmlDeviceGetPciInfo_v3");
  want(Resolve(lib, s.mig_mode, {"nvmlDeviceGetMigMode"}), "nvmlDeviceGetMigMode");
  want(Resolve(lib, s.max_mig_count, {"nvmlDeviceGetMaxMigDeviceCount"}),
       "nvmlDeviceGetMaxMigDeviceCount");
  want(Resolve(lib, s.mig_handle_by_index, {"nvmlDeviceGetMigDeviceHandleByIndex"}),
       "nvmlDeviceGetMigDeviceHandleByIndex");
  want(Resolve(lib, s.gpu_instance_id, {"nvmlDeviceGetGpuInstanceId"}),
       "nvmlDeviceGetGpuInstanceId");
  want(Resolve(lib, s.compute_instance_id, {"nvmlDeviceGetComputeInstanceId"}),
       "nvmlDeviceGetComputeInstanceId");
  // v1 nvmlMemory_t (24 bytes): the plain name is the only layout we declare.
  want(Resolve(lib, s.memory_info, {"nvmlDeviceGetMemoryInfo"}), "nvmlDeviceGetMemoryInfo");
}

// Telemetry (temperature, clocks, power, ECC, memory repair, PCIe, NVLink, fields).
void ResolveTelemetry(void* lib, NvmlSymbols& s) {
  auto want = [&](bool ok, const char* name) { NoteMissing(ok, name, s.missing_optional); };
  want(Resolve(lib, s.temperature_v, {"nvmlDeviceGetTemperatureV"}), "nvmlDeviceGetTemperatureV");
  want(Resolve(lib, s.temperature, {"nvmlDeviceGetTemperature"}), "nvmlDeviceGetTemperature");
  want(Resolve(lib, s.temperature_threshold, {"nvmlDeviceGetTemperatureThreshold"}),
       "nvmlDeviceGetTemperatureThreshold");
  want(Resolve(
           lib, s.current_clock_reasons,
           {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"}),
       "nvmlDeviceGetCurrentClocksEventReasons");
  want(Resolve(lib, s.supported_clock_reasons,
               {"nvmlDeviceGetSupportedClocksEventReasons",
                "nvmlDeviceGetSupportedClocksThrottleReasons"}),
       "nvmlDeviceGetSupportedClocksEventReasons");
  want(Resolve(lib, s.violation_status, {"nvmlDeviceGetViolationStatus"}),
       "nvmlDeviceGetViolationStatus");
  want(Resolve(lib, s.power_usage, {"nvmlDeviceGetPowerUsage"}), "nvmlDeviceGetPowerUsage");
  want(Resolve(lib, s.enforced_power_limit, {"nvmlDeviceGetEnforcedPowerLimit"}),
       "nvmlDeviceGetEnforcedPowerLimit");
  want(Resolve(lib, s.ecc_mode, {"nvmlDeviceGetEccMode"}), "nvmlDeviceGetEccMode");
  want(Resolve(lib, s.total_ecc, {"nvmlDeviceGetTotalEccErrors"}), "nvmlDeviceGetTotalEccErrors");
  want(Resolve(lib, s.remapped_rows, {"nvmlDeviceGetRemappedRows"}), "nvmlDeviceGetRemappedRows");
  want(Resolve(lib, s.retired_pages, {"nvmlDeviceGetRetiredPages"}), "nvmlDeviceGetRetiredPages");
  want(Resolve(lib, s.retired_pending, {"nvmlDeviceGetRetiredPagesPendingStatus"}),
       "nvmlDeviceGetRetiredPagesPendingStatus");
  want(Resolve(lib, s.pcie_replay, {"nvmlDeviceGetPcieReplayCounter"}),
       "nvmlDeviceGetPcieReplayCounter");
  want(Resolve(lib, s.nvlink_state, {"nvmlDeviceGetNvLinkState"}), "nvmlDeviceGetNvLinkState");
  want(Resolve(lib, s.nvlink_error, {"nvmlDeviceGetNvLinkErrorCounter"}),
       "nvmlDeviceGetNvLinkErrorCounter");
  want(Resolve(lib, s.field_values, {"nvmlDeviceGetFieldValues"}), "nvmlDeviceGetFieldValues");
}

void ResolveEvents(void* lib, NvmlSymbols& s) {
  auto want = [&](bool ok, const char* name) { NoteMissing(ok, name, s.missing_optional); };
  want(Resolve(lib, s.event_set_create, {"nvmlEventSetCreate"}), "nvmlEventSetCreate");
  want(Resolve(lib, s.supported_events, {"nvmlDeviceGetSupportedEventTypes"}),
       "nvmlDeviceGetSupportedEventTypes");
  want(Resolve(lib, s.register_events, {"nvmlDeviceRegisterEvents"}), "nvmlDeviceRegisterEvents");
  // Only the v2 wait: v1 writes the 24-byte legacy struct (no GI/CI ids).
  want(Resolve(lib, s.event_set_wait, {"nvmlEventSetWait_v2"}), "nvmlEventSetWait_v2");
  want(Resolve(lib, s.event_set_free, {"nvmlEventSetFree"}), "nvmlEventSetFree");
}

}  // namespace

Status NvmlLoader::Load() {
  if (load_attempted_) {
    return handle_ ? OkStatus() : UnavailableError(load_error_);
  }
  load_attempted_ = true;
  dlerror();
  handle_ = dlopen(library_.c_str(), RTLD_LAZY | RTLD_GLOBAL);
  if (handle_ == nullptr) {
    const char* err = dlerror();
    load_error_ = err ? err : (library_ + ": cannot be loaded");
    return UnavailableError(load_error_);
  }
  const std::string missing = ResolveRequired(handle_, *sym_);
  ResolveIdentity(handle_, *sym_);
  ResolveTelemetry(handle_, *sym_);
  ResolveEvents(handle_, *sym_);
  if (!missing.empty()) {
    load_error_ = library_ + ": missing required symbols: " + missing;
    // Keep the handle open (harmless) but behave as unavailable.
    handle_ = nullptr;
    return UnavailableError(load_error_);
  }
  return OkStatus();
}

bool NvmlLoader::loaded() const { return handle_ != nullptr; }

std::string NvmlLoader::MissingOptionalSymbols() const { return sym_->missing_optional; }

std::string NvmlLoader::LoadError() const { return load_error_; }

#define GG_REQUIRE(fn)                                       \
  if (handle_ == nullptr) return NvmlReturn::kUninitialized; \
  if (sym_->fn == nullptr) return NvmlReturn::kFunctionNotFound;

NvmlReturn NvmlLoader::Init() {
  if (!Load().ok()) return NvmlReturn::kLibraryNotFound;
  return Ret(sym_->init());
}

NvmlReturn NvmlLoader::Shutdown() {
  GG_REQUIRE(shutdown);
  return Ret(sym_->shutdown());
}

std::string NvmlLoader::ErrorString(NvmlReturn r) {
  if (handle_ != nullptr && sym_->error_string != nullptr && r != NvmlReturn::kDeadlineExceeded) {
    const char* s = sym_->error_string(static_cast<int>(r));
    if (s != nullptr) return s;
  }
  return std::string(NvmlReturnName(r));
}

NvmlReturn NvmlLoader::SystemGetDriverVersion(std::string* version) {
  GG_REQUIRE(driver_version);
  char buf[kVersionBuf] = {};
  nvmlReturn_t r = sym_->driver_version(buf, sizeof(buf));
  if (r == 0) *version = CString(buf, sizeof(buf));
  return Ret(r);
}

NvmlReturn NvmlLoader::DeviceGetCount(unsigned* count) {
  GG_REQUIRE(count);
  return Ret(sym_->count(count));
}

NvmlReturn NvmlLoader::DeviceGetHandleByIndex(unsigned index, DeviceHandle* device) {
  GG_REQUIRE(handle_by_index);
  nvmlDevice_t d = nullptr;
  nvmlReturn_t r = sym_->handle_by_index(index, &d);
  if (r == 0) device->value = reinterpret_cast<uintptr_t>(d);
  return Ret(r);
}

NvmlReturn NvmlLoader::DeviceGetName(DeviceHandle device, std::string* name) {
  GG_REQUIRE(name);
  char buf[kNameBuf] = {};
  nvmlReturn_t r = sym_->name(Dev(device), buf, sizeof(buf));
  if (r == 0) *name = CString(buf, sizeof(buf));
  return Ret(r);
}

NvmlReturn NvmlLoader::DeviceGetUuid(DeviceHandle device, std::string* uuid) {
  GG_REQUIRE(uuid);
  char buf[kUuidBuf] = {};
  nvmlReturn_t r = sym_->uuid(Dev(device), buf, sizeof(buf));
  if (r == 0) *uuid = CString(buf, sizeof(buf));
  return Ret(r);
}

NvmlReturn NvmlLoader::DeviceGetSerial(DeviceHandle device, std::string* serial) {
  GG_REQUIRE(serial);
  char buf[kSerialBuf] = {};
  nvmlReturn_t r = sym_->serial(Dev(device), buf, sizeof(buf));
  if (r == 0) *serial = CString(buf, sizeof(buf));
  return Ret(r);
}

NvmlReturn NvmlLoader::DeviceGetPciInfo(DeviceHandle device, PciInfo* pci) {
  GG_REQUIRE(pci_info);
  nvmlPciInfo_t p;
  std::memset(&p, 0, sizeof(p));
  nvmlReturn_t r = sym_->pci_info(Dev(device), &p);
  if (r == 0) {
    pci->domain = p.domain;
    pci->bus = p.bus;
    pci->device = p.device;
    pci->pci_device_id = p.pciDeviceId;
    pci->bus_id = CString(p.busId, sizeof(p.busId));
  }
  return Ret(r);
}

NvmlReturn NvmlLoader::DeviceGetMigMode(DeviceHandle device, bool* current, bool* pending) {
  GG_REQUIRE(mig_mode);
  unsigned c = 0, p = 0;
  nvmlReturn_t r = sym_->mig_mode(Dev(device), &c, &p);
  if (r == 0) {
    *current = c == 1;
    *pending = p == 1;
  }
  return Ret(r);
}

NvmlReturn NvmlLoader::DeviceGetMaxMigDeviceCount(DeviceHandle device, unsigned* count) {
  GG_REQUIRE(max_mig_count);
  unsigned c = 0;
  nvmlReturn_t r = sym_->max_mig_count(Dev(device), &c);
  if (r == 0) *count = c;
  return Ret(r);
}

NvmlReturn NvmlLoader::DeviceGetMigDeviceHandleByIndex(DeviceHandle device, unsigned index,
                                                       DeviceHandle* mig) {
  GG_REQUIRE(mig_handle_by_index);
  nvmlDevice_t m = nullptr;
  nvmlReturn_t r = sym_->mig_handle_by_index(Dev(device), index, &m);
  if (r == 0) mig->value = reinterpret_cast<std::uintptr_t>(m);
  return Ret(r);
}

NvmlReturn NvmlLoader::DeviceGetGpuInstanceId(DeviceHandle mig, unsigned* id) {
  GG_REQUIRE(gpu_instance_id);
  unsigned v = 0;
  nvmlReturn_t r = sym_->gpu_instance_id(Dev(mig), &v);
  if (r == 0) *id = v;
  return Ret(r);
}

NvmlReturn NvmlLoader::DeviceGetComputeInstanceId(DeviceHandle mig, unsigned* id) {
  GG_REQUIRE(compute_instance_id);
  unsigned v = 0;
  nvmlReturn_t r = sym_->compute_instance_id(Dev(mig), &v);
  if (r == 0) *id = v;
  return Ret(r);
}

NvmlReturn NvmlLoader::DeviceGetMemoryTotal(DeviceHandle device, uint64_t* bytes) {
  GG_REQUIRE(memory_info);
  nvmlMemory_t m{};
  nvmlReturn_t r = sym_->memory_info(Dev(device), &m);
  if (r == 0) *bytes = m.total;
  return Ret(r);
}

NvmlReturn NvmlLoader::DeviceGetTemperature(DeviceHandle device, int* celsius) {
  if (handle_ == nullptr) return NvmlReturn::kUninitialized;
  if (sym_->temperature_v != nullptr) {
    nvmlTemperature_t t;
    std::memset(&t, 0, sizeof(t));
    t.version = kTemperatureV1;
    t.sensorType = kTemperatureGpu;
    nvmlReturn_t r = sym_->temperature_v(Dev(device), &t);
    if (r == 0) {
      *celsius = t.temperature;
      return NvmlReturn::kSuccess;
    }
    // Version mismatch / not supported on this driver: fall back to the deprecated call.
    if (Ret(r) != NvmlReturn::kArgumentVersionMismatch && Ret(r) != NvmlReturn::kNotSupported &&
        Ret(r) != NvmlReturn::kFunctionNotFound)
      return Ret(r);
  }
  if (sym_->temperature == nullptr) return NvmlReturn::kFunctionNotFound;
  unsigned v = 0;
  nvmlReturn_t r = sym_->temperature(Dev(device), kTemperatureGpu, &v);
  if (r == 0) *celsius = static_cast<int>(v);
  return Ret(r);
}

NvmlReturn NvmlLoader::DeviceGetTemperatureThreshold(DeviceHandle device,
                                                     TemperatureThreshold which, int* celsius) {
  GG_REQUIRE(temperature_threshold);
  unsigned v = 0;
  nvmlReturn_t r = sym_->temperature_threshold(Dev(device), static_cast<int>(which), &v);
  if (r == 0) *celsius = static_cast<int>(v);
  return Ret(r);
}

NvmlReturn NvmlLoader::DeviceGetCurrentClocksEventReasons(DeviceHandle device, uint64_t* reasons) {
  GG_REQUIRE(current_clock_reasons);
  unsigned long long v = 0;
  nvmlReturn_t r = sym_->current_clock_reasons(Dev(device), &v);
  if (r == 0) *reasons = v;
  return Ret(r);
}

NvmlReturn NvmlLoader::DeviceGetSupportedClocksEventReasons(DeviceHandle device,
                                                            uint64_t* reasons) {
  GG_REQUIRE(supported_clock_reasons);
  unsigned long long v = 0;
  nvmlReturn_t r = sym_->supported_clock_reasons(Dev(device), &v);
  if (r == 0) *reasons = v;
  return Ret(r);
}

NvmlReturn NvmlLoader::DeviceGetViolationStatus(DeviceHandle device, PerfPolicy policy,
                                                ViolationTime* out) {
  GG_REQUIRE(violation_status);
  nvmlViolationTime_t v{};
  nvmlReturn_t r = sym_->violation_status(Dev(device), static_cast<int>(policy), &v);
  if (r == 0) {
    out->reference_time_us = v.referenceTime;
    out->violation_time_ns = v.violationTime;
  }
  return Ret(r);
}

NvmlReturn NvmlLoader::DeviceGetPowerUsage(DeviceHandle device, unsigned* milliwatts) {
  GG_REQUIRE(power_usage);
  return Ret(sym_->power_usage(Dev(device), milliwatts));
}

NvmlReturn NvmlLoader::DeviceGetEnforcedPowerLimit(DeviceHandle device, unsigned* milliwatts) {
  GG_REQUIRE(enforced_power_limit);
  return Ret(sym_->enforced_power_limit(Dev(device), milliwatts));
}

NvmlReturn NvmlLoader::DeviceGetEccMode(DeviceHandle device, bool* current, bool* pending) {
  GG_REQUIRE(ecc_mode);
  nvmlEnableState_t c = 0, p = 0;
  nvmlReturn_t r = sym_->ecc_mode(Dev(device), &c, &p);
  if (r == 0) {
    *current = c == 1;
    *pending = p == 1;
  }
  return Ret(r);
}

NvmlReturn NvmlLoader::DeviceGetTotalEccErrors(DeviceHandle device, EccErrorType type,
                                               EccCounterType counter, uint64_t* count) {
  GG_REQUIRE(total_ecc);
  unsigned long long v = 0;
  nvmlReturn_t r =
      sym_->total_ecc(Dev(device), static_cast<int>(type), static_cast<int>(counter), &v);
  if (r == 0) *count = v;
  return Ret(r);
}

NvmlReturn NvmlLoader::DeviceGetRemappedRows(DeviceHandle device, RemappedRows* rows) {
  GG_REQUIRE(remapped_rows);
  unsigned corr = 0, unc = 0, pending = 0, failure = 0;
  nvmlReturn_t r = sym_->remapped_rows(Dev(device), &corr, &unc, &pending, &failure);
  if (r == 0) {
    rows->correctable = corr;
    rows->uncorrectable = unc;
    rows->pending = pending != 0;
    rows->failure = failure != 0;
  }
  return Ret(r);
}

NvmlReturn NvmlLoader::DeviceGetRetiredPagesCount(DeviceHandle device, RetirementCause cause,
                                                  unsigned* count) {
  GG_REQUIRE(retired_pages);
  unsigned n = 0;  // size query: NULL addresses with count 0
  nvmlReturn_t r = sym_->retired_pages(Dev(device), static_cast<int>(cause), &n, nullptr);
  if (r == 0 || Ret(r) == NvmlReturn::kInsufficientSize) {
    *count = n;
    return NvmlReturn::kSuccess;
  }
  return Ret(r);
}

NvmlReturn NvmlLoader::DeviceGetRetiredPagesPendingStatus(DeviceHandle device, bool* pending) {
  GG_REQUIRE(retired_pending);
  nvmlEnableState_t p = 0;
  nvmlReturn_t r = sym_->retired_pending(Dev(device), &p);
  if (r == 0) *pending = p == 1;
  return Ret(r);
}

NvmlReturn NvmlLoader::DeviceGetPcieReplayCounter(DeviceHandle device, unsigned* value) {
  GG_REQUIRE(pcie_replay);
  return Ret(sym_->pcie_replay(Dev(device), value));
}

NvmlReturn NvmlLoader::DeviceGetNvLinkState(DeviceHandle device, unsigned link, bool* active) {
  GG_REQUIRE(nvlink_state);
  nvmlEnableState_t a = 0;
  nvmlReturn_t r = sym_->nvlink_state(Dev(device), link, &a);
  if (r == 0) *active = a == 1;
  return Ret(r);
}

NvmlReturn NvmlLoader::DeviceGetNvLinkErrorCounter(DeviceHandle device, unsigned link,
                                                   NvLinkErrorCounter counter, uint64_t* value) {
  GG_REQUIRE(nvlink_error);
  unsigned long long v = 0;
  nvmlReturn_t r = sym_->nvlink_error(Dev(device), link, static_cast<int>(counter), &v);
  if (r == 0) *value = v;
  return Ret(r);
}

NvmlReturn NvmlLoader::DeviceGetFieldValues(DeviceHandle device, std::span<FieldValue> values) {
  GG_REQUIRE(field_values);
  constexpr size_t kMax = 32;
  if (values.size() > kMax) return NvmlReturn::kInvalidArgument;
  nvmlFieldValue_t raw[kMax];
  std::memset(raw, 0, sizeof(raw));
  for (size_t i = 0; i < values.size(); ++i) {
    raw[i].fieldId = values[i].field_id;
    raw[i].scopeId = values[i].scope_id;
  }
  nvmlReturn_t r = sym_->field_values(Dev(device), static_cast<int>(values.size()), raw);
  if (r != 0) return Ret(r);
  for (size_t i = 0; i < values.size(); ++i) {
    FieldValue& v = values[i];
    v.result = Ret(raw[i].nvmlReturn);
    v.type = static_cast<FieldValueType>(raw[i].valueType);
    v.timestamp_us = raw[i].timestamp;
    v.u64 = 0;
    v.i64 = 0;
    v.dbl = 0;
    switch (v.type) {
      case FieldValueType::kDouble:
        v.dbl = raw[i].value.dVal;
        break;
      case FieldValueType::kUnsignedInt:
        v.u64 = raw[i].value.uiVal;
        break;
      case FieldValueType::kUnsignedLong:
        v.u64 = raw[i].value.ulVal;
        break;
      case FieldValueType::kUnsignedLongLong:
        v.u64 = raw[i].value.ullVal;
        break;
      case FieldValueType::kSignedLongLong:
        v.i64 = raw[i].value.sllVal;
        break;
      case FieldValueType::kSignedInt:
        v.i64 = raw[i].value.siVal;
        break;
      case FieldValueType::kUnsignedShort:
        v.u64 = raw[i].value.usVal;
        break;
      default:
        v.u64 = raw[i].value.ullVal;
        break;
    }
    if (v.type == FieldValueType::kSignedLongLong || v.type == FieldValueType::kSignedInt) {
      v.u64 = static_cast<uint64_t>(v.i64);
    } else if (v.type != FieldValueType::kDouble) {
      v.i64 = static_cast<int64_t>(v.u64);
    }
  }
  return NvmlReturn::kSuccess;
}

NvmlReturn NvmlLoader::EventSetCreate(EventSetHandle* set) {
  GG_REQUIRE(event_set_create);
  nvmlEventSet_t s = nullptr;
  nvmlReturn_t r = sym_->event_set_create(&s);
  if (r == 0) set->value = reinterpret_cast<uintptr_t>(s);
  return Ret(r);
}

NvmlReturn NvmlLoader::DeviceGetSupportedEventTypes(DeviceHandle device, uint64_t* mask) {
  GG_REQUIRE(supported_events);
  unsigned long long v = 0;
  nvmlReturn_t r = sym_->supported_events(Dev(device), &v);
  if (r == 0) *mask = v;
  return Ret(r);
}

NvmlReturn NvmlLoader::DeviceRegisterEvents(DeviceHandle device, uint64_t mask,
                                            EventSetHandle set) {
  GG_REQUIRE(register_events);
  return Ret(sym_->register_events(Dev(device), mask, reinterpret_cast<nvmlEventSet_t>(set.value)));
}

NvmlReturn NvmlLoader::EventSetWait(EventSetHandle set, unsigned timeout_ms, EventData* data) {
  GG_REQUIRE(event_set_wait);
  nvmlEventData_t e;
  std::memset(&e, 0, sizeof(e));
  nvmlReturn_t r =
      sym_->event_set_wait(reinterpret_cast<nvmlEventSet_t>(set.value), &e, timeout_ms);
  if (r == 0) {
    data->device.value = reinterpret_cast<uintptr_t>(e.device);
    data->event_type = e.eventType;
    data->event_data = e.eventData;
    data->gpu_instance_id = e.gpuInstanceId;
    data->compute_instance_id = e.computeInstanceId;
  }
  return Ret(r);
}

NvmlReturn NvmlLoader::EventSetFree(EventSetHandle set) {
  GG_REQUIRE(event_set_free);
  return Ret(sym_->event_set_free(reinterpret_cast<nvmlEventSet_t>(set.value)));
}

#undef GG_REQUIRE

}  // namespace gg::gpu
