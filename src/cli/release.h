// `kubectl gpu-guardian release NODE --reason TEXT`: hands a node back now. Removes the taint
// and the cordon gpu-guardian put there (never an administrator's), lifts a quarantine, ends
// the occurrence's remediation and records who asked and why in the node's remediation record
// and in Events. The decision is remediation::PlanRelease; this file only reads and writes.
#pragma once

#include <string>

#include "common/clock.h"
#include "common/status.h"
#include "k8s/rest_client.h"

namespace gg::cli {

// One line saying what was handed back (or that nothing of ours was on the node).
// InvalidArgument for an empty reason; the API error otherwise (a write raced by the operator
// is read again and retried a few times).
StatusOr<std::string> ReleaseNode(k8s::RestClient& client, const std::string& node,
                                  const std::string& reason, WallTime now);

}  // namespace gg::cli
