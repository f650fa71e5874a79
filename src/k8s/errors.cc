// HTTP status → Status code mapping.
#include "k8s/errors.h"

#include <charconv>

#include "k8s/codec.h"

namespace gg::k8s {

StatusCode CodeForHttpStatus(int http_status, std::string_view reason, bool is_create) {
  switch (http_status) {
    case 400:
      return StatusCode::kInvalidArgument;
    case 401:
      return StatusCode::kUnauthenticated;
    case 403:
      return StatusCode::kPermissionDenied;
    case 404:
      return StatusCode::kNotFound;
    case 405:
    case 415:
      return StatusCode::kUnimplemented;
    case 409:
      if (reason == "AlreadyExists" || (is_create && reason != "Conflict")) {
        return StatusCode::kAlreadyExists;
      }
      return StatusCode::kAborted;
    case 410:
      return StatusCode::kOutOfRange;
    case 422:
      return StatusCode::kInvalidArgument;
    case 429:
      return StatusCode::kResourceExhausted;
    case 504:
      return StatusCode::kDeadlineExceeded;
    default:
      break;
  }
  if (http_status >= 500) return StatusCode::kUnavailable;
  if (http_status >= 400) return StatusCode::kFailedPrecondition;
  return StatusCode::kUnknown;
}

Status ErrorFromResponse(int http_status, std::string_view body, std::string_view retry_after,
                         bool is_create) {
  Status s = StatusFromBody(body, http_status);
  if (is_create && s.http_status() == 409 && s.code() == StatusCode::kAborted &&
      s.reason() != "Conflict") {
    Status a(StatusCode::kAlreadyExists, s.message());
    a.set_http_status(409).set_reason(s.reason()).set_retry_after_seconds(s.retry_after_seconds());
    s = a;
  }
  if (!retry_after.empty()) {
    int secs = 0;
    auto [p, ec] =
        std::from_chars(retry_after.data(), retry_after.data() + retry_after.size(), secs);
    if (ec == std::errc() && secs > 0) s.set_retry_after_seconds(secs);
  }
  return s;
}

}  // namespace gg::k8s
