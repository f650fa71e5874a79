// FakeRecorder: keeps every Event in memory (no aggregation) so unit tests can assert which
// decisions were reported. Thread-safe.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "events/recorder.h"

namespace gg::events {

struct RecordedEvent {
  ObjectRef object;
  EventType type;
  std::string reason;
  std::string message;
};

class FakeRecorder final : public EventRecorder {
 public:
  using EventRecorder::Event;
  void Event(const ObjectRef& object, EventType type, std::string_view reason,
             std::string_view message) override {
    std::scoped_lock lock(mu_);
    events_.push_back({object, type, std::string(reason), std::string(message)});
  }
  std::vector<RecordedEvent> Events() const {
    std::scoped_lock lock(mu_);
    return events_;
  }
  // Number of events with this reason (optionally for one object name).
  int Count(std::string_view reason, std::string_view object_name = {}) const {
    std::scoped_lock lock(mu_);
    int n = 0;
    for (const auto& e : events_) {
      if (e.reason == reason && (object_name.empty() || e.object.name == object_name)) ++n;
    }
    return n;
  }
  void Clear() {
    std::scoped_lock lock(mu_);
    events_.clear();
  }

 private:
  mutable std::mutex mu_;
  std::vector<RecordedEvent> events_;
};

}  // namespace gg::events
