// The one place that maps a reconcile outcome (Status code or Result) to what happens to
// the key next: forget it, requeue it rate-limited, requeue it after a delay, or give up
// (terminal: the caller records an Event and a metric, the key is not retried until the
// world changes and an informer event adds it again).
#pragma once

#include <string_view>

#include "common/clock.h"
#include "common/status.h"

namespace gg::runtime {

// What a successful reconcile asks for. Zero/false: done until the next event.
struct Result {
  Duration requeue_after{0};  // > 0: look again after this long (periodic re-check)
  bool requeue = false;       // true: requeue rate-limited (with backoff) without an error
};

enum class RequeueAction {
  kForget,              // success (or the root object is gone): Forget(key)
  kRequeueRateLimited,  // transient error or Result.requeue: AddRateLimited(key)
  kRequeueAfter,        // AddAfter(key, after); also Forget(key) first unless is_error
  kTerminal,            // permanent error: Forget(key), no requeue, record an Event
};

// The controller_runtime_reconcile_total result label values.
inline constexpr std::string_view kResultSuccess = "success";
inline constexpr std::string_view kResultError = "error";
inline constexpr std::string_view kResultRequeue = "requeue";
inline constexpr std::string_view kResultRequeueAfter = "requeue_after";

struct Requeue {
  RequeueAction action = RequeueAction::kForget;
  Duration after{0};                         // for kRequeueAfter
  bool is_error = false;                     // counts as a reconcile error
  std::string_view result = kResultSuccess;  // metric label
};

// Status → decision:
//   OK                                                  → kForget (success)
//   NotFound (the root object is gone)                  → kForget (success)
//   Unavailable, Aborted, ResourceExhausted, DeadlineExceeded, Internal, Unknown,
//   Cancelled, AlreadyExists, Unauthenticated, DataLoss → kRequeueRateLimited (error), or
//       kRequeueAfter(retry_after) when the status carries Retry-After seconds (429/503)
//   InvalidArgument, FailedPrecondition, PermissionDenied, OutOfRange, Unimplemented
//                                                       → kTerminal (error)
Requeue RequeueFor(const Status& status);
// As above for errors; for a value: requeue_after > 0 → kRequeueAfter (result
// "requeue_after"), requeue → kRequeueRateLimited (result "requeue"), else kForget.
Requeue RequeueFor(const StatusOr<Result>& result);

bool IsTerminal(const Status& status);
// NotFound → OK (for reconcilers that treat a vanished object as done).
inline Status IgnoreNotFound(const Status& s) { return IsNotFound(s) ? OkStatus() : s; }

}  // namespace gg::runtime
