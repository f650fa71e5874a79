// libFuzzer target for the object codecs (API-server JSON → projections, simdjson): every
// projection the caches hold, as one object, as a list (both the copying and the in-place
// path) and as a Status error body. Any input gives a value or a Status, never a crash, and
// the two list paths must agree.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "k8s/codec.h"

namespace {

template <typename T>
void Decode(std::string_view in) {
  (void)gg::k8s::ParseObject<T>(in).ok();
  auto copied = gg::k8s::ParseList<T>(in);
  std::string body(in);
  auto in_place = gg::k8s::ParseList<T>(body);
  if (copied.ok() != in_place.ok()) std::abort();
  if (copied.ok() && copied->items.size() != in_place->items.size()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  Decode<gg::k8s::Node>(in);
  Decode<gg::k8s::Pod>(in);
  Decode<gg::k8s::PodDisruptionBudget>(in);
  Decode<gg::k8s::DaemonSet>(in);
  Decode<gg::k8s::ReplicaSet>(in);
  Decode<gg::k8s::Namespace>(in);
  Decode<gg::k8s::Lease>(in);
  Decode<gg::k8s::Event>(in);
  Decode<gg::k8s::ResourceSlice>(in);
  Decode<gg::k8s::ResourceClaim>(in);
  Decode<gg::k8s::PartialObject>(in);
  (void)gg::k8s::StatusFromBody(in, 500).ok();
  std::string body(in);
  (void)gg::k8s::ParseResourceVersion(body).ok();
  return 0;
}
