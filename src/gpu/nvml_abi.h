// The NVML types, constants and struct layouts gpu-guardian uses, HAND-WRITTEN from NVIDIA's
// public ABI facts (docs/reference/nvml-abi.md: the official 13.x header as republished by
// NVIDIA/go-nvml, with sizes computed on LP64). No NVIDIA header is used at build time; the
// static_asserts pin the layouts we depend on. Shared by the dlopen loader (nvml_loader.cc) and
// the fake libnvidia-ml.so.1 (fake_nvml_lib/), so both sides of that ABI are one declaration.
#pragma once

#include <cstddef>

namespace gg::gpu::nvml_abi {

extern "C" {
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
using nvmlEventSet_t = struct nvmlEventSet_st*;
using nvmlEnableState_t = int;

struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
};

union nvmlValue_t {
  double dVal;
  int siVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  long long sllVal;
  unsigned short usVal;
};

struct nvmlFieldValue_t {
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;
  long long latencyUsec;
  int valueType;
  nvmlReturn_t nvmlReturn;
  nvmlValue_t value;
};

struct nvmlEventData_t {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

struct nvmlTemperature_t {  // v1
  unsigned int version;
  int sensorType;
  int temperature;
};

struct nvmlViolationTime_t {
  unsigned long long referenceTime;
  unsigned long long violationTime;
};

struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
}  // extern "C"

static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t layout (docs/reference/nvml-abi.md)");
static_assert(offsetof(nvmlPciInfo_t, busId) == 36, "nvmlPciInfo_t.busId offset");
static_assert(sizeof(nvmlFieldValue_t) == 40, "nvmlFieldValue_t layout");
static_assert(offsetof(nvmlFieldValue_t, value) == 32, "nvmlFieldValue_t.value offset");
static_assert(sizeof(nvmlEventData_t) == 32, "nvmlEventData_t (v2 wait) layout");
static_assert(offsetof(nvmlEventData_t, gpuInstanceId) == 24, "nvmlEventData_t.gpuInstanceId");
static_assert(sizeof(nvmlTemperature_t) == 12, "nvmlTemperature_v1_t layout");
static_assert(sizeof(nvmlMemory_t) == 24, "nvmlMemory_t layout");
static_assert(sizeof(nvmlViolationTime_t) == 16, "nvmlViolationTime_t layout");

constexpr unsigned kTemperatureV1 = 0x0100000C;  // sizeof | 1 << 24
constexpr int kTemperatureGpu = 0;
constexpr unsigned kNameBuf = 96;    // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned kUuidBuf = 96;    // NVML_DEVICE_UUID_V2_BUFFER_SIZE
constexpr unsigned kSerialBuf = 30;  // NVML_DEVICE_SERIAL_BUFFER_SIZE
constexpr unsigned kVersionBuf = 80;

}  // namespace gg::gpu::nvml_abi
