// libFuzzer target for the remediation record codec (the Node annotation anyone with node
// patch rights can write): a value or a Status, never a crash; decoded records round-trip.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "remediation/record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto r = gg::remediation::DecodeRecord(in);
  if (!r.ok()) return 0;
  auto again = gg::remediation::DecodeRecord(gg::remediation::EncodeRecord(*r));
  if (!again.ok()) std::abort();
  return 0;
}
