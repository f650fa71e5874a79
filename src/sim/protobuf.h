// Kubernetes protobuf request bodies, decoded to JSON. kubectl's generators (create namespace,
// configmap, secret, serviceaccount, role, deployment, service...; auth can-i, auth whoami)
// POST `application/vnd.kubernetes.protobuf`: the magic "k8s\0" and a runtime.Unknown holding
// the object's apiVersion/kind and its message bytes. Field numbers and types come from a
// table generated from the upstream generated.proto files (data/protobuf/messages.json); the
// result is the JSON the Go encoder would have written for the same object.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace gg::sim {

// True when `body` starts with the "k8s\0" protobuf envelope magic.
bool HasProtobufMagic(std::string_view body);

// The whole envelope: apiVersion/kind from runtime.Unknown's typeMeta, the object decoded by
// the message of that kind. InvalidArgument for a malformed body or an unknown field number
// (nothing is dropped silently); Unimplemented for a kind without a table entry.
StatusOr<nlohmann::json> DecodeK8sProtobuf(std::string_view body);

// One message's bytes as `message` (fully qualified, e.g. "k8s.io.api.core.v1.ConfigMap").
StatusOr<nlohmann::json> DecodeProtobufMessage(std::string_view bytes, std::string_view message);

// The message name for apiVersion/kind ("v1"/"ConfigMap" -> k8s.io.api.core.v1.ConfigMap;
// "DeleteOptions" of any version -> meta/v1). Empty when the table has none.
std::string ProtobufMessageFor(std::string_view api_version, std::string_view kind);

}  // namespace gg::sim
