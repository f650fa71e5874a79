// EventRecorder: how decisions become Kubernetes Events. Components take an EventRecorder&
// (injected); production uses AggregatingRecorder (aggregating.h), tests FakeRecorder (fake.h).
#pragma once

#include <string>
#include <string_view>

#include "events/reasons.h"

namespace gg::events {

// The object an Event is about (core/v1 ObjectReference subset).
struct ObjectRef {
  std::string kind;         // "Node", "GPUHealthPolicy", "Pod"
  std::string api_version;  // "v1", "gpuguardian.io/v1alpha1"
  std::string name;
  std::string namespace_;  // empty for cluster-scoped objects
  std::string uid;

  static ObjectRef Node(std::string name, std::string uid = "") {
    return {"Node", "v1", std::move(name), "", std::move(uid)};
  }
  static ObjectRef Policy(std::string name, std::string uid = "") {
    return {"GPUHealthPolicy", "gpuguardian.io/v1alpha1", std::move(name), "", std::move(uid)};
  }
  friend bool operator==(const ObjectRef&, const ObjectRef&) = default;
};

class EventRecorder {
 public:
  virtual ~EventRecorder() = default;
  // Records one occurrence. Never blocks on the network and never fails the caller:
  // events are best-effort, as in client-go.
  virtual void Event(const ObjectRef& object, EventType type, std::string_view reason,
                     std::string_view message) = 0;
  // Catalog reasons carry their own type.
  void Event(const ObjectRef& object, std::string_view reason, std::string_view message) {
    Event(object, TypeOfReason(reason), reason, message);
  }
};

// Discards everything (dry wiring, benchmarks).
class NullRecorder final : public EventRecorder {
 public:
  using EventRecorder::Event;
  void Event(const ObjectRef&, EventType, std::string_view, std::string_view) override {}
};

}  // namespace gg::events
