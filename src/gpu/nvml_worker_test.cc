// NvmlWorker: calls run on the worker; a hung call becomes DeadlineExceeded + hung state.
#include "gpu/nvml_worker.h"

#include <gtest/gtest.h>

#include <thread>

#include "gpu/fake_nvml.h"

namespace gg::gpu {
namespace {

template <typename Pred>
bool WaitFor(Pred p, std::chrono::milliseconds limit = std::chrono::milliseconds(10000)) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (p()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return p();
}

TEST(NvmlWorkerTest, CallsReturnValues) {
  FakeNvml fake(2);
  NvmlWorker worker(fake, {std::chrono::milliseconds(5000)});
  ASSERT_EQ(worker.Call<int>([](NvmlApi& a, int*) { return a.Init(); }, nullptr),
            NvmlReturn::kSuccess);
  unsigned count = 0;
  EXPECT_EQ(
      worker.Call<unsigned>([](NvmlApi& a, unsigned* c) { return a.DeviceGetCount(c); }, &count),
      NvmlReturn::kSuccess);
  EXPECT_EQ(count, 2u);
  EXPECT_FALSE(worker.hung());
}

TEST(NvmlWorkerTest, HungCallIsDeadlineExceededThenRecovers) {
  FakeNvml fake(1);
  ASSERT_EQ(fake.Init(), NvmlReturn::kSuccess);
  NvmlWorker worker(fake, {std::chrono::milliseconds(100)});
  fake.Hang("nvmlDeviceGetPcieReplayCounter");
  DeviceHandle h;
  ASSERT_EQ(fake.DeviceGetHandleByIndex(0, &h), NvmlReturn::kSuccess);
  unsigned v = 0;
  EXPECT_EQ(worker.Call<unsigned>(
                [h](NvmlApi& a, unsigned* o) { return a.DeviceGetPcieReplayCounter(h, o); }, &v),
            NvmlReturn::kDeadlineExceeded);
  EXPECT_TRUE(worker.hung());
  EXPECT_EQ(worker.hung_message(), "NVML call nvmlDeviceGetPcieReplayCounter hung > 100ms");
  // While hung, further calls fail fast instead of queueing behind it.
  int t = 0;
  EXPECT_EQ(worker.Call<int>([h](NvmlApi& a, int* o) { return a.DeviceGetTemperature(h, o); }, &t),
            NvmlReturn::kDeadlineExceeded);
  EXPECT_GE(worker.deadline_exceeded_total(), 2u);
  fake.ReleaseHangs();
  ASSERT_TRUE(WaitFor([&] { return !worker.hung(); }));
  EXPECT_EQ(worker.Call<int>([h](NvmlApi& a, int* o) { return a.DeviceGetTemperature(h, o); }, &t),
            NvmlReturn::kSuccess);
  EXPECT_EQ(t, 35);
}

TEST(NvmlWorkerTest, DestroyWhileHungDoesNotBlock) {
  FakeNvml fake(1);
  ASSERT_EQ(fake.Init(), NvmlReturn::kSuccess);
  {
    NvmlWorker worker(fake, {std::chrono::milliseconds(50)});
    fake.SetCallDelay("nvmlDeviceGetCount", std::chrono::milliseconds(300));
    unsigned c = 0;
    EXPECT_EQ(
        worker.Call<unsigned>([](NvmlApi& a, unsigned* o) { return a.DeviceGetCount(o); }, &c),
        NvmlReturn::kDeadlineExceeded);
  }  // destructor returns at once; the detached thread finishes the delayed call later
  // ...and `fake` must outlive it: the thread is still in the call now, then exits.
  EXPECT_FALSE(NvmlWorker::WaitForAllThreadsToExit(std::chrono::milliseconds(50)));
  EXPECT_TRUE(NvmlWorker::WaitForAllThreadsToExit(std::chrono::milliseconds(10000)));
}

}  // namespace
}  // namespace gg::gpu
