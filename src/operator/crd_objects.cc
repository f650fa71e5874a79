// CRD projections: decode envelope + metadata with nlohmann, payloads with the api/ codecs.
#include "operator/crd_objects.h"

#include <nlohmann/json.hpp>

#include "common/time_util.h"
#include "k8s/codec.h"

namespace gg::op {
namespace {

using nlohmann::json;

Status DecodeMeta(const json& obj, k8s::ObjectMeta* meta) {
  if (!obj.is_object()) return InvalidArgumentError("object: expected object");
  auto it = obj.find("metadata");
  if (it == obj.end() || !it->is_object()) return InvalidArgumentError("metadata: expected object");
  const json& m = *it;
  auto str = [&m](const char* k) -> std::string {
    auto f = m.find(k);
    return f != m.end() && f->is_string() ? f->get<std::string>() : std::string();
  };
  meta->name = str("name");
  meta->namespace_ = str("namespace");
  meta->uid = str("uid");
  meta->resource_version = str("resourceVersion");
  if (auto g = m.find("generation"); g != m.end() && g->is_number_integer()) {
    meta->generation = g->get<std::int64_t>();
  }
  if (auto l = m.find("labels"); l != m.end() && l->is_object()) {
    for (auto& [k, v] : l->items()) {
      if (v.is_string()) meta->labels.Set(k, v.get<std::string>());
    }
  }
  if (auto d = m.find("deletionTimestamp"); d != m.end() && d->is_string()) {
    auto t = ParseRfc3339(d->get<std::string>());
    if (t.ok()) meta->deletion_timestamp = *t;
  }
  if (meta->name.empty()) return InvalidArgumentError("metadata.name: required");
  return OkStatus();
}

StatusOr<NodeHealthObject> FromJson(const json& obj, NodeHealthObject*) {
  NodeHealthObject out;
  GG_RETURN_IF_ERROR(DecodeMeta(obj, &out.meta));
  out.meta.uid = k8s::Uid();  // read by nothing for a report
  auto st = obj.find("status");
  if (st != obj.end() && st->is_object()) {
    auto s = api::DecodeGpuNodeHealthStatus(st->dump());
    if (s.ok()) {
      if (s->node_name.empty()) s->node_name = out.meta.name;
      out.SetStatus(*s);
    } else {
      out.decode_error = s.status().message();
    }
  }
  return out;
}

StatusOr<PolicyObject> FromJson(const json& obj, PolicyObject*) {
  PolicyObject out;
  GG_RETURN_IF_ERROR(DecodeMeta(obj, &out.meta));
  auto p = api::DecodeGpuHealthPolicy(obj.dump());
  if (p.ok()) {
    out.policy = std::move(p).value();
    out.policy->name = out.meta.name;
    out.policy->uid = out.meta.uid;
    out.policy->resource_version = out.meta.resource_version;
    out.policy->generation = out.meta.generation;
  } else {
    out.decode_error = p.status().message();
  }
  return out;
}

template <typename T>
StatusOr<k8s::ObjectList<T>> ParseListJson(std::string& body,
                                           const std::function<void(T&&)>& sink) {
  json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return InvalidArgumentError("list: invalid JSON");
  k8s::ObjectList<T> out;
  if (auto m = doc.find("metadata"); m != doc.end() && m->is_object()) {
    out.resource_version = m->value("resourceVersion", "");
    out.continue_token = m->value("continue", "");
  }
  if (auto items = doc.find("items"); items != doc.end() && items->is_array()) {
    for (const json& item : *items) {
      auto obj = FromJson(item, static_cast<T*>(nullptr));
      if (!obj.ok()) continue;  // an item without a name cannot be cached; skip it
      sink(std::move(obj).value());
    }
  }
  return out;
}

template <typename T>
StatusOr<k8s::WatchEvent<T>> ParseWatchJson(std::string_view line) {
  json doc = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object())
    return InvalidArgumentError("watch event: invalid JSON");
  k8s::WatchEvent<T> ev;
  std::string type = doc.value("type", "");
  const json& obj = doc.contains("object") ? doc["object"] : json();
  if (type == "ERROR") {
    ev.type = k8s::WatchEventType::kError;
    int code = obj.is_object() ? obj.value("code", 500) : 500;
    ev.error = k8s::StatusFromBody(obj.dump(), code);
    return ev;
  }
  if (type == "BOOKMARK") {
    ev.type = k8s::WatchEventType::kBookmark;
    if (obj.is_object() && obj.contains("metadata")) {
      ev.object.meta.resource_version = obj["metadata"].value("resourceVersion", "");
    }
    return ev;
  }
  if (type == "ADDED")
    ev.type = k8s::WatchEventType::kAdded;
  else if (type == "MODIFIED")
    ev.type = k8s::WatchEventType::kModified;
  else if (type == "DELETED")
    ev.type = k8s::WatchEventType::kDeleted;
  else
    return InvalidArgumentError("watch event: unknown type \"" + type + "\"");
  auto o = FromJson(obj, static_cast<T*>(nullptr));
  if (!o.ok()) return o.status();
  ev.object = std::move(o).value();
  return ev;
}

template <typename T>
StatusOr<T> DecodeOne(std::string_view text) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgumentError("invalid JSON");
  return FromJson(doc, static_cast<T*>(nullptr));
}

template <typename T>
runtime::InformerCodec<T> MakeCodec() {
  // Both members given explicitly: the defaults (k8s/codec.h, not instantiated for our types)
  // must not be.
  return runtime::InformerCodec<T>{[](std::string& body, const std::function<void(T &&)>& sink) {
                                     return ParseListJson<T>(body, sink);
                                   },
                                   [](std::string_view line) { return ParseWatchJson<T>(line); }};
}

}  // namespace

StatusOr<NodeHealthObject> DecodeNodeHealthObject(std::string_view json_text) {
  return DecodeOne<NodeHealthObject>(json_text);
}
StatusOr<PolicyObject> DecodePolicyObject(std::string_view json_text) {
  return DecodeOne<PolicyObject>(json_text);
}
runtime::InformerCodec<NodeHealthObject> NodeHealthCodec() { return MakeCodec<NodeHealthObject>(); }
runtime::InformerCodec<PolicyObject> PolicyCodec() { return MakeCodec<PolicyObject>(); }

}  // namespace gg::op
