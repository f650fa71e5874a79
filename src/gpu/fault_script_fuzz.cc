// libFuzzer entry point for ParseFaultScript: any YAML text yields a script or a Status.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gpu/fault_script.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  auto s = gg::gpu::ParseFaultScript(std::string_view(reinterpret_cast<const char*>(data), size));
  (void)s.ok();
  return 0;
}
