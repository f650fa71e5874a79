// libFuzzer target for the GPUHealthPolicy codec and validation: any input gives a value or a
// Status, never a crash; whatever decodes validates without crashing and survives
// encode -> decode unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "api/gpu_health_policy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto p = gg::api::DecodeGpuHealthPolicy(in);
  if (!p.ok()) {
    (void)gg::api::DecodeGpuHealthPolicySpec(in);
    return 0;
  }
  (void)gg::api::ValidationStatus(gg::api::ValidatePolicySpec(p->spec));
  for (int64_t total : {0, 1, 25, 100000}) (void)p->spec.safety.max_unhealthy.Resolve(total);
  // Spec round-trips exactly; status times are written at seconds precision, so status
  // encoding must only be stable from the first encode on.
  std::string once = gg::api::EncodeGpuHealthPolicy(*p);
  auto again = gg::api::DecodeGpuHealthPolicy(once);
  if (!again.ok() || !(again->spec == p->spec)) std::abort();
  if (gg::api::EncodeGpuHealthPolicy(*again) != once) std::abort();
  return 0;
}
