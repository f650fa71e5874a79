// GET /openapi/v2: the Swagger 2.0 document kube-apiserver still serves beside /openapi/v3,
// and the one kubectl before 1.27 reads for client-side validation (apply, create) and
// explain. It is built from the OpenAPI v3 documents the simulator serves:
// `#/components/schemas/X` becomes `#/definitions/X`, a single-ref allOf becomes the $ref,
// v3-only keywords (oneOf on IntOrString and Quantity, nullable, anyOf, not) are dropped,
// parameters and request bodies take their v2 shapes, and every x-kubernetes-* extension
// (group-version-kind, patch strategy and merge key, list type) is kept. Custom resources get
// their structural schema as kube-apiserver publishes it in v2 (see CrdSchemaV2).
//
// The protobuf form (Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf or
// ...spec.v2.v1.0+protobuf) is gnostic's openapi.v2.Document; its encoder below is written
// by hand from the message definitions' field numbers (no generated code).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/status.h"

namespace gg::sim {

// An OpenAPI v3 schema (as in components.schemas) in its Swagger 2.0 form.
nlohmann::json SchemaV3ToV2(const nlohmann::json& schema);

// A v3 document's schemas and paths added to the v2 document `v2` (definitions, paths).
void AddV3DocumentToV2(const nlohmann::json& v3, nlohmann::json& v2);

// An empty Swagger 2.0 document for kube version "1.35": info, bearer-token security.
nlohmann::json NewV2Document(std::string_view kube_version);

// A custom resource's published v2 schema: `structural` (the CRD version's
// openAPIV3Schema, may be null) with what v2 cannot say removed the way kube-apiserver
// removes it (allOf/oneOf/anyOf/not; nullable and preserve-unknown-fields drop type,
// properties and items; an array left without items loses its type; nullable properties
// leave `required`), then apiVersion, kind, metadata (a $ref to ObjectMeta) and the GVK
// extension added. A root that preserves unknown fields is published as {type: object}.
nlohmann::json CrdSchemaV2(const nlohmann::json& structural, const std::string& group,
                           const std::string& version, const std::string& kind);

// The gnostic openapi.v2.Document protobuf of a v2 document. InvalidArgument names a key
// Swagger 2.0 does not have (the real server's gnostic parser rejects those too).
StatusOr<std::string> EncodeOpenApiV2Protobuf(const nlohmann::json& v2);

// One built document in the forms it is served in.
struct OpenApiV2Served {
  std::string json;
  std::string protobuf;
  std::string etag;  // quoted, as the real server's: "<SHA-512 of the JSON, upper-case hex>"
};

// The served document, rebuilt only when the set of custom resource definitions changes
// (compared by the custom part's content); only the served forms are kept.
class OpenApiV2Cache {
 public:
  // `builtin` builds the built-in document (called on a rebuild); `custom` is the current v2
  // document of custom resources (definitions and paths only).
  StatusOr<std::shared_ptr<const OpenApiV2Served>> Get(
      const std::function<nlohmann::json()>& builtin, const nlohmann::json& custom);

 private:
  std::mutex mu_;
  std::string custom_key_;
  std::shared_ptr<const OpenApiV2Served> served_;
};

// Which form `accept` asks for: "json", "protobuf", or "" when neither is acceptable (406).
// The first acceptable media range wins, as in the real handler; an empty Accept is */*.
std::string OpenApiV2Format(std::string_view accept);

}  // namespace gg::sim
