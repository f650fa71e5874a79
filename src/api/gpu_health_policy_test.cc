// GPUHealthPolicy: defaults, validation (every problem with a field path), codecs (strict
// types, unknown fields ignored, garbage -> errors, never a crash), IntOrPercent, selectors.
#include "api/gpu_health_policy.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace gg::api {
namespace {

using std::chrono::hours;
using std::chrono::minutes;

TEST(PolicyDefaults, ConservativeDefaultIsValidAndNeverDrains) {
  GpuHealthPolicySpec spec = DefaultPolicySpec();
  EXPECT_TRUE(ValidatePolicySpec(spec).empty());
  for (const Rule& r : spec.rules) {
    EXPECT_LT(r.action, Action::kDrain) << r.name;
    if (r.xid) {
      for (int code : kApplicationXids) {
        EXPECT_TRUE(std::find(r.xid->ignore.begin(), r.xid->ignore.end(), code) !=
                    r.xid->ignore.end());
      }
    }
  }
  EXPECT_EQ(spec.unknown.action, Action::kEvent);
  EXPECT_EQ(spec.unknown.after, minutes(15));
  EXPECT_EQ(spec.remediation.taint_effect, TaintEffect::kNoSchedule);
  EXPECT_EQ(spec.safety.max_unhealthy.ToString(), "10%");
}

TEST(IntOrPercent, ResolveRoundsUpExactly) {
  EXPECT_EQ((IntOrPercent{10, true}).Resolve(25), 3);  // 2.5 -> 3
  EXPECT_EQ((IntOrPercent{10, true}).Resolve(100), 10);
  EXPECT_EQ((IntOrPercent{1, true}).Resolve(288), 3);  // as NVSentinel's example
  EXPECT_EQ((IntOrPercent{0, true}).Resolve(1000), 0);
  EXPECT_EQ((IntOrPercent{100, true}).Resolve(7), 7);
  EXPECT_EQ((IntOrPercent{5, false}).Resolve(2), 5);
  EXPECT_EQ((IntOrPercent{10, true}).Resolve(0), 0);
  EXPECT_TRUE(ParseIntOrPercent("10%").ok());
  EXPECT_EQ(ParseIntOrPercent("7")->value, 7);
  for (const char* bad : {"", "%", "-1", "1.5%", "abc", "10%%", "99999999999999%"}) {
    EXPECT_FALSE(ParseIntOrPercent(bad).ok()) << bad;
  }
}

TEST(LabelSelector, MatchesLikeKubernetes) {
  LabelSelector s;
  s.match_labels = {{"nvidia.com/gpu.present", "true"}};
  s.match_expressions = {{"pool", "In", {"a", "b"}},
                         {"gpuguardian.io/exclude", "DoesNotExist", {}}};
  EXPECT_TRUE(s.Matches({{"nvidia.com/gpu.present", "true"}, {"pool", "a"}}));
  EXPECT_FALSE(s.Matches({{"nvidia.com/gpu.present", "true"}, {"pool", "c"}}));
  EXPECT_FALSE(s.Matches(
      {{"nvidia.com/gpu.present", "true"}, {"pool", "a"}, {"gpuguardian.io/exclude", "true"}}));
  EXPECT_TRUE(LabelSelector{}.Matches({}));
}

TEST(PolicyValidation, ReportsEveryProblemWithPath) {
  GpuHealthPolicySpec spec = DefaultPolicySpec();
  Rule dup = spec.rules[0];
  spec.rules.push_back(dup);  // duplicate name
  Rule none;
  none.name = "nothing";  // zero matchers
  spec.rules.push_back(none);
  Rule two;
  two.name = "two";
  two.gpu_lost = true;
  two.ecc = EccMatcher{0, std::nullopt, std::nullopt};  // two matchers
  spec.rules.push_back(two);
  Rule win;
  win.name = "win";
  win.xid = XidMatcher{{}, {94}, {94}, false};  // matched and ignored
  win.window = minutes(1);
  win.for_ = minutes(5);  // window < for
  spec.rules.push_back(win);
  Rule lvl;
  lvl.name = "Bad_Name";
  lvl.thermal = ThermalMatcher{};  // no threshold
  lvl.window = minutes(5);         // window on a level rule
  spec.rules.push_back(lvl);
  spec.safety.max_unhealthy = IntOrPercent{150, true};
  spec.remediation.drain.order = {DrainStep{}, DrainStep{100}};
  spec.node_selector.match_expressions = {{"k", "Equals", {}}};

  auto errs = ValidatePolicySpec(spec);
  auto has = [&](const std::string& path, const std::string& needle) {
    for (const auto& e : errs) {
      if (e.path == path && e.message.find(needle) != std::string::npos) return true;
    }
    return false;
  };
  EXPECT_TRUE(has("spec.rules[9].name", "duplicate"));
  EXPECT_TRUE(has("spec.rules[10]", "none is set"));
  EXPECT_TRUE(has("spec.rules[11]", "2 are set"));
  EXPECT_TRUE(has("spec.rules[12].xid.codes[0]", "both matched and ignored"));
  EXPECT_TRUE(has("spec.rules[12].window", "shorter than for"));
  EXPECT_TRUE(has("spec.rules[13].name", "[a-z0-9-]"));
  EXPECT_TRUE(has("spec.rules[13].thermal", "temperatureAboveCelsius"));
  EXPECT_TRUE(has("spec.rules[13].window", "only Xid rules"));
  EXPECT_TRUE(has("spec.safety.maxUnhealthy", "at most 100%"));
  EXPECT_TRUE(has("spec.remediation.drain.order[0]", "must be last"));
  EXPECT_TRUE(has("spec.nodeSelector.matchExpressions[0].operator", "In, NotIn"));
  Status st = ValidationStatus(errs);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("spec.rules[9].name: duplicate"), std::string::npos);
  EXPECT_TRUE(ValidationStatus({}).ok());
}

constexpr char kIssueExample[] = R"({
  "apiVersion": "gpuguardian.io/v1alpha1", "kind": "GPUHealthPolicy",
  "metadata": {"name": "training", "generation": 3, "uid": "u-1", "resourceVersion": "42",
               "labels": {"x": "y"}},
  "spec": {
    "nodeSelector": {"matchLabels": {"nvidia.com/gpu.present": "true"},
                     "matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]},
    "rules": [
      {"name": "fatal-xid", "xid": {"catalogActions": ["RESET_GPU", "RESTART_BM"], "codes": [48, 79],
       "ignore": [13, 31, 43, 45, 68]}, "count": 1, "window": "10m", "action": "Drain"},
      {"name": "dbe", "ecc": {"uncorrectableVolatileAbove": 0}, "action": "Drain"},
      {"name": "remap", "remappedRows": {"failure": true, "pending": true}, "action": "Cordon"},
      {"name": "hot", "thermal": {"temperatureAboveCelsius": 85, "throttleReasons": ["HwThermalSlowdown"]},
       "for": "5m", "action": "Taint"},
      {"name": "lost", "gpuLost": true, "action": "Drain"},
      {"name": "links", "nvlink": {"linksDownAbove": 0}, "for": "2m", "action": "Cordon"},
      {"name": "replay", "pcieReplayAbove": 1000, "action": "Event"},
      {"name": "reboot", "recoveryActions": ["NodeReboot"], "action": "Cordon", "futureField": 1}
    ],
    "unknown": {"after": "15m", "action": "Event"},
    "remediation": {"taint": {"effect": "NoExecute"},
                    "drain": {"scope": "AllPods", "order": [{"priorityBelow": 1000}, {}],
                              "gracePeriodSeconds": 30, "timeout": "1h", "deleteEmptyDirData": true,
                              "force": false},
                    "deviceLevel": "Auto", "maxBadGPUsForDeviceLevel": 1},
    "recovery": {"automatic": true, "healthyFor": "10m"},
    "safety": {"maxUnhealthy": "10%", "maxNodesPerHour": 20, "maxConcurrentDrains": 5},
    "dryRun": false, "paused": false
  },
  "status": {"observedGeneration": 2, "matchedNodes": 10,
             "conditions": [{"type": "Ready", "status": "True", "reason": "Valid", "message": "",
                             "lastTransitionTime": "2026-11-29T22:00:00Z"}]}
})";

TEST(PolicyCodec, DecodesIssueExample) {
  auto p = DecodeGpuHealthPolicy(kIssueExample);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->name, "training");
  EXPECT_EQ(p->generation, 3);
  EXPECT_EQ(p->spec.rules.size(), 8u);
  EXPECT_EQ(p->spec.rules[0].xid->codes, (std::vector<int>{48, 79}));
  EXPECT_EQ(p->spec.rules[0].window, minutes(10));
  EXPECT_EQ(p->spec.rules[0].action, Action::kDrain);
  EXPECT_EQ(p->spec.rules[3].for_, minutes(5));
  EXPECT_TRUE(p->spec.rules[4].gpu_lost);
  EXPECT_EQ(p->spec.rules[5].nvlink->links_down_above, 0);
  EXPECT_EQ(p->spec.remediation.taint_effect, TaintEffect::kNoExecute);
  EXPECT_EQ(p->spec.remediation.drain.scope, DrainScope::kAllPods);
  EXPECT_EQ(p->spec.remediation.drain.grace_period_seconds, 30);
  EXPECT_EQ(p->spec.remediation.device_level, DeviceLevelMode::kAuto);
  EXPECT_EQ(p->spec.safety.max_unhealthy, (IntOrPercent{10, true}));
  EXPECT_EQ(p->status.matched_nodes, 10);
  EXPECT_TRUE(ValidatePolicySpec(p->spec).empty());

  // Round trip through the encoder.
  auto again = DecodeGpuHealthPolicy(EncodeGpuHealthPolicy(*p));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->spec, p->spec);
  EXPECT_EQ(again->status, p->status);
}

TEST(PolicyCodec, AbsentFieldsDefault) {
  auto p = DecodeGpuHealthPolicy(R"({"metadata":{"name":"d"},"spec":{}})");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->spec, DefaultPolicySpec());
  // An explicit empty selector selects every node.
  auto all = DecodeGpuHealthPolicySpec(R"({"nodeSelector":{}})");
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->node_selector.match_labels.empty());
  auto empty_rules = DecodeGpuHealthPolicySpec(R"({"rules":[]})");
  ASSERT_TRUE(empty_rules.ok());
  EXPECT_TRUE(empty_rules->rules.empty());
}

TEST(PolicyCodec, StrictTypesWithFieldPaths) {
  struct Case {
    const char* json;
    const char* want;
  } cases[] = {
      {R"({"spec":{"rules":[{"name":"a","gpuLost":"yes"}]}})",
       "spec.rules[0].gpuLost: expected boolean"},
      {R"({"spec":{"rules":[{"name":"a","xid":{"codes":[48,"79"]}}]}})",
       "spec.rules[0].xid.codes[1]: expected integer"},
      {R"({"spec":{"rules":[{"name":"a","gpuLost":true,"action":"Reboot"}]}})",
       "spec.rules[0].action: must be one of"},
      {R"({"spec":{"rules":[{"name":"a","gpuLost":true,"for":"5 minutes"}]}})",
       "spec.rules[0].for: invalid duration"},
      {R"({"spec":{"safety":{"maxUnhealthy":"ten"}}})", "spec.safety.maxUnhealthy"},
      {R"({"spec":{"safety":{"maxUnhealthy":1.5}}})",
       "spec.safety.maxUnhealthy: expected integer or percentage"},
      {R"({"spec":{"remediation":{"taint":{"effect":"NoRun"}}}})", "spec.remediation.taint.effect"},
      {R"({"spec":{"rules":{}}})", "spec.rules: expected array"},
      {R"({"spec":{"nodeSelector":{"matchLabels":{"a":1}}}})",
       "spec.nodeSelector.matchLabels.a: expected string"},
      {R"({"spec":{"rules":[{"name":"a","ecc":{"uncorrectableVolatileAbove":-1}}]}})",
       "uncorrectableVolatileAbove: expected non-negative"},
      {R"({"kind":"Pod"})", "kind: expected GPUHealthPolicy"},
      {R"({"metadata":{"generation":"3"}})", "metadata.generation: expected integer"},
      {R"([])", "(root): expected object"},
      {R"({"spec":)", "invalid JSON"},
  };
  for (const auto& c : cases) {
    auto p = DecodeGpuHealthPolicy(c.json);
    ASSERT_FALSE(p.ok()) << c.json;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(p.status().message().find(c.want), std::string::npos)
        << c.json << " -> " << p.status().message();
  }
}

TEST(PolicyCodec, GarbageNeverCrashes) {
  std::string base = kIssueExample;
  // Every truncation and a few byte flips: errors or values, never a crash.
  for (size_t i = 0; i < base.size(); i += 7) {
    (void)DecodeGpuHealthPolicy(base.substr(0, i));
    std::string flipped = base;
    flipped[i] = static_cast<char>(flipped[i] ^ 0x5a);
    (void)DecodeGpuHealthPolicy(flipped);
  }
  (void)DecodeGpuHealthPolicy(std::string(10000, '['));
  (void)DecodeGpuHealthPolicy(std::string("\0\xff\xfe", 3));
}

TEST(PolicyCodec, StatusEncodes) {
  GpuHealthPolicyStatus st;
  st.observed_generation = 4;
  st.matched_nodes = 25;
  st.unhealthy_nodes = 3;
  st.conditions.push_back({"BrakeEngaged", "True", "MaxUnhealthy", "3 of 3", WallTime{}, 4});
  st.last_brake_time = WallTime(std::chrono::seconds(1'800'000'000));
  std::string j = EncodeGpuHealthPolicyStatus(st);
  EXPECT_NE(j.find("\"matchedNodes\":25"), std::string::npos);
  EXPECT_NE(j.find("\"lastBrakeTime\":\"2027-01-15T08:00:00Z\""), std::string::npos);
  auto back = DecodeGpuHealthPolicy("{\"status\":" + j + "}");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->status, st);
}

}  // namespace
}  // namespace gg::api

namespace gg::api {
namespace {

TEST(PolicyCodec, OddDurationsAndCountsRoundTrip) {
  GpuHealthPolicySpec spec = DefaultPolicySpec();
  spec.rules[0].window = std::chrono::nanoseconds(1'500'000'001);
  spec.rules[2].for_ = std::chrono::nanoseconds(9'000'000'000'000'123'456);
  spec.rules[1].count = 7;  // invalid on a level rule, but must survive the codec
  GpuHealthPolicy p;
  p.name = "odd";
  p.spec = spec;
  auto back = DecodeGpuHealthPolicy(EncodeGpuHealthPolicy(p));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->spec, spec);
}

}  // namespace
}  // namespace gg::api

namespace gg::api {
namespace {

TEST(PolicyDeviceLevel, DefaultsAreOffNoScheduleNvidiaDriver) {
  auto spec = DecodeGpuHealthPolicySpec(R"({"remediation": {}})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->remediation.device_level, DeviceLevelMode::kOff);
  EXPECT_EQ(spec->remediation.device_taint_effect, DeviceTaintEffect::kNoSchedule);
  EXPECT_EQ(spec->remediation.device_driver, "gpu.nvidia.com");
  EXPECT_EQ(spec->remediation.max_bad_gpus_for_device_level, 2);
}

TEST(PolicyDeviceLevel, DecodesEncodesAndValidates) {
  auto spec = DecodeGpuHealthPolicySpec(R"({"remediation": {"deviceLevel": "Auto",
      "deviceTaintEffect": "None", "deviceDriver": "gpu.example.com",
      "maxBadGPUsForDeviceLevel": 3}})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->remediation.device_taint_effect, DeviceTaintEffect::kNone);
  EXPECT_EQ(spec->remediation.device_driver, "gpu.example.com");
  EXPECT_TRUE(ValidatePolicySpec(*spec).empty());
  GpuHealthPolicy p;
  p.name = "dra";
  p.spec = *spec;
  auto back = DecodeGpuHealthPolicy(EncodeGpuHealthPolicy(p));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->spec.remediation, spec->remediation);

  // Bad enum: a clear error naming the field and the allowed values.
  auto bad =
      DecodeGpuHealthPolicySpec(R"({"remediation": {"deviceTaintEffect": "PreferNoSchedule"}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("deviceTaintEffect"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("None, NoSchedule, NoExecute"), std::string::npos);
  auto wrong_type = DecodeGpuHealthPolicySpec(R"({"remediation": {"deviceDriver": 5}})");
  EXPECT_FALSE(wrong_type.ok());

  // Driver names must be DNS subdomains of at most 63 characters.
  for (const char* d : {"", "GPU.nvidia.com", "gpu..nvidia.com", "-gpu.nvidia.com", "gpu_nvidia",
                        "a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z.a.b.c.d.e.f.g"}) {
    GpuHealthPolicySpec s = DefaultPolicySpec();
    s.remediation.device_driver = d;
    auto errs = ValidatePolicySpec(s);
    ASSERT_EQ(errs.size(), 1u) << d;
    EXPECT_EQ(errs[0].path, "spec.remediation.deviceDriver") << d;
  }
  for (const char* d : {"gpu.nvidia.com", "dra.example.com", "x"}) {
    GpuHealthPolicySpec s = DefaultPolicySpec();
    s.remediation.device_driver = d;
    EXPECT_TRUE(ValidatePolicySpec(s).empty()) << d;
  }
}

// The spec after encoding it in a policy and decoding that again.
StatusOr<GpuHealthPolicySpec> ThroughTheCodec(const GpuHealthPolicySpec& spec) {
  GpuHealthPolicy p;
  p.name = "p";
  p.spec = spec;
  GG_ASSIGN_OR_RETURN(GpuHealthPolicy back, DecodeGpuHealthPolicy(EncodeGpuHealthPolicy(p)));
  return back.spec;
}

TEST(PolicyQuarantine, DefaultsDecodesEncodesAndValidates) {
  auto spec = DecodeGpuHealthPolicySpec(R"({"recovery": {"healthyFor": "5m"}})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->recovery.quarantine.after, 3) << "conservative default: 3 fences ...";
  EXPECT_EQ(spec->recovery.quarantine.within, std::chrono::hours(24)) << "... within 24h";
  auto set =
      DecodeGpuHealthPolicySpec(R"({"recovery": {"quarantine": {"after": 5, "within": "6h"}}})");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->recovery.quarantine, (QuarantineSpec{5, std::chrono::hours(6)}));
  EXPECT_EQ(set->recovery.healthy_for, std::chrono::minutes(10)) << "siblings keep defaults";
  auto back = ThroughTheCodec(*set);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->recovery, set->recovery);

  auto bad = DecodeGpuHealthPolicySpec(R"({"recovery": {"quarantine": {"after": "3"}}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("recovery.quarantine.after"), std::string::npos)
      << bad.status();
  EXPECT_FALSE(DecodeGpuHealthPolicySpec(R"({"recovery": {"quarantine": 3}})").ok());
  EXPECT_FALSE(
      DecodeGpuHealthPolicySpec(R"({"recovery": {"quarantine": {"within": "a day"}}})").ok());

  for (auto [after, within, field] :
       {std::tuple{-1, Duration(std::chrono::hours(1)), "spec.recovery.quarantine.after"},
        std::tuple{11, Duration(std::chrono::hours(1)), "spec.recovery.quarantine.after"},
        std::tuple{3, Duration::zero(), "spec.recovery.quarantine.within"}}) {
    GpuHealthPolicySpec s = DefaultPolicySpec();
    s.recovery.quarantine = {after, within};
    auto errs = ValidatePolicySpec(s);
    ASSERT_EQ(errs.size(), 1u) << after;
    EXPECT_EQ(errs[0].path, field);
  }
  GpuHealthPolicySpec off = DefaultPolicySpec();
  off.recovery.quarantine = {0, Duration::zero()};
  EXPECT_TRUE(ValidatePolicySpec(off).empty()) << "after 0 turns it off; within is then moot";
}

}  // namespace
}  // namespace gg::api

namespace gg::api {
namespace {

// The spec after encoding it in a whole resource and decoding that again.
GpuHealthPolicySpec RoundTrip(const GpuHealthPolicySpec& spec) {
  GpuHealthPolicy p;
  p.name = "round-trip";
  p.spec = spec;
  auto back = DecodeGpuHealthPolicy(EncodeGpuHealthPolicy(p));
  EXPECT_TRUE(back.ok()) << back.status();
  return back.ok() ? back->spec : GpuHealthPolicySpec{};
}

bool HasError(const std::vector<FieldError>& errs, const std::string& path,
              const std::string& needle) {
  return std::any_of(errs.begin(), errs.end(), [&](const FieldError& e) {
    return e.path == path && e.message.find(needle) != std::string::npos;
  });
}

TEST(PolicyDrainOrder, PodSelectorStagesDecodeEncodeAndValidate) {
  auto spec = DecodeGpuHealthPolicySpec(R"({"remediation": {"drain": {"order": [
      {"podSelector": {"matchLabels": {"workload": "batch"}}},
      {"podSelector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["dev"]}]},
       "priorityBelow": 500},
      {"priorityBelow": 1000}, {}]}}})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const auto& order = spec->remediation.drain.order;
  ASSERT_EQ(order.size(), 4u);
  EXPECT_EQ(order[0].pod_selector->match_labels.at("workload"), "batch");
  EXPECT_FALSE(order[0].priority_below);
  EXPECT_EQ(order[1].priority_below, 500);
  EXPECT_EQ(order[1].pod_selector->match_expressions[0].values, std::vector<std::string>{"dev"});
  EXPECT_FALSE(order[2].pod_selector);
  EXPECT_TRUE(order[3].MatchesAll());
  EXPECT_TRUE(ValidatePolicySpec(*spec).empty()) << ValidationStatus(ValidatePolicySpec(*spec));
  EXPECT_EQ(RoundTrip(*spec).remediation.drain, spec->remediation.drain);
  // An empty selector ({}) matches every pod but is a selector stage, not "the rest".
  auto empty_sel =
      DecodeGpuHealthPolicySpec(R"({"remediation":{"drain":{"order":[{"podSelector":{}}]}}})");
  ASSERT_TRUE(empty_sel.ok());
  EXPECT_TRUE(empty_sel->remediation.drain.order[0].pod_selector.has_value());

  auto bad_type =
      DecodeGpuHealthPolicySpec(R"({"remediation":{"drain":{"order":[{"podSelector":[]}]}}})");
  ASSERT_FALSE(bad_type.ok());
  EXPECT_NE(bad_type.status().message().find(
                "spec.remediation.drain.order[0].podSelector: expected object"),
            std::string::npos)
      << bad_type.status();
}

TEST(PolicyDrainOrder, ValidationNamesTheStage) {
  GpuHealthPolicySpec spec = DefaultPolicySpec();
  LabelSelector bad;
  bad.match_expressions = {{"workload", "In", {}}};
  // The catch-all in the middle; a selector with a broken expression; priority going down.
  spec.remediation.drain.order = {DrainStep{2000, std::nullopt}, DrainStep{},
                                  DrainStep{std::nullopt, bad}, DrainStep{1000, std::nullopt}};
  auto errs = ValidatePolicySpec(spec);
  auto has = [&](const std::string& path, const std::string& needle) {
    return HasError(errs, path, needle);
  };
  EXPECT_TRUE(has("spec.remediation.drain.order[1]",
                  "priorityBelow or podSelector (the rest) must be last"));
  EXPECT_TRUE(has("spec.remediation.drain.order[2].podSelector.matchExpressions[0].values",
                  "must not be empty"));
  EXPECT_TRUE(has("spec.remediation.drain.order[3].priorityBelow", "must increase"));
  EXPECT_EQ(errs.size(), 3u) << ValidationStatus(errs);
  // Selector stages may come in any order and mix with priorities.
  LabelSelector batch;
  batch.match_labels["workload"] = "batch";
  spec.remediation.drain.order = {DrainStep{std::nullopt, batch}, DrainStep{1000, std::nullopt},
                                  DrainStep{500, batch}, DrainStep{}};
  EXPECT_TRUE(ValidatePolicySpec(spec).empty()) << ValidationStatus(ValidatePolicySpec(spec));
}

TEST(PolicyNodeCondition, DecodesEncodesAndValidates) {
  auto spec = DecodeGpuHealthPolicySpec(R"({"rules": [
      {"name": "npd-xid", "nodeCondition": {"type": "GPUXidError"}, "for": "1m", "action": "Cordon"},
      {"name": "disk", "nodeCondition": {"type": "DiskPressure", "status": "Unknown"}, "action": "Event"}]})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->rules.size(), 2u);
  EXPECT_EQ(spec->rules[0].node_condition,
            (NodeConditionMatcher{"GPUXidError", "True"}));  // default status
  EXPECT_EQ(spec->rules[0].for_, minutes(1));
  EXPECT_EQ(spec->rules[1].node_condition->status, "Unknown");
  EXPECT_TRUE(ValidatePolicySpec(*spec).empty()) << ValidationStatus(ValidatePolicySpec(*spec));
  EXPECT_EQ(RoundTrip(*spec).rules, spec->rules);

  auto bad_type =
      DecodeGpuHealthPolicySpec(R"({"rules":[{"name":"a","nodeCondition":{"type":5}}]})");
  ASSERT_FALSE(bad_type.ok());
  EXPECT_NE(bad_type.status().message().find("spec.rules[0].nodeCondition.type: expected string"),
            std::string::npos);

  struct Case {
    NodeConditionMatcher m;
    const char* path;
    const char* needle;
  } cases[] = {
      {{"", "True"}, "spec.rules[0].nodeCondition.type", "1-316 characters"},
      {{"Has Space", "True"}, "spec.rules[0].nodeCondition.type", "[A-Za-z0-9._/-]"},
      {{"GPUHealthy", "False"}, "spec.rules[0].nodeCondition.type", "operator's own verdict"},
      {{"GPUXidError", "true"}, "spec.rules[0].nodeCondition.status", "True, False or Unknown"},
      {{"MemoryPressure", "False"}, "spec.rules[0].nodeCondition.status", "healthy node"},
      {{"Ready", "True"}, "spec.rules[0].nodeCondition.status", "healthy node"},
  };
  for (const auto& c : cases) {
    GpuHealthPolicySpec s = DefaultPolicySpec();
    Rule r;
    r.name = "a";
    r.node_condition = c.m;
    s.rules = {r};
    auto errs = ValidatePolicySpec(s);
    ASSERT_EQ(errs.size(), 1u) << c.m.type << "/" << c.m.status << ": " << ValidationStatus(errs);
    EXPECT_EQ(errs[0].path, c.path);
    EXPECT_NE(errs[0].message.find(c.needle), std::string::npos) << errs[0].message;
  }
  // One matcher per rule: a nodeCondition counts like any other.
  GpuHealthPolicySpec s = DefaultPolicySpec();
  s.rules[0].node_condition = NodeConditionMatcher{"GPUXidError", "True"};
  EXPECT_FALSE(ValidatePolicySpec(s).empty());
}

TEST(PolicySignals, PowerAndEccRateDecodeEncodeAndValidate) {
  auto spec = DecodeGpuHealthPolicySpec(R"({"rules": [
      {"name": "power", "power": {"overLimitPercent": 10}, "for": "5m", "action": "Taint"},
      {"name": "power-any", "power": {}, "for": "5m", "action": "Event"},
      {"name": "sbe-burst", "ecc": {"correctableVolatileIncreaseAbove": 100}, "window": "1h",
       "action": "Taint"}]})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->rules[0].power, PowerMatcher{10});
  EXPECT_EQ(spec->rules[1].power, PowerMatcher{0});
  EXPECT_EQ(spec->rules[2].ecc->correctable_volatile_increase_above, 100u);
  EXPECT_TRUE(ValidatePolicySpec(*spec).empty()) << ValidationStatus(ValidatePolicySpec(*spec));
  EXPECT_EQ(RoundTrip(*spec).rules, spec->rules);

  GpuHealthPolicySpec s = *spec;
  s.rules[0].power->over_limit_percent = 101;
  s.rules[2].window.reset();                  // a rate needs its window
  s.rules[1].window = std::chrono::hours(1);  // power is a level: no window
  auto errs = ValidatePolicySpec(s);
  auto has = [&](const std::string& path, const std::string& needle) {
    return HasError(errs, path, needle);
  };
  EXPECT_TRUE(has("spec.rules[0].power.overLimitPercent", "between 0 and 100"));
  EXPECT_TRUE(has("spec.rules[1].window", "use `for` for levels"));
  EXPECT_TRUE(has("spec.rules[2].window", "counts within a window"));
  EXPECT_EQ(errs.size(), 3u) << ValidationStatus(errs);
  auto bad =
      DecodeGpuHealthPolicySpec(R"({"rules":[{"name":"p","power":{"overLimitPercent":"5%"}}]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("spec.rules[0].power.overLimitPercent: expected integer"),
            std::string::npos);
}

}  // namespace
}  // namespace gg::api
