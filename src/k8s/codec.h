// Decoding API-server JSON into projections with simdjson on-demand (never nlohmann here):
// unknown fields ignored, wrong types → InvalidArgument naming the field, never a crash.
// Instantiated for every projection in k8s/objects.h; other types (our CRDs in api/) plug in
// through k8s/json_decode.h.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "k8s/objects.h"

namespace gg::k8s {

// T is one of: Node, Pod, PodDisruptionBudget, DaemonSet, ReplicaSet, Namespace, Lease, Event,
// ResourceSlice, ResourceClaim, PartialObject.
//
// The string_view overloads copy the input into a padded thread-local buffer; the std::string&
// overloads parse in place (growing capacity by kBodyPadding if needed), which is the fast path
// for transport bodies.
template <typename T>
StatusOr<T> ParseObject(std::string_view json);
template <typename T>
StatusOr<ObjectList<T>> ParseList(std::string_view json);
template <typename T>
StatusOr<ObjectList<T>> ParseList(std::string& json);
// Like ParseList but hands each item to `sink` instead of collecting (no vector of 500 items).
template <typename T>
StatusOr<ObjectList<T>> ParseListInto(std::string& json, const std::function<void(T&&)>& sink);
// One watch line. `padded` = the caller guarantees kBodyPadding readable bytes after it
// (RestClient::Watch lines do), which skips a copy.
template <typename T>
StatusOr<WatchEvent<T>> ParseWatchEvent(std::string_view line, bool padded = false);

// metadata.resourceVersion of one object (the answer to a write), nothing else decoded: a
// Node's ~50 labels decoded and interned only to be dropped cost more than the write's own
// bookkeeping. Parses in place (capacity grows by kBodyPadding if needed).
StatusOr<std::string> ParseResourceVersion(std::string& json);

// While one is installed on a thread, DecodeObjectMeta asks it for the labels of the cached
// version of the object it decodes (by namespace and name, read before the labels) and shares
// the pairs that did not change, instead of interning every pair again. The informer installs
// one around each watch event and LIST page: most events change few of a Node's ~50 labels.
class PreviousLabels {
 public:
  using Lookup = const LabelMap* (*)(const void* ctx, std::string_view ns, std::string_view name);
  PreviousLabels(Lookup lookup, const void* ctx);
  ~PreviousLabels();
  PreviousLabels(const PreviousLabels&) = delete;
  PreviousLabels& operator=(const PreviousLabels&) = delete;
  // The installed lookup's answer; null when none is installed or the object is not cached.
  static const LabelMap* Find(std::string_view ns, std::string_view name);

 private:
  Lookup lookup_;
  const void* ctx_;
  PreviousLabels* outer_;
};

// A Kubernetes Status object (error body) → gg::Status with code, http_status, reason and
// retry_after_seconds (details.retryAfterSeconds). `http_status` is used when the body lacks
// "code"; an unparsable body gives a Status built from http_status alone.
Status StatusFromBody(std::string_view body, int http_status);

namespace json {
// A LIST page (500 Nodes: ~7 MB) grows the thread's parser to several times the page, and a
// parser never shrinks: at 10k nodes that was ~38 MB held for good by the informer threads.
// Frees the parser's buffers when they are past kKeepParserCapacity (the next parse
// allocates again). Call after a whole LIST, not per page. Declared here, not in
// k8s/json_decode.h, so callers outside src/k8s need not include simdjson's on-demand types,
// whose kernel depends on the flags src/k8s is built with.
void ReleaseLargeThreadParser();
}  // namespace json

}  // namespace gg::k8s
