// simdjson on-demand building blocks for projections: field readers that report the field
// path on a type mismatch, ObjectMeta decoding, and the generic list / watch-event / object
// drivers. codec.cc uses them for the built-in projections; api/ uses them for our CRDs:
//
//   Status DecodePolicy(simdjson::ondemand::object& o, GPUHealthPolicy* out);
//   auto list = json::ParseListWith<GPUHealthPolicy>(body, &DecodePolicy);
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "k8s/codec.h"
#include "k8s/objects.h"
#include "k8s/transport.h"

namespace gg::k8s::json {

namespace od = simdjson::ondemand;

template <typename T>
using DecodeFn = Status (*)(od::object& obj, T* out);

// "<field>: expected <what>" InvalidArgument.
Status TypeError(std::string_view field, std::string_view what);
Status JsonError(std::string_view where, simdjson::error_code ec);

// Null check that does not consume the value. Malformed input reads as "not null".
inline bool IsNull(od::value& v) {
  od::json_type t;
  if (v.type().get(t)) return false;
  return t == od::json_type::null;
}

// Calls fn(raw key, value) for every field of `obj`; a malformed field is an error at `where`.
template <typename Fn>
Status ForFields(od::object& obj, std::string_view where, Fn&& fn) {
  for (auto field : obj) {
    od::raw_json_string key;
    if (auto ec = field.key().get(key)) return JsonError(where, ec);
    od::value val;
    if (auto ec = field.value().get(val)) return JsonError(where, ec);
    GG_RETURN_IF_ERROR(fn(key, val));
  }
  return OkStatus();
}

// Readers: null → leave `out` unchanged and return OK; wrong type → InvalidArgument(field).
Status ReadString(od::value v, std::string_view field, std::string* out);
Status ReadInt(od::value v, std::string_view field, std::int64_t* out);
Status ReadInt32(od::value v, std::string_view field, std::int32_t* out);
Status ReadOptInt32(od::value v, std::string_view field, std::optional<std::int32_t>* out);
Status ReadOptInt64(od::value v, std::string_view field, std::optional<std::int64_t>* out);
Status ReadBool(od::value v, std::string_view field, bool* out);
// RFC 3339 string → time (an unparsable time is InvalidArgument).
Status ReadTime(od::value v, std::string_view field, std::optional<WallTime>* out);
// Object of strings → LabelMap; `keep` filters keys (null keeps all).
Status ReadStringMap(od::value v, std::string_view field, LabelMap* out,
                     bool (*keep)(std::string_view key) = nullptr);
// resource.Quantity as integer count ("8", 8, "1k"); non-integral → InvalidArgument.
Status ReadQuantityCount(od::value v, std::string_view field, std::int64_t* out);
Status ReadStringList(od::value v, std::string_view field, std::vector<std::string>* out);

// Like ReadStringMap, sharing the pairs that repeat `prev` (see LabelMap::AppendLike).
Status ReadStringMapLike(od::value v, std::string_view field, LabelMap* out, const LabelMap* prev,
                         bool (*keep)(std::string_view key) = nullptr);

// metadata; `keep_annotation` as for ReadStringMap.
Status DecodeObjectMeta(od::value v, ObjectMeta* out,
                        bool (*keep_annotation)(std::string_view key) = nullptr);

Status DecodeLabelSelector(od::value v, std::string_view field, LabelSelector* out);

// Thread-local reusable parser.
od::parser& ThreadParser();
// The thread's parser keeps at most this much after ReleaseLargeThreadParser (k8s/codec.h):
// room for any one watch event (a GPU Node is ~14 KB). A parser costs ~5.7 bytes per byte of
// capacity (a 4-byte structural index and ~1.7 bytes of string buffer), so a 1 MiB keep let
// each informer thread hold a LIST page's parser (~1.3 MB for 500 Leases) for good.
inline constexpr std::size_t kKeepParserCapacity = 64 << 10;
// Ensures `s` has kBodyPadding spare capacity (may reallocate once).
void EnsurePadding(std::string& s);
// Copies into a thread-local padded buffer.
simdjson::padded_string_view PaddedCopy(std::string_view s);

// Parses a Kubernetes Status object into a gg::Status (http_status fallback when absent).
Status DecodeStatusObject(od::object& obj, int http_status);

// While one is alive on a thread, an object decoded without a cached version (PreviousLabels)
// shares the label pairs it has in common with the object decoded before it: the items of one
// list, whose labels (a fleet's GFD/NFD labels) mostly repeat at the same positions, skip the
// intern table's hash and lock for those pairs. Its fleet-wide pairs also take over the shared
// set of a recent item of its own node group (the list alternates between zones and pools),
// instead of looking the set up. Nestable; what it keeps is dropped with the outermost one.
class SiblingLabels {
 public:
  SiblingLabels();
  ~SiblingLabels();
  SiblingLabels(const SiblingLabels&) = delete;
  SiblingLabels& operator=(const SiblingLabels&) = delete;
};

// Generic drivers. `json` must have kBodyPadding readable bytes after its end.
template <typename T>
StatusOr<ObjectList<T>> ParseListPadded(std::string_view json, DecodeFn<T> decode,
                                        const std::function<void(T&&)>* sink = nullptr) {
  ObjectList<T> out;
  SiblingLabels siblings;
  od::document doc;
  auto ec = ThreadParser()
                .iterate(simdjson::padded_string_view(json.data(), json.size(),
                                                      json.size() + kBodyPadding))
                .get(doc);
  if (ec) return JsonError("list", ec);
  od::object top;
  if ((ec = doc.get_object().get(top))) return JsonError("list", ec);
  for (auto field : top) {
    od::raw_json_string key;
    if ((ec = field.key().get(key))) return JsonError("list", ec);
    od::value val;
    if ((ec = field.value().get(val))) return JsonError("list", ec);
    if (key == "items") {
      od::array arr;
      bool is_null = false;
      if (!val.is_null().get(is_null) && is_null) continue;
      if ((ec = val.get_array().get(arr))) return TypeError("items", "array");
      for (auto elem : arr) {
        od::object o;
        if ((ec = elem.get_object().get(o))) return TypeError("items[]", "object");
        T item;
        Status s = decode(o, &item);
        if (!s.ok()) return s.WithContext("items[" + std::to_string(out.items.size()) + "]");
        if (sink) {
          (*sink)(std::move(item));
        } else {
          out.items.push_back(std::move(item));
        }
      }
    } else if (key == "metadata") {
      od::object m;
      if ((ec = val.get_object().get(m))) return TypeError("metadata", "object");
      for (auto mf : m) {
        od::raw_json_string mk;
        if ((ec = mf.key().get(mk))) return JsonError("metadata", ec);
        od::value mv;
        if ((ec = mf.value().get(mv))) return JsonError("metadata", ec);
        if (mk == "resourceVersion") {
          GG_RETURN_IF_ERROR(ReadString(mv, "metadata.resourceVersion", &out.resource_version));
        } else if (mk == "continue") {
          GG_RETURN_IF_ERROR(ReadString(mv, "metadata.continue", &out.continue_token));
        }
      }
    }
  }
  return out;
}

template <typename T>
StatusOr<T> ParseObjectPadded(std::string_view json, DecodeFn<T> decode) {
  od::document doc;
  auto ec = ThreadParser()
                .iterate(simdjson::padded_string_view(json.data(), json.size(),
                                                      json.size() + kBodyPadding))
                .get(doc);
  if (ec) return JsonError("object", ec);
  od::object o;
  if ((ec = doc.get_object().get(o))) return TypeError("object", "JSON object");
  T out;
  GG_RETURN_IF_ERROR(decode(o, &out));
  return out;
}

StatusOr<WatchEventType> ParseWatchEventTypeName(std::string_view t);

template <typename T>
StatusOr<WatchEvent<T>> ParseWatchEventPadded(std::string_view line, DecodeFn<T> decode) {
  od::document doc;
  auto ec = ThreadParser()
                .iterate(simdjson::padded_string_view(line.data(), line.size(),
                                                      line.size() + kBodyPadding))
                .get(doc);
  if (ec) return JsonError("watch event", ec);
  od::object top;
  if ((ec = doc.get_object().get(top))) return TypeError("watch event", "JSON object");
  // Servers send "type" first; find_field_unordered copes with any order.
  std::string_view type_name;
  if ((ec = top.find_field_unordered("type").get_string().get(type_name))) {
    return TypeError("type", "string");
  }
  GG_ASSIGN_OR_RETURN(WatchEventType type, ParseWatchEventTypeName(type_name));
  WatchEvent<T> ev;
  ev.type = type;
  od::object obj;
  if ((ec = top.find_field_unordered("object").get_object().get(obj))) {
    return TypeError("object", "JSON object");
  }
  if (type == WatchEventType::kError) {
    ev.error = DecodeStatusObject(obj, 0);
    if (ev.error.ok()) ev.error = UnknownError("watch ERROR event without a failure status");
    return ev;
  }
  Status s = decode(obj, &ev.object);
  if (!s.ok()) return s.WithContext("watch event object");
  return ev;
}

template <typename T>
StatusOr<ObjectList<T>> ParseListWith(std::string_view json, DecodeFn<T> decode) {
  auto p = PaddedCopy(json);
  return ParseListPadded<T>(std::string_view(p.data(), p.length()), decode);
}
template <typename T>
StatusOr<ObjectList<T>> ParseListWith(std::string& json, DecodeFn<T> decode) {
  EnsurePadding(json);
  return ParseListPadded<T>(json, decode);
}
template <typename T>
StatusOr<T> ParseObjectWith(std::string_view json, DecodeFn<T> decode) {
  auto p = PaddedCopy(json);
  return ParseObjectPadded<T>(std::string_view(p.data(), p.length()), decode);
}
template <typename T>
StatusOr<WatchEvent<T>> ParseWatchEventWith(std::string_view line, DecodeFn<T> decode,
                                            bool padded = false) {
  if (padded) return ParseWatchEventPadded<T>(line, decode);
  auto p = PaddedCopy(line);
  return ParseWatchEventPadded<T>(std::string_view(p.data(), p.length()), decode);
}

}  // namespace gg::k8s::json
