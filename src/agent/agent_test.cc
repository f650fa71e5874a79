// Report building, the agent's one-shot path, metrics names/labels, config validation and
// the publish bodies.
#include "agent/agent.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "agent/app.h"
#include "agent/k8s_writers.h"
#include "agent/nvml_source.h"
#include "agent/report_builder.h"
#include "gpu/fake_nvml.h"
#include "metrics/registry.h"

namespace gg::agent {
namespace {

using namespace std::chrono_literals;

api::GpuStatus Gpu(int index, std::string uuid, int temp) {
  api::GpuStatus g;
  g.index = index;
  g.uuid = std::move(uuid);
  g.temperature_c = temp;
  return g;
}

TEST(BuildReport, MergesSourcesFirstWinsSortedByIndex) {
  ReportInputs in;
  in.node_name = "n1";
  in.agent_version = "v";
  in.expected_gpus = 3;
  SourceSnapshot nvml;
  nvml.provides_gpus = true;
  nvml.status = {"nvml", api::SourceState::kOk, ""};
  nvml.gpus = {Gpu(1, "GPU-b", 50), Gpu(0, "GPU-a", 40)};
  SourceSnapshot file;
  file.provides_gpus = true;
  file.status = {"file", api::SourceState::kDegraded, "parse error"};
  file.gpus = {Gpu(0, "GPU-a", 99), Gpu(2, "GPU-c", 60)};
  SourceSnapshot kmsg;
  kmsg.status = {"kmsg", api::SourceState::kOk, ""};
  kmsg.gpus = {Gpu(7, "GPU-ignored", 1)};  // provides_gpus false: ignored
  in.snapshots = {nvml, file, kmsg};
  api::XidEvent x;
  x.xid = 79;
  in.xids = {x};
  const WallTime now = WallTime(std::chrono::seconds(1'800'000'000));
  auto r = BuildReport(in, now);
  EXPECT_EQ(r.node_name, "n1");
  EXPECT_EQ(r.expected_gpus, 3);
  EXPECT_EQ(r.observed_at, now);
  EXPECT_EQ(r.heartbeat_time, WallTime{});
  ASSERT_EQ(r.gpus.size(), 3u);
  EXPECT_EQ(r.gpus[0].uuid, "GPU-a");
  EXPECT_EQ(r.gpus[0].temperature_c, 40);  // nvml came first
  EXPECT_EQ(r.gpus[1].uuid, "GPU-b");
  EXPECT_EQ(r.gpus[2].uuid, "GPU-c");
  ASSERT_EQ(r.sources.size(), 3u);
  EXPECT_EQ(r.sources[1].state, api::SourceState::kDegraded);
  ASSERT_EQ(r.xids.size(), 1u);
}

TEST(Agent, CollectOnceAndMetrics) {
  gpu::FakeNvml fake(2);
  fake.Mutate(1, [](gpu::FakeGpuState& g) { g.temperature_c = 77; });
  FakeClock clock;
  gpu::XidClassifier classifier;
  metrics::Registry registry;
  AgentMetrics metrics(registry, "node-x");
  AgentOptions ao;
  ao.node_name = "node-x";
  ao.agent_version = "1.2.3";
  ao.expected_gpus = 2;
  Agent agent(ao, clock, &metrics);
  NvmlSourceOptions no;
  no.events = false;
  agent.AddSource(std::make_unique<NvmlSource>(fake, clock, classifier, no));
  auto r = agent.CollectOnce();
  EXPECT_EQ(r.agent_version, "1.2.3");
  ASSERT_EQ(r.gpus.size(), 2u);
  EXPECT_EQ(r.gpus[1].temperature_c, 77);

  // Xids pushed through the context are counted once and land in the next report.
  auto ctx = agent.Context();
  api::XidEvent x;
  x.xid = 13;
  x.gpu_uuid = r.gpus[0].uuid;
  x.last_seen = clock.Now();
  ctx.on_xid(x, "nvml");
  ctx.on_xid(x, "kmsg");  // same Xid from the kernel log: not counted twice
  r = agent.BuildNow();
  ASSERT_EQ(r.xids.size(), 1u);
  EXPECT_EQ(r.xids[0].count, 1);

  const std::string text = registry.ExposeText();
  const std::string labels = "{gpu=\"1\",UUID=\"" + r.gpus[1].uuid + "\",pci_bus_id=\"" +
                             r.gpus[1].pci_bus_id + "\",device=\"nvidia1\",modelName=\"" +
                             r.gpus[1].name + "\",Hostname=\"node-x\"}";
  EXPECT_NE(text.find("DCGM_FI_DEV_GPU_TEMP" + labels + " 77"), std::string::npos) << text;
  EXPECT_NE(text.find("DCGM_FI_DEV_POWER_USAGE" + labels + " 81"), std::string::npos);
  EXPECT_NE(text.find("# TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter"), std::string::npos);
  EXPECT_NE(text.find("DCGM_FI_DEV_XID_ERRORS{gpu=\"0\""), std::string::npos);
  EXPECT_EQ(registry.Value("gpu_guardian_agent_xid_total", {"13"}), 1);
  EXPECT_EQ(registry.Value("gpu_guardian_agent_source_state", {"nvml", "OK"}), 1);
  EXPECT_EQ(registry.Value("gpu_guardian_agent_source_state", {"nvml", "Unavailable"}), 0);
  EXPECT_EQ(registry.Value("gpu_guardian_agent_publishes_total", {"error"}), 0);
  EXPECT_EQ(registry.Value("gpu_guardian_agent_expected_gpus"), 2);
}

TEST(Agent, CounterFollowsNvmlCounterIncludingReset) {
  gpu::FakeNvml fake(1);
  FakeClock clock;
  gpu::XidClassifier classifier;
  metrics::Registry registry;
  AgentMetrics metrics(registry, "h");
  AgentOptions ao;
  ao.node_name = "h";
  Agent agent(ao, clock, &metrics);
  NvmlSourceOptions no;
  no.events = false;
  agent.AddSource(std::make_unique<NvmlSource>(fake, clock, classifier, no));
  fake.Mutate(0, [](gpu::FakeGpuState& g) { g.ecc_uncorrected_volatile = 5; });
  auto r = agent.CollectOnce();
  const auto& g = r.gpus.at(0);
  metrics::LabelValues l = {"0", g.uuid, g.pci_bus_id, "nvidia0", g.name, "h"};
  EXPECT_EQ(registry.Value("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", l), 5);
  fake.Mutate(0, [](gpu::FakeGpuState& g) { g.ecc_uncorrected_volatile = 7; });
  agent.CollectOnce();
  EXPECT_EQ(registry.Value("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", l), 7);
  fake.Mutate(0, [](gpu::FakeGpuState& g) { g.ecc_uncorrected_volatile = 1; });  // reset
  agent.CollectOnce();
  EXPECT_EQ(registry.Value("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", l), 1);
}

TEST(AgentConfig, Validation) {
  AgentConfig c;
  c.node_name = "n";
  EXPECT_TRUE(ValidateConfig(c).ok());
  auto bad = c;
  bad.sources = {"nvml", "gpu"};
  EXPECT_EQ(ValidateConfig(bad).message(),
            "--source: unknown source \"gpu\" (want nvml, kmsg, file, script)");
  bad = c;
  bad.sources = {"file"};
  EXPECT_EQ(ValidateConfig(bad).message(), "--file: required with --source file");
  bad = c;
  bad.sources = {"nvml", "script"};
  bad.script_path = "x.yaml";
  EXPECT_FALSE(ValidateConfig(bad).ok());
  bad = c;
  bad.publish = {"crd"};
  EXPECT_FALSE(ValidateConfig(bad).ok());
  bad = c;
  bad.node_name.clear();
  EXPECT_EQ(ValidateConfig(bad).message(), "--node-name: required (or set $NODE_NAME)");
  bad.once = bad.print = true;  // --once --print needs no node
  EXPECT_TRUE(ValidateConfig(bad).ok());
  EXPECT_EQ(SplitList(" nvml, kmsg,,file "), (std::vector<std::string>{"nvml", "kmsg", "file"}));
}

TEST(AgentApp, OncePrintWithoutApiServer) {
  gpu::FakeNvml fake(2);
  AgentConfig c;
  c.once = c.print = true;
  c.metrics_addr = "0";
  metrics::Registry registry;
  auto app = AgentApp::Create(c, RealClock::Default(), registry, Logger(), &fake);
  ASSERT_TRUE(app.ok()) << app.status();
  std::ostringstream out;
  EXPECT_EQ((*app)->RunOnce(out), 0);
  auto j = nlohmann::json::parse(out.str(), nullptr, false);
  ASSERT_TRUE(j.is_object()) << out.str();
  EXPECT_EQ(j["gpus"].size(), 2u);
  EXPECT_EQ(j["sources"][0]["state"], "OK");

  gpu::FakeNvml missing(1);
  missing.SetLibraryMissing(true);
  metrics::Registry registry2;
  auto app2 = AgentApp::Create(c, RealClock::Default(), registry2, Logger(), &missing);
  ASSERT_TRUE(app2.ok());
  std::ostringstream out2;
  EXPECT_EQ((*app2)->RunOnce(out2), 1);  // nothing could be collected
  EXPECT_NE(out2.str().find("Unavailable"), std::string::npos);
}

// The agent, one shot, over a kernel log: returns the report it printed.
nlohmann::json OnceOverKmsg(const std::string& log_text, AgentConfig c) {
  const std::string path = ::testing::TempDir() + "gg-agent-kmsg-" +
                           ::testing::UnitTest::GetInstance()->current_test_info()->name();
  {
    std::ofstream out(path, std::ios::trunc);
    out << log_text;
  }
  c.once = c.print = true;
  c.metrics_addr = "0";
  c.sources = {"kmsg"};
  c.kmsg_path = path;
  c.kmsg_from_boot = true;
  metrics::Registry registry;
  auto app = AgentApp::Create(c, RealClock::Default(), registry, Logger());
  EXPECT_TRUE(app.ok()) << app.status();
  if (!app.ok()) return {};
  std::ostringstream out;
  (*app)->RunOnce(out);
  std::remove(path.c_str());
  return nlohmann::json::parse(out.str(), nullptr, false);
}

const nlohmann::json* XidIn(const nlohmann::json& report, int xid) {
  if (!report.is_object() || !report.contains("xids")) return nullptr;
  for (const auto& x : report["xids"])
    if (x.value("xid", 0) == xid) return &x;
  return nullptr;
}

// Contract: a MIG Xid line in the kernel log is published with its GPU instance.
TEST(AgentApp, MigKernelXidCarriesTheGpuInstance) {
  auto r = OnceOverKmsg(
      "4,7,100,-;NVRM: Xid (PCI:0000:86:00 GPU-I:03 GPU-CI:00): 13, pid=4242, name=python3, "
      "Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0): Out Of Range Address\n"
      "4,8,200,-;NVRM: Xid (PCI:0000:87:00): 79, pid='<unknown>', name=<unknown>, GPU has "
      "fallen off the bus.\n",
      AgentConfig{});
  const auto* x13 = XidIn(r, 13);
  ASSERT_NE(x13, nullptr) << r.dump();
  EXPECT_EQ((*x13)["gpuInstance"], 3);
  EXPECT_EQ((*x13)["computeInstance"], 0);
  EXPECT_EQ((*x13)["pciBusId"], "0000:86:00.0");
  const auto* x79 = XidIn(r, 79);
  ASSERT_NE(x79, nullptr) << r.dump();
  EXPECT_FALSE(x79->contains("gpuInstance"));  // whole GPU
}

// --xid-ignore-dp-defaults: the device plugin's application Xids (13,31,43,45,68,109) are
// IGNORE; DP_ENABLE_HEALTHCHECKS re-arms one, as in the plugin.
TEST(AgentApp, XidIgnoreDpDefaultsFlag) {
  const std::string log =
      "4,1,100,-;NVRM: Xid (PCI:0000:3b:00): 109, pid=1, name=a, CTX SWITCH TIMEOUT\n"
      "4,2,200,-;NVRM: Xid (PCI:0000:3b:00): 31, pid=1, name=a, MMU Fault\n"
      "4,3,300,-;NVRM: Xid (PCI:0000:3b:00): 48, An uncorrectable double bit error\n";
  ::unsetenv("DP_ENABLE_HEALTHCHECKS");
  ::unsetenv("DP_DISABLE_HEALTHCHECKS");
  AgentConfig plain;
  auto r = OnceOverKmsg(log, plain);
  ASSERT_NE(XidIn(r, 109), nullptr) << r.dump();
  EXPECT_EQ((*XidIn(r, 109))["recommendedAction"], "RESET_GPU");  // the catalog's rating

  AgentConfig dp;
  dp.xid_ignore_dp_defaults = true;
  r = OnceOverKmsg(log, dp);
  ASSERT_NE(XidIn(r, 109), nullptr) << r.dump();
  EXPECT_EQ((*XidIn(r, 109))["recommendedAction"], "IGNORE");
  EXPECT_EQ((*XidIn(r, 31))["recommendedAction"], "IGNORE");
  EXPECT_NE((*XidIn(r, 48))["recommendedAction"], "IGNORE");  // not an application Xid

  ::setenv("DP_ENABLE_HEALTHCHECKS", "109", 1);
  r = OnceOverKmsg(log, dp);
  ::unsetenv("DP_ENABLE_HEALTHCHECKS");
  ASSERT_NE(XidIn(r, 109), nullptr) << r.dump();
  EXPECT_EQ((*XidIn(r, 109))["recommendedAction"], "RESET_GPU");
  EXPECT_EQ((*XidIn(r, 31))["recommendedAction"], "IGNORE");
}

TEST(ResourceWriter, Bodies) {
  api::GpuNodeHealthStatus r;
  r.node_name = "n1";
  auto body = nlohmann::json::parse(ResourceWriter::StatusPatchBody(r));
  EXPECT_EQ(body["status"]["nodeName"], "n1");
  EXPECT_TRUE(body["status"]["agentVersion"].is_null());  // clears a stale value
  EXPECT_TRUE(body["status"]["observedAt"].is_null());
  EXPECT_TRUE(body["status"]["gpus"].is_array());
  auto obj = nlohmann::json::parse(ResourceWriter::NewObjectBody("n1", "uid-1"));
  EXPECT_EQ(obj["apiVersion"], "gpuguardian.io/v1alpha1");
  EXPECT_EQ(obj["kind"], "GPUNodeHealth");
  EXPECT_EQ(obj["metadata"]["name"], "n1");
  EXPECT_EQ(obj["metadata"]["ownerReferences"][0]["kind"], "Node");
  EXPECT_EQ(obj["metadata"]["ownerReferences"][0]["uid"], "uid-1");
  EXPECT_FALSE(obj.contains("status"));
  // A heartbeat carries the time and the precondition, nothing of the report.
  const WallTime t = WallTime(std::chrono::seconds(1'767'225'600)) + std::chrono::microseconds(5);
  auto hb = nlohmann::json::parse(ResourceWriter::HeartbeatPatchBody(t, "42"));
  EXPECT_EQ(hb, nlohmann::json::parse(
                    R"({"metadata":{"resourceVersion":"42"},
                        "status":{"heartbeatTime":"2026-01-01T00:00:00.000005Z"}})"));
  EXPECT_LT(ResourceWriter::HeartbeatPatchBody(t, "42").size(), 100u);
}

TEST(FakeGpuUuid, Shape) {
  const std::string u = FakeGpuUuid("gpu-node-00000", 0);
  ASSERT_EQ(u.size(), 40u);
  EXPECT_EQ(u.rfind("GPU-", 0), 0u);
  EXPECT_EQ(u[12], '-');
  EXPECT_NE(u, FakeGpuUuid("gpu-node-00000", 1));
  EXPECT_EQ(u, FakeGpuUuid("gpu-node-00000", 0));
}

}  // namespace
}  // namespace gg::agent
