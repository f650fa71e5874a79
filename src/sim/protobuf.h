// Kubernetes protobuf request bodies, decoded to JSON. kubectl's generators (create namespace,
// configmap, secret, serviceaccount, role, deployment, service...; auth can-i, auth whoami)
// POST `application/vnd.kubernetes.protobuf`: the magic "k8s\0" and a runtime.Unknown holding
// the object's apiVersion/kind and its message bytes. Field numbers and types come from a
// table generated from the upstream generated.proto files (data/protobuf/messages.json); the
// result is the JSON the Go encoder would have written for the same object.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

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

// The protobuf wire format, writing side: the primitives a hand-written encoder composes
// (the /openapi/v2 document's). proto3 leaves zero scalars out; callers decide, since a
// oneof member is written even when zero.
class ProtobufWriter {
 public:
  void Varint(int field, std::uint64_t v);
  void Bool(int field, bool v) { Varint(field, v ? 1 : 0); }
  void Double(int field, double v);           // fixed64, little-endian
  void Bytes(int field, std::string_view v);  // strings and embedded messages
  const std::string& data() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  void RawVarint(std::uint64_t v);
  std::string out_;
};

// One field of a message as read: its number, wire type and value.
struct ProtobufField {
  int number = 0;
  int wire = 0;
  std::uint64_t num = 0;   // varint, fixed64 and fixed32 values
  std::string_view bytes;  // length-delimited values (views into the message)
};

// The fields of one message's bytes, in order. InvalidArgument when malformed.
StatusOr<std::vector<ProtobufField>> ReadProtobufFields(std::string_view message);

}  // namespace gg::sim
