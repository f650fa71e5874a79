// RequeueFor: Status codes and Results → what happens to the key next.
#include "runtime/requeue.h"

#include <chrono>

namespace gg::runtime {

bool IsTerminal(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kPermissionDenied:
    case StatusCode::kOutOfRange:
    case StatusCode::kUnimplemented:
      return true;
    default:
      return false;
  }
}

Requeue RequeueFor(const Status& status) {
  Requeue r;
  if (status.ok() || IsNotFound(status)) return r;  // done; NotFound: the root object is gone
  r.is_error = true;
  r.result = kResultError;
  if (IsTerminal(status)) {
    r.action = RequeueAction::kTerminal;
    return r;
  }
  // Everything else is worth retrying: transient codes, and Internal/Unknown because a bug
  // in one reconcile should not stop the key forever (the backoff keeps it cheap).
  if (status.retry_after_seconds() > 0) {
    r.action = RequeueAction::kRequeueAfter;
    r.after = std::chrono::seconds(status.retry_after_seconds());
    return r;
  }
  r.action = RequeueAction::kRequeueRateLimited;
  return r;
}

Requeue RequeueFor(const StatusOr<Result>& result) {
  if (!result.ok()) return RequeueFor(result.status());
  Requeue r;
  if (result->requeue_after > Duration(0)) {
    r.action = RequeueAction::kRequeueAfter;
    r.after = result->requeue_after;
    r.result = kResultRequeueAfter;
  } else if (result->requeue) {
    r.action = RequeueAction::kRequeueRateLimited;
    r.result = kResultRequeue;
  }
  return r;
}

}  // namespace gg::runtime
