// OpenAPI v3 documents the simulator generates for CRD group versions (/openapi/v3/apis/G/V),
// shaped like the real server's: components.schemas holds each kind's structural schema
// (with x-kubernetes-group-version-kind, metadata as a $ref to ObjectMeta) and its List,
// plus the meta.k8s.io schemas they reference; paths carry the operations with
// x-kubernetes-group-version-kind and the fieldValidation parameter that kubectl's apply
// checks before trusting server-side validation. kubectl explain reads the schemas.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace gg::sim {

struct ResourceInfo;
class SchemaSet;

// "gpuguardian.io" + "v1alpha1" + "GPUHealthPolicy" -> "io.gpuguardian.v1alpha1.GPUHealthPolicy"
std::string CrdSchemaName(std::string_view group, std::string_view version, std::string_view kind);

// One document for the custom resources of a single group/version. `builtin` (may be null)
// supplies ObjectMeta, ListMeta and what they reference.
nlohmann::json CrdOpenApiDocument(const std::vector<std::shared_ptr<const ResourceInfo>>& resources,
                                  const SchemaSet* builtin);

// The custom resources' part of the /openapi/v2 document (definitions and paths): each
// kind's schema as kube-apiserver publishes it in v2 (CrdSchemaV2), its List, the paths, and
// the meta.k8s.io definitions they reference.
nlohmann::json CrdOpenApiV2Part(const std::vector<std::shared_ptr<const ResourceInfo>>& resources,
                                const SchemaSet* builtin);

}  // namespace gg::sim
