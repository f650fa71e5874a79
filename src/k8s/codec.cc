// simdjson on-demand decoders for the built-in projections, and the shared field readers.
#include "k8s/codec.h"

#include <array>
#include <charconv>

#include "common/time_util.h"
#include "k8s/errors.h"
#include "k8s/json_decode.h"

namespace gg::k8s {
namespace json {

Status TypeError(std::string_view field, std::string_view what) {
  return InvalidArgumentError(std::string(field) + ": expected " + std::string(what));
}

Status JsonError(std::string_view where, simdjson::error_code ec) {
  return InvalidArgumentError(std::string(where) + ": malformed JSON (" +
                              simdjson::error_message(ec) + ")");
}

od::parser& ThreadParser() {
  thread_local od::parser parser;
  return parser;
}

void ReleaseLargeThreadParser() {
  od::parser& p = ThreadParser();
  if (p.capacity() > kKeepParserCapacity) p = od::parser{};
}

void EnsurePadding(std::string& s) {
  if (s.capacity() < s.size() + kBodyPadding) s.reserve(s.size() + kBodyPadding);
}

simdjson::padded_string_view PaddedCopy(std::string_view s) {
  thread_local std::string buf;
  buf.reserve(s.size() + kBodyPadding);
  buf.assign(s.data(), s.size());
  return simdjson::padded_string_view(buf.data(), buf.size(), buf.capacity());
}

namespace {

// *present=false for null.
Status AsObject(od::value& v, std::string_view field, od::object* out, bool* present) {
  *present = false;
  if (IsNull(v)) return OkStatus();
  if (v.get_object().get(*out)) return TypeError(field, "object");
  *present = true;
  return OkStatus();
}

template <typename Fn>
Status ForObjectFields(od::value& v, std::string_view field, Fn&& fn) {
  od::object o;
  bool present = false;
  GG_RETURN_IF_ERROR(AsObject(v, field, &o, &present));
  if (!present) return OkStatus();
  return ForFields(o, field, fn);
}

// fn(od::object&, index) for each element of an array of objects.
template <typename Fn>
Status ForArrayObjects(od::value& v, std::string_view field, Fn&& fn) {
  if (IsNull(v)) return OkStatus();
  od::array arr;
  if (v.get_array().get(arr)) return TypeError(field, "array");
  std::size_t i = 0;
  for (auto elem : arr) {
    od::object o;
    if (elem.get_object().get(o)) {
      return TypeError(std::string(field) + "[" + std::to_string(i) + "]", "object");
    }
    Status s = fn(o, i);
    if (!s.ok()) return s.WithContext(std::string(field) + "[" + std::to_string(i) + "]");
    ++i;
  }
  return OkStatus();
}

}  // namespace

Status ReadString(od::value v, std::string_view field, std::string* out) {
  if (IsNull(v)) return OkStatus();
  std::string_view s;
  if (v.get_string().get(s)) return TypeError(field, "string");
  out->assign(s.data(), s.size());
  return OkStatus();
}

Status ReadInt(od::value v, std::string_view field, std::int64_t* out) {
  if (IsNull(v)) return OkStatus();
  std::int64_t n = 0;
  if (v.get_int64().get(n)) return TypeError(field, "integer");
  *out = n;
  return OkStatus();
}

Status ReadInt32(od::value v, std::string_view field, std::int32_t* out) {
  std::int64_t n = *out;
  GG_RETURN_IF_ERROR(ReadInt(v, field, &n));
  if (n < INT32_MIN || n > INT32_MAX) return TypeError(field, "32-bit integer");
  *out = static_cast<std::int32_t>(n);
  return OkStatus();
}

Status ReadOptInt32(od::value v, std::string_view field, std::optional<std::int32_t>* out) {
  if (IsNull(v)) return OkStatus();
  std::int32_t n = 0;
  GG_RETURN_IF_ERROR(ReadInt32(v, field, &n));
  *out = n;
  return OkStatus();
}

Status ReadOptInt64(od::value v, std::string_view field, std::optional<std::int64_t>* out) {
  if (IsNull(v)) return OkStatus();
  std::int64_t n = 0;
  GG_RETURN_IF_ERROR(ReadInt(v, field, &n));
  *out = n;
  return OkStatus();
}

Status ReadBool(od::value v, std::string_view field, bool* out) {
  if (IsNull(v)) return OkStatus();
  bool b = false;
  if (v.get_bool().get(b)) return TypeError(field, "boolean");
  *out = b;
  return OkStatus();
}

Status ReadTime(od::value v, std::string_view field, std::optional<WallTime>* out) {
  if (IsNull(v)) return OkStatus();
  std::string_view s;
  if (v.get_string().get(s)) return TypeError(field, "RFC 3339 time string");
  auto t = ParseRfc3339(s);
  if (!t.ok()) return TypeError(field, "RFC 3339 time");
  *out = *t;
  return OkStatus();
}

Status ReadStringMapLike(od::value v, std::string_view field, LabelMap* out, const LabelMap* prev,
                         bool (*keep)(std::string_view key)) {
  od::object o;
  bool present = false;
  GG_RETURN_IF_ERROR(AsObject(v, field, &o, &present));
  if (!present) return OkStatus();
  auto append_all = [&]() -> Status {
    for (auto f : o) {
      std::string_view key;
      if (auto ec = f.unescaped_key().get(key)) return JsonError(field, ec);
      if (keep && !keep(key)) continue;  // value is skipped by the iterator
      // The key's storage (the parser's string buffer) stays valid for the whole document.
      std::string_view k = key;
      od::value val;
      if (auto ec = f.value().get(val)) return JsonError(field, ec);
      std::string_view s;
      if (IsNull(val)) continue;
      if (val.get_string().get(s)) {
        return TypeError(std::string(field) + "." + std::string(k), "string");
      }
      if (!out->AppendLike(prev, k, s)) {
        return TypeError(std::string(field) + "." + std::string(k), "string without NUL");
      }
    }
    return OkStatus();
  };
  Status s = append_all();
  out->FinishAppend();  // also shrinks: cached for good, no spare capacity (49 grew it to 64)
  return s;
}

Status ReadStringMap(od::value v, std::string_view field, LabelMap* out,
                     bool (*keep)(std::string_view key)) {
  return ReadStringMapLike(v, field, out, nullptr, keep);
}

namespace {
StatusOr<std::int64_t> ParseQuantityCount(std::string_view s) {
  std::int64_t n = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc() || n < 0) return InvalidArgumentError("bad quantity");
  std::string_view suffix(p, s.data() + s.size() - p);
  static constexpr std::pair<std::string_view, std::int64_t> kSuffixes[] = {
      {"", 1},
      {"k", 1000},
      {"M", 1000000},
      {"G", 1000000000},
      {"Ki", 1024},
      {"Mi", 1024 * 1024},
      {"Gi", 1024LL * 1024 * 1024}};
  for (const auto& [suf, mult] : kSuffixes) {
    if (suffix == suf) return n * mult;
  }
  if (suffix == "m" && n % 1000 == 0) return n / 1000;
  return InvalidArgumentError("bad quantity");
}
}  // namespace

Status ReadQuantityCount(od::value v, std::string_view field, std::int64_t* out) {
  if (IsNull(v)) return OkStatus();
  od::json_type t;
  if (v.type().get(t)) return TypeError(field, "quantity");
  if (t == od::json_type::number) {
    std::int64_t n = 0;
    if (v.get_int64().get(n)) return TypeError(field, "integral quantity");
    *out = n;
    return OkStatus();
  }
  std::string_view s;
  if (v.get_string().get(s)) return TypeError(field, "quantity string");
  auto q = ParseQuantityCount(s);
  if (!q.ok()) return TypeError(field, "integral quantity");
  *out = *q;
  return OkStatus();
}

Status ReadStringList(od::value v, std::string_view field, std::vector<std::string>* out) {
  if (IsNull(v)) return OkStatus();
  od::array arr;
  if (v.get_array().get(arr)) return TypeError(field, "array");
  for (auto elem : arr) {
    std::string_view s;
    if (elem.get_string().get(s)) return TypeError(std::string(field) + "[]", "string");
    out->emplace_back(s);
  }
  return OkStatus();
}

namespace {

// Label pairs of the metadata being decoded, as views into the parser's string buffer (valid
// for the whole document). Collected during the pass over metadata and turned into the
// LabelMap after it, when name and namespace are known whatever their order (the real API
// server sends name first; a server that sorts keys sends labels first), so the cached
// version's pairs can be shared. A stack: each DecodeObjectMeta uses the entries above the
// size it found.
thread_local std::vector<std::pair<std::string_view, std::string_view>> label_pairs;

// SiblingLabels state: how many are alive on this thread, the labels decoded last, and the
// last maps decoded with each of a few shared sets: a list's items alternate between node
// groups (zones, pools), so the item before is often from another group, one a few back not.
thread_local int sibling_scopes = 0;
thread_local LabelMap sibling_labels;
constexpr std::size_t kSiblingSets = 8;
thread_local std::array<LabelMap, kSiblingSets> sibling_sets;
thread_local std::size_t sibling_sets_next = 0;

void RememberSibling(const LabelMap& labels) {
  sibling_labels = labels;  // shares the array, no copy
  if (labels.SharedSize() == 0) return;
  for (LabelMap& m : sibling_sets) {
    if (m.SameSharedSet(labels)) return;
  }
  sibling_sets[sibling_sets_next] = labels;
  sibling_sets_next = (sibling_sets_next + 1) % kSiblingSets;
}

Status CollectLabelPairs(od::value& v) {
  od::object o;
  bool present = false;
  GG_RETURN_IF_ERROR(AsObject(v, "metadata.labels", &o, &present));
  if (!present) return OkStatus();
  for (auto f : o) {
    std::string_view key;
    if (auto ec = f.unescaped_key().get(key)) return JsonError("metadata.labels", ec);
    od::value val;
    if (auto ec = f.value().get(val)) return JsonError("metadata.labels", ec);
    if (IsNull(val)) continue;
    std::string_view s;
    if (val.get_string().get(s)) return TypeError("metadata.labels." + std::string(key), "string");
    label_pairs.emplace_back(key, s);
  }
  return OkStatus();
}

// Builds m->labels from label_pairs[base..], sharing the cached version's pairs.
Status BuildLabels(ObjectMeta* m, std::size_t base) {
  const LabelMap* prev = PreviousLabels::Find(m->namespace_, m->name);
  if (!prev && sibling_scopes > 0) prev = &sibling_labels;
  Status s;
  for (std::size_t i = base; i < label_pairs.size(); ++i) {
    const auto& [k, val] = label_pairs[i];
    if (!m->labels.AppendLike(prev, k, val)) {
      s = TypeError("metadata.labels." + std::string(k), "string without NUL");
      break;
    }
  }
  m->labels.FinishAppend(sibling_sets);  // all empty outside a SiblingLabels scope
  if (sibling_scopes > 0) RememberSibling(m->labels);
  return s;
}

Status ReadUid(od::value& v, Uid* out) {
  std::string s;
  GG_RETURN_IF_ERROR(ReadString(v, "metadata.uid", &s));
  *out = Uid(s);
  return OkStatus();
}

Status ReadCompact(od::value& v, std::string_view field, CompactString* out) {
  std::string s;
  GG_RETURN_IF_ERROR(ReadString(v, field, &s));
  *out = CompactString(s);
  return OkStatus();
}

Status ReadOptionalTime(od::value& v, std::string_view field, OptionalTime* out) {
  std::optional<WallTime> t = *out;
  GG_RETURN_IF_ERROR(ReadTime(v, field, &t));
  *out = t;
  return OkStatus();
}

Status DecodeMetaFields(od::value& v, ObjectMeta* m, bool (*keep_annotation)(std::string_view),
                        bool* has_labels) {
  return ForObjectFields(v, "metadata", [&](od::raw_json_string k, od::value& val) -> Status {
    if (k == "name") return ReadString(val, "metadata.name", &m->name);
    if (k == "namespace") return ReadCompact(val, "metadata.namespace", &m->namespace_);
    if (k == "uid") return ReadUid(val, &m->uid);
    if (k == "resourceVersion") {
      return ReadString(val, "metadata.resourceVersion", &m->resource_version);
    }
    if (k == "generation") return ReadInt(val, "metadata.generation", &m->generation);
    if (k == "labels") {
      *has_labels = true;
      return CollectLabelPairs(val);
    }
    if (k == "annotations") {
      return ReadStringMap(val, "metadata.annotations", &m->annotations, keep_annotation);
    }
    if (k == "creationTimestamp") {
      return ReadOptionalTime(val, "metadata.creationTimestamp", &m->creation_timestamp);
    }
    if (k == "deletionTimestamp") {
      return ReadOptionalTime(val, "metadata.deletionTimestamp", &m->deletion_timestamp);
    }
    if (k == "ownerReferences") {
      return ForArrayObjects(val, "metadata.ownerReferences", [&](od::object& o, std::size_t) {
        OwnerReference r;
        GG_RETURN_IF_ERROR(
            ForFields(o, "ownerReference", [&](od::raw_json_string rk, od::value& rv) -> Status {
              if (rk == "apiVersion") return ReadString(rv, "apiVersion", &r.api_version);
              if (rk == "kind") return ReadString(rv, "kind", &r.kind);
              if (rk == "name") return ReadString(rv, "name", &r.name);
              if (rk == "uid") return ReadString(rv, "uid", &r.uid);
              if (rk == "controller") return ReadBool(rv, "controller", &r.controller);
              return OkStatus();
            }));
        m->owner_references.push_back(std::move(r));
        return OkStatus();
      });
    }
    return OkStatus();
  });
}

}  // namespace

SiblingLabels::SiblingLabels() { ++sibling_scopes; }

SiblingLabels::~SiblingLabels() {
  if (--sibling_scopes > 0) return;
  sibling_labels.clear();
  for (LabelMap& m : sibling_sets) m.clear();
}

Status DecodeObjectMeta(od::value v, ObjectMeta* m, bool (*keep_annotation)(std::string_view)) {
  const std::size_t base = label_pairs.size();
  bool has_labels = false;
  Status s = DecodeMetaFields(v, m, keep_annotation, &has_labels);
  if (s.ok() && has_labels) s = BuildLabels(m, base);
  label_pairs.resize(base);
  return s;
}

Status DecodeLabelSelector(od::value v, std::string_view field, LabelSelector* out) {
  return ForObjectFields(v, field, [&](od::raw_json_string k, od::value& val) -> Status {
    if (k == "matchLabels") {
      LabelMap m;
      GG_RETURN_IF_ERROR(ReadStringMap(val, std::string(field) + ".matchLabels", &m));
      m.ForEach([&](std::string_view a, std::string_view b) { out->match_labels.emplace(a, b); });
      return OkStatus();
    }
    if (k == "matchExpressions") {
      return ForArrayObjects(
          val, std::string(field) + ".matchExpressions", [&](od::object& o, std::size_t) {
            LabelSelectorRequirement r;
            GG_RETURN_IF_ERROR(ForFields(o, "matchExpression",
                                         [&](od::raw_json_string ek, od::value& ev) -> Status {
                                           if (ek == "key") return ReadString(ev, "key", &r.key);
                                           if (ek == "operator")
                                             return ReadString(ev, "operator", &r.op);
                                           if (ek == "values") {
                                             return ReadStringList(ev, "values", &r.values);
                                           }
                                           return OkStatus();
                                         }));
            out->match_expressions.push_back(std::move(r));
            return OkStatus();
          });
    }
    return OkStatus();
  });
}

Status DecodeStatusObject(od::object& obj, int http_status) {
  std::string status, message, reason;
  std::int64_t code = 0;
  std::int64_t retry_after = 0;
  Status parsed = ForFields(obj, "Status", [&](od::raw_json_string k, od::value& v) -> Status {
    if (k == "status") return ReadString(v, "status", &status);
    if (k == "message") return ReadString(v, "message", &message);
    if (k == "reason") return ReadString(v, "reason", &reason);
    if (k == "code") return ReadInt(v, "code", &code);
    if (k == "details") {
      return ForObjectFields(v, "details", [&](od::raw_json_string dk, od::value& dv) -> Status {
        if (dk == "retryAfterSeconds") return ReadInt(dv, "retryAfterSeconds", &retry_after);
        return OkStatus();
      });
    }
    return OkStatus();
  });
  if (!parsed.ok()) return parsed;
  int http = code > 0 ? static_cast<int>(code) : http_status;
  if (status == "Success" || (http >= 200 && http < 300)) return OkStatus();
  if (http == 0) http = 500;
  if (message.empty()) message = reason.empty() ? "HTTP " + std::to_string(http) : reason;
  Status s(CodeForHttpStatus(http, reason), message);
  s.set_http_status(http).set_reason(reason);
  if (retry_after > 0) s.set_retry_after_seconds(static_cast<int>(retry_after));
  return s;
}

StatusOr<WatchEventType> ParseWatchEventTypeName(std::string_view t) {
  if (t == "ADDED") return WatchEventType::kAdded;
  if (t == "MODIFIED") return WatchEventType::kModified;
  if (t == "DELETED") return WatchEventType::kDeleted;
  if (t == "BOOKMARK") return WatchEventType::kBookmark;
  if (t == "ERROR") return WatchEventType::kError;
  return InvalidArgumentError("watch event: unknown type \"" + std::string(t) + "\"");
}

}  // namespace json

namespace {
thread_local PreviousLabels* current_previous_labels = nullptr;
}  // namespace

PreviousLabels::PreviousLabels(Lookup lookup, const void* ctx)
    : lookup_(lookup), ctx_(ctx), outer_(current_previous_labels) {
  current_previous_labels = this;
}

PreviousLabels::~PreviousLabels() { current_previous_labels = outer_; }

const LabelMap* PreviousLabels::Find(std::string_view ns, std::string_view name) {
  const PreviousLabels* p = current_previous_labels;
  return p && !name.empty() ? p->lookup_(p->ctx_, ns, name) : nullptr;
}

namespace {
Status DecodeResourceVersionOnly(simdjson::ondemand::object& obj, std::string* rv) {
  simdjson::ondemand::object meta;
  if (obj.find_field_unordered("metadata").get_object().get(meta)) {
    return json::TypeError("metadata", "object");
  }
  std::string_view v;
  if (meta.find_field_unordered("resourceVersion").get_string().get(v)) {
    return json::TypeError("metadata.resourceVersion", "string");
  }
  *rv = std::string(v);
  return OkStatus();
}
}  // namespace

StatusOr<std::string> ParseResourceVersion(std::string& body) {
  json::EnsurePadding(body);
  return json::ParseObjectPadded<std::string>(body, &DecodeResourceVersionOnly);
}

Status StatusFromBody(std::string_view body, int http_status) {
  auto fallback = [&] {
    std::string snippet(body.substr(0, 200));
    Status s(CodeForHttpStatus(http_status, ""),
             "HTTP " + std::to_string(http_status) + (snippet.empty() ? "" : ": " + snippet));
    s.set_http_status(http_status);
    return s;
  };
  if (body.empty()) return fallback();
  auto p = json::PaddedCopy(body);
  json::od::document doc;
  if (json::ThreadParser().iterate(p).get(doc)) return fallback();
  json::od::object obj;
  if (doc.get_object().get(obj)) return fallback();
  Status s = json::DecodeStatusObject(obj, http_status);
  if (s.ok() && !(http_status >= 200 && http_status < 300)) return fallback();
  if (s.code() == StatusCode::kInvalidArgument && s.http_status() == 0) return fallback();
  return s;
}

}  // namespace gg::k8s
