// What an operator sees from the agent: the one-shot diagnosis reads every source
// to its end and its exit status says whether one failed; a kmsg path that is not a log and a
// misspelled field in the file source are named errors; the log has one line per transition
// (source state, first sight of an Xid, storms summed per interval, GPU lost/back).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent.h"
#include "agent/app.h"
#include "agent/publisher.h"
#include "common/clock.h"
#include "common/log.h"
#include "metrics/registry.h"

namespace gg::agent {
namespace {

using namespace std::chrono_literals;

class CaptureSink : public LogSink {
 public:
  void Write(std::string_view line) override {
    std::scoped_lock lock(mu);
    lines.emplace_back(line);
  }
  std::vector<std::string> Matching(std::string_view needle) {
    std::scoped_lock lock(mu);
    std::vector<std::string> out;
    for (const auto& l : lines)
      if (l.find(needle) != std::string::npos) out.push_back(l);
    return out;
  }
  std::string All() {
    std::scoped_lock lock(mu);
    std::string out;
    for (const auto& l : lines) out += l + "\n";
    return out;
  }
  std::mutex mu;
  std::vector<std::string> lines;
};

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "gg-op-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string Write(const std::string& name, const std::string& text) const {
    std::string p = path_ + "/" + name;
    std::ofstream(p) << text;
    return p;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A kernel log (kmsg record format) holding eight Xids on four GPUs among other lines.
std::string EightXidLog() {
  const char* lines[] = {
      "6,100,1000,-;Linux version 6.1.0 (gcc 12)",
      "4,101,2000,-;NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has "
      "fallen off the bus.",
      "4,102,3000,-;NVRM: Xid (PCI:0000:55:00): 48, An uncorrectable double bit error (DBE) "
      "has been detected on GPU in the framebuffer at partition 6, subpartition 0.",
      "4,103,4000,-;NVRM: Xid (PCI:0000:18:00): 109, pid=1797828, name=pt_main_thread, Ch "
      "00000008, errorString CTX SWITCH TIMEOUT, Info 0x58005",
      "6,104,4500,-;eth0: link up",
      "4,105,5000,-;NVRM: Xid (PCI:0000:b7:00): 13, pid=2280636, name=train.3, Graphics "
      "Exception",
      "4,106,6000,-;NVRM: Xid (PCI:0000:b7:00): 31, pid=2280636, name=train.3, Ch 0000000d, "
      "MMU Fault",
      "4,107,7000,-;NVRM: Xid (PCI:0000:18:00): 94, pid=1797828, name=pt_main_thread, "
      "Contained: SM (0x1).",
      "4,108,8000,-;NVRM: Xid (PCI:0000:55:00): 63, ECC page retirement or row remapping "
      "recording event",
      "4,109,9000,-;NVRM: Xid (PCI:0000:3b:00): 74, pid=1234, name=nccl, NVLink: fatal error",
  };
  std::string out;
  for (const char* l : lines) out += std::string(l) + "\n";
  return out;
}

struct OnceResult {
  int code = -1;
  nlohmann::json report;
  std::string log;
};

OnceResult RunOnce(AgentConfig c) {
  c.once = c.print = true;
  c.metrics_addr = "0";
  auto sink = std::make_shared<CaptureSink>();
  metrics::Registry registry;
  auto app = AgentApp::Create(c, RealClock::Default(), registry, Logger(sink).WithName("agent"));
  OnceResult r;
  if (!app.ok()) {
    r.log = app.status().ToString();
    return r;
  }
  std::ostringstream out;
  r.code = (*app)->RunOnce(out);
  r.report = nlohmann::json::parse(out.str(), nullptr, false);
  r.log = sink->All();
  return r;
}

TEST(AgentOnce, KmsgFromBootReportsEveryXidInTheLog) {
  TempDir dir;
  AgentConfig c;
  c.sources = {"kmsg"};
  c.kmsg_path = dir.Write("kmsg", EightXidLog());
  c.kmsg_from_boot = true;
  OnceResult r = RunOnce(c);
  ASSERT_EQ(r.code, 0) << r.log;
  ASSERT_TRUE(r.report.is_object()) << r.log;
  std::multiset<int> xids;
  for (const auto& x : r.report["xids"]) xids.insert(x["xid"].get<int>());
  EXPECT_EQ(xids, (std::multiset<int>{13, 31, 48, 63, 74, 79, 94, 109})) << r.report.dump(1);
  for (const auto& x : r.report["xids"]) {
    EXPECT_FALSE(x["pciBusId"].get<std::string>().empty());
    EXPECT_FALSE(x["recommendedAction"].get<std::string>().empty());
  }
  EXPECT_EQ(r.report["sources"][0]["state"], "OK");
  // Each Xid is one log line naming it, its GPU and the catalog's action.
  size_t seen = 0;
  std::istringstream lines(r.log);
  for (std::string l; std::getline(lines, l);)
    if (l.find("Xid seen") != std::string::npos) {
      ++seen;
      EXPECT_NE(l.find("action="), std::string::npos) << l;
      EXPECT_NE(l.find("pci="), std::string::npos) << l;
    }
  EXPECT_EQ(seen, 8u) << r.log;
}

TEST(AgentOnce, KmsgWithoutFromBootReadsFromTheEnd) {
  TempDir dir;
  AgentConfig c;
  c.sources = {"kmsg"};
  c.kmsg_path = dir.Write("kmsg", EightXidLog());
  OnceResult r = RunOnce(c);
  ASSERT_EQ(r.code, 0) << r.log;
  EXPECT_TRUE(r.report["xids"].empty()) << r.report.dump(1);
}

TEST(AgentOnce, KmsgPathThatIsADirectoryIsUnavailable) {
  TempDir dir;
  AgentConfig c;
  c.sources = {"kmsg"};
  c.kmsg_path = dir.path();
  c.kmsg_from_boot = true;
  OnceResult r = RunOnce(c);
  EXPECT_EQ(r.code, 1) << r.log;
  ASSERT_TRUE(r.report.is_object()) << r.log;
  EXPECT_EQ(r.report["sources"][0]["state"], "Unavailable");
  EXPECT_NE(r.report["sources"][0]["message"].get<std::string>().find("a directory"),
            std::string::npos)
      << r.report.dump(1);
  EXPECT_NE(r.log.find("source unavailable"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("a directory"), std::string::npos) << r.log;
}

TEST(AgentOnce, MissingKmsgFileIsUnavailableAndFailsTheRun) {
  AgentConfig c;
  c.sources = {"kmsg"};
  c.kmsg_path = "/nonexistent/kmsg";
  OnceResult r = RunOnce(c);
  EXPECT_EQ(r.code, 1) << r.log;
  EXPECT_EQ(r.report["sources"][0]["state"], "Unavailable");
  EXPECT_NE(r.log.find("No such file"), std::string::npos) << r.log;
}

TEST(AgentOnce, FileSourceUnknownFieldFailsAndIsNamed) {
  TempDir dir;
  AgentConfig c;
  c.sources = {"file"};
  c.file_path = dir.Write("gpus.json", R"({"gpuz": [{"index": 0, "uuid": "GPU-a"}]})");
  OnceResult r = RunOnce(c);
  EXPECT_EQ(r.code, 1) << r.log;
  ASSERT_TRUE(r.report.is_object()) << r.log;
  const std::string msg = r.report["sources"][0]["message"];
  EXPECT_EQ(r.report["sources"][0]["state"], "Degraded");
  EXPECT_NE(msg.find("unknown field \"gpuz\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean \"gpus\""), std::string::npos) << msg;
  EXPECT_NE(r.log.find("gpuz"), std::string::npos) << r.log;

  // Nested objects are held to their field names too.
  c.file_path = dir.Write("nested.json",
                          R"({"gpus": [{"index": 0, "uuid": "GPU-a", "ecc": {"uncorected": 1}}]})");
  r = RunOnce(c);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.report["sources"][0]["message"].get<std::string>().find(
                "unknown field \"uncorected\" in gpus[0].ecc"),
            std::string::npos)
      << r.report.dump(1);

  // The right spelling passes.
  c.file_path = dir.Write("good.json", R"({"gpus": [{"index": 0, "uuid": "GPU-a"}]})");
  r = RunOnce(c);
  EXPECT_EQ(r.code, 0) << r.log;
  EXPECT_EQ(r.report["gpus"].size(), 1u);
}

// A source whose snapshot the test sets.
class FakeSource final : public Source {
 public:
  explicit FakeSource(std::string name) : name_(std::move(name)) {
    snap_.provides_gpus = true;
    snap_.status = {name_, api::SourceState::kUnavailable, "not collected yet"};
  }
  std::string_view Name() const override { return name_; }
  void Start(const SourceContext&, std::stop_token) override {}
  void Stop() override {}
  void PollOnce(const SourceContext&) override {}
  SourceSnapshot Snapshot() const override {
    std::scoped_lock lock(mu_);
    return snap_;
  }
  void Set(SourceSnapshot s) {
    std::scoped_lock lock(mu_);
    snap_ = std::move(s);
  }

 private:
  std::string name_;
  mutable std::mutex mu_;
  SourceSnapshot snap_;
};

api::GpuStatus Gpu(int index, bool lost = false) {
  api::GpuStatus g;
  g.index = index;
  g.uuid = "GPU-" + std::to_string(index);
  g.lost = lost;
  return g;
}

SourceSnapshot Snap(api::SourceState state, std::string msg, std::vector<api::GpuStatus> gpus) {
  SourceSnapshot s;
  s.provides_gpus = true;
  s.status = {"nvml", state, std::move(msg)};
  s.gpus = std::move(gpus);
  s.clock_event_masks.assign(s.gpus.size(), 0);
  return s;
}

TEST(AgentLog, SourceTransitionsAndGpuLostBackAreOneLineEach) {
  FakeClock clock;
  auto sink = std::make_shared<CaptureSink>();
  AgentOptions o;
  o.node_name = "n1";
  Agent agent(o, clock, nullptr, Logger(sink));
  auto src = std::make_unique<FakeSource>("nvml");
  FakeSource* fake = src.get();
  agent.AddSource(std::move(src));

  agent.BuildNow();  // "not collected yet": nothing to say
  EXPECT_TRUE(sink->Matching("source").empty()) << sink->All();

  fake->Set(
      Snap(api::SourceState::kUnavailable, "libnvidia-ml.so.1: cannot open shared object", {}));
  agent.BuildNow();
  agent.BuildNow();  // unchanged: no second line
  auto unavailable = sink->Matching("source unavailable");
  ASSERT_EQ(unavailable.size(), 1u) << sink->All();
  EXPECT_NE(unavailable[0].find("libnvidia-ml.so.1"), std::string::npos);

  fake->Set(Snap(api::SourceState::kOk, "", {Gpu(0), Gpu(1)}));
  agent.BuildNow();
  auto recovered = sink->Matching("source recovered");
  ASSERT_EQ(recovered.size(), 1u) << sink->All();
  EXPECT_NE(recovered[0].find("gpus=2"), std::string::npos) << recovered[0];

  fake->Set(Snap(api::SourceState::kOk, "", {Gpu(0), Gpu(1, /*lost=*/true)}));
  agent.BuildNow();
  agent.BuildNow();
  auto lost = sink->Matching("GPU lost");
  ASSERT_EQ(lost.size(), 1u) << sink->All();
  EXPECT_NE(lost[0].find("uuid=GPU-1"), std::string::npos);

  fake->Set(Snap(api::SourceState::kOk, "", {Gpu(0), Gpu(1)}));
  agent.BuildNow();
  EXPECT_EQ(sink->Matching("GPU back").size(), 1u) << sink->All();
}

TEST(AgentLog, AnXidStormIsOneLinePerIntervalNotOnePerXid) {
  FakeClock clock;
  auto sink = std::make_shared<CaptureSink>();
  AgentOptions o;
  o.node_name = "n1";
  o.xid_summary_interval = 60s;
  Agent agent(o, clock, nullptr, Logger(sink));
  auto ctx = agent.Context();
  api::XidEvent x;
  x.xid = 13;
  x.gpu_uuid = "GPU-a";
  x.count = 1;
  x.category = "Application";
  x.recommended_action = "IGNORE";
  for (int i = 0; i < 500; ++i) {
    x.last_seen = clock.Now();
    ctx.on_xid(x, "kmsg");
    clock.Advance(100ms);  // 50 s of storm
  }
  api::XidEvent other = x;
  other.xid = 79;
  other.gpu_uuid = "GPU-b";
  ctx.on_xid(other, "kmsg");

  auto seen = sink->Matching("Xid seen");
  ASSERT_EQ(seen.size(), 2u) << sink->All();
  EXPECT_NE(seen[0].find("xid=13"), std::string::npos);
  EXPECT_NE(seen[0].find("gpu=GPU-a"), std::string::npos);
  EXPECT_NE(seen[0].find("action=IGNORE"), std::string::npos);
  EXPECT_NE(seen[1].find("xid=79"), std::string::npos);

  agent.BuildNow();  // within the interval: no summary yet
  EXPECT_TRUE(sink->Matching("Xids repeated").empty()) << sink->All();
  clock.Advance(15s);
  agent.BuildNow();
  auto summary = sink->Matching("Xids repeated");
  ASSERT_EQ(summary.size(), 1u) << sink->All();
  EXPECT_NE(summary[0].find("total=499"), std::string::npos) << summary[0];
  EXPECT_NE(summary[0].find("Xid 13 on GPU-a x499"), std::string::npos) << summary[0];
  agent.BuildNow();
  EXPECT_EQ(sink->Matching("Xids repeated").size(), 1u);  // nothing new: no line
  // 500 Xids, 3 lines.
  EXPECT_EQ(sink->Matching("Xid").size(), 3u) << sink->All();
}

// A writer that fails with a given Status until told otherwise.
class FailingWriter final : public ReportWriter {
 public:
  struct Shared {
    std::mutex mu;
    Status error;
    int attempts = 0;
  };
  explicit FailingWriter(std::shared_ptr<Shared> s) : s_(std::move(s)) {}
  std::string_view Mode() const override { return "resource"; }
  Status Write(const api::GpuNodeHealthStatus&) override {
    std::scoped_lock lock(s_->mu);
    ++s_->attempts;
    return s_->error;
  }

 private:
  std::shared_ptr<Shared> s_;
};

bool WaitUntil(const std::function<bool()>& pred) {
  auto end = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return pred();
}

struct PublishRun {
  FakeClock clock;
  std::shared_ptr<CaptureSink> sink = std::make_shared<CaptureSink>();
  std::shared_ptr<FailingWriter::Shared> shared = std::make_shared<FailingWriter::Shared>();
  std::unique_ptr<Publisher> pub;
  explicit PublishRun(Status error) {
    shared->error = std::move(error);
    PublisherOptions o;
    o.jitter_seed = 7;
    o.initial_backoff = 1s;
    o.max_backoff = 10s;
    pub = std::make_unique<Publisher>(std::make_unique<FailingWriter>(shared), clock, o, nullptr,
                                      Logger(sink));
    pub->Start();
    api::GpuNodeHealthStatus r;
    r.node_name = "n1";
    pub->Offer(r);
  }
  int Attempts() {
    std::scoped_lock lock(shared->mu);
    return shared->attempts;
  }
  // Lets `n` more attempts happen (each after its backoff on the fake clock).
  void Attempt(int n) {
    const int target = Attempts() + n;
    for (int steps = 0; Attempts() < target && steps < 10000; ++steps) {
      clock.Advance(500ms);
      std::this_thread::sleep_for(2ms);
    }
  }
};

TEST(AgentLog, PublishFailuresAreLoggedOnceAndTheRecoveryOnce) {
  PublishRun run(UnavailableError("connection refused"));
  ASSERT_TRUE(WaitUntil([&] { return run.Attempts() >= 1; }));
  const MonoTime start = run.clock.Monotonic();
  run.Attempt(20);
  EXPECT_EQ(run.sink->Matching("report write failed").size(), 1u) << run.sink->All();
  // Repeats of the same error: at most one reminder per 5 minutes of (fake) time.
  const auto minutes =
      std::chrono::duration_cast<std::chrono::minutes>(run.clock.Monotonic() - start).count();
  EXPECT_LE(run.sink->Matching("still failing").size(), static_cast<size_t>(minutes / 5 + 1))
      << run.sink->All();
  EXPECT_GE(run.Attempts(), 21);
  {
    std::scoped_lock lock(run.shared->mu);
    run.shared->error = OkStatus();
  }
  run.Attempt(1);
  ASSERT_TRUE(WaitUntil([&] { return !run.sink->Matching("report write recovered").empty(); }))
      << run.sink->All();
  auto rec = run.sink->Matching("report write recovered");
  EXPECT_EQ(rec.size(), 1u);
  EXPECT_NE(rec[0].find("failed_attempts="), std::string::npos);
  run.pub->Stop();
}

TEST(AgentLog, MissingCrdIsOneErrorNamingTheFix) {
  Status not_served(StatusCode::kNotFound, "the server could not find the requested resource");
  PublishRun run(not_served.WithContext("creating GPUNodeHealth n1"));
  ASSERT_TRUE(WaitUntil([&] { return run.Attempts() >= 1; }));
  run.Attempt(10);
  auto lines = run.sink->Matching("kubectl apply -f deploy/crds/");
  ASSERT_EQ(lines.size(), 1u) << run.sink->All();
  EXPECT_NE(lines[0].find("gpunodehealths.gpuguardian.io"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find(" error "), std::string::npos) << lines[0];
  run.pub->Stop();
}

}  // namespace
}  // namespace gg::agent
