// The NvmlApi overrides, declared once for every implementation (the dlopen loader and the
// fake): GG_NVML_API_OVERRIDES inside a class that derives from NvmlApi declares them all, so
// adding an NVML call means one line here and one definition per implementation.
#pragma once

#include "gpu/nvml_api.h"

// clang-format off
#define GG_NVML_API_OVERRIDES                                                                    \
  NvmlReturn Init() override;                                                                    \
  NvmlReturn Shutdown() override;                                                                \
  std::string LoadError() const override;                                                        \
  std::string ErrorString(NvmlReturn r) override;                                                \
  NvmlReturn SystemGetDriverVersion(std::string* version) override;                              \
  NvmlReturn DeviceGetCount(unsigned* count) override;                                           \
  NvmlReturn DeviceGetHandleByIndex(unsigned index, DeviceHandle* device) override;              \
  NvmlReturn DeviceGetName(DeviceHandle device, std::string* name) override;                     \
  NvmlReturn DeviceGetUuid(DeviceHandle device, std::string* uuid) override;                     \
  NvmlReturn DeviceGetSerial(DeviceHandle device, std::string* serial) override;                 \
  NvmlReturn DeviceGetPciInfo(DeviceHandle device, PciInfo* pci) override;                       \
  NvmlReturn DeviceGetMigMode(DeviceHandle device, bool* current, bool* pending) override;       \
  NvmlReturn DeviceGetMaxMigDeviceCount(DeviceHandle device, unsigned* count) override;          \
  NvmlReturn DeviceGetMigDeviceHandleByIndex(DeviceHandle device, unsigned index,                \
                                             DeviceHandle* mig) override;                        \
  NvmlReturn DeviceGetGpuInstanceId(DeviceHandle mig, unsigned* id) override;                    \
  NvmlReturn DeviceGetComputeInstanceId(DeviceHandle mig, unsigned* id) override;                \
  NvmlReturn DeviceGetMemoryTotal(DeviceHandle device, uint64_t* bytes) override;                \
  NvmlReturn DeviceGetTemperature(DeviceHandle device, int* celsius) override;                   \
  NvmlReturn DeviceGetTemperatureThreshold(DeviceHandle device, TemperatureThreshold which,      \
                                           int* celsius) override;                               \
  NvmlReturn DeviceGetCurrentClocksEventReasons(DeviceHandle device,                             \
                                                uint64_t* reasons) override;                     \
  NvmlReturn DeviceGetSupportedClocksEventReasons(DeviceHandle device,                           \
                                                  uint64_t* reasons) override;                   \
  NvmlReturn DeviceGetViolationStatus(DeviceHandle device, PerfPolicy policy,                    \
                                      ViolationTime* out) override;                              \
  NvmlReturn DeviceGetPowerUsage(DeviceHandle device, unsigned* milliwatts) override;            \
  NvmlReturn DeviceGetEnforcedPowerLimit(DeviceHandle device, unsigned* milliwatts) override;    \
  NvmlReturn DeviceGetEccMode(DeviceHandle device, bool* current, bool* pending) override;       \
  NvmlReturn DeviceGetTotalEccErrors(DeviceHandle device, EccErrorType type,                     \
                                     EccCounterType counter, uint64_t* count) override;          \
  NvmlReturn DeviceGetRemappedRows(DeviceHandle device, RemappedRows* rows) override;            \
  NvmlReturn DeviceGetRetiredPagesCount(DeviceHandle device, RetirementCause cause,              \
                                        unsigned* count) override;                               \
  NvmlReturn DeviceGetRetiredPagesPendingStatus(DeviceHandle device, bool* pending) override;    \
  NvmlReturn DeviceGetPcieReplayCounter(DeviceHandle device, unsigned* value) override;          \
  NvmlReturn DeviceGetNvLinkState(DeviceHandle device, unsigned link, bool* active) override;    \
  NvmlReturn DeviceGetNvLinkErrorCounter(DeviceHandle device, unsigned link,                     \
                                         NvLinkErrorCounter counter, uint64_t* value) override;  \
  NvmlReturn DeviceGetFieldValues(DeviceHandle device, std::span<FieldValue> values) override;   \
  NvmlReturn EventSetCreate(EventSetHandle* set) override;                                       \
  NvmlReturn DeviceGetSupportedEventTypes(DeviceHandle device, uint64_t* mask) override;         \
  NvmlReturn DeviceRegisterEvents(DeviceHandle device, uint64_t mask,                            \
                                  EventSetHandle set) override;                                  \
  NvmlReturn EventSetWait(EventSetHandle set, unsigned timeout_ms, EventData* data) override;    \
  NvmlReturn EventSetFree(EventSetHandle set) override;                                          \
  static_assert(true, "GG_NVML_API_OVERRIDES ends with a semicolon")
// clang-format on
