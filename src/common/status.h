// Status / StatusOr<T>: the project's error model (canonical codes as in Abseil/gRPC).
// Codes decide retry behavior (see RequeueFor in runtime/): Unavailable/Aborted/
// ResourceExhausted/DeadlineExceeded are transient; InvalidArgument is terminal.
#pragma once

#include <cassert>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace gg {

enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,  // e.g. 409 Conflict on a stale resourceVersion
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;

  // Extra detail for errors that came from an HTTP peer (the API server).
  int http_status() const { return http_status_; }
  Status& set_http_status(int s) {
    http_status_ = s;
    return *this;
  }
  // Seconds the server asked us to wait (Retry-After), 0 when absent.
  int retry_after_seconds() const { return retry_after_s_; }
  Status& set_retry_after_seconds(int s) {
    retry_after_s_ = s;
    return *this;
  }
  // Kubernetes Status.reason (e.g. "Conflict", "Expired", "TooManyRequests").
  const std::string& reason() const { return reason_; }
  Status& set_reason(std::string r) {
    reason_ = std::move(r);
    return *this;
  }

  // Adds context in front of the message: "listing nodes: <message>".
  Status WithContext(std::string_view context) const;

  void IgnoreError() const {}

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  int http_status_ = 0;
  int retry_after_s_ = 0;
  std::string reason_;
};

std::ostream& operator<<(std::ostream& os, const Status& s);

inline Status OkStatus() { return Status(); }
Status CancelledError(std::string msg);
Status UnknownError(std::string msg);
Status InvalidArgumentError(std::string msg);
Status DeadlineExceededError(std::string msg);
Status NotFoundError(std::string msg);
Status AlreadyExistsError(std::string msg);
Status PermissionDeniedError(std::string msg);
Status ResourceExhaustedError(std::string msg);
Status FailedPreconditionError(std::string msg);
Status AbortedError(std::string msg);
Status OutOfRangeError(std::string msg);
Status UnimplementedError(std::string msg);
Status InternalError(std::string msg);
Status UnavailableError(std::string msg);
Status DataLossError(std::string msg);
Status UnauthenticatedError(std::string msg);

inline bool IsNotFound(const Status& s) { return s.code() == StatusCode::kNotFound; }
inline bool IsAborted(const Status& s) { return s.code() == StatusCode::kAborted; }
inline bool IsUnavailable(const Status& s) { return s.code() == StatusCode::kUnavailable; }
inline bool IsInvalidArgument(const Status& s) { return s.code() == StatusCode::kInvalidArgument; }
inline bool IsAlreadyExists(const Status& s) { return s.code() == StatusCode::kAlreadyExists; }

// True for codes a caller may retry after a backoff.
bool IsTransient(const Status& s);

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const Status& s) : status_(s) {  // NOLINT(google-explicit-constructor)
    if (status_.ok()) status_ = InternalError("StatusOr constructed from OK status without value");
  }
  StatusOr(Status&& s) : status_(std::move(s)) {  // NOLINT(google-explicit-constructor)
    if (status_.ok()) status_ = InternalError("StatusOr constructed from OK status without value");
  }
  StatusOr(const T& v) : value_(v) {}        // NOLINT(google-explicit-constructor)
  StatusOr(T&& v) : value_(std::move(v)) {}  // NOLINT(google-explicit-constructor)
  template <typename U,
            typename = std::enable_if_t<
                std::is_constructible_v<T, U&&> && !std::is_same_v<std::decay_t<U>, Status> &&
                !std::is_same_v<std::decay_t<U>, T> && !std::is_same_v<std::decay_t<U>, StatusOr>>>
  StatusOr(U&& v) : value_(T(std::forward<U>(v))) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T& value() & {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  T&& operator*() && { return std::move(*value_); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }
  T value_or(T fallback) const { return ok() ? *value_ : std::move(fallback); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace gg

#define GG_CONCAT_INNER_(a, b) a##b
#define GG_CONCAT_(a, b) GG_CONCAT_INNER_(a, b)

// Returns the Status from the enclosing function when `expr` is not OK.
#define GG_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::gg::Status gg_status_ = (expr);        \
    if (!gg_status_.ok()) return gg_status_; \
  } while (0)

// `GG_ASSIGN_OR_RETURN(auto x, Foo());` — assigns the value or returns the error.
#define GG_ASSIGN_OR_RETURN(lhs, expr) \
  GG_ASSIGN_OR_RETURN_IMPL_(GG_CONCAT_(gg_statusor_, __LINE__), lhs, expr)
#define GG_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()
