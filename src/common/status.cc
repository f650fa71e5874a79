// Status implementation: names, formatting and the canonical error constructors.
#include "common/status.h"

namespace gg {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kCancelled:
      return "CANCELLED";
    case StatusCode::kUnknown:
      return "UNKNOWN";
    case StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case StatusCode::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case StatusCode::kNotFound:
      return "NOT_FOUND";
    case StatusCode::kAlreadyExists:
      return "ALREADY_EXISTS";
    case StatusCode::kPermissionDenied:
      return "PERMISSION_DENIED";
    case StatusCode::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    case StatusCode::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case StatusCode::kAborted:
      return "ABORTED";
    case StatusCode::kOutOfRange:
      return "OUT_OF_RANGE";
    case StatusCode::kUnimplemented:
      return "UNIMPLEMENTED";
    case StatusCode::kInternal:
      return "INTERNAL";
    case StatusCode::kUnavailable:
      return "UNAVAILABLE";
    case StatusCode::kDataLoss:
      return "DATA_LOSS";
    case StatusCode::kUnauthenticated:
      return "UNAUTHENTICATED";
  }
  return "UNKNOWN";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(StatusCodeName(code_));
  out += ": ";
  out += message_;
  return out;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  Status s = *this;
  s.message_ = std::string(context) + ": " + message_;
  return s;
}

std::ostream& operator<<(std::ostream& os, const Status& s) { return os << s.ToString(); }

bool IsTransient(const Status& s) {
  switch (s.code()) {
    case StatusCode::kUnavailable:
    case StatusCode::kAborted:
    case StatusCode::kResourceExhausted:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kInternal:
    case StatusCode::kUnknown:
      return true;
    default:
      return false;
  }
}

#define GG_DEFINE_ERROR_(fn, code) \
  Status fn(std::string msg) { return Status(StatusCode::code, std::move(msg)); }
GG_DEFINE_ERROR_(CancelledError, kCancelled)
GG_DEFINE_ERROR_(UnknownError, kUnknown)
GG_DEFINE_ERROR_(InvalidArgumentError, kInvalidArgument)
GG_DEFINE_ERROR_(DeadlineExceededError, kDeadlineExceeded)
GG_DEFINE_ERROR_(NotFoundError, kNotFound)
GG_DEFINE_ERROR_(AlreadyExistsError, kAlreadyExists)
GG_DEFINE_ERROR_(PermissionDeniedError, kPermissionDenied)
GG_DEFINE_ERROR_(ResourceExhaustedError, kResourceExhausted)
GG_DEFINE_ERROR_(FailedPreconditionError, kFailedPrecondition)
GG_DEFINE_ERROR_(AbortedError, kAborted)
GG_DEFINE_ERROR_(OutOfRangeError, kOutOfRange)
GG_DEFINE_ERROR_(UnimplementedError, kUnimplemented)
GG_DEFINE_ERROR_(InternalError, kInternal)
GG_DEFINE_ERROR_(UnavailableError, kUnavailable)
GG_DEFINE_ERROR_(DataLossError, kDataLoss)
GG_DEFINE_ERROR_(UnauthenticatedError, kUnauthenticated)
#undef GG_DEFINE_ERROR_

}  // namespace gg
