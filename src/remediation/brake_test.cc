// Brake arithmetic: percent caps (rounding up), hourly rates, concurrent drains, release.
#include "remediation/brake.h"

#include <gtest/gtest.h>

namespace gg::remediation {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

const WallTime kNow = WallTime(seconds(1'800'000'000));

api::SafetySpec Safety(api::IntOrPercent max_unhealthy,
                       std::optional<int64_t> per_hour = std::nullopt,
                       std::optional<int64_t> drains = std::nullopt) {
  api::SafetySpec s;
  s.max_unhealthy = max_unhealthy;
  s.max_nodes_per_hour = per_hour;
  s.max_concurrent_drains = drains;
  return s;
}

TEST(Brake, ThirtyPercentFailingWithTenPercentBudgetGetsExactlyTheBudget) {
  struct Case {
    int64_t nodes;
    int64_t failing;
    int64_t want;
  } cases[] = {{100, 30, 10}, {25, 8, 3}, {10, 3, 1}, {5, 2, 1}, {1000, 300, 100}};
  for (const auto& c : cases) {
    BrakeInput in;
    in.matched_nodes = c.nodes;
    BrakeLedger ledger(Safety({10, true}), in);
    int64_t started = 0;
    for (int64_t i = 0; i < c.failing; ++i) {
      BrakeDecision d = ledger.Check(kNow);
      if (d.allow_new_node) {
        ledger.RecordNodeStart(kNow);
        ++started;
      } else {
        EXPECT_TRUE(d.engaged);
        EXPECT_NE(d.reason.find("maxUnhealthy 10%"), std::string::npos) << d.reason;
      }
    }
    EXPECT_EQ(started, c.want) << c.nodes << " nodes";
  }
}

TEST(Brake, ZeroBudgetAllowsNothingAndAbsoluteCapIsExact) {
  BrakeInput in;
  in.matched_nodes = 50;
  EXPECT_FALSE(CheckBrake(Safety({0, true}), in, kNow).allow_new_node);
  in.remediating_nodes = 2;
  EXPECT_TRUE(CheckBrake(Safety({3, false}), in, kNow).allow_new_node);
  in.remediating_nodes = 3;
  EXPECT_FALSE(CheckBrake(Safety({3, false}), in, kNow).allow_new_node);
}

TEST(Brake, NodesPerHourSlidesAndTellsWhenToRetry) {
  BrakeInput in;
  in.matched_nodes = 100;
  in.node_starts = {kNow - minutes(70), kNow - minutes(50), kNow - minutes(10)};
  auto s = Safety({100, true}, 2);
  BrakeDecision d = CheckBrake(s, in, kNow);
  EXPECT_FALSE(d.allow_new_node);
  ASSERT_TRUE(d.retry_at.has_value());
  EXPECT_EQ(*d.retry_at, kNow + minutes(10));  // the start 50 min ago leaves the hour
  // Released by itself once back under budget.
  BrakeDecision later = CheckBrake(s, in, kNow + minutes(10) + seconds(1));
  EXPECT_TRUE(later.allow_new_node);
  EXPECT_FALSE(later.engaged);
}

TEST(Brake, ConcurrentDrainsAndDevices) {
  BrakeInput in;
  in.matched_nodes = 10;
  in.active_drains = 2;
  api::SafetySpec s = Safety({100, true}, std::nullopt, 2);
  s.max_devices_per_hour = 1;
  in.device_starts = {kNow - minutes(5)};
  BrakeDecision d = CheckBrake(s, in, kNow);
  EXPECT_TRUE(d.allow_new_node);
  EXPECT_FALSE(d.allow_new_drain);
  EXPECT_FALSE(d.allow_new_device);
  EXPECT_TRUE(d.engaged);
  EXPECT_NE(d.reason.find("maxConcurrentDrains 2"), std::string::npos);
  BrakeLedger ledger(s, in);
  ledger.RecordDrainEnd();
  EXPECT_TRUE(ledger.Check(kNow).allow_new_drain);
}

}  // namespace
}  // namespace gg::remediation
