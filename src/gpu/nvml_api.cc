// Names and Status mapping for NvmlApi's codes and enums.
#include "gpu/nvml_api.h"

#include <string>

namespace gg::gpu {

std::string_view NvmlReturnName(NvmlReturn r) {
  switch (r) {
    case NvmlReturn::kSuccess:
      return "SUCCESS";
    case NvmlReturn::kUninitialized:
      return "UNINITIALIZED";
    case NvmlReturn::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case NvmlReturn::kNotSupported:
      return "NOT_SUPPORTED";
    case NvmlReturn::kNoPermission:
      return "NO_PERMISSION";
    case NvmlReturn::kNotFound:
      return "NOT_FOUND";
    case NvmlReturn::kInsufficientSize:
      return "INSUFFICIENT_SIZE";
    case NvmlReturn::kDriverNotLoaded:
      return "DRIVER_NOT_LOADED";
    case NvmlReturn::kTimeout:
      return "TIMEOUT";
    case NvmlReturn::kIrqIssue:
      return "IRQ_ISSUE";
    case NvmlReturn::kLibraryNotFound:
      return "LIBRARY_NOT_FOUND";
    case NvmlReturn::kFunctionNotFound:
      return "FUNCTION_NOT_FOUND";
    case NvmlReturn::kCorruptedInforom:
      return "CORRUPTED_INFOROM";
    case NvmlReturn::kGpuIsLost:
      return "GPU_IS_LOST";
    case NvmlReturn::kResetRequired:
      return "RESET_REQUIRED";
    case NvmlReturn::kOperatingSystem:
      return "OPERATING_SYSTEM";
    case NvmlReturn::kLibRmVersionMismatch:
      return "LIB_RM_VERSION_MISMATCH";
    case NvmlReturn::kInUse:
      return "IN_USE";
    case NvmlReturn::kMemory:
      return "MEMORY";
    case NvmlReturn::kNoData:
      return "NO_DATA";
    case NvmlReturn::kArgumentVersionMismatch:
      return "ARGUMENT_VERSION_MISMATCH";
    case NvmlReturn::kNotReady:
      return "NOT_READY";
    case NvmlReturn::kGpuNotFound:
      return "GPU_NOT_FOUND";
    case NvmlReturn::kInvalidState:
      return "INVALID_STATE";
    case NvmlReturn::kUnknown:
      return "UNKNOWN";
    case NvmlReturn::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
  }
  return "ERROR";
}

bool IsGpuHealthSignal(NvmlReturn r) {
  switch (r) {
    case NvmlReturn::kGpuIsLost:
    case NvmlReturn::kResetRequired:
    case NvmlReturn::kLibRmVersionMismatch:
    case NvmlReturn::kDriverNotLoaded:
    case NvmlReturn::kDeadlineExceeded:
      return true;
    default:
      return false;
  }
}

Status NvmlStatus(NvmlReturn r, std::string_view call) {
  if (r == NvmlReturn::kSuccess) return OkStatus();
  std::string msg(call);
  msg += ": ";
  msg += NvmlReturnName(r);
  switch (r) {
    case NvmlReturn::kNotSupported:
    case NvmlReturn::kFunctionNotFound:
      return UnimplementedError(std::move(msg));
    case NvmlReturn::kDeadlineExceeded:
      return DeadlineExceededError(std::move(msg));
    case NvmlReturn::kNoPermission:
      return PermissionDeniedError(std::move(msg));
    case NvmlReturn::kInvalidArgument:
    case NvmlReturn::kArgumentVersionMismatch:
      return InvalidArgumentError(std::move(msg));
    case NvmlReturn::kNotFound:
    case NvmlReturn::kGpuNotFound:
      return NotFoundError(std::move(msg));
    case NvmlReturn::kInsufficientSize:
    case NvmlReturn::kMemory:
      return ResourceExhaustedError(std::move(msg));
    case NvmlReturn::kTimeout:
      return DeadlineExceededError(std::move(msg));
    case NvmlReturn::kUninitialized:
    case NvmlReturn::kInvalidState:
      return FailedPreconditionError(std::move(msg));
    case NvmlReturn::kGpuIsLost:
    case NvmlReturn::kResetRequired:
    case NvmlReturn::kDriverNotLoaded:
    case NvmlReturn::kLibraryNotFound:
    case NvmlReturn::kLibRmVersionMismatch:
    case NvmlReturn::kNotReady:
    case NvmlReturn::kInUse:
      return UnavailableError(std::move(msg));
    default:
      return InternalError(std::move(msg));
  }
}

std::string RecoveryActionName(int value) {
  switch (value) {
    case 0:
      return "None";
    case 1:
      return "GpuReset";
    case 2:
      return "NodeReboot";
    case 3:
      return "DrainP2P";
    case 4:
      return "DrainAndReset";
    case 5:
      return "RecoverImexDomain";
    default:
      return "Unknown(" + std::to_string(value) + ")";
  }
}

std::string_view ClockEventReasonName(uint64_t bit) {
  switch (bit) {
    case kClockEventGpuIdle:
      return "GpuIdle";
    case kClockEventApplicationsClocksSetting:
      return "ApplicationsClocksSetting";
    case kClockEventSwPowerCap:
      return "SwPowerCap";
    case kClockEventHwSlowdown:
      return "HwSlowdown";
    case kClockEventSyncBoost:
      return "SyncBoost";
    case kClockEventSwThermalSlowdown:
      return "SwThermalSlowdown";
    case kClockEventHwThermalSlowdown:
      return "HwThermalSlowdown";
    case kClockEventHwPowerBrakeSlowdown:
      return "HwPowerBrakeSlowdown";
    case kClockEventDisplayClockSetting:
      return "DisplayClockSetting";
    default:
      return {};
  }
}

}  // namespace gg::gpu
