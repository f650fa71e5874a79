// Unit tests for the rate limiters (backoff math, token bucket) and RequeueFor.
#include "runtime/rate_limiter.h"

#include <gtest/gtest.h>

#include "runtime/requeue.h"

namespace gg::runtime {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(ItemExponential, DoublesPerFailureAndCaps) {
  ItemExponentialFailureRateLimiter l(milliseconds(5), seconds(1000));
  EXPECT_EQ(l.When("a"), milliseconds(5));
  EXPECT_EQ(l.When("a"), milliseconds(10));
  EXPECT_EQ(l.When("a"), milliseconds(20));
  EXPECT_EQ(l.NumRequeues("a"), 3);
  EXPECT_EQ(l.When("b"), milliseconds(5));  // per item
  for (int n = 3; n < 18; ++n) EXPECT_EQ(l.When("a"), milliseconds(5) * (1 << n)) << n;
  // 5 ms * 2^18 = 1310.72 s > 1000 s.
  EXPECT_EQ(l.When("a"), seconds(1000));
  for (int i = 0; i < 100; ++i) EXPECT_EQ(l.When("a"), seconds(1000));  // no overflow
  EXPECT_EQ(l.NumRequeues("a"), 119);
  l.Forget("a");
  EXPECT_EQ(l.NumRequeues("a"), 0);
  EXPECT_EQ(l.When("a"), milliseconds(5));
}

TEST(Bucket, BurstThenQps) {
  FakeClock clock;
  BucketRateLimiter l(clock, 10, 100);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(l.When("x"), Duration(0)) << i;
  // The 101st waits one token (100 ms); the 102nd two, each reservation adds 1/qps.
  EXPECT_EQ(l.When("x"), milliseconds(100));
  EXPECT_EQ(l.When("x"), milliseconds(200));
  clock.Advance(milliseconds(200));  // refills exactly the two borrowed tokens
  EXPECT_EQ(l.When("x"), milliseconds(100));
  clock.Advance(seconds(1000));  // refill caps at burst
  for (int i = 0; i < 100; ++i) EXPECT_EQ(l.When("y"), Duration(0));
  EXPECT_GT(l.When("y"), Duration(0));
  EXPECT_EQ(l.NumRequeues("x"), 0);
}

TEST(MaxOf, DefaultControllerLimiter) {
  FakeClock clock;
  auto l = DefaultControllerRateLimiter(clock);
  // First failures: the per-item backoff dominates while the bucket has tokens.
  EXPECT_EQ(l->When("a"), milliseconds(5));
  EXPECT_EQ(l->When("a"), milliseconds(10));
  EXPECT_EQ(l->NumRequeues("a"), 2);
  // Drain the bucket with other keys: then the bucket's wait dominates a fresh key's 5 ms.
  for (int i = 0; i < 98; ++i) (void)l->When("k" + std::to_string(i));
  EXPECT_EQ(l->When("fresh"), milliseconds(100));
  l->Forget("a");
  EXPECT_EQ(l->NumRequeues("a"), 0);
}

TEST(Requeue, StatusCodes) {
  EXPECT_EQ(RequeueFor(OkStatus()).action, RequeueAction::kForget);
  EXPECT_FALSE(RequeueFor(OkStatus()).is_error);
  EXPECT_EQ(RequeueFor(NotFoundError("node gone")).action, RequeueAction::kForget);
  EXPECT_EQ(RequeueFor(NotFoundError("node gone")).result, kResultSuccess);
  for (const Status& s :
       {UnavailableError("x"), AbortedError("conflict"), ResourceExhaustedError("x"),
        DeadlineExceededError("x"), InternalError("x"), UnknownError("x")}) {
    Requeue r = RequeueFor(s);
    EXPECT_EQ(r.action, RequeueAction::kRequeueRateLimited) << s;
    EXPECT_TRUE(r.is_error);
    EXPECT_EQ(r.result, kResultError);
  }
  for (const Status& s :
       {InvalidArgumentError("x"), FailedPreconditionError("x"), PermissionDeniedError("x")}) {
    EXPECT_EQ(RequeueFor(s).action, RequeueAction::kTerminal) << s;
    EXPECT_TRUE(IsTerminal(s));
  }
  Status throttled = ResourceExhaustedError("too many requests");
  throttled.set_retry_after_seconds(7);
  Requeue r = RequeueFor(throttled);
  EXPECT_EQ(r.action, RequeueAction::kRequeueAfter);
  EXPECT_EQ(r.after, seconds(7));
  EXPECT_TRUE(r.is_error);
  EXPECT_TRUE(IgnoreNotFound(NotFoundError("x")).ok());
  EXPECT_FALSE(IgnoreNotFound(InternalError("x")).ok());
}

TEST(Requeue, Results) {
  Requeue r = RequeueFor(StatusOr<Result>(Result{}));
  EXPECT_EQ(r.action, RequeueAction::kForget);
  EXPECT_EQ(r.result, kResultSuccess);
  r = RequeueFor(StatusOr<Result>(Result{seconds(30)}));
  EXPECT_EQ(r.action, RequeueAction::kRequeueAfter);
  EXPECT_EQ(r.after, seconds(30));
  EXPECT_FALSE(r.is_error);
  EXPECT_EQ(r.result, kResultRequeueAfter);
  r = RequeueFor(StatusOr<Result>(Result{Duration(0), true}));
  EXPECT_EQ(r.action, RequeueAction::kRequeueRateLimited);
  EXPECT_EQ(r.result, kResultRequeue);
  r = RequeueFor(StatusOr<Result>(AbortedError("conflict")));
  EXPECT_EQ(r.action, RequeueAction::kRequeueRateLimited);
  EXPECT_TRUE(r.is_error);
}

}  // namespace
}  // namespace gg::runtime
