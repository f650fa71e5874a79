// Tests for NvmlApi helpers (names, Status mapping).
#include "gpu/nvml_api.h"

#include <gtest/gtest.h>

namespace gg::gpu {
namespace {

TEST(NvmlApiTest, NamesAndStatus) {
  EXPECT_EQ(NvmlReturnName(NvmlReturn::kGpuIsLost), "GPU_IS_LOST");
  EXPECT_EQ(NvmlStatus(NvmlReturn::kGpuIsLost, "nvmlDeviceGetUUID").code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(NvmlStatus(NvmlReturn::kGpuIsLost, "nvmlDeviceGetUUID").message(),
            "nvmlDeviceGetUUID: GPU_IS_LOST");
  EXPECT_EQ(NvmlStatus(NvmlReturn::kDeadlineExceeded, "x").code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(NvmlStatus(NvmlReturn::kNotSupported, "x").code(), StatusCode::kUnimplemented);
  EXPECT_TRUE(NvmlStatus(NvmlReturn::kSuccess, "x").ok());
  EXPECT_TRUE(IsGpuHealthSignal(NvmlReturn::kGpuIsLost));
  EXPECT_FALSE(IsGpuHealthSignal(NvmlReturn::kNotSupported));
  EXPECT_EQ(RecoveryActionName(4), "DrainAndReset");
  EXPECT_EQ(RecoveryActionName(77), "Unknown(77)");
  EXPECT_EQ(ClockEventReasonName(kClockEventHwThermalSlowdown), "HwThermalSlowdown");
  EXPECT_EQ(ClockEventReasonName(0x200), "");
}

}  // namespace
}  // namespace gg::gpu
