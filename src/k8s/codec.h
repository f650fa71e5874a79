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

// A Kubernetes Status object (error body) → gg::Status with code, http_status, reason and
// retry_after_seconds (details.retryAfterSeconds). `http_status` is used when the body lacks
// "code"; an unparsable body gives a Status built from http_status alone.
Status StatusFromBody(std::string_view body, int http_status);

}  // namespace gg::k8s
