// EventSink: where AggregatingRecorder writes core/v1 Events (the API server in production,
// an in-memory sink in tests). CoreEvent is the wire shape the recorder manages.
#pragma once

#include <string>

#include "common/clock.h"
#include "common/status.h"
#include "events/recorder.h"

namespace gg::events {

struct CoreEvent {
  std::string name;        // "<object>.<hex unix nanos>"
  std::string namespace_;  // object's namespace, or "default" for cluster-scoped objects
  ObjectRef involved;
  EventType type = EventType::kNormal;
  std::string reason;
  std::string message;
  int count = 1;
  WallTime first_timestamp{};
  WallTime last_timestamp{};
  std::string component;  // source.component == reportingComponent
  std::string host;       // source.host == reportingInstance (omitted when empty)
};

// Full core/v1 Event body for POST.
std::string EncodeCoreEvent(const CoreEvent& e);
// Strategic-merge body for a repeat: {"count":N,"lastTimestamp":...,"message":...}.
std::string EncodeCoreEventRepeatPatch(const CoreEvent& e);

class EventSink {
 public:
  virtual ~EventSink() = default;
  // POST /api/v1/namespaces/{ns}/events.
  virtual Status Create(const CoreEvent& e) = 0;
  // PATCH (strategic merge) of count/lastTimestamp/message on the existing name; NotFound
  // when the Event is gone (the recorder then creates it again).
  virtual Status Patch(const CoreEvent& e) = 0;
  // Asked when an Event is recorded: false drops it (e.g. this replica does not lead). Once
  // admitted, an Event is written even if this changes meanwhile (aggregating.h says why).
  virtual bool Admit() const { return true; }
};

}  // namespace gg::events
