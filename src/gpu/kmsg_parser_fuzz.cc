// libFuzzer entry point for ParseKmsgLine (and the PCI helpers it uses).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gpu/kmsg_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view s(reinterpret_cast<const char*>(data), size);
  auto x = gg::gpu::ParseKmsgLine(s);
  if (x) {
    uint32_t d = 0, b = 0, dev = 0, f = 0;
    if (!x->pci_bus_id.empty()) (void)gg::gpu::ParsePciBusId(x->pci_bus_id, &d, &b, &dev, &f);
  }
  uint32_t d = 0, b = 0, dev = 0, f = 0;
  (void)gg::gpu::ParsePciBusId(s, &d, &b, &dev, &f);
  return 0;
}
