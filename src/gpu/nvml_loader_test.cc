// NvmlLoader without a driver: a missing library is a reported state, never a crash.
#include "gpu/nvml_loader.h"

#include <gtest/gtest.h>

#include "common/clock.h"
#include "gpu/collector.h"

namespace gg::gpu {
namespace {

TEST(NvmlLoaderTest, MissingLibraryIsUnavailable) {
  NvmlLoader loader("libnvidia-ml-does-not-exist.so.1");
  Status s = loader.Load();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(loader.LoadError().find("libnvidia-ml-does-not-exist.so.1"), std::string::npos);
  EXPECT_FALSE(loader.loaded());
  EXPECT_EQ(loader.Init(), NvmlReturn::kLibraryNotFound);
  unsigned n = 0;
  EXPECT_EQ(loader.DeviceGetCount(&n), NvmlReturn::kUninitialized);
  EventData e;
  EXPECT_EQ(loader.EventSetWait(EventSetHandle{}, 1, &e), NvmlReturn::kUninitialized);
  EXPECT_EQ(loader.ErrorString(NvmlReturn::kGpuIsLost), "GPU_IS_LOST");
}

TEST(NvmlLoaderTest, LibraryWithoutNvmlSymbolsIsUnavailable) {
  // libc is loadable but has none of the symbols: required symbols are reported missing.
  NvmlLoader loader("libc.so.6");
  Status s = loader.Load();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(loader.LoadError().find("missing required symbols: nvmlInit_v2"), std::string::npos)
      << loader.LoadError();
  EXPECT_EQ(loader.Init(), NvmlReturn::kLibraryNotFound);
}

TEST(NvmlLoaderTest, CollectorReportsMissingLibrary) {
  NvmlLoader loader("libnvidia-ml-does-not-exist.so.1");
  FakeClock clock;
  Collector c(loader, clock);
  EXPECT_FALSE(c.Init().ok());
  SweepResult r = c.Sweep();
  EXPECT_EQ(r.source.state, api::SourceState::kUnavailable);
  EXPECT_NE(r.source.message.find("cannot open shared object file"), std::string::npos)
      << r.source.message;
}

}  // namespace
}  // namespace gg::gpu
