// Fault suite, agent side and time: the agent killed (SIGKILL) and restarted, an NVML call
// that hangs in the driver, a kernel-log flood of a million lines, and the operator's wall
// clock jumping. Asserted on the world: the report, the node's cordon/taint/condition,
// Events, and the memory of the process that hosts the agent.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <sstream>

#include "agent/app.h"
#include "e2e/process.h"
#include "fault/fault_world.h"
#include "gpu/fake_nvml.h"
#include "gpu/nvml_worker.h"

namespace gg::fault {
namespace {

using Clk = std::chrono::steady_clock;
const std::string kBin = GG_BIN_DIR;

json Report(sim::SimServer& sim, const std::string& node) {
  auto r = sim.Get(std::string(kReports) + "/" + node);
  return r.ok() && r->contains("status") ? (*r)["status"] : json();
}

std::string SourceState(const json& status, const std::string& name) {
  if (!status.is_object()) return "";
  for (const auto& s : status.value("sources", json::array()))
    if (s.value("name", "") == name) return s.value("state", "");
  return "";
}

// Resident set size of this process, in KiB.
long RssKib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  return -1;
}

class AgentFaults : public FaultWorld {
 protected:
  // The CRDs in deploy/ are not needed: FaultWorld's CRDs accept any report.
  agent::AgentConfig InProcessAgent(const std::string& node) {
    agent::AgentConfig c;
    c.node_name = node;
    c.server = sim_->Url();
    c.publish = {"resource"};
    c.sweep_interval = 100ms;
    c.debounce = 50ms;
    c.heartbeat = 1h;
    c.metrics_addr = "0";
    return c;
  }
  e2e::TempDir dir_;
};

void WriteGpuFile(const std::string& path, bool xid79, int temp0 = 40) {
  json f = {{"gpus", json::array({{{"index", 0}, {"uuid", "GPU-a"}, {"temperatureC", temp0}},
                                  {{"index", 1}, {"uuid", "GPU-b"}, {"temperatureC", 41}}})}};
  if (xid79) f["xids"] = json::array({{{"xid", 79}, {"gpuUUID", "GPU-b"}, {"count", 1}}});
  {
    std::ofstream out(path + ".tmp", std::ios::trunc);
    out << f.dump();
  }
  std::rename((path + ".tmp").c_str(), path.c_str());
}

// The agent process dies with SIGKILL while its node is fenced and comes back: the fence holds
// throughout (no Unknown/healthy flip, no uncordon) and the restarted agent publishes again
// without duplicating what it had already reported.
TEST_F(AgentFaults, AgentKilledAndRestartedKeepsTheFenceAndResumes) {
  AddNode("gpu-0");
  auto spec = DefaultSpec();
  spec["rules"][0]["action"] = "Cordon";
  CreatePolicy("default", spec);
  CordonRecorder cordons(*sim_, {"gpu-0"});
  auto& op = StartOperator(FastConfig("op-a", false));
  const std::string file = dir_.path() + "/gpus.json";
  WriteGpuFile(file, /*xid79=*/true);
  auto start_agent = [&](const std::string& log) {
    return std::make_unique<e2e::Process>(
        std::vector<std::string>{kBin + "/gpu-guardian-agent", "--node-name", "gpu-0", "--server",
                                 sim_->Url(), "--source", "file", "--file", file, "--heartbeat",
                                 "1h", "--sweep-interval", "200ms", "--metrics-addr", "0"},
        dir_.path() + "/" + log);
  };
  auto agent = start_agent("agent-1.log");
  ASSERT_TRUE(WaitFor([&] {
    return Cordoned(Node("gpu-0")) && Condition(Node("gpu-0")) == "False";
  })) << agent->Log();
  const std::string rv_before =
      (*sim_->Get(std::string(kReports) + "/gpu-0"))["metadata"].value("resourceVersion", "");

  ASSERT_EQ(::kill(agent->pid(), SIGKILL), 0);
  agent->Stop(SIGKILL, 5s);
  // Silence is not health: a dead agent changes nothing.
  std::this_thread::sleep_for(2s);
  EXPECT_TRUE(Cordoned(Node("gpu-0")));
  EXPECT_EQ(Condition(Node("gpu-0")), "False");

  auto again = start_agent("agent-2.log");
  // The restarted agent writes its first report at once (new heartbeat, same facts).
  ASSERT_TRUE(WaitFor([&] {
    auto r = sim_->Get(std::string(kReports) + "/gpu-0");
    return r.ok() && (*r)["metadata"].value("resourceVersion", "") != rv_before;
  })) << again->Log();
  std::this_thread::sleep_for(1s);
  EXPECT_TRUE(Cordoned(Node("gpu-0")));
  EXPECT_TRUE(Events("NodeUncordoned", "gpu-0").empty());
  EXPECT_TRUE(Events("GPURecovered", "gpu-0").empty());
  EXPECT_EQ(Report(*sim_, "gpu-0").value("xids", json::array()).size(), 1u)
      << "the restart must not duplicate the Xid";

  // The restarted agent is live: a new fact (GPU 0 warmer) reaches the report, the node
  // stays fenced (the Xid is still in the agent's ring), and it was cordoned exactly once.
  WriteGpuFile(file, /*xid79=*/true, /*temp0=*/55);
  EXPECT_TRUE(WaitFor([&] {
    auto g = Report(*sim_, "gpu-0").value("gpus", json::array());
    return !g.empty() && g[0].value("temperatureC", 0) == 55;
  })) << again->Log();
  EXPECT_TRUE(Cordoned(Node("gpu-0")));
  auto changes = cordons.Changes();
  ASSERT_EQ(changes.size(), 1u) << "no flap across the agent's death";
  EXPECT_TRUE(changes[0].cordoned);
  EXPECT_EQ(again->Stop(SIGTERM, 10s), 0);
  EXPECT_FALSE(op.done.load());
}

// An NVML call hangs in the driver: the agent keeps running and publishing (the nvml source
// Degraded, naming the hung call), stops promptly even while the call is stuck, and reports
// OK again once the driver answers.
TEST_F(AgentFaults, NvmlHangDegradesTheReportNotTheAgent) {
  AddNode("gpu-0");
  gpu::FakeNvml fake(8);  // the node's capacity: fewer GPUs would be Degraded already
  metrics::Registry registry;
  auto cfg = InProcessAgent("gpu-0");
  cfg.sources = {"nvml"};
  cfg.nvml_deadline = 300ms;
  auto app = agent::AgentApp::Create(cfg, RealClock::Default(), registry, Logger(), &fake);
  ASSERT_TRUE(app.ok()) << app.status();
  ASSERT_TRUE((*app)->Start({}).ok());
  ASSERT_TRUE(WaitFor([&] { return SourceState(Report(*sim_, "gpu-0"), "nvml") == "OK"; }))
      << Report(*sim_, "gpu-0").dump();

  fake.Hang("nvmlDeviceGetTemperature");
  ASSERT_TRUE(
      WaitFor([&] { return SourceState(Report(*sim_, "gpu-0"), "nvml") == "Degraded"; }, 30s))
      << Report(*sim_, "gpu-0").dump();
  json st = Report(*sim_, "gpu-0");
  std::string msg;
  for (const auto& s : st["sources"])
    if (s.value("name", "") == "nvml") msg = s.value("message", "");
  EXPECT_NE(msg.find("hung"), std::string::npos) << st.dump();

  fake.ReleaseHangs();
  EXPECT_TRUE(WaitFor([&] { return SourceState(Report(*sim_, "gpu-0"), "nvml") == "OK"; }, 30s))
      << Report(*sim_, "gpu-0").dump();

  // Stuck again, then stopped: shutdown must not wait for the driver.
  fake.Hang("nvmlDeviceGetTemperature");
  ASSERT_TRUE(
      WaitFor([&] { return SourceState(Report(*sim_, "gpu-0"), "nvml") == "Degraded"; }, 30s));
  const auto t0 = Clk::now();
  (*app)->Stop();
  const double stop_s = Seconds(Clk::now() - t0);
  std::printf("agent stopped in %.2f s with an NVML call hung\n", stop_s);
  EXPECT_LT(stop_s, 5.0);
  app->reset();
  fake.ReleaseHangs();
  // The destroyed agent's worker thread finishes its sweep through `fake` after the release:
  // `fake` must outlive it (it used to be destroyed under the thread: a heap corruption that
  // surfaced in whichever test ran next).
  EXPECT_TRUE(gpu::NvmlWorker::WaitForAllThreadsToExit(10s));
}

// kmsg lines the way the kernel writes them: "prio,seq,usec,flags;text".
std::string KmsgLine(long seq, const std::string& text) {
  return "4," + std::to_string(seq) + "," + std::to_string(1000000 + seq * 10) + ",-;" + text +
         "\n";
}

// A million kernel-log lines — application Xids (13, 43, 31) interleaved with unrelated noise
// — reach the agent through its kmsg path. Application Xids never fence (the policy ignores
// them, as NVSentinel #1710 teaches), counts are aggregated without loss, the report and the
// process stay small, and a real Xid 79 after the flood still fences the node.
TEST_F(AgentFaults, KmsgFloodOfApplicationXidsNoFalseFenceBoundedMemory) {
  AddNode("gpu-0");
  CreatePolicy("default", json::parse(R"({
    "nodeSelector": {"matchLabels": {"nvidia.com/gpu.present": "true"}},
    "rules": [{"name": "fatal-xid",
               "xid": {"catalogActions": ["RESET_GPU", "RESTART_BM"], "ignore": [13, 31, 43, 45, 68]},
               "count": 1, "window": "10m", "action": "Cordon"}],
    "unknown": {"after": "1h", "action": "Event"},
    "remediation": {"taint": {"effect": "NoSchedule"}},
    "recovery": {"automatic": true, "healthyFor": "2s"},
    "safety": {"maxUnhealthy": "100%", "maxNodesPerHour": 1000, "maxConcurrentDrains": 100}
  })"));
  CordonRecorder cordons(*sim_, {"gpu-0"});
  StartOperator(FastConfig("op-a", false));

  const std::string fifo = dir_.path() + "/kmsg";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // O_RDWR: opening never blocks and the reader never sees EOF between our writes.
  int wfd = ::open(fifo.c_str(), O_RDWR);
  ASSERT_GE(wfd, 0);
  metrics::Registry registry;
  auto cfg = InProcessAgent("gpu-0");
  cfg.sources = {"kmsg"};
  cfg.kmsg_path = fifo;
  cfg.kmsg_from_boot = true;
  auto app = agent::AgentApp::Create(cfg, RealClock::Default(), registry);
  ASSERT_TRUE(app.ok()) << app.status();
  ASSERT_TRUE((*app)->Start({}).ok());
  ASSERT_TRUE(WaitFor([&] { return SourceState(Report(*sim_, "gpu-0"), "kmsg") != ""; }))
      << Report(*sim_, "gpu-0").dump();

  const long rss_before = RssKib();
  constexpr long kLines = 1'000'000;
  const char* texts[] = {
      "NVRM: Xid (PCI:0000:3b:00): 13, pid=4242, name=python3, Graphics SM Warp Exception on "
      "(GPC 1, TPC 0, SM 0): Out Of Range Address",
      "NVRM: Xid (PCI:0000:3b:00): 43, pid=4242, name=python3, Ch 00000010",
      "NVRM: Xid (PCI:0000:5e:00): 31, pid=777, name=train, Ch 00000008, intr 10000000. MMU Fault: "
      "ENGINE GRAPHICS GPC1 GPCCLIENT_T1_0 faulted @ 0x7f2a_8e000000. Fault is of type FAULT_PDE",
      "eth0: Link is Up - 100Gbps/Full - flow control off",
  };
  std::map<int, long> sent;  // xid -> lines
  const auto t0 = Clk::now();
  std::string chunk;
  for (long i = 0; i < kLines; ++i) {
    int k = static_cast<int>(i % 4);
    chunk += KmsgLine(i + 1, texts[k]);
    if (k < 3) ++sent[k == 0 ? 13 : k == 1 ? 43 : 31];
    if (chunk.size() > 60000 || i + 1 == kLines) {
      ASSERT_EQ(::write(wfd, chunk.data(), chunk.size()), static_cast<ssize_t>(chunk.size()));
      chunk.clear();
    }
  }
  // Aggregated counts arrive (the reader folds floods into per-window totals).
  auto count_of = [&](int xid) {
    long n = 0;
    for (const auto& x : Report(*sim_, "gpu-0").value("xids", json::array()))
      if (x.value("xid", 0) == xid) n += x.value("count", 0L);
    return n;
  };
  bool all = WaitFor(
      [&] {
        return count_of(13) == sent[13] && count_of(43) == sent[43] && count_of(31) == sent[31];
      },
      120s);
  const double secs = Seconds(Clk::now() - t0);
  const long rss_after = RssKib();
  json st = Report(*sim_, "gpu-0");
  std::printf("kmsg flood: %ld lines in %.1f s, xid13 %ld/%ld, report %zu bytes, RSS %+ld KiB\n",
              kLines, secs, count_of(13), sent[13], st.dump().size(), rss_after - rss_before);
  RecordProperty("kmsg_flood_rss_growth_kib", static_cast<int>(rss_after - rss_before));
  EXPECT_TRUE(all) << "counts lost in the flood: " << st.dump().substr(0, 2000);
  EXPECT_LE(st.value("xids", json::array()).size(), 64u) << "the ring is bounded";
  EXPECT_LT(st.dump().size(), 64u * 1024) << "the report stays small";
  EXPECT_LT(rss_after - rss_before, 64 * 1024) << "memory grows with the flood";
  // No false fence.
  std::this_thread::sleep_for(1s);
  EXPECT_TRUE(cordons.Changes().empty() || !cordons.Changes().back().cordoned);
  EXPECT_FALSE(HasOurTaint(Node("gpu-0")));
  EXPECT_TRUE(Events("GPUUnhealthy", "gpu-0").empty());

  // Not blinded: a real fatal Xid right after the flood fences the node.
  std::string fatal = KmsgLine(
      kLines + 1, "NVRM: Xid (PCI:0000:3b:00): 79, pid=0, name=, GPU has fallen off the bus.");
  ASSERT_EQ(::write(wfd, fatal.data(), fatal.size()), static_cast<ssize_t>(fatal.size()));
  EXPECT_TRUE(WaitFor([&] { return Cordoned(Node("gpu-0")) && HasOurTaint(Node("gpu-0")); }, 60s))
      << Report(*sim_, "gpu-0").dump().substr(0, 2000);
  (*app)->Stop();
  ::close(wfd);
}

// The operator's wall clock steps (NTP, a VM resumed) while the monotonic clock runs on.
class JumpClock final : public Clock {
 public:
  WallTime Now() const override { return RealClock::Default().Now() + offset_.load(); }
  MonoTime Monotonic() const override { return RealClock::Default().Monotonic(); }
  bool SleepFor(Duration d, std::stop_token stop) override {
    return RealClock::Default().SleepFor(d, stop);
  }
  TimerId ScheduleAfter(Duration d, std::function<void()> fn) override {
    return RealClock::Default().ScheduleAfter(d, std::move(fn));
  }
  void Cancel(TimerId id) override { RealClock::Default().Cancel(id); }
  void Jump(Duration to_offset) { offset_.store(to_offset); }

 private:
  std::atomic<Duration> offset_{Duration(0)};
};

// Clock jumps of +2 h and -1 h must neither fence a healthy node (its report suddenly looks
// stale or from the future), nor recover a fenced one early (healthyFor: 10m is not met by a
// jump), nor evict anything, nor cost the lease. Agents keep heartbeating in real time.
TEST_F(AgentFaults, OperatorClockJumpsChangeNothing) {
  for (const char* n : {"gpu-0", "gpu-1"}) AddNode(n);
  AddPod("work-0", "gpu-0", "work");
  AddPod("work-1", "gpu-1", "work");
  auto spec = DefaultSpec();
  spec["recovery"]["healthyFor"] = "10m";
  CreatePolicy("default", spec);
  WriteReport("gpu-0", HealthyReport("gpu-0"));
  WriteReport("gpu-1", XidReport("gpu-1"));
  CordonRecorder cordons(*sim_, {"gpu-0", "gpu-1"});
  // Outlives the test body: the operator (stopped in TearDown) still reads it until then.
  static JumpClock clock;
  clock.Jump(Duration(0));
  auto& op = StartOperator(FastConfig("op-a", true), clock);
  ASSERT_TRUE(WaitFor([&] { return Cordoned(Node("gpu-1")) && LivePodsOn("gpu-1") == 0; }))
      << Node("gpu-1").dump();
  // gpu-1's GPU is replaced; recovery would need 10 minutes of health.
  WriteReport("gpu-1", HealthyReport("gpu-1"));
  std::this_thread::sleep_for(1s);

  // The operator sees these steps raw here (its own robustness); a step back that is then
  // corrected is the next test's, with the clock the operator binary uses.
  for (auto offset : {Duration(2h), Duration(-1h)}) {
    clock.Jump(offset);
    // Agents heartbeat (real time) a few times; the operator re-evaluates on each.
    for (int k = 0; k < 6; ++k) {
      WriteReport("gpu-0", HealthyReport("gpu-0"));
      WriteReport("gpu-1", HealthyReport("gpu-1"));
      std::this_thread::sleep_for(500ms);
    }
    EXPECT_FALSE(Cordoned(Node("gpu-0"))) << "offset " << offset.count();
    EXPECT_FALSE(HasOurTaint(Node("gpu-0"))) << "offset " << offset.count();
    EXPECT_TRUE(Cordoned(Node("gpu-1"))) << "recovered early at offset " << offset.count();
    EXPECT_EQ(LivePodsOn("gpu-0"), 1);
  }
  EXPECT_FALSE(op.done.load()) << op.result;
  EXPECT_TRUE(op.op->IsLeader()) << "the lease must survive wall-clock jumps";
  int gpu1_changes = 0;
  for (const auto& c : cordons.Changes()) {
    if (c.node == "gpu-0") {
      ADD_FAILURE() << "gpu-0 cordon changed";
    }
    if (c.node == "gpu-1") ++gpu1_changes;
  }
  EXPECT_EQ(gpu1_changes, 1) << "gpu-1: cordoned once, never released";
}

// The system clock is set back an hour while a fenced node turns healthy, then corrected.
// gpu-guardian-operator reads wall time through MonotonicWallClock (cmd/gpu-guardian-operator),
// so the correction does not count as healthy time: recovery comes after healthyFor of real
// time since the healthy report, not at the correction. (On the raw clock the node recovered
// within a second of the correction: the hour counted.)
TEST_F(AgentFaults, OperatorClockSetBackThenCorrectedCountsNoHealthyTime) {
  AddNode("gpu-1");
  auto spec = DefaultSpec();
  spec["rules"][0]["action"] = "Cordon";
  spec["recovery"]["healthyFor"] = "8s";
  CreatePolicy("default", spec);
  WriteReport("gpu-1", XidReport("gpu-1"));
  // Outlive the test body: the operator (stopped in TearDown) still reads them until then.
  static JumpClock system;
  system.Jump(Duration(0));
  static MonotonicWallClock clock(system);
  auto& op = StartOperator(FastConfig("op-a", true), clock);
  ASSERT_TRUE(WaitFor([&] { return Cordoned(Node("gpu-1")); })) << Node("gpu-1").dump();

  system.Jump(-1h);
  const auto healthy_from = Clk::now();
  WriteReport("gpu-1", HealthyReport("gpu-1"));
  std::this_thread::sleep_for(1s);
  system.Jump(Duration(0));  // corrected
  // Agents heartbeat in real time; the node stays fenced until healthyFor (8 s) after the
  // healthy report, less up to 1 s because the node's record keeps `since` to the second.
  while (Clk::now() < healthy_from + 6500ms) {
    WriteReport("gpu-1", HealthyReport("gpu-1"));
    EXPECT_TRUE(Cordoned(Node("gpu-1")))
        << "recovered " << Seconds(Clk::now() - healthy_from) << " s after turning healthy";
    std::this_thread::sleep_for(250ms);
  }
  // And then it does recover: healthy time still counts.
  EXPECT_TRUE(WaitFor(
      [&] {
        WriteReport("gpu-1", HealthyReport("gpu-1"));
        return !Cordoned(Node("gpu-1"));
      },
      30s));
  std::printf("recovered %.1f s after the healthy report (healthyFor 8 s)\n",
              Seconds(Clk::now() - healthy_from));
  EXPECT_FALSE(op.done.load()) << op.result;
}

}  // namespace
}  // namespace gg::fault
