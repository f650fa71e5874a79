// RestEventSink: EventSink over the API server (POST / strategic-merge PATCH of core/v1
// Events through k8s::RestClient), optionally only while this process leads.
#pragma once

#include <functional>

#include "events/sink.h"
#include "k8s/rest_client.h"

namespace gg::events {

class RestEventSink final : public EventSink {
 public:
  // `is_leader` (optional): events are writes too; a non-leader records none (Admit). It is
  // not checked again at write time, so a lost lease does not drop Events of decisions made
  // while leading.
  explicit RestEventSink(k8s::RestClient& client, std::function<bool()> is_leader = nullptr)
      : client_(client), is_leader_(std::move(is_leader)) {}
  Status Create(const CoreEvent& e) override;
  Status Patch(const CoreEvent& e) override;
  bool Admit() const override { return !is_leader_ || is_leader_(); }

 private:
  k8s::RestClient& client_;
  std::function<bool()> is_leader_;
};

}  // namespace gg::events
