// libFuzzer entry point for the Xid catalog CSV parser and the override list parsers.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gpu/xid_catalog.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view s(reinterpret_cast<const char*>(data), size);
  auto catalog = gg::gpu::XidCatalog::FromCsv(s);
  if (catalog.ok() && !catalog->entries().empty()) (void)catalog->Find(catalog->entries()[0].xid);
  gg::gpu::XidOverrides o;
  (void)o.AddIgnoreList(s);
  o.ApplyDpEnableHealthchecks(s);
  gg::gpu::XidClassifier c(o);
  (void)c.Classify(79);
  (void)gg::gpu::ParseRecoveryActionChange(s);
  return 0;
}
