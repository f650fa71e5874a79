// The shipped YAML (deploy/samples/*.yaml and the CRD's default rules) decodes, validates and
// matches the built-in defaults, and behaves as its comments promise on an Xid storm.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

#include "api/gpu_health_policy.h"
#include "policy/evaluate.h"

namespace gg::policy {
namespace {

// YAML -> JSON with plain-scalar typing (true/false, integers); quoted scalars stay strings.
nlohmann::json ToJson(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json j = nlohmann::json::object();
      for (const auto& kv : n) j[kv.first.as<std::string>()] = ToJson(kv.second);
      return j;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& e : n) j.push_back(ToJson(e));
      return j;
    }
    case YAML::NodeType::Scalar: {
      std::string s = n.Scalar();
      if (n.Tag() != "!") {
        if (s == "true") return true;
        if (s == "false") return false;
        if (!s.empty() && s.find_first_not_of("-0123456789") == std::string::npos) {
          return std::stoll(s);
        }
      }
      return s;
    }
    default:
      return nullptr;
  }
}

api::GpuHealthPolicy LoadSample(const std::string& file) {
  std::string path = file.find('/') == std::string::npos ? "/deploy/samples/" + file : "/" + file;
  YAML::Node doc = YAML::LoadFile(std::string(GG_SOURCE_DIR) + path);
  auto p = api::DecodeGpuHealthPolicy(ToJson(doc).dump());
  EXPECT_TRUE(p.ok()) << file << ": " << p.status();
  if (!p.ok()) return {};
  EXPECT_TRUE(api::ValidatePolicySpec(p->spec).empty())
      << file << ": " << api::ValidationStatus(api::ValidatePolicySpec(p->spec));
  return *p;
}

api::GpuNodeHealthStatus StormReport(WallTime now) {
  api::GpuNodeHealthStatus r;
  r.heartbeat_time = now;
  r.expected_gpus = 8;
  for (int i = 0; i < 8; ++i) {
    api::GpuStatus g;
    g.index = i;
    g.uuid = "GPU-" + std::to_string(i);
    r.gpus.push_back(g);
    for (int code : api::kApplicationXids) {
      api::XidEvent e;
      e.xid = code;
      e.gpu_uuid = g.uuid;
      e.count = 2000;
      e.first_seen = now - std::chrono::minutes(5);
      e.last_seen = now;
      e.recommended_action = "RESTART_APP";
      r.xids.push_back(e);
    }
  }
  r.sources = {{"nvml", api::SourceState::kOk, ""}, {"kmsg", api::SourceState::kOk, ""}};
  return r;
}

TEST(Samples, DefaultSampleEqualsBuiltInDefault) {
  api::GpuHealthPolicy p = LoadSample("default-policy.yaml");
  EXPECT_EQ(p.spec, api::DefaultPolicySpec());
}

TEST(Samples, AllSamplesValidAndNeverDrainOnApplicationXids) {
  const WallTime now = WallTime(std::chrono::seconds(1'800'000'000));
  for (const char* f : {"default-policy.yaml", "aggressive-training.yaml", "observe-only.yaml",
                        "batch-before-inference.yaml", "npd-xid-conditions.yaml"}) {
    api::GpuHealthPolicy p = LoadSample(f);
    Verdict v = Evaluate(p, StormReport(now), EvalMemory{}, now);
    EXPECT_LT(v.action, api::Action::kTaint) << f << ": " << v.message;
  }
  EXPECT_TRUE(LoadSample("observe-only.yaml").spec.dry_run);
  // The demo's policy (deploy/demo) is valid under the same rules.
  EXPECT_EQ(LoadSample("deploy/demo/policy.yaml").spec.rules.size(), 5u);
  // The aggressive policy notices the storm (Event) without fencing anything.
  Verdict v = Evaluate(LoadSample("aggressive-training.yaml"), StormReport(now), EvalMemory{}, now);
  EXPECT_EQ(v.action, api::Action::kEvent);
  EXPECT_EQ(v.MatchedRules(), std::vector<std::string>{"app-xid-storm"});
}

TEST(Samples, BatchBeforeInferenceStagesBatchPodsFirst) {
  api::GpuHealthPolicy p = LoadSample("batch-before-inference.yaml");
  const auto& order = p.spec.remediation.drain.order;
  ASSERT_EQ(order.size(), 3u);
  ASSERT_TRUE(order[0].pod_selector.has_value());
  EXPECT_TRUE(order[0].pod_selector->Matches({{"workload-class", "batch"}, {"app", "x"}}));
  EXPECT_FALSE(order[0].pod_selector->Matches({{"workload-class", "inference"}}));
  EXPECT_FALSE(order[0].priority_below.has_value());  // batch goes first whatever its priority
  EXPECT_TRUE(order.back().MatchesAll());
}

TEST(Samples, NpdConditionsCordonOnTheDetectorsVerdict) {
  api::GpuHealthPolicy p = LoadSample("npd-xid-conditions.yaml");
  const WallTime now = WallTime(std::chrono::seconds(1'800'000'000));
  auto report = StormReport(now);
  report.xids.clear();
  EXPECT_EQ(Evaluate(p, report, EvalMemory{}, now).state, HealthState::kHealthy);
  std::vector<NodeConditionFact> xid = {{"GPUXidFatal", "True", "FatalXid", now}};
  Verdict v = Evaluate(p, report, EvalMemory{}, now, xid);
  EXPECT_EQ(v.action, api::Action::kCordon);
  EXPECT_EQ(v.MatchedRules(), std::vector<std::string>{"npd-fatal-xid"});
  // EKS: a False "...Ready" condition, after its `for`.
  std::vector<NodeConditionFact> eks = {
      {"AcceleratedHardwareReady", "False", "NvidiaXID79Error", now - std::chrono::minutes(3)}};
  EXPECT_EQ(Evaluate(p, report, EvalMemory{}, now, eks).action, api::Action::kCordon);
}

TEST(Samples, CrdDefaultsMatchBuiltInDefaults) {
  YAML::Node crd =
      YAML::LoadFile(std::string(GG_SOURCE_DIR) + "/deploy/crds/gpuhealthpolicies.yaml");
  YAML::Node spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
  nlohmann::json rules = ToJson(spec["properties"]["rules"]["default"]);
  auto decoded = api::DecodeGpuHealthPolicySpec(nlohmann::json{{"rules", rules}}.dump());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->rules, api::DefaultRules());
  nlohmann::json sel = ToJson(spec["properties"]["nodeSelector"]["default"]);
  decoded = api::DecodeGpuHealthPolicySpec(nlohmann::json{{"nodeSelector", sel}}.dump());
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->node_selector, api::DefaultPolicySpec().node_selector);
  auto props = spec["properties"];
  EXPECT_EQ(props["unknown"]["properties"]["after"]["default"].as<std::string>(), "15m");
  EXPECT_EQ(props["recovery"]["properties"]["healthyFor"]["default"].as<std::string>(), "10m");
  EXPECT_EQ(props["safety"]["properties"]["maxUnhealthy"]["default"].as<std::string>(), "10%");
  EXPECT_EQ(props["safety"]["properties"]["maxNodesPerHour"]["default"].as<int>(), 20);
  EXPECT_EQ(props["safety"]["properties"]["maxConcurrentDrains"]["default"].as<int>(), 5);
  EXPECT_EQ(props["remediation"]["properties"]["maxBadGPUsForDeviceLevel"]["default"].as<int>(), 2);
}

}  // namespace
}  // namespace gg::policy
