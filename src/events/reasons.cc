// Reasons catalog lookups.
#include "events/reasons.h"

namespace gg::events {

std::string_view EventTypeName(EventType t) {
  return t == EventType::kWarning ? "Warning" : "Normal";
}

EventType TypeOfReason(std::string_view reason) {
  for (const auto& r : kReasons) {
    if (r.reason == reason) return r.type;
  }
  return EventType::kNormal;
}

}  // namespace gg::events
