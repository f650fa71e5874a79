// HTTP status → canonical Status code mapping (one place), for the RestClient and codecs.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace gg::k8s {

// 400 InvalidArgument, 401 Unauthenticated, 403 PermissionDenied, 404 NotFound,
// 405/415 Unimplemented, 409 Aborted (AlreadyExists when reason is AlreadyExists or
// `is_create`), 410 OutOfRange, 422 InvalidArgument, 429 ResourceExhausted,
// 500/503/502 Unavailable, 504 DeadlineExceeded, other 5xx Unavailable, other 4xx
// FailedPrecondition.
StatusCode CodeForHttpStatus(int http_status, std::string_view reason, bool is_create = false);

// Builds the error Status for a response (parses the body's Status object, reads the
// Retry-After header when present).
Status ErrorFromResponse(int http_status, std::string_view body, std::string_view retry_after,
                         bool is_create = false);

// True for 410 errors (reason Expired or Gone): the informer relists.
inline bool IsExpired(const Status& s) {
  return s.code() == StatusCode::kOutOfRange &&
         (s.http_status() == 410 || s.reason() == "Expired" || s.reason() == "Gone");
}
inline bool IsConflict(const Status& s) {
  return s.code() == StatusCode::kAborted && s.reason() == "Conflict";
}
inline bool IsTooManyRequests(const Status& s) {
  return s.code() == StatusCode::kResourceExhausted;
}

}  // namespace gg::k8s
