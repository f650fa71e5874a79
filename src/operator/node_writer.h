// NodeWriter: the operator's only writes to Nodes. One fencing write is one strategic-merge
// PATCH of the main resource carrying spec.taints (the whole list: it is atomic, so other
// owners' taints are sent back unchanged), spec.unschedulable and our record annotation,
// with a metadata.resourceVersion precondition (409 → retry from a fresh cache). The
// GPUHealthy condition goes through nodes/<n>/status (merge key "type": other conditions are
// untouched). Every write first checks leadership.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "k8s/objects.h"
#include "k8s/rest_client.h"

namespace gg::op {

struct NodeSpecChange {
  std::optional<std::vector<k8s::Taint>> taints;  // the full new list
  std::optional<bool> unschedulable;
  std::map<std::string, std::optional<std::string>> annotations;  // nullopt deletes
  std::string resource_version;                                   // precondition ("" = none)
  bool Empty() const { return !taints && !unschedulable && annotations.empty(); }
};

// Both return the node's resourceVersion after the write ("" when not known), so the
// reconciler can tell a cache that has not caught up with our own write yet.
class NodeWriter {
 public:
  virtual ~NodeWriter() = default;
  virtual StatusOr<std::string> PatchNode(const std::string& node,
                                          const NodeSpecChange& change) = 0;
  virtual StatusOr<std::string> PatchCondition(const std::string& node,
                                               const k8s::NodeCondition& condition) = 0;
};

// The SMP body for PatchNode (exposed for tests).
std::string NodeSpecPatchBody(const NodeSpecChange& change);

class RestNodeWriter final : public NodeWriter {
 public:
  RestNodeWriter(k8s::RestClient& client, std::function<bool()> is_leader)
      : client_(client), is_leader_(std::move(is_leader)) {}
  StatusOr<std::string> PatchNode(const std::string& node, const NodeSpecChange& change) override;
  StatusOr<std::string> PatchCondition(const std::string& node,
                                       const k8s::NodeCondition& condition) override;

 private:
  Status CheckLeader() const;
  k8s::RestClient& client_;
  std::function<bool()> is_leader_;
};

}  // namespace gg::op
