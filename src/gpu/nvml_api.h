// NvmlApi: the small slice of NVML the agent uses, expressed in our own types so that the
// real dlopen loader, FakeNvml and the guarded worker are interchangeable. No NVIDIA type
// appears here; codes and bit values mirror NVML's ABI (see docs/reference/nvml-abi.md).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"

namespace gg::gpu {

// nvmlReturn_t values we distinguish, plus kDeadlineExceeded (ours: the call hung past its
// deadline on the NVML worker; never produced by NVML itself).
enum class NvmlReturn : int {
  kSuccess = 0,
  kUninitialized = 1,
  kInvalidArgument = 2,
  kNotSupported = 3,
  kNoPermission = 4,
  kNotFound = 6,
  kInsufficientSize = 7,
  kDriverNotLoaded = 9,
  kTimeout = 10,  // event wait: nothing arrived
  kIrqIssue = 11,
  kLibraryNotFound = 12,
  kFunctionNotFound = 13,
  kCorruptedInforom = 14,
  kGpuIsLost = 15,
  kResetRequired = 16,
  kOperatingSystem = 17,
  kLibRmVersionMismatch = 18,
  kInUse = 19,
  kMemory = 20,
  kNoData = 21,
  kArgumentVersionMismatch = 25,
  kNotReady = 27,
  kGpuNotFound = 28,
  kInvalidState = 29,
  kUnknown = 999,
  kDeadlineExceeded = -1,
};

// "SUCCESS", "NOT_SUPPORTED", "GPU_IS_LOST", ... ("ERROR_<n>" for codes we don't name).
std::string_view NvmlReturnName(NvmlReturn r);
// True for codes that are health signals about the GPU itself (lost, reset required,
// driver/library mismatch, driver not loaded), not merely "this metric is unavailable".
bool IsGpuHealthSignal(NvmlReturn r);
// Maps to a Status: NotSupported -> Unimplemented, GpuIsLost -> Unavailable,
// DeadlineExceeded -> DeadlineExceeded, LibraryNotFound/FunctionNotFound -> Unavailable, ...
// `call` names the NVML function for the message ("nvmlDeviceGetUUID: GPU_IS_LOST").
Status NvmlStatus(NvmlReturn r, std::string_view call);

// Opaque handles (NVML's are pointers valid for one init session; compare by value).
struct DeviceHandle {
  std::uintptr_t value = 0;
  friend bool operator==(DeviceHandle, DeviceHandle) = default;
};
struct EventSetHandle {
  std::uintptr_t value = 0;
  friend bool operator==(EventSetHandle, EventSetHandle) = default;
};

struct PciInfo {
  uint32_t domain = 0;
  uint32_t bus = 0;
  uint32_t device = 0;
  uint32_t pci_device_id = 0;  // device id << 16 | vendor id (0x10DE)
  std::string bus_id;          // NVML form "00000000:3B:00.0"
};

enum class TemperatureThreshold : int { kShutdown = 0, kSlowdown = 1, kMemMax = 2, kGpuMax = 3 };
enum class EccErrorType : int { kCorrected = 0, kUncorrected = 1 };
enum class EccCounterType : int { kVolatile = 0, kAggregate = 1 };
enum class RetirementCause : int { kMultipleSingleBit = 0, kDoubleBit = 1 };
enum class NvLinkErrorCounter : int {
  kDlReplay = 0,
  kDlRecovery = 1,
  kDlCrcFlit = 2,
  kDlCrcData = 3,
  kDlEccData = 4,
};
// nvmlPerfPolicyType_t for the per-reason "time spent throttled" counters.
enum class PerfPolicy : int {
  kPower = 0,
  kThermal = 1,
  kSyncBoost = 2,
  kBoardLimit = 3,
  kLowUtilization = 4,
  kReliability = 5,
  kTotalAppClocks = 10,
  kTotalBaseClocks = 11,
};

struct RemappedRows {
  uint32_t correctable = 0;
  uint32_t uncorrectable = 0;
  bool pending = false;
  bool failure = false;
};

struct ViolationTime {
  uint64_t reference_time_us = 0;  // when the counter was sampled
  uint64_t violation_time_ns = 0;  // total time the policy held clocks down
};

// nvmlValueType_t
enum class FieldValueType : int {
  kDouble = 0,
  kUnsignedInt = 1,
  kUnsignedLong = 2,
  kUnsignedLongLong = 3,
  kSignedLongLong = 4,
  kSignedInt = 5,
  kUnsignedShort = 6,
};

// One nvmlFieldValue_t: fill field_id (and scope_id for per-link fields) before the call.
struct FieldValue {
  uint32_t field_id = 0;
  uint32_t scope_id = 0;
  NvmlReturn result = NvmlReturn::kNotSupported;  // per entry; check before reading value
  FieldValueType type = FieldValueType::kUnsignedLongLong;
  int64_t timestamp_us = 0;
  // The value converted from the union by `type`: integers in `u64`/`i64`, doubles in `dbl`.
  uint64_t u64 = 0;
  int64_t i64 = 0;
  double dbl = 0;
};

// NVML field ids we read (docs/reference/nvml-abi.md, "Constants").
inline constexpr uint32_t kFieldEccSbeVolTotal = 3;
inline constexpr uint32_t kFieldEccDbeVolTotal = 4;
inline constexpr uint32_t kFieldNvLinkLinkCount = 91;
inline constexpr uint32_t kFieldPcieReplayCounter = 94;
inline constexpr uint32_t kFieldMemoryTemp = 82;
inline constexpr uint32_t kFieldGpuRecoveryAction = 230;  // NVML_FI_DEV_GET_GPU_RECOVERY_ACTION

// nvmlDeviceGpuRecoveryAction_t (value of field 230).
enum class RecoveryAction : int {
  kNone = 0,
  kGpuReset = 1,
  kNodeReboot = 2,
  kDrainP2P = 3,
  kDrainAndReset = 4,
  kRecoverImexDomain = 5,
};
// "None", "GpuReset", "NodeReboot", "DrainP2P", "DrainAndReset", "RecoverImexDomain",
// "Unknown(<n>)" — the strings api::GpuStatus::recovery_action carries.
std::string RecoveryActionName(int value);

// Event type bits (unsigned long long in NVML).
inline constexpr uint64_t kEventSingleBitEcc = 0x0001;
inline constexpr uint64_t kEventDoubleBitEcc = 0x0002;
inline constexpr uint64_t kEventPState = 0x0004;
inline constexpr uint64_t kEventXidCritical = 0x0008;
inline constexpr uint64_t kEventClock = 0x0010;
inline constexpr uint64_t kEventPowerSourceChange = 0x0080;
inline constexpr uint64_t kEventMigConfigChange = 0x0100;
inline constexpr uint64_t kEventSingleBitEccStorm = 0x0200;
inline constexpr uint64_t kEventDramRetirement = 0x0400;
inline constexpr uint64_t kEventDramRetirementFailure = 0x0800;
inline constexpr uint64_t kEventNonFatalPoison = 0x1000;
inline constexpr uint64_t kEventFatalPoison = 0x2000;
inline constexpr uint64_t kEventGpuUnavailable = 0x4000;
inline constexpr uint64_t kEventGpuRecoveryAction = 0x8000;
// What the collector asks for (always ANDed with the device's supported mask).
inline constexpr uint64_t kHealthEventMask =
    kEventSingleBitEcc | kEventDoubleBitEcc | kEventXidCritical | kEventSingleBitEccStorm |
    kEventDramRetirement | kEventDramRetirementFailure | kEventNonFatalPoison | kEventFatalPoison |
    kEventGpuUnavailable | kEventGpuRecoveryAction;

// Clock event (throttle) reason bits.
inline constexpr uint64_t kClockEventGpuIdle = 0x001;
inline constexpr uint64_t kClockEventApplicationsClocksSetting = 0x002;
inline constexpr uint64_t kClockEventSwPowerCap = 0x004;
inline constexpr uint64_t kClockEventHwSlowdown = 0x008;
inline constexpr uint64_t kClockEventSyncBoost = 0x010;
inline constexpr uint64_t kClockEventSwThermalSlowdown = 0x020;
inline constexpr uint64_t kClockEventHwThermalSlowdown = 0x040;
inline constexpr uint64_t kClockEventHwPowerBrakeSlowdown = 0x080;
inline constexpr uint64_t kClockEventDisplayClockSetting = 0x100;
// Name of one bit ("GpuIdle", "SwPowerCap", "HwSlowdown", "HwThermalSlowdown", ...), or
// empty for an unknown bit.
std::string_view ClockEventReasonName(uint64_t bit);

inline constexpr uint32_t kNoInstanceId = 0xFFFFFFFF;  // event not attributable to MIG GI/CI

// nvmlEventData_t (v2 layout).
struct EventData {
  DeviceHandle device;
  uint64_t event_type = 0;
  uint64_t event_data = 0;  // Xid number for kEventXidCritical (999 = unknown Xid)
  uint32_t gpu_instance_id = kNoInstanceId;
  uint32_t compute_instance_id = kNoInstanceId;
};

// The interface. Every method returns the NVML code; outputs are written only on kSuccess.
// Implementations must be callable from several threads (NVML is thread-safe); the
// collector nevertheless funnels telemetry calls through one NvmlWorker.
class NvmlApi {
 public:
  virtual ~NvmlApi() = default;

  // --- library ---
  virtual NvmlReturn Init() = 0;      // nvmlInit_v2; kLibraryNotFound when not loadable
  virtual NvmlReturn Shutdown() = 0;  // nvmlShutdown
  // Why the library/symbols are unusable ("libnvidia-ml.so.1: cannot open shared object
  // file: No such file or directory"); empty when loaded.
  virtual std::string LoadError() const = 0;
  virtual std::string ErrorString(NvmlReturn r) = 0;  // nvmlErrorString or our name
  virtual NvmlReturn SystemGetDriverVersion(std::string* version) = 0;

  // --- enumeration and identity ---
  virtual NvmlReturn DeviceGetCount(unsigned* count) = 0;
  virtual NvmlReturn DeviceGetHandleByIndex(unsigned index, DeviceHandle* device) = 0;
  virtual NvmlReturn DeviceGetName(DeviceHandle device, std::string* name) = 0;
  virtual NvmlReturn DeviceGetUuid(DeviceHandle device, std::string* uuid) = 0;
  virtual NvmlReturn DeviceGetSerial(DeviceHandle device, std::string* serial) = 0;
  virtual NvmlReturn DeviceGetPciInfo(DeviceHandle device, PciInfo* pci) = 0;
  virtual NvmlReturn DeviceGetMigMode(DeviceHandle device, bool* current, bool* pending) = 0;

  // --- MIG devices (docs/reference/nvml-abi.md, "MIG") ---
  // A MIG device handle answers DeviceGetUuid ("MIG-..."), DeviceGetName ("<product> MIG
  // 1g.10gb") and the calls below. The defaults say the implementation has no MIG support
  // (kFunctionNotFound), which the collector treats like a driver without the symbols.
  // nvmlDeviceGetMaxMigDeviceCount: slots on a parent GPU (0 without MIG).
  virtual NvmlReturn DeviceGetMaxMigDeviceCount(DeviceHandle device, unsigned* count) {
    (void)device, (void)count;
    return NvmlReturn::kFunctionNotFound;
  }
  // nvmlDeviceGetMigDeviceHandleByIndex: kNotFound for an empty slot.
  virtual NvmlReturn DeviceGetMigDeviceHandleByIndex(DeviceHandle device, unsigned index,
                                                     DeviceHandle* mig) {
    (void)device, (void)index, (void)mig;
    return NvmlReturn::kFunctionNotFound;
  }
  // nvmlDeviceGetGpuInstanceId / nvmlDeviceGetComputeInstanceId, on a MIG handle.
  virtual NvmlReturn DeviceGetGpuInstanceId(DeviceHandle mig, unsigned* id) {
    (void)mig, (void)id;
    return NvmlReturn::kFunctionNotFound;
  }
  virtual NvmlReturn DeviceGetComputeInstanceId(DeviceHandle mig, unsigned* id) {
    (void)mig, (void)id;
    return NvmlReturn::kFunctionNotFound;
  }
  // nvmlDeviceGetMemoryInfo: total framebuffer in bytes (of the instance, on a MIG handle).
  virtual NvmlReturn DeviceGetMemoryTotal(DeviceHandle device, uint64_t* bytes) {
    (void)device, (void)bytes;
    return NvmlReturn::kFunctionNotFound;
  }

  // --- thermal, clocks, power ---
  virtual NvmlReturn DeviceGetTemperature(DeviceHandle device, int* celsius) = 0;
  virtual NvmlReturn DeviceGetTemperatureThreshold(DeviceHandle device, TemperatureThreshold which,
                                                   int* celsius) = 0;
  // nvmlDeviceGetCurrentClocksEventReasons (or the older ...ThrottleReasons).
  virtual NvmlReturn DeviceGetCurrentClocksEventReasons(DeviceHandle device, uint64_t* reasons) = 0;
  virtual NvmlReturn DeviceGetSupportedClocksEventReasons(DeviceHandle device,
                                                          uint64_t* reasons) = 0;
  // nvmlDeviceGetViolationStatus: cumulative time clocks were held down per policy.
  virtual NvmlReturn DeviceGetViolationStatus(DeviceHandle device, PerfPolicy policy,
                                              ViolationTime* out) = 0;
  virtual NvmlReturn DeviceGetPowerUsage(DeviceHandle device, unsigned* milliwatts) = 0;
  virtual NvmlReturn DeviceGetEnforcedPowerLimit(DeviceHandle device, unsigned* milliwatts) = 0;

  // --- memory health ---
  virtual NvmlReturn DeviceGetEccMode(DeviceHandle device, bool* current, bool* pending) = 0;
  virtual NvmlReturn DeviceGetTotalEccErrors(DeviceHandle device, EccErrorType type,
                                             EccCounterType counter, uint64_t* count) = 0;
  virtual NvmlReturn DeviceGetRemappedRows(DeviceHandle device, RemappedRows* rows) = 0;
  // Number of retired pages for `cause` (nvmlDeviceGetRetiredPages with a zero-size query).
  virtual NvmlReturn DeviceGetRetiredPagesCount(DeviceHandle device, RetirementCause cause,
                                                unsigned* count) = 0;
  virtual NvmlReturn DeviceGetRetiredPagesPendingStatus(DeviceHandle device, bool* pending) = 0;

  // --- interconnect ---
  virtual NvmlReturn DeviceGetPcieReplayCounter(DeviceHandle device, unsigned* value) = 0;
  virtual NvmlReturn DeviceGetNvLinkState(DeviceHandle device, unsigned link, bool* active) = 0;
  virtual NvmlReturn DeviceGetNvLinkErrorCounter(DeviceHandle device, unsigned link,
                                                 NvLinkErrorCounter counter, uint64_t* value) = 0;

  // --- field values (e.g. kFieldGpuRecoveryAction) ---
  virtual NvmlReturn DeviceGetFieldValues(DeviceHandle device, std::span<FieldValue> values) = 0;

  // --- events ---
  virtual NvmlReturn EventSetCreate(EventSetHandle* set) = 0;
  virtual NvmlReturn DeviceGetSupportedEventTypes(DeviceHandle device, uint64_t* mask) = 0;
  virtual NvmlReturn DeviceRegisterEvents(DeviceHandle device, uint64_t mask,
                                          EventSetHandle set) = 0;
  // nvmlEventSetWait_v2: kTimeout when nothing arrived within timeout_ms (may return early).
  virtual NvmlReturn EventSetWait(EventSetHandle set, unsigned timeout_ms, EventData* data) = 0;
  virtual NvmlReturn EventSetFree(EventSetHandle set) = 0;
};

}  // namespace gg::gpu
