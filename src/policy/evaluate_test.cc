// Tables of cases for Evaluate/Resolve and the EvalMemory codec: windows, counts, `for`,
// hysteresis, Unknown paths, stale/future reports, application-Xid storms, precedence.
#include "policy/evaluate.h"

#include <gtest/gtest.h>

#include "common/time_util.h"

namespace gg::policy {
namespace {

using api::Action;
using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;

const WallTime kNow = WallTime(seconds(1'800'000'000));

api::GpuHealthPolicy DefaultPolicy(std::string name = "default") {
  api::GpuHealthPolicy p;
  p.name = std::move(name);
  p.spec = api::DefaultPolicySpec();
  return p;
}

api::GpuNodeHealthStatus Report(int gpus = 8) {
  api::GpuNodeHealthStatus r;
  r.node_name = "node-a";
  r.observed_at = kNow - seconds(30);
  r.heartbeat_time = kNow - seconds(30);
  r.expected_gpus = gpus;
  for (int i = 0; i < gpus; ++i) {
    api::GpuStatus g;
    g.index = i;
    g.uuid = "GPU-" + std::to_string(1000 + i);
    g.pci_bus_id = "00000000:" + std::to_string(10 + i) + ":00.0";
    g.temperature_c = 50;
    g.ecc_enabled = true;
    g.ecc_uncorrected_volatile = 0;
    g.nvlink_links_down = 0;
    r.gpus.push_back(g);
  }
  r.sources = {{"nvml", api::SourceState::kOk, ""}, {"kmsg", api::SourceState::kOk, ""}};
  return r;
}

api::XidEvent Xid(int code, int gpu, int64_t count, WallTime first, WallTime last,
                  std::string action = "") {
  api::XidEvent e;
  e.xid = code;
  e.gpu_uuid = "GPU-" + std::to_string(1000 + gpu);
  e.count = count;
  e.first_seen = first;
  e.last_seen = last;
  e.recommended_action = std::move(action);
  return e;
}

TEST(Evaluate, HealthyReportIsHealthyAndRecovered) {
  Verdict v = Evaluate(DefaultPolicy(), Report(), EvalMemory{}, kNow);
  EXPECT_EQ(v.state, HealthState::kHealthy);
  EXPECT_EQ(v.action, Action::kNone);
  EXPECT_EQ(v.reason, "GPUsHealthy");
  EXPECT_TRUE(v.recovered);
  EXPECT_FALSE(v.memory_changed);  // an always-healthy node needs no record write
  EXPECT_TRUE(v.evidence.empty());
  ASSERT_TRUE(v.next_evaluation.has_value());  // heartbeat budget deadline
  EXPECT_EQ(*v.next_evaluation, kNow - seconds(30) + minutes(15) + seconds(1));
}

TEST(Evaluate, Xid79IsNodeWideCordonUnderDefault) {
  auto r = Report();
  r.xids.push_back(Xid(79, 3, 1, kNow - minutes(1), kNow - minutes(1), "RESTART_BM"));
  Verdict v = Evaluate(DefaultPolicy(), r, EvalMemory{}, kNow);
  EXPECT_EQ(v.state, HealthState::kUnhealthy);
  EXPECT_EQ(v.action, Action::kCordon);
  ASSERT_EQ(v.evidence.size(), 1u);
  EXPECT_EQ(v.evidence[0].rule, "fatal-xid");
  EXPECT_EQ(v.evidence[0].gpu_index, 3);
  EXPECT_EQ(v.evidence[0].message,
            "GPU 3 (GPU-1003): Xid 79 (fallen off the bus, RESTART_BM) x1 in 24h");
  EXPECT_TRUE(v.node_wide);
  EXPECT_EQ(v.bad_gpus, std::vector<std::string>{"GPU-1003"});
  EXPECT_FALSE(v.recovered);
  EXPECT_TRUE(v.memory_changed);
  EXPECT_EQ(v.memory.state, HealthState::kUnhealthy);
}

TEST(Evaluate, ConfinedEccErrorIsDeviceLevel) {
  auto r = Report();
  r.gpus[5].ecc_uncorrected_volatile = 2;
  Verdict v = Evaluate(DefaultPolicy(), r, EvalMemory{}, kNow);
  EXPECT_EQ(v.state, HealthState::kUnhealthy);
  EXPECT_FALSE(v.node_wide);
  EXPECT_EQ(v.bad_gpus, std::vector<std::string>{"GPU-1005"});
  // More bad GPUs than maxBadGPUsForDeviceLevel (2) -> node-wide.
  r.gpus[1].ecc_uncorrected_volatile = 1;
  r.gpus[2].ecc_uncorrected_volatile = 1;
  v = Evaluate(DefaultPolicy(), r, EvalMemory{}, kNow);
  EXPECT_TRUE(v.node_wide);
  EXPECT_EQ(v.bad_gpus.size(), 3u);
}

TEST(Evaluate, ApplicationXidStormNeverActsUnderDefault) {
  auto r = Report();
  for (int code : api::kApplicationXids) {
    for (int gpu = 0; gpu < 8; ++gpu) {
      // Thousands of occurrences; some even mislabelled with a fatal catalog action.
      r.xids.push_back(Xid(code, gpu, 5000, kNow - hours(3), kNow - seconds(1),
                           gpu % 2 ? "RESET_GPU" : "RESTART_APP"));
    }
  }
  EvalMemory mem;
  for (int i = 0; i < 50; ++i) {
    r.heartbeat_time = kNow + minutes(i);
    Verdict v = Evaluate(DefaultPolicy(), r, mem, kNow + minutes(i));
    ASSERT_EQ(v.state, HealthState::kHealthy) << v.message;
    ASSERT_EQ(v.action, Action::kNone);
    mem = v.memory;
  }
}

struct WindowCase {
  const char* name;
  int64_t count;      // rule count
  Duration window;    // rule window
  int64_t xid_count;  // aggregate count
  Duration first_ago;
  Duration last_ago;
  bool fires;
};

TEST(Evaluate, XidCountWindowTable) {
  const WindowCase cases[] = {
      {"single in window", 1, minutes(10), 1, minutes(1), minutes(1), true},
      {"single outside window", 1, minutes(10), 1, minutes(11), minutes(11), false},
      {"three inside, need 3", 3, minutes(10), 3, minutes(9), minutes(1), true},
      {"two inside, need 3", 3, minutes(10), 2, minutes(9), minutes(1), false},
      // Straddles the window start: only the latest occurrence is known to be inside.
      {"straddle counts 1", 3, minutes(10), 50, minutes(30), minutes(1), false},
      {"straddle fires count 1", 1, minutes(10), 50, minutes(30), minutes(1), true},
      {"last exactly at cutoff", 1, minutes(10), 1, minutes(10), minutes(10), true},
  };
  for (const auto& c : cases) {
    auto p = DefaultPolicy();
    api::Rule rule;
    rule.name = "x";
    rule.xid = api::XidMatcher{{}, {94}, {}, false};
    rule.count = c.count;
    rule.window = c.window;
    rule.action = Action::kTaint;
    p.spec.rules = {rule};
    auto r = Report();
    r.xids.push_back(Xid(94, 2, c.xid_count, kNow - c.first_ago, kNow - c.last_ago));
    Verdict v = Evaluate(p, r, EvalMemory{}, kNow);
    EXPECT_EQ(v.state == HealthState::kUnhealthy, c.fires) << c.name << ": " << v.message;
  }
}

TEST(Evaluate, XidCountRuleLatchesWhileRecurring) {
  auto p = DefaultPolicy();
  api::Rule rule;
  rule.name = "repeat-94";
  rule.xid = api::XidMatcher{{}, {94}, {}, false};
  rule.count = 3;
  rule.window = minutes(10);
  rule.action = Action::kTaint;
  p.spec.rules = {rule};
  auto r = Report();
  r.xids.push_back(Xid(94, 2, 3, kNow - minutes(5), kNow - minutes(1)));
  Verdict v = Evaluate(p, r, EvalMemory{}, kNow);
  ASSERT_EQ(v.state, HealthState::kUnhealthy);
  ASSERT_EQ(v.memory.matches.size(), 1u);
  EXPECT_TRUE(v.memory.matches[0].latched);
  // 20 minutes later the storm continues: first_seen has left the window, so the aggregate
  // alone would only prove 1 in-window occurrence, but the latch keeps the rule fired.
  r.xids[0].count = 23;
  r.xids[0].last_seen = kNow + minutes(20);
  r.heartbeat_time = kNow + minutes(20);
  v = Evaluate(p, r, v.memory, kNow + minutes(20));
  EXPECT_EQ(v.state, HealthState::kUnhealthy);
  // The Xid stops; once its last occurrence leaves the window the rule clears.
  ASSERT_TRUE(v.next_evaluation.has_value());
  EXPECT_EQ(*v.next_evaluation, kNow + minutes(30) + seconds(1));
  r.heartbeat_time = kNow + minutes(31);
  v = Evaluate(p, r, v.memory, kNow + minutes(31));
  EXPECT_EQ(v.state, HealthState::kHealthy);
  EXPECT_TRUE(v.memory.matches.empty());
}

TEST(Evaluate, ForDurationPendsThenFires) {
  auto p = DefaultPolicy();
  api::Rule rule;
  rule.name = "hot";
  rule.thermal = api::ThermalMatcher{85, {"HwThermalSlowdown"}};
  rule.for_ = minutes(5);
  rule.action = Action::kTaint;
  p.spec.rules = {rule};
  auto r = Report();
  r.gpus[4].temperature_c = 91;

  Verdict v = Evaluate(p, r, EvalMemory{}, kNow);
  EXPECT_EQ(v.state, HealthState::kHealthy);
  ASSERT_EQ(v.pending.size(), 1u);
  EXPECT_EQ(v.pending[0].fires_at, kNow + minutes(5));
  EXPECT_EQ(*v.next_evaluation, kNow + minutes(5));
  EXPECT_TRUE(v.memory_changed);

  // Still hot at +4m: pending.
  r.heartbeat_time = kNow + minutes(4);
  v = Evaluate(p, r, v.memory, kNow + minutes(4));
  EXPECT_EQ(v.state, HealthState::kHealthy);
  // Cools at +4m30 -> timer reset.
  auto cool = r;
  cool.gpus[4].temperature_c = 70;
  Verdict reset = Evaluate(p, cool, v.memory, kNow + minutes(4) + seconds(30));
  EXPECT_TRUE(reset.memory.matches.empty());
  EXPECT_TRUE(reset.pending.empty());
  // Stays hot until +5m -> fires.
  r.heartbeat_time = kNow + minutes(5);
  v = Evaluate(p, r, v.memory, kNow + minutes(5));
  EXPECT_EQ(v.state, HealthState::kUnhealthy);
  EXPECT_EQ(v.action, Action::kTaint);
  EXPECT_EQ(v.evidence[0].message, "GPU 4 (GPU-1004): temperature 91C > 85C");
}

TEST(Evaluate, RecoveryHysteresis) {
  auto p = DefaultPolicy();
  auto bad = Report();
  bad.gpus[0].lost = true;
  Verdict v = Evaluate(p, bad, EvalMemory{}, kNow);
  ASSERT_EQ(v.state, HealthState::kUnhealthy);
  auto good = Report();
  good.heartbeat_time = kNow + minutes(1);
  v = Evaluate(p, good, v.memory, kNow + minutes(1));
  EXPECT_EQ(v.state, HealthState::kHealthy);
  EXPECT_FALSE(v.recovered);
  ASSERT_TRUE(v.healthy_since.has_value());
  EXPECT_EQ(*v.healthy_since, kNow + minutes(1));
  EXPECT_EQ(*v.next_evaluation, kNow + minutes(11));
  good.heartbeat_time = kNow + minutes(10);
  Verdict mid = Evaluate(p, good, v.memory, kNow + minutes(10));
  EXPECT_FALSE(mid.recovered);
  EXPECT_FALSE(mid.memory_changed);
  Verdict done = Evaluate(p, good, v.memory, kNow + minutes(11));
  EXPECT_TRUE(done.recovered);
  // Manual recovery: never recovered automatically.
  p.spec.recovery.automatic = false;
  EXPECT_FALSE(Evaluate(p, good, v.memory, kNow + hours(5)).recovered);
}

TEST(Evaluate, UnknownPaths) {
  auto p = DefaultPolicy();
  Verdict none = Evaluate(p, std::nullopt, EvalMemory{}, kNow);
  EXPECT_EQ(none.state, HealthState::kUnknown);
  EXPECT_EQ(none.reason, "NoReport");
  EXPECT_EQ(none.action, Action::kEvent);

  Verdict garbage = EvaluateReport(
      p,
      StatusOr<api::GpuNodeHealthStatus>(InvalidArgumentError("gpus[0].index: expected integer")),
      EvalMemory{}, kNow);
  EXPECT_EQ(garbage.state, HealthState::kUnknown);
  EXPECT_EQ(garbage.reason, "InvalidReport");
  EXPECT_NE(garbage.message.find("expected integer"), std::string::npos);
  Verdict missing =
      EvaluateReport(p, StatusOr<api::GpuNodeHealthStatus>(NotFoundError("x")), EvalMemory{}, kNow);
  EXPECT_EQ(missing.reason, "NoReport");

  // Stale-but-present facts are not acted on, even a lost GPU.
  auto stale = Report();
  stale.gpus[0].lost = true;
  stale.heartbeat_time = kNow - minutes(16);
  Verdict s = Evaluate(p, stale, EvalMemory{}, kNow);
  EXPECT_EQ(s.state, HealthState::kUnknown);
  EXPECT_EQ(s.reason, "StaleReport");
  EXPECT_TRUE(s.evidence.empty());

  auto dark = Report(0);
  dark.expected_gpus = 8;
  dark.sources = {{"nvml", api::SourceState::kUnavailable, "libnvidia-ml.so.1: not found"},
                  {"kmsg", api::SourceState::kUnavailable, "permission denied"}};
  Verdict d = Evaluate(p, dark, EvalMemory{}, kNow);
  EXPECT_EQ(d.state, HealthState::kUnknown);
  EXPECT_EQ(d.reason, "TelemetryUnavailable");
  // No NVML is not proof of missing GPUs: gpu-missing must not fire.
  EXPECT_TRUE(d.evidence.empty());

  // Unknown never cordons/drains unless asked.
  EXPECT_LT(d.action, Action::kTaint);
  p.spec.unknown.action = Action::kCordon;
  EXPECT_EQ(Evaluate(p, std::nullopt, EvalMemory{}, kNow).action, Action::kCordon);
}

TEST(Evaluate, PositiveEvidenceWinsOverPartialTelemetryLoss) {
  auto r = Report(0);
  r.expected_gpus = 8;
  r.sources = {{"nvml", api::SourceState::kUnavailable, "GPU is lost"},
               {"kmsg", api::SourceState::kOk, ""}};
  api::XidEvent e = Xid(79, 0, 1, kNow - minutes(1), kNow - minutes(1), "RESTART_BM");
  e.gpu_uuid.clear();
  e.pci_bus_id = "0000:3b:00.0";
  r.xids.push_back(e);
  Verdict v = Evaluate(DefaultPolicy(), r, EvalMemory{}, kNow);
  EXPECT_EQ(v.state, HealthState::kUnhealthy);
  EXPECT_TRUE(v.node_wide);  // unmapped GPU: cannot be confined
  EXPECT_NE(v.message.find("unmapped GPU at 0000:3b:00.0"), std::string::npos);
}

TEST(Evaluate, FutureTimestampsAreClampedAndFlagged) {
  auto r = Report();
  r.heartbeat_time = kNow + hours(2);
  r.xids.push_back(Xid(48, 1, 1, kNow + hours(2), kNow + hours(2), "RESET_GPU"));
  Verdict v = Evaluate(DefaultPolicy(), r, EvalMemory{}, kNow);
  EXPECT_EQ(v.state, HealthState::kUnhealthy);
  EXPECT_TRUE(v.clock_skew);
  EXPECT_NE(v.message.find("clock skew"), std::string::npos);
}

TEST(Evaluate, GpuMissingAfterFor) {
  auto r = Report(7);
  r.expected_gpus = 8;
  Verdict v = Evaluate(DefaultPolicy(), r, EvalMemory{}, kNow);
  EXPECT_EQ(v.state, HealthState::kHealthy);
  ASSERT_EQ(v.pending.size(), 1u);
  EXPECT_EQ(v.pending[0].rule, "gpu-missing");
  v = Evaluate(DefaultPolicy(), r, v.memory, kNow + minutes(5));
  EXPECT_EQ(v.state, HealthState::kUnhealthy);
  EXPECT_TRUE(v.node_wide);
  EXPECT_EQ(v.evidence[0].message, "node: 7 of 8 expected GPUs visible");
}

TEST(Evaluate, NoneActionRulesObserveOnly) {
  auto p = DefaultPolicy();
  api::Rule rule;
  rule.name = "pcie";
  rule.pcie_replay_above = 100;
  rule.action = Action::kNone;
  p.spec.rules = {rule};
  auto r = Report();
  r.gpus[0].pcie_replay_count = 500;
  Verdict v = Evaluate(p, r, EvalMemory{}, kNow);
  EXPECT_EQ(v.state, HealthState::kHealthy);
  ASSERT_EQ(v.evidence.size(), 1u);
  EXPECT_TRUE(v.MatchedRules().empty());
}

// A policy of just `rules` (everything else defaulted).
api::GpuHealthPolicy PolicyWith(std::vector<api::Rule> rules) {
  api::GpuHealthPolicy p = DefaultPolicy("signals");
  p.spec.rules = std::move(rules);
  return p;
}

api::Rule RuleOf(std::string name, Action action) {
  api::Rule r;
  r.name = std::move(name);
  r.action = action;
  return r;
}

TEST(Evaluate, NvlinkLinksDownPendThenFireNodeWide) {
  auto r = Report();
  r.gpus[2].nvlink_links_total = 18;
  r.gpus[2].nvlink_links_down = 2;
  // The default rule nvlink-down: linksDownAbove 0 for 5m, Taint.
  Verdict v = Evaluate(DefaultPolicy(), r, EvalMemory{}, kNow);
  EXPECT_EQ(v.state, HealthState::kHealthy);
  ASSERT_EQ(v.pending.size(), 1u);
  EXPECT_EQ(v.pending[0].rule, "nvlink-down");
  EXPECT_EQ(v.pending[0].fires_at, kNow + minutes(5));
  v = Evaluate(DefaultPolicy(), r, v.memory, kNow + minutes(5));
  ASSERT_EQ(v.evidence.size(), 1u);
  EXPECT_EQ(v.action, Action::kTaint);
  EXPECT_EQ(v.evidence[0].message, "GPU 2 (GPU-1002): NVLink links down 2 of 18 > 0");
  EXPECT_TRUE(v.node_wide);  // the fabric is shared: never a device-level fence
  EXPECT_EQ(v.bad_gpus, std::vector<std::string>{"GPU-1002"});
  // Links back up: the condition no longer holds and its timer is gone.
  r.gpus[2].nvlink_links_down = 0;
  v = Evaluate(DefaultPolicy(), r, v.memory, kNow + minutes(6));
  EXPECT_TRUE(v.evidence.empty());
  EXPECT_TRUE(v.memory.matches.empty());
}

TEST(Evaluate, NvlinkErrorCountThresholdTable) {
  api::Rule rule = RuleOf("nvlink-errors", Action::kCordon);
  rule.nvlink = api::NvlinkMatcher{std::nullopt, 100};
  struct Case {
    std::optional<uint64_t> errors;
    bool fires;
  } cases[] = {{std::nullopt, false}, {0, false}, {100, false}, {101, true}, {1u << 31, true}};
  for (const auto& c : cases) {
    auto r = Report();
    r.gpus[4].nvlink_error_count = c.errors;
    Verdict v = Evaluate(PolicyWith({rule}), r, EvalMemory{}, kNow);
    EXPECT_EQ(v.state == HealthState::kUnhealthy, c.fires) << c.errors.value_or(0);
    if (!c.fires) continue;
    ASSERT_EQ(v.evidence.size(), 1u);
    EXPECT_EQ(v.evidence[0].message,
              "GPU 4 (GPU-1004): NVLink errors " + std::to_string(*c.errors) + " > 100");
    EXPECT_TRUE(v.node_wide);
  }
}

TEST(Evaluate, RetiredPagesTable) {
  api::Rule rule = RuleOf("retired", Action::kCordon);
  rule.retired_pages = api::RetiredPagesMatcher{0, 10, true};  // dbe > 0, sbe > 10, pending
  struct Case {
    const char* what;
    std::optional<uint32_t> dbe, sbe;
    bool pending;
    std::string message;  // empty: must not fire
  } cases[] = {
      {"pre-Ampere clean", 0, 0, false, ""},
      {"no counters (row remapping GPU)", std::nullopt, std::nullopt, false, ""},
      {"one DBE page", 1, 0, false, "pages retired for DBE 1 > 0"},
      {"SBE at the threshold", 0, 10, false, ""},
      {"SBE over the threshold", 0, 11, false, "pages retired for SBE 11 > 10"},
      {"retirement pending", 0, 0, true, "page retirement pending"},
      {"all at once", 2, 12, true,
       "page retirement pending, pages retired for DBE 2 > 0, pages retired for SBE 12 > 10"},
  };
  for (const auto& c : cases) {
    auto r = Report();
    r.gpus[6].retired_pages_dbe = c.dbe;
    r.gpus[6].retired_pages_sbe = c.sbe;
    r.gpus[6].retired_pages_pending = c.pending;
    Verdict v = Evaluate(PolicyWith({rule}), r, EvalMemory{}, kNow);
    if (c.message.empty()) {
      EXPECT_EQ(v.state, HealthState::kHealthy) << c.what << ": " << v.message;
      continue;
    }
    ASSERT_EQ(v.evidence.size(), 1u) << c.what;
    EXPECT_EQ(v.action, Action::kCordon) << c.what;
    EXPECT_EQ(v.evidence[0].message, "GPU 6 (GPU-1006): " + c.message) << c.what;
    EXPECT_FALSE(v.node_wide) << c.what;  // confined to the GPU: device-level may fence it
    EXPECT_EQ(v.bad_gpus, std::vector<std::string>{"GPU-1006"}) << c.what;
  }
}

TEST(Evaluate, NodeConditionRuleTable) {
  api::Rule rule = RuleOf("npd-xid", Action::kCordon);
  rule.node_condition = api::NodeConditionMatcher{"GPUXidError", "True"};
  rule.for_ = minutes(1);
  const auto policy = PolicyWith({rule});
  struct Case {
    const char* what;
    std::vector<NodeConditionFact> conditions;
    bool fires;
    bool pending;
  } cases[] = {
      {"no such condition", {{"Ready", "True", "KubeletReady", kNow - hours(1)}}, false, false},
      {"condition False", {{"GPUXidError", "False", "NoXid", kNow - hours(1)}}, false, false},
      {"True for 2m", {{"GPUXidError", "True", "Xid79", kNow - minutes(2)}}, true, false},
      {"True for 30s", {{"GPUXidError", "True", "Xid79", kNow - seconds(30)}}, false, true},
      {"True since the future (clamped: just began)",
       {{"GPUXidError", "True", "", kNow + hours(1)}},
       false,
       true},
  };
  for (const auto& c : cases) {
    Verdict v = Evaluate(policy, Report(), EvalMemory{}, kNow, c.conditions);
    EXPECT_EQ(v.state == HealthState::kUnhealthy, c.fires) << c.what << ": " << v.message;
    EXPECT_EQ(v.pending.size(), c.pending ? 1u : 0u) << c.what;
    if (c.fires) {
      ASSERT_EQ(v.evidence.size(), 1u);
      EXPECT_EQ(v.evidence[0].message, "node: condition GPUXidError=True (Xid79)");
      EXPECT_TRUE(v.node_wide);
      EXPECT_EQ(v.action, Action::kCordon);
    }
    if (c.pending) {
      EXPECT_EQ(v.pending[0].fires_at,
                std::min(c.conditions[0].last_transition_time.value(), kNow) + minutes(1))
          << c.what;
    }
  }
  // Without lastTransitionTime the timer starts when the operator first sees the condition.
  std::vector<NodeConditionFact> no_time = {{"GPUXidError", "True", "", std::nullopt}};
  Verdict v = Evaluate(policy, Report(), EvalMemory{}, kNow, no_time);
  ASSERT_EQ(v.pending.size(), 1u);
  v = Evaluate(policy, Report(), v.memory, kNow + minutes(1), no_time);
  EXPECT_EQ(v.state, HealthState::kUnhealthy);
  // Like every rule, not evaluated without a fresh report: the node is Unknown instead.
  v = Evaluate(policy, std::nullopt, EvalMemory{}, kNow,
               std::vector<NodeConditionFact>{{"GPUXidError", "True", "", kNow - hours(1)}});
  EXPECT_EQ(v.state, HealthState::kUnknown);
}

TEST(Evaluate, PowerOverEnforcedLimitTable) {
  api::Rule rule = RuleOf("power", Action::kTaint);
  rule.power = api::PowerMatcher{5};  // more than 5% over the limit
  struct Case {
    std::optional<double> draw, limit;
    bool fires;
  } cases[] = {
      {690, 700, false},          {735, 700, false},  // at +5%: not over
      {735.5, 700, true},         {900, 700, true},  {std::nullopt, 700, false},
      {900, std::nullopt, false}, {900, 0, false},  // a zero limit is no limit reading
  };
  for (const auto& c : cases) {
    auto r = Report();
    r.gpus[1].power_watts = c.draw;
    r.gpus[1].power_limit_watts = c.limit;
    Verdict v = Evaluate(PolicyWith({rule}), r, EvalMemory{}, kNow);
    EXPECT_EQ(v.state == HealthState::kUnhealthy, c.fires) << c.draw.value_or(-1) << " W";
  }
  auto r = Report();
  r.gpus[1].power_watts = 812.3;
  r.gpus[1].power_limit_watts = 700;
  rule.power->over_limit_percent = 0;
  rule.for_ = minutes(5);
  Verdict v = Evaluate(PolicyWith({rule}), r, EvalMemory{}, kNow);
  ASSERT_EQ(v.pending.size(), 1u);  // `for`: a moment over the limit is not a fault
  v = Evaluate(PolicyWith({rule}), r, v.memory, kNow + minutes(5));
  ASSERT_EQ(v.evidence.size(), 1u);
  EXPECT_EQ(v.evidence[0].message, "GPU 1 (GPU-1001): power 812.3 W > enforced limit 700.0 W");
  EXPECT_FALSE(v.node_wide);
}

// Correctable ECC as a rate: > 100 new errors within 1h, fed report by report.
TEST(Evaluate, CorrectableEccIncreaseWithinWindow) {
  api::Rule rule = RuleOf("sbe-burst", Action::kTaint);
  rule.ecc = api::EccMatcher{};
  rule.ecc->correctable_volatile_increase_above = 100;
  rule.window = hours(1);
  auto policy = PolicyWith({rule});
  policy.spec.unknown.after =
      hours(24);  // the next evaluation below is the baseline's, not the heartbeat's
  EvalMemory mem;
  auto at = [&](WallTime t, std::optional<uint64_t> counter) {
    auto r = Report();
    r.heartbeat_time = t;
    r.gpus[3].ecc_corrected_volatile = counter;
    Verdict v = Evaluate(policy, r, mem, t);
    mem = v.memory;
    return v;
  };
  // Zero errors: nothing kept, nothing written.
  Verdict v = at(kNow, 0);
  EXPECT_FALSE(v.memory_changed);
  // 40 errors already there when first seen: a baseline, not a rate.
  v = at(kNow + minutes(1), 40);
  EXPECT_EQ(v.state, HealthState::kHealthy);
  ASSERT_EQ(v.memory.matches.size(), 1u);
  EXPECT_FALSE(v.memory.matches[0].Holding());
  EXPECT_EQ(v.memory.matches[0].samples, (std::vector<CounterSample>{{kNow + minutes(1), 40}}));
  // +60 then +60 within 20 minutes: 120 > 100.
  v = at(kNow + minutes(11), 100);
  EXPECT_EQ(v.state, HealthState::kHealthy);
  v = at(kNow + minutes(21), 160);
  ASSERT_EQ(v.state, HealthState::kUnhealthy) << v.message;
  ASSERT_EQ(v.evidence.size(), 1u);
  EXPECT_EQ(v.evidence[0].message, "GPU 3 (GPU-1003): correctable ECC errors +120 in 1h > 100");
  EXPECT_FALSE(v.node_wide);
  ASSERT_TRUE(v.next_evaluation.has_value());
  EXPECT_EQ(*v.next_evaluation, kNow + minutes(11) + hours(1) + seconds(1));  // baseline moves on
  // The burst stops; an hour later the baseline is past it and the rule no longer holds.
  v = at(kNow + minutes(50), 160);
  EXPECT_EQ(v.state, HealthState::kUnhealthy);
  v = at(kNow + minutes(11) + hours(1) + seconds(1), 160);
  EXPECT_EQ(v.state, HealthState::kHealthy) << v.message;
  // Memory stays bounded whatever the counter does.
  for (int i = 0; i < 200; ++i) at(kNow + hours(2) + minutes(i), 200 + 3 * uint64_t(i));
  EXPECT_LE(mem.matches.at(0).samples.size(), kMaxCounterSamples);
  // A driver reload resets the counter: the samples start over instead of a negative rate.
  v = at(kNow + hours(6), 5);
  EXPECT_EQ(v.state, HealthState::kHealthy);
  EXPECT_EQ(v.memory.matches.at(0).samples, (std::vector<CounterSample>{{kNow + hours(6), 5}}));
  // The counter gone (ECC off, NVML error): the samples go too.
  v = at(kNow + hours(7), std::nullopt);
  EXPECT_TRUE(v.memory.matches.empty());
}

TEST(Evaluate, CorrectableEccIncreaseDoesNotCountOldErrors) {
  api::Rule rule = RuleOf("sbe-burst", Action::kTaint);
  rule.ecc = api::EccMatcher{};
  rule.ecc->correctable_volatile_increase_above = 100;
  rule.window = hours(1);
  // 500 errors spread over a day: never more than 100 within an hour.
  EvalMemory mem;
  for (int i = 0; i < 48; ++i) {
    auto r = Report();
    const WallTime t = kNow + minutes(30 * i);
    r.heartbeat_time = t;
    r.gpus[0].ecc_corrected_volatile = 10 + 10 * uint64_t(i);
    Verdict v = Evaluate(PolicyWith({rule}), r, mem, t);
    ASSERT_EQ(v.state, HealthState::kHealthy) << i << ": " << v.message;
    mem = v.memory;
  }
}

TEST(Resolve, PrecedenceAcrossPolicies) {
  auto r = Report();
  r.gpus[2].remap_pending = true;  // default: Taint
  auto drain = DefaultPolicy("zz-training");
  drain.spec.rules[5].action = Action::kDrain;  // row-remap-pending -> Drain
  auto observe = DefaultPolicy("aa-observe");
  observe.spec.rules.clear();
  std::vector<Verdict> vs = {Evaluate(DefaultPolicy("mm-default"), r, {}, kNow),
                             Evaluate(drain, r, {}, kNow), Evaluate(observe, r, {}, kNow)};
  auto w = Resolve(vs);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->policy, "zz-training");
  EXPECT_EQ(w->action, Action::kDrain);
  // Tie on action and state -> smallest name.
  auto a = DefaultPolicy("b");
  auto b = DefaultPolicy("a");
  w = Resolve({Evaluate(a, r, {}, kNow), Evaluate(b, r, {}, kNow)});
  EXPECT_EQ(w->policy, "a");
  // Unknown (Event) beats Healthy (None); Unhealthy beats Unknown at the same action.
  Verdict unknown = Evaluate(DefaultPolicy("u"), std::nullopt, {}, kNow);
  Verdict healthy = Evaluate(DefaultPolicy("h"), Report(), {}, kNow);
  EXPECT_TRUE(Precedes(unknown, healthy));
  EXPECT_FALSE(Resolve({}).has_value());
}

TEST(EvalMemory, CodecRoundTripAndGarbage) {
  EvalMemory m;
  m.state = HealthState::kUnhealthy;
  m.since = kNow;
  m.matches = {{"hot", "GPU-1", kNow - minutes(2), false},
               {"sbe", "GPU-2", WallTime{}, false, {{kNow - hours(1), 7}, {kNow, 90}}},
               {"x", "node", kNow, true}};
  auto back = DecodeEvalMemory(EncodeEvalMemory(m));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, m);
  EXPECT_TRUE(DecodeEvalMemory("{}")->empty());
  for (
      const char* bad :
      {"", "null", "[", "{\"state\":\"Sick\"}", "{\"since\":5}", "{\"matches\":[{\"rule\":1}]}",
       "{\"matches\":{}}",
       R"({"matches":[{"rule":"r","key":"k","since":"2026-01-01T00:00:00Z","samples":[{"at":"x","v":1}]}]})",
       R"({"matches":[{"rule":"r","key":"k","since":"2026-01-01T00:00:00Z","samples":[{"at":"2026-01-01T00:00:00Z","v":-1}]}]})",
       "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"}) {
    EXPECT_FALSE(DecodeEvalMemory(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace gg::policy
