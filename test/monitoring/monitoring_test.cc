// The shipped monitoring (Grafana dashboard, PrometheusRule) must only query series that our
// binaries really export, with label names they really carry: a renamed metric or label would
// otherwise leave a dashboard panel silently empty or an alert that can never fire.
//
// The exported set is read from the Prometheus exposition of a registry that holds the
// operator's, the agent's, the work queue's and the process metrics, with at least one series
// in each family, so label names are visible.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "agent/agent_metrics.h"
#include "api/gpu_node_health.h"
#include "common/clock.h"
#include "metrics/registry.h"
#include "operator/metrics.h"
#include "runtime/workqueue.h"

namespace gg {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// metric name → label names seen on its series ("le" and "quantile" excluded).
using Exported = std::map<std::string, std::set<std::string>>;

Exported ExportedSeries() {
  static Exported* cached = [] {
    auto* out = new Exported();
    static metrics::Registry reg;
    static op::OperatorMetrics om(reg);
    om.SetNodeHealth("node-a", "Unhealthy");
    om.Remediation("cordon", op::kResultSuccess);
    om.evictions.WithLabels({"success"}).Inc();
    om.drains.WithLabels({"Done"}).Inc();
    om.brake_engaged.WithLabels({"default"}).Set(0);
    om.nodes_by_state.WithLabels({"Healthy"}).Set(1);
    om.detection_to_action.WithLabels({}).Observe(0.01);

    static agent::AgentMetrics am(reg, "node-a");
    am.RegisterSource("nvml");
    api::GpuNodeHealthStatus st;
    st.node_name = "node-a";
    st.expected_gpus = 1;
    api::GpuStatus g;
    g.index = 0;
    g.uuid = "GPU-00000000-0000-0000-0000-000000000000";
    g.name = "NVIDIA H200";
    g.pci_bus_id = "00000000:3B:00.0";
    g.temperature_c = 40;
    g.slowdown_temperature_c = 90;
    g.shutdown_temperature_c = 95;
    g.power_watts = 100;
    g.power_limit_watts = 700;
    g.ecc_enabled = true;
    g.ecc_corrected_volatile = 1;
    g.ecc_uncorrected_volatile = 1;
    g.ecc_corrected_aggregate = 1;
    g.ecc_uncorrected_aggregate = 1;
    g.remapped_rows_correctable = 1;
    g.remapped_rows_uncorrectable = 1;
    g.retired_pages_sbe = 1;
    g.retired_pages_dbe = 1;
    g.pcie_replay_count = 1;
    g.nvlink_links_total = 18;
    g.nvlink_links_down = 1;
    st.gpus.push_back(g);
    st.sources.push_back({"nvml", api::SourceState::kOk, ""});
    am.Observe(st, {{g.uuid, 0}});
    am.CountXid(79, 1);
    am.PublishResult("change");
    am.PublishLatency(0.01);

    static RealClock clock;
    static runtime::WorkQueue q("node", clock, &reg);
    q.Add("node-a");
    metrics::RegisterProcessMetrics(reg);

    // Series line: name{a="x",b="y"} value
    static const std::regex series(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? )");
    static const std::regex label(R"(([a-zA-Z_][a-zA-Z0-9_]*)=")");
    std::istringstream text(reg.ExposeText());
    for (std::string line; std::getline(text, line);) {
      std::smatch m;
      if (line.empty() || line[0] == '#' || !std::regex_search(line, m, series)) continue;
      auto& labels = (*out)[m[1].str()];
      std::string body = m[3].str();
      for (auto it = std::sregex_iterator(body.begin(), body.end(), label);
           it != std::sregex_iterator(); ++it) {
        std::string l = (*it)[1].str();
        if (l != "le" && l != "quantile") labels.insert(l);
      }
    }
    return out;
  }();
  return *cached;
}

// Our metric names inside a PromQL expression. Other exporters' series (up, kube_*) and
// PromQL functions are not ours to check.
std::vector<std::string> OurMetrics(const std::string& expr) {
  static const std::regex name(
      R"(\b((gpu_guardian_|DCGM_FI_|workqueue_|controller_runtime_|process_)[a-zA-Z0-9_]*))");
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(expr.begin(), expr.end(), name); it != std::sregex_iterator();
       ++it) {
    out.push_back((*it)[1].str());
  }
  return out;
}

// Label names an expression groups by or matches on: `by (a, b)`, `without (a)`, `{a="x"}`.
std::set<std::string> UsedLabels(const std::string& expr) {
  std::set<std::string> out;
  static const std::regex grouping(R"(\b(by|without|on|ignoring)\s*\(([^)]*)\))");
  static const std::regex matcher(R"(\{([^}]*)\})");
  static const std::regex ident(R"(([a-zA-Z_][a-zA-Z0-9_]*))");
  static const std::regex matcher_label(R"(([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=))");
  for (auto it = std::sregex_iterator(expr.begin(), expr.end(), grouping);
       it != std::sregex_iterator(); ++it) {
    std::string body = (*it)[2].str();
    for (auto j = std::sregex_iterator(body.begin(), body.end(), ident);
         j != std::sregex_iterator(); ++j) {
      out.insert((*j)[1].str());
    }
  }
  for (auto it = std::sregex_iterator(expr.begin(), expr.end(), matcher);
       it != std::sregex_iterator(); ++it) {
    std::string body = (*it)[1].str();
    for (auto j = std::sregex_iterator(body.begin(), body.end(), matcher_label);
         j != std::sregex_iterator(); ++j) {
      out.insert((*j)[1].str());
    }
  }
  return out;
}

// Labels Prometheus adds at scrape or a histogram carries: always allowed.
bool TargetOrBuiltinLabel(const std::string& l) {
  return l == "job" || l == "instance" || l == "le" || l == "namespace" || l == "pod" ||
         l == "__name__";
}

// Checks one expression; returns human-readable problems.
std::vector<std::string> CheckExpr(const std::string& where, const std::string& expr) {
  std::vector<std::string> problems;
  const Exported& exported = ExportedSeries();
  std::set<std::string> labels_available;
  auto metrics = OurMetrics(expr);
  for (const auto& m : metrics) {
    auto it = exported.find(m);
    if (it == exported.end()) {
      problems.push_back(where + ": metric " + m + " is not exported by any gpu-guardian binary");
      continue;
    }
    labels_available.insert(it->second.begin(), it->second.end());
  }
  if (metrics.empty()) return problems;  // only other exporters' series
  for (const auto& l : UsedLabels(expr)) {
    if (TargetOrBuiltinLabel(l) || labels_available.count(l)) continue;
    problems.push_back(where + ": label " + l + " is not carried by " + metrics.front());
  }
  return problems;
}

TEST(MonitoringTest, ExporterSetIsSeen) {
  // Guards the checks below against a registry that silently exported nothing.
  const Exported& e = ExportedSeries();
  ASSERT_TRUE(e.count("gpu_guardian_node_healthy"));
  EXPECT_EQ(e.at("gpu_guardian_node_healthy"), std::set<std::string>{"node"});
  ASSERT_TRUE(e.count("DCGM_FI_DEV_GPU_TEMP"));
  EXPECT_TRUE(e.at("DCGM_FI_DEV_GPU_TEMP").count("Hostname"));
  ASSERT_TRUE(e.count("workqueue_depth"));
  ASSERT_TRUE(e.count("gpu_guardian_detection_to_action_seconds_bucket"));
}

TEST(MonitoringTest, CheckerRejectsUnknownNamesAndLabels) {
  EXPECT_FALSE(CheckExpr("t", "sum(gpu_guardian_no_such_metric)").empty());
  EXPECT_FALSE(CheckExpr("t", "sum by (gpu_model) (gpu_guardian_node_healthy)").empty());
  EXPECT_FALSE(CheckExpr("t", R"(gpu_guardian_nodes{phase="x"})").empty());
  EXPECT_TRUE(CheckExpr("t", R"(sum by (state) (gpu_guardian_nodes{state="Healthy"}))").empty());
  EXPECT_TRUE(CheckExpr("t", "absent(up{job=\"x\"} == 1)").empty());
}

TEST(MonitoringTest, GrafanaDashboardQueriesExportedSeries) {
  const std::string path = std::string(GG_SOURCE_DIR) + "/deploy/monitoring/grafana-dashboard.json";
  auto dash = nlohmann::json::parse(ReadFile(path), nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(dash.is_discarded()) << path << " is not valid JSON";
  ASSERT_TRUE(dash.contains("panels"));
  int exprs = 0;
  std::set<int> ids;
  std::vector<std::string> problems;
  for (const auto& p : dash["panels"]) {
    ASSERT_TRUE(p.contains("id") && p.contains("title") && p.contains("gridPos")) << p.dump();
    EXPECT_TRUE(ids.insert(p["id"].get<int>()).second) << "duplicate panel id " << p["id"];
    if (p.value("type", "") == "row") continue;
    ASSERT_TRUE(p.contains("targets")) << p["title"];
    for (const auto& t : p["targets"]) {
      ++exprs;
      auto more = CheckExpr("panel \"" + p["title"].get<std::string>() + "\"",
                            t.value("expr", std::string()));
      problems.insert(problems.end(), more.begin(), more.end());
    }
  }
  EXPECT_GE(exprs, 20);
  for (const auto& pr : problems) ADD_FAILURE() << pr;
}

TEST(MonitoringTest, PrometheusRulesQueryExportedSeries) {
  const std::string path = std::string(GG_SOURCE_DIR) + "/deploy/monitoring/prometheusrule.yaml";
  YAML::Node doc = YAML::LoadFile(path);
  int rules = 0;
  std::vector<std::string> problems;
  for (const auto& group : doc["spec"]["groups"]) {
    for (const auto& rule : group["rules"]) {
      ++rules;
      ASSERT_TRUE(rule["alert"] && rule["expr"]) << "rule without alert/expr in " << path;
      auto more =
          CheckExpr("alert " + rule["alert"].as<std::string>(), rule["expr"].as<std::string>());
      problems.insert(problems.end(), more.begin(), more.end());
      EXPECT_TRUE(rule["annotations"]["summary"]) << rule["alert"].as<std::string>();
    }
  }
  EXPECT_GE(rules, 4);
  for (const auto& pr : problems) ADD_FAILURE() << pr;
}

}  // namespace
}  // namespace gg
