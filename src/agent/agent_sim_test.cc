// The whole agent (AgentApp: file/script source -> report -> publishers over HTTP) against
// the in-process simulator with the real GPUNodeHealth CRD from deploy/crds: report created
// with its ownerReference, rewritten only on change, heartbeats, API outage and recovery.
#include <gtest/gtest.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "agent/app.h"
#include "agent/nvml_source.h"
#include "metrics/registry.h"
#include "sim/population.h"
#include "sim/server.h"

namespace gg::agent {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds limit = 20s) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return pred();
}

// YAML -> JSON for the CRD manifest (quoted scalars stay strings).
json ToJson(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      json j = json::object();
      for (const auto& kv : n) j[kv.first.as<std::string>()] = ToJson(kv.second);
      return j;
    }
    case YAML::NodeType::Sequence: {
      json j = json::array();
      for (const auto& v : n) j.push_back(ToJson(v));
      return j;
    }
    case YAML::NodeType::Scalar: {
      const std::string s = n.as<std::string>();
      if (n.Tag() == "!") return s;
      if (s == "true") return true;
      if (s == "false") return false;
      char* end = nullptr;
      long long v = std::strtoll(s.c_str(), &end, 10);
      if (!s.empty() && end && *end == '\0') return v;
      return s;
    }
    default:
      return nullptr;
  }
}

constexpr char kGnhPath[] = "/apis/gpuguardian.io/v1alpha1/gpunodehealths/node-a";

class AgentSimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sim::SimOptions o;
    o.kubelet = o.scheduler = o.controllers = false;
    auto s = sim::SimServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    sim_ = std::move(*s);
    auto crd =
        ToJson(YAML::LoadFile(std::string(GG_SOURCE_DIR) + "/deploy/crds/gpunodehealths.yaml"));
    ASSERT_TRUE(sim_->Create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd).ok());
    json node = {{"apiVersion", "v1"},
                 {"kind", "Node"},
                 {"metadata", {{"name", "node-a"}}},
                 {"status", {{"capacity", {{"nvidia.com/gpu", "8"}}}}}};
    ASSERT_TRUE(sim_->Create("/api/v1/nodes", node).ok());
    dir_ = std::filesystem::temp_directory_path() /
           ("gg-agent-sim-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    file_ = (dir_ / "gpus.json").string();
  }
  void TearDown() override {
    if (app_) app_->Stop();
    app_.reset();
    if (sim_) sim_->Stop();
    std::filesystem::remove_all(dir_);
  }
  void WriteFile(int temp, int xid_count = 0) {
    json f = {{"gpus", json::array({{{"index", 0}, {"uuid", "GPU-a"}, {"temperatureC", temp}},
                                    {{"index", 1}, {"uuid", "GPU-b"}, {"temperatureC", 40}}})}};
    if (xid_count > 0)
      f["xids"] = json::array({{{"xid", 79}, {"gpuUUID", "GPU-b"}, {"count", xid_count}}});
    const std::string tmp = file_ + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << f.dump();
    }
    std::filesystem::rename(tmp, file_);
  }
  AgentConfig Config() {
    AgentConfig c;
    c.node_name = "node-a";
    c.server = sim_->Url();
    c.sources = {"file"};
    c.file_path = file_;
    c.publish = {"resource", "annotation"};
    c.sweep_interval = 100ms;
    c.debounce = 50ms;
    c.heartbeat = 1h;
    c.metrics_addr = "127.0.0.1:0";
    return c;
  }
  void StartAgent(AgentConfig c) {
    auto app = AgentApp::Create(std::move(c), RealClock::Default(), registry_);
    ASSERT_TRUE(app.ok()) << app.status();
    app_ = std::move(app).value();
    ASSERT_TRUE(app_->Start({}).ok());
  }
  json Gnh() {
    auto r = sim_->Get(kGnhPath);
    return r.ok() ? *r : json();
  }
  // The agent publishing the file source's report (45 °C) as a resource, heartbeating every
  // 400 ms; returns once the report is there.
  void StartHeartbeatingAgent() {
    WriteFile(45);
    auto c = Config();
    c.publish = {"resource"};
    c.heartbeat = 400ms;
    StartAgent(c);
    ASSERT_TRUE(WaitFor([&] { return GnhTemp() == 45; }));
  }
  int GnhTemp() {
    auto g = Gnh();
    try {
      return g.at("status").at("gpus").at(0).at("temperatureC").get<int>();
    } catch (...) {
      return -1;
    }
  }

  std::unique_ptr<sim::SimServer> sim_;
  metrics::Registry registry_;
  std::unique_ptr<AgentApp> app_;
  std::filesystem::path dir_;
  std::string file_;
};

TEST_F(AgentSimTest, ReportCreatedWithOwnerAndUpdatedOnlyOnChange) {
  WriteFile(45);
  StartAgent(Config());
  ASSERT_TRUE(WaitFor([&] { return GnhTemp() == 45; })) << Gnh().dump();
  json g = Gnh();
  auto node = sim_->Get("/api/v1/nodes/node-a");
  ASSERT_TRUE(node.ok());
  ASSERT_EQ(g["metadata"]["ownerReferences"].size(), 1u);
  EXPECT_EQ(g["metadata"]["ownerReferences"][0]["kind"], "Node");
  EXPECT_EQ(g["metadata"]["ownerReferences"][0]["uid"], (*node)["metadata"]["uid"]);
  EXPECT_EQ(g["status"]["nodeName"], "node-a");
  EXPECT_EQ(g["status"]["expectedGPUs"], 8);
  EXPECT_EQ(g["status"]["sources"][0]["state"], "OK");
  EXPECT_TRUE(g["status"].contains("heartbeatTime"));
  auto decoded = api::DecodeGpuNodeHealthStatus(g["status"].dump());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  // The annotation mode wrote the Node too.
  ASSERT_TRUE(WaitFor([&] {
    auto n = sim_->Get("/api/v1/nodes/node-a");
    return n.ok() && (*n)["metadata"].contains("annotations") &&
           (*n)["metadata"]["annotations"].contains(api::kHealthAnnotation);
  }));
  auto n = sim_->Get("/api/v1/nodes/node-a");
  auto ann = api::DecodeHealthAnnotation(
      (*n)["metadata"]["annotations"][api::kHealthAnnotation].get<std::string>());
  ASSERT_TRUE(ann.ok()) << ann.status();
  EXPECT_EQ(ann->gpus.size(), 2u);

  // Many rebuilds (every 100 ms), no change: no new writes.
  const std::string rv = Gnh()["metadata"]["resourceVersion"];
  const uint64_t builds = app_->agent().builds();
  ASSERT_TRUE(WaitFor([&] { return app_->agent().builds() >= builds + 10; }));
  EXPECT_EQ(Gnh()["metadata"]["resourceVersion"], rv);
  EXPECT_EQ(registry_.Value("gpu_guardian_agent_publishes_total", {"change"}), 2);  // 2 modes

  // A change is written (and only it).
  WriteFile(91, 2);
  ASSERT_TRUE(WaitFor([&] { return GnhTemp() == 91; }));
  g = Gnh();
  EXPECT_NE(g["metadata"]["resourceVersion"], rv);
  ASSERT_EQ(g["status"]["xids"].size(), 1u);
  EXPECT_EQ(g["status"]["xids"][0]["xid"], 79);
  EXPECT_EQ(g["status"]["xids"][0]["count"], 2);
  EXPECT_EQ(registry_.Value("gpu_guardian_agent_publishes_total", {"error"}), 0);

  // /metrics and /healthz are served.
  auto health = app_->metrics_port();
  EXPECT_GT(health, 0);
}

constexpr char kLeasePath[] =
    "/apis/coordination.k8s.io/v1/namespaces/gpu-guardian/leases/gpu-guardian-agent-node-a";

// With the Lease's namespace in place a heartbeat renews the node's Lease: the report is
// written by changes only, so its resourceVersion and heartbeatTime stay put while the Lease's
// renewTime moves.
TEST_F(AgentSimTest, HeartbeatRenewsTheNodeLeaseNotTheReport) {
  ASSERT_TRUE(sim_->Create("/api/v1/namespaces", {{"metadata", {{"name", "gpu-guardian"}}}}).ok());
  ASSERT_NO_FATAL_FAILURE(StartHeartbeatingAgent());
  ASSERT_TRUE(WaitFor(
      [&] { return registry_.Value("gpu_guardian_agent_publishes_total", {"change"}) >= 1; }));
  ASSERT_TRUE(WaitFor([&] { return sim_->Get(kLeasePath).ok(); })) << "created with the report";
  // A heartbeat comes only after a quiet interval: from then on the facts are settled.
  ASSERT_TRUE(WaitFor(
      [&] { return registry_.Value("gpu_guardian_agent_publishes_total", {"heartbeat"}) >= 1; }));
  const json report = Gnh();
  const double hb0 = registry_.Value("gpu_guardian_agent_publishes_total", {"heartbeat"});
  const json lease0 = *sim_->Get(kLeasePath);
  ASSERT_TRUE(WaitFor([&] {
    return registry_.Value("gpu_guardian_agent_publishes_total", {"heartbeat"}) > hb0 + 2;
  }));
  const json lease = *sim_->Get(kLeasePath);
  EXPECT_EQ(lease["spec"]["holderIdentity"], "node-a");
  EXPECT_EQ(lease["spec"]["leaseDurationSeconds"], 3) << "three 400 ms heartbeats, rounded up";
  EXPECT_EQ(lease["metadata"]["labels"]["gpuguardian.io/agent-lease"], "true");
  EXPECT_NE(lease["spec"]["renewTime"], lease0["spec"]["renewTime"]);
  // MicroTime: RFC 3339 with exactly six fractional digits.
  const std::string renew = lease["spec"]["renewTime"].get<std::string>();
  EXPECT_EQ(renew.size(), std::string("2026-01-01T00:00:00.000000Z").size()) << renew;
  EXPECT_EQ(renew[19], '.') << renew;
  const json now = Gnh();
  EXPECT_EQ(now["metadata"]["resourceVersion"], report["metadata"]["resourceVersion"]);
  EXPECT_EQ(now["status"]["heartbeatTime"], report["status"]["heartbeatTime"]);
  // A change is still written to the report at once.
  WriteFile(50);
  EXPECT_TRUE(WaitFor([&] { return GnhTemp() == 50; }));
  EXPECT_EQ(registry_.Value("gpu_guardian_agent_publishes_total", {"error"}), 0);
}

// Someone else wrote the Lease (a conflict on our next PUT) or deleted it: the agent reads it
// again and renews it, or creates it again.
TEST_F(AgentSimTest, ALeaseChangedOrDeletedBehindTheAgentIsRenewedAgain) {
  ASSERT_TRUE(sim_->Create("/api/v1/namespaces", {{"metadata", {{"name", "gpu-guardian"}}}}).ok());
  ASSERT_NO_FATAL_FAILURE(StartHeartbeatingAgent());
  ASSERT_TRUE(WaitFor([&] { return sim_->Get(kLeasePath).ok(); }));
  ASSERT_TRUE(sim_->MergePatch(kLeasePath, {{"spec", {{"holderIdentity", "intruder"}}}}).ok());
  EXPECT_TRUE(WaitFor([&] {
    auto l = sim_->Get(kLeasePath);
    return l.ok() && (*l)["spec"]["holderIdentity"] == "node-a";
  }));
  ASSERT_TRUE(sim_->Delete(kLeasePath).ok());
  EXPECT_TRUE(WaitFor([&] { return sim_->Get(kLeasePath).ok(); }));
  const json report = Gnh();
  const double hb = registry_.Value("gpu_guardian_agent_publishes_total", {"heartbeat"});
  ASSERT_TRUE(WaitFor([&] {
    return registry_.Value("gpu_guardian_agent_publishes_total", {"heartbeat"}) > hb + 1;
  }));
  EXPECT_EQ(Gnh()["status"]["heartbeatTime"], report["status"]["heartbeatTime"])
      << "renewed through the Lease, not the report";
}

// No namespace for the Lease here (an older cluster, or RBAC without the Lease grant): the
// heartbeat falls back to patching the report's heartbeatTime.
TEST_F(AgentSimTest, HeartbeatRewritesUnchangedReport) {
  ASSERT_NO_FATAL_FAILURE(StartHeartbeatingAgent());
  // A change write (e.g. expectedGPUs learned from the Node) may come first; wait for a write
  // the publisher counts as a heartbeat, and check it moved heartbeatTime and only that: the
  // facts and their observedAt stay as the last change wrote them.
  ASSERT_TRUE(WaitFor(
      [&] { return registry_.Value("gpu_guardian_agent_publishes_total", {"change"}) >= 1; }));
  const double hb0 = registry_.Value("gpu_guardian_agent_publishes_total", {"heartbeat"});
  ASSERT_TRUE(WaitFor(
      [&] { return registry_.Value("gpu_guardian_agent_publishes_total", {"heartbeat"}) > hb0; }));
  const json before = Gnh()["status"];
  ASSERT_TRUE(WaitFor([&] {
    return registry_.Value("gpu_guardian_agent_publishes_total", {"heartbeat"}) > hb0 + 1;
  }));
  ASSERT_TRUE(WaitFor([&] { return Gnh()["status"]["heartbeatTime"] != before["heartbeatTime"]; }));
  json after = Gnh()["status"];
  EXPECT_EQ(after["observedAt"], before["observedAt"]);
  after["heartbeatTime"] = before["heartbeatTime"];
  EXPECT_EQ(after, before);
  EXPECT_EQ(GnhTemp(), 45);
}

// Someone else changed the report since the agent wrote it: the heartbeat's precondition
// fails and the agent writes its whole report again instead of renewing a report it did not
// write.
TEST_F(AgentSimTest, HeartbeatAfterAForeignChangeRewritesTheWholeReport) {
  ASSERT_NO_FATAL_FAILURE(StartHeartbeatingAgent());
  json g = Gnh();
  g["status"]["gpus"][0]["temperatureC"] = 12;
  g["metadata"].erase("resourceVersion");
  ASSERT_TRUE(sim_->MergePatch(kGnhPath, {{"status", g["status"]}}).ok());
  ASSERT_EQ(GnhTemp(), 12);
  ASSERT_TRUE(WaitFor([&] { return GnhTemp() == 45; })) << Gnh().dump();
  EXPECT_EQ(registry_.Value("gpu_guardian_agent_publishes_total", {"error"}), 0);
}

TEST_F(AgentSimTest, ApiOutageThenRecoveryPublishesLatestState) {
  WriteFile(45);
  auto c = Config();
  c.publish = {"resource"};
  StartAgent(c);
  ASSERT_TRUE(WaitFor([&] { return GnhTemp() == 45; }));

  sim::FaultConfig outage;
  outage.outage_until = std::chrono::steady_clock::now() + 3s;
  sim_->SetFaults(outage);
  WriteFile(70);
  // Collection goes on while the API is down.
  ASSERT_TRUE(WaitFor([&] {
    auto l = app_->agent().Latest();
    return l && l->gpus.size() == 2 && l->gpus[0].temperature_c == 70;
  }));
  WriteFile(77);
  ASSERT_TRUE(WaitFor([&] {
    auto l = app_->agent().Latest();
    return l && l->gpus[0].temperature_c == 77;
  }));
  // After the outage the newest state is what the API holds.
  ASSERT_TRUE(WaitFor([&] { return GnhTemp() == 77; }, 60s)) << Gnh().dump();
}

TEST_F(AgentSimTest, ScriptSourceUuidsMatchTheSimulatorConvention) {
  const std::string script = (dir_ / "t.yaml").string();
  {
    std::ofstream out(script);
    out << "gpus: 2\ntimeline:\n- {at: 0s, gpu: 1, xid: 48}\n";
  }
  auto c = Config();
  c.sources = {"script"};
  c.script_path = script;
  c.publish = {"resource"};
  StartAgent(c);
  ASSERT_TRUE(WaitFor([&] {
    auto g = Gnh();
    return g.contains("status") && g["status"].contains("gpus") && g["status"]["gpus"].size() == 2;
  }));
  json g = Gnh();
  EXPECT_EQ(g["status"]["gpus"][0]["uuid"], sim::FakeGpuUuid("node-a", 0));
  EXPECT_EQ(g["status"]["gpus"][1]["uuid"], sim::FakeGpuUuid("node-a", 1));
  EXPECT_EQ(FakeGpuUuid("node-a", 1), sim::FakeGpuUuid("node-a", 1));
}

// MIG end to end through the real CRD (which the simulator prunes by): the kernel-log Xid of
// one GPU instance keeps its GPU-I/GPU-CI in the published report, and the partitioned GPU
// lists its MIG devices.
TEST_F(AgentSimTest, MigXidKeepsItsGpuInstanceInThePublishedReport) {
  const std::string script = (dir_ / "mig.yaml").string();
  {
    std::ofstream out(script);
    out << "gpus: 2\nproduct: NVIDIA H200\nmig:\n"
           "- {gpu: 1, gpu_instance: 3, compute_instance: 0, profile: 1g.18gb, memory_mib: 16384}\n"
           "- {gpu: 1, gpu_instance: 5, compute_instance: 0, profile: 3g.71gb, memory_mib: 71680}\n"
           "timeline:\n";
  }
  const std::string kmsg = (dir_ / "kmsg").string();
  {
    std::ofstream out(kmsg);
    out << "4,100,1000,-;NVRM: Xid (PCI:0000:86:00 GPU-I:03 GPU-CI:00): 13, pid=4242, "
           "name=python3, Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0)\n";
  }
  auto c = Config();
  c.sources = {"script", "kmsg"};
  c.script_path = script;
  c.kmsg_path = kmsg;
  c.kmsg_from_boot = true;
  c.publish = {"resource"};
  StartAgent(c);
  auto xid_of = [](const json& g, int xid) -> json {
    if (!g.contains("status") || !g["status"].contains("xids")) return json();
    for (const auto& x : g["status"]["xids"])
      if (x.value("xid", 0) == xid) return x;
    return json();
  };
  auto gpus_seen = [](const json& g) {
    return g.contains("status") && g["status"].contains("gpus") && g["status"]["gpus"].size() == 2;
  };
  ASSERT_TRUE(WaitFor([&] {
    auto g = Gnh();
    return !xid_of(g, 13).is_null() && gpus_seen(g);
  })) << Gnh().dump();
  // Once the GPUs are known, a line of GPU 1 (0000:19:00) is also mapped to its UUID.
  {
    std::ofstream out(kmsg, std::ios::app);
    out << "4,101,2000,-;NVRM: Xid (PCI:0000:19:00 GPU-I:05): 43, pid=77, name=train, "
           "Ch 00000008\n";
  }
  ASSERT_TRUE(WaitFor([&] { return !xid_of(Gnh(), 43).is_null(); })) << Gnh().dump();
  json g = Gnh();
  json x13 = xid_of(g, 13);
  EXPECT_EQ(x13["gpuInstance"], 3) << x13.dump();
  EXPECT_EQ(x13["computeInstance"], 0) << x13.dump();
  EXPECT_EQ(x13["pciBusId"], "0000:86:00.0");
  json x43 = xid_of(g, 43);
  EXPECT_EQ(x43["gpuInstance"], 5) << x43.dump();
  EXPECT_FALSE(x43.contains("computeInstance")) << x43.dump();
  EXPECT_EQ(x43["gpuUUID"], sim::FakeGpuUuid("node-a", 1));  // 0000:19:00 is GPU 1
  const json& gpus = g["status"]["gpus"];
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_FALSE(gpus[0].contains("migDevices"));
  EXPECT_EQ(gpus[1]["migEnabled"], true);
  ASSERT_EQ(gpus[1]["migDevices"].size(), 2u) << gpus[1].dump();
  EXPECT_EQ(gpus[1]["migDevices"][0]["gpuInstance"], 3);
  EXPECT_EQ(gpus[1]["migDevices"][0]["profile"], "1g.18gb");
  EXPECT_EQ(gpus[1]["migDevices"][0]["memoryMiB"], 16384);
  EXPECT_EQ(gpus[1]["migDevices"][1]["gpuInstance"], 5);
  EXPECT_EQ(gpus[1]["migDevices"][1]["uuid"].get<std::string>().rfind("MIG-", 0), 0u);
}

}  // namespace
}  // namespace gg::agent
