// RestEventSink: the two writes client-go's recorder makes.
#include "events/rest_sink.h"

namespace gg::events {

Status RestEventSink::Create(const CoreEvent& e) {
  auto r = client_.Create(k8s::kEvents, e.namespace_, EncodeCoreEvent(e));
  return r.ok() ? OkStatus() : r.status();
}

Status RestEventSink::Patch(const CoreEvent& e) {
  auto r = client_.Patch(k8s::kEvents, e.namespace_, e.name, k8s::PatchType::kStrategicMerge,
                         EncodeCoreEventRepeatPatch(e));
  return r.ok() ? OkStatus() : r.status();
}

}  // namespace gg::events
