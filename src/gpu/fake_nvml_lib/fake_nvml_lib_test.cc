// The fake libnvidia-ml.so.1 through the agent's real loading path: NvmlLoader dlopens the
// built library, the GPUs come from a fault-script state file, and events appended to the
// file while it is open arrive (Xid as an NVML event, ECC counters, temperature, a lost GPU).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "gpu/nvml_loader.h"

namespace gg::gpu {
namespace {

using namespace std::chrono_literals;

template <typename F>
bool WaitFor(F f, std::chrono::milliseconds limit = 10s) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (f()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return f();
}

TEST(FakeNvmlLibrary, ServesTheStateFileThroughTheRealLoader) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("fake-nvml-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::path state = dir / "nvml.yaml";
  std::ofstream(state)
      << "gpus: 8\nproduct: NVIDIA H100 80GB HBM3\nuuids: [GPU-a0, GPU-a1, GPU-a2, "
         "GPU-a3, GPU-a4, GPU-a5, GPU-a6, GPU-a7]\n"
         "mig:\n- {gpu: 7, gpu_instance: 3, compute_instance: 0, profile: 1g.10gb, "
         "memory_mib: 9856, uuid: MIG-a7-3}\ntimeline:\n";
  ::setenv("GG_FAKE_NVML_FILE", state.c_str(), 1);

  NvmlLoader nvml(GG_FAKE_NVML_LIB);
  ASSERT_TRUE(nvml.Load().ok()) << nvml.LoadError();
  EXPECT_EQ(nvml.MissingOptionalSymbols(), "");  // every symbol the agent resolves is there
  ASSERT_EQ(nvml.Init(), NvmlReturn::kSuccess);
  unsigned count = 0;
  ASSERT_EQ(nvml.DeviceGetCount(&count), NvmlReturn::kSuccess);
  ASSERT_EQ(count, 8u);
  std::vector<DeviceHandle> dev(8);
  for (unsigned i = 0; i < 8; ++i)
    ASSERT_EQ(nvml.DeviceGetHandleByIndex(i, &dev[i]), NvmlReturn::kSuccess);
  std::string uuid, name;
  ASSERT_EQ(nvml.DeviceGetUuid(dev[3], &uuid), NvmlReturn::kSuccess);
  EXPECT_EQ(uuid, "GPU-a3");
  ASSERT_EQ(nvml.DeviceGetName(dev[0], &name), NvmlReturn::kSuccess);
  EXPECT_EQ(name, "NVIDIA H100 80GB HBM3");
  PciInfo pci;
  ASSERT_EQ(nvml.DeviceGetPciInfo(dev[1], &pci), NvmlReturn::kSuccess);
  EXPECT_FALSE(pci.bus_id.empty());
  int temp = 0;
  ASSERT_EQ(nvml.DeviceGetTemperature(dev[1], &temp), NvmlReturn::kSuccess);
  EXPECT_EQ(temp, 35);
  std::vector<FieldValue> fields(2);
  fields[0].field_id = kFieldPcieReplayCounter;
  fields[1].field_id = kFieldGpuRecoveryAction;
  ASSERT_EQ(nvml.DeviceGetFieldValues(dev[0], fields), NvmlReturn::kSuccess);
  EXPECT_EQ(fields[0].result, NvmlReturn::kSuccess);
  EXPECT_EQ(fields[1].result, NvmlReturn::kSuccess);

  // GPU 7 is partitioned: its MIG device answers through the MIG entry points.
  bool mig = false, pending = false;
  ASSERT_EQ(nvml.DeviceGetMigMode(dev[7], &mig, &pending), NvmlReturn::kSuccess);
  EXPECT_TRUE(mig);
  ASSERT_EQ(nvml.DeviceGetMigMode(dev[6], &mig, &pending), NvmlReturn::kSuccess);
  EXPECT_FALSE(mig);
  unsigned slots = 0;
  ASSERT_EQ(nvml.DeviceGetMaxMigDeviceCount(dev[7], &slots), NvmlReturn::kSuccess);
  ASSERT_GE(slots, 1u);
  DeviceHandle mig_dev;
  ASSERT_EQ(nvml.DeviceGetMigDeviceHandleByIndex(dev[7], 0, &mig_dev), NvmlReturn::kSuccess);
  EXPECT_EQ(nvml.DeviceGetMigDeviceHandleByIndex(dev[7], 1, &mig_dev), NvmlReturn::kNotFound);
  ASSERT_EQ(nvml.DeviceGetMigDeviceHandleByIndex(dev[7], 0, &mig_dev), NvmlReturn::kSuccess);
  unsigned gi = 0, ci = 9;
  ASSERT_EQ(nvml.DeviceGetGpuInstanceId(mig_dev, &gi), NvmlReturn::kSuccess);
  ASSERT_EQ(nvml.DeviceGetComputeInstanceId(mig_dev, &ci), NvmlReturn::kSuccess);
  EXPECT_EQ(gi, 3u);
  EXPECT_EQ(ci, 0u);
  ASSERT_EQ(nvml.DeviceGetUuid(mig_dev, &uuid), NvmlReturn::kSuccess);
  EXPECT_EQ(uuid, "MIG-a7-3");
  ASSERT_EQ(nvml.DeviceGetName(mig_dev, &name), NvmlReturn::kSuccess);
  EXPECT_EQ(name, "NVIDIA H100 80GB HBM3 MIG 1g.10gb");
  uint64_t bytes = 0;
  ASSERT_EQ(nvml.DeviceGetMemoryTotal(mig_dev, &bytes), NvmlReturn::kSuccess);
  EXPECT_EQ(bytes, 9856ull << 20);

  EventSetHandle set;
  ASSERT_EQ(nvml.EventSetCreate(&set), NvmlReturn::kSuccess);
  for (auto d : dev)
    ASSERT_EQ(nvml.DeviceRegisterEvents(d, kHealthEventMask, set), NvmlReturn::kSuccess);
  EventData ev;
  EXPECT_EQ(nvml.EventSetWait(set, 10, &ev), NvmlReturn::kTimeout);

  // Faults appended while the library is in use.
  std::ofstream(state, std::ios::app) << "  - {at: 0s, gpu: 2, xid: 79}\n"
                                         "  - {at: 0s, gpu: 4, ecc: {uncorrectable_volatile: 1}}\n"
                                         "  - {at: 0s, gpu: 1, temperature: 92}\n"
                                         "  - {at: 0s, gpu: 5, lost: true}\n";
  bool xid = false, dbe = false;
  ASSERT_TRUE(WaitFor([&] {
    while (nvml.EventSetWait(set, 50, &ev) == NvmlReturn::kSuccess) {
      if (ev.event_type == kEventXidCritical && ev.device == dev[2] && ev.event_data == 79)
        xid = true;
      if (ev.event_type == kEventDoubleBitEcc && ev.device == dev[4]) dbe = true;
    }
    return xid && dbe;
  })) << "xid "
      << xid << " dbe " << dbe;
  uint64_t ecc = 0;
  ASSERT_EQ(nvml.DeviceGetTotalEccErrors(dev[4], EccErrorType::kUncorrected,
                                         EccCounterType::kVolatile, &ecc),
            NvmlReturn::kSuccess);
  EXPECT_EQ(ecc, 1u);
  ASSERT_EQ(nvml.DeviceGetTemperature(dev[1], &temp), NvmlReturn::kSuccess);
  EXPECT_EQ(temp, 92);
  EXPECT_EQ(nvml.DeviceGetUuid(dev[5], &uuid), NvmlReturn::kGpuIsLost);
  // Events already played are not played again when the file changes once more.
  std::ofstream(state, std::ios::app)
      << "  - {at: 0s, gpu: 6, xid: 48}\n"
         "  - {at: 0s, gpu: 7, xid: 13, gpu_instance: 3, compute_instance: 0}\n";
  bool again = false, xid48 = false, xid13 = false;
  ASSERT_TRUE(WaitFor([&] {
    while (nvml.EventSetWait(set, 50, &ev) == NvmlReturn::kSuccess) {
      if (ev.event_type == kEventXidCritical && ev.event_data == 79) again = true;
      if (ev.event_type == kEventXidCritical && ev.event_data == 48 && ev.device == dev[6]) {
        xid48 = true;
        EXPECT_EQ(ev.gpu_instance_id, kNoInstanceId);  // a whole-GPU Xid
      }
      if (ev.event_type == kEventXidCritical && ev.event_data == 13 && ev.device == dev[7]) {
        xid13 = true;
        EXPECT_EQ(ev.gpu_instance_id, 3u);  // attributed through the C event record
        EXPECT_EQ(ev.compute_instance_id, 0u);
      }
    }
    return xid48 && xid13;
  }));
  EXPECT_FALSE(again);
  EXPECT_EQ(nvml.EventSetFree(set), NvmlReturn::kSuccess);
  EXPECT_EQ(nvml.Shutdown(), NvmlReturn::kSuccess);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace gg::gpu
