// Cache projections of our two CRDs for runtime::Informer, and the informer codecs that decode
// them (nlohmann for the envelope and metadata; the api/ codecs for spec/status). A report or
// policy that does not decode is still cached, with the error, so the reconciler can say why
// (Unknown state / Invalid condition) instead of silently ignoring the object.
#pragma once

#include <optional>
#include <string>

#include "api/gpu_health_policy.h"
#include "api/gpu_node_health.h"
#include "k8s/objects.h"
#include "operator/packed_report.h"
#include "runtime/informer.h"

namespace gg::op {

// GPUNodeHealth/<node>: the agent's report, its status packed (operator/packed_report.h: a
// few hundred bytes instead of ~4 KB decoded, for every node of the fleet).
struct NodeHealthObject {
  k8s::ObjectMeta meta;
  PackedReport packed;              // empty: no status yet or undecodable
  k8s::CompactString decode_error;  // why there is no status, if it failed to decode

  bool HasStatus() const { return !packed.empty(); }
  // The status as decoded; nullopt when there is none.
  std::optional<api::GpuNodeHealthStatus> Unpacked() const {
    if (packed.empty()) return std::nullopt;
    return packed.Unpack(meta.name);
  }
  // Set meta.name first: a nodeName equal to it is stored in one byte.
  void SetStatus(const api::GpuNodeHealthStatus& s) { packed = PackedReport::Pack(s, meta.name); }
};

// GPUHealthPolicy/<name>.
struct PolicyObject {
  k8s::ObjectMeta meta;
  std::optional<api::GpuHealthPolicy> policy;  // absent when undecodable
  std::string decode_error;
};

StatusOr<NodeHealthObject> DecodeNodeHealthObject(std::string_view json);
StatusOr<PolicyObject> DecodePolicyObject(std::string_view json);

runtime::InformerCodec<NodeHealthObject> NodeHealthCodec();
runtime::InformerCodec<PolicyObject> PolicyCodec();

}  // namespace gg::op
