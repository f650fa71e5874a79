// libFuzzer target for the GPUNodeHealth decoders: any input must give a value or a Status,
// never a crash, and whatever decodes must re-encode and decode again to the same facts.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "api/gpu_node_health.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  for (int annotation = 0; annotation < 2; ++annotation) {
    auto r =
        annotation ? gg::api::DecodeHealthAnnotation(in) : gg::api::DecodeGpuNodeHealthStatus(in);
    if (!r.ok()) continue;
    auto again = gg::api::DecodeGpuNodeHealthStatus(gg::api::EncodeGpuNodeHealthStatus(*r));
    if (!again.ok() || !gg::api::SameFacts(*r, *again)) std::abort();
  }
  return 0;
}
