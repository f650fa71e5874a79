// core/v1 Event wire encoding (field names per the core/v1 OpenAPI).
#include "events/sink.h"

#include <nlohmann/json.hpp>

#include "common/time_util.h"

namespace gg::events {

std::string EncodeCoreEvent(const CoreEvent& e) {
  nlohmann::json involved = {{"kind", e.involved.kind}, {"name", e.involved.name}};
  if (!e.involved.api_version.empty()) involved["apiVersion"] = e.involved.api_version;
  if (!e.involved.namespace_.empty()) involved["namespace"] = e.involved.namespace_;
  if (!e.involved.uid.empty()) involved["uid"] = e.involved.uid;
  nlohmann::json source = {{"component", e.component}};
  if (!e.host.empty()) source["host"] = e.host;
  nlohmann::json j = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"name", e.name}, {"namespace", e.namespace_}}},
      {"involvedObject", involved},
      {"reason", e.reason},
      {"message", e.message},
      {"type", std::string(EventTypeName(e.type))},
      {"count", e.count},
      {"firstTimestamp", FormatRfc3339(e.first_timestamp)},
      {"lastTimestamp", FormatRfc3339(e.last_timestamp)},
      {"source", source},
      {"reportingComponent", e.component},
      // Python clients reading events.k8s.io need eventTime; the legacy validation rules then
      // also want action and reportingInstance, so set them all.
      {"eventTime", FormatRfc3339Micro(e.first_timestamp)},
      {"action", e.reason},
      {"reportingInstance", e.host.empty() ? e.component : e.host},
  };
  return j.dump();
}

std::string EncodeCoreEventRepeatPatch(const CoreEvent& e) {
  nlohmann::json j = {{"count", e.count},
                      {"lastTimestamp", FormatRfc3339(e.last_timestamp)},
                      {"message", e.message}};
  return j.dump();
}

}  // namespace gg::events
