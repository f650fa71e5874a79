// Sources against fakes: the script source (FaultPlayer -> FakeNvml -> Collector) through
// the whole agent on a FakeClock (Xid event, DBE, remap failure, thermal, GPU lost), NVML
// hang and missing library, the file source (re-read, bad file, missing file) and the kmsg
// source over a pipe. Assertions are on the built report.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "agent/agent.h"
#include "agent/file_source.h"
#include "agent/kmsg_source.h"
#include "agent/nvml_source.h"
#include "gpu/fake_nvml.h"
#include "gpu/fault_script.h"
#include "metrics/registry.h"

namespace gg::agent {
namespace {

using namespace std::chrono_literals;

bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds limit = 15s) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(2ms);
  }
  return pred();
}

NvmlSourceOptions FastNvml() {
  NvmlSourceOptions o;
  o.sweep_interval = 10s;
  o.collector.call_deadline = 2000ms;
  o.collector.event_wait = 20ms;
  return o;
}

const api::XidEvent* FindXid(const api::GpuNodeHealthStatus& r, int xid) {
  for (const auto& x : r.xids)
    if (x.xid == xid) return &x;
  return nullptr;
}

constexpr char kScript[] = R"(gpus: 8
product: NVIDIA H100 80GB HBM3
timeline:
- {at: 30s, gpu: 3, xid: 79}
- {at: 60s, gpu: 1, temperature: 92, for: 5m}
- {at: 90s, gpu: 2, ecc: {uncorrectable_volatile: 1}}
- {at: 120s, gpu: 4, remap: {failure: true}}
- {at: 150s, gpu: 5, lost: true}
)";

class ScriptScenario : public ::testing::Test {
 protected:
  void SetUp() override {
    auto script = gpu::ParseFaultScript(kScript);
    ASSERT_TRUE(script.ok()) << script.status();
    auto src = ScriptSource::FromScript(*script, "node-a", clock_, classifier_, 1.0, FastNvml());
    ASSERT_TRUE(src.ok()) << src.status();
    source_ = src->get();
    AgentOptions o;
    o.node_name = "node-a";
    o.agent_version = "test";
    o.expected_gpus = 8;
    agent_ = std::make_unique<Agent>(o, clock_, &metrics_);
    agent_->AddSource(std::move(src).value());
    agent_->Start();
    ASSERT_TRUE(WaitFor([&] { return Report().gpus.size() == 8; }));
  }
  void TearDown() override {
    if (agent_) agent_->Stop();
  }
  api::GpuNodeHealthStatus Report() { return agent_->BuildNow(); }
  // Moves the script (and sweep timers) forward in 1 s steps, letting threads run.
  void AdvanceTo(Duration t) {
    while (elapsed_ < t) {
      clock_.Advance(1s);
      elapsed_ += 1s;
      std::this_thread::sleep_for(1ms);
    }
  }

  FakeClock clock_;
  gpu::XidClassifier classifier_;
  metrics::Registry registry_;
  AgentMetrics metrics_{registry_, "node-a"};
  std::unique_ptr<Agent> agent_;
  ScriptSource* source_ = nullptr;
  Duration elapsed_{0};
};

TEST_F(ScriptScenario, TimelineShowsUpInTheReport) {
  auto r = Report();
  EXPECT_EQ(r.sources.at(0).name, "script");
  EXPECT_EQ(r.sources.at(0).state, api::SourceState::kOk) << r.sources[0].message;
  EXPECT_EQ(r.gpus[3].uuid, FakeGpuUuid("node-a", 3));
  EXPECT_TRUE(r.xids.empty());

  // t=30s: Xid 79 on GPU 3 arrives through the NVML event thread.
  AdvanceTo(31s);
  ASSERT_TRUE(WaitFor([&] { return FindXid(Report(), 79) != nullptr; }));
  r = Report();
  const auto* x = FindXid(r, 79);
  EXPECT_EQ(x->gpu_uuid, FakeGpuUuid("node-a", 3));
  EXPECT_EQ(x->count, 1);
  EXPECT_EQ(x->recommended_action, "RESTART_BM");
  EXPECT_EQ(registry_.Value("gpu_guardian_agent_xid_total", {"79"}), 1);

  // t=60s: GPU 1 at 92 C (over its 89 C slowdown) for 5 minutes.
  AdvanceTo(71s);
  ASSERT_TRUE(WaitFor([&] { return Report().gpus[1].temperature_c == 92; }));

  // t=90s: a double-bit ECC error: counted, and the DBE event sweeps at once.
  AdvanceTo(91s);
  ASSERT_TRUE(WaitFor([&] { return Report().gpus[2].ecc_uncorrected_volatile == 1u; }));

  // t=120s: row remapping failed on GPU 4.
  AdvanceTo(131s);
  ASSERT_TRUE(WaitFor([&] { return Report().gpus[4].remap_failure; }));

  // t=150s: GPU 5 is lost: a health signal, the source says so.
  AdvanceTo(161s);
  ASSERT_TRUE(WaitFor([&] { return Report().gpus[5].lost; }));
  r = Report();
  EXPECT_EQ(r.sources[0].state, api::SourceState::kDegraded);

  // t=360s: the thermal event reverted.
  AdvanceTo(371s);
  ASSERT_TRUE(WaitFor([&] { return Report().gpus[1].temperature_c == 35; }));

  // Metrics follow the report.
  const std::string text = registry_.ExposeText();
  EXPECT_NE(text.find("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{gpu=\"2\",UUID=\"" + FakeGpuUuid("node-a", 2)),
            std::string::npos);
  EXPECT_NE(text.find("gpu_guardian_agent_gpu_lost{gpu=\"5\""), std::string::npos);
}

TEST(NvmlSource, HungCallIsDegradedNotAHang) {
  gpu::FakeNvml fake(4);
  FakeClock clock;
  gpu::XidClassifier classifier;
  auto o = FastNvml();
  o.collector.call_deadline = 100ms;
  o.events = false;
  NvmlSource src(fake, clock, classifier, o);
  SourceContext ctx;
  src.PollOnce(ctx);
  ASSERT_EQ(src.Snapshot().status.state, api::SourceState::kOk);
  fake.Hang("nvmlDeviceGetTemperature");
  src.PollOnce(ctx);
  auto s = src.Snapshot();
  EXPECT_EQ(s.status.state, api::SourceState::kDegraded);
  EXPECT_NE(s.status.message.find("hung"), std::string::npos) << s.status.message;
  ASSERT_EQ(s.gpus.size(), 4u);
  EXPECT_TRUE(s.gpus[0].lost);
  fake.ReleaseHangs();
  ASSERT_TRUE(WaitFor([&] {
    src.PollOnce(ctx);
    return src.Snapshot().status.state == api::SourceState::kOk;
  }));
}

TEST(NvmlSource, LibraryMissingIsUnavailableInTheReport) {
  gpu::FakeNvml fake(8);
  fake.SetLibraryMissing(true);
  FakeClock clock;
  gpu::XidClassifier classifier;
  AgentOptions ao;
  ao.node_name = "n";
  Agent agent(ao, clock, nullptr);
  agent.AddSource(std::make_unique<NvmlSource>(fake, clock, classifier, FastNvml()));
  auto r = agent.CollectOnce();
  ASSERT_EQ(r.sources.size(), 1u);
  EXPECT_EQ(r.sources[0].name, "nvml");
  EXPECT_EQ(r.sources[0].state, api::SourceState::kUnavailable);
  EXPECT_NE(r.sources[0].message.find("libnvidia-ml.so.1"), std::string::npos);
  EXPECT_TRUE(r.gpus.empty());
}

class FileSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("gg-agent-file-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "gpus.json").string();
    ctx_.on_xid = [this](const api::XidEvent& x, const std::string& s) { ring_.Add(x, s); };
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& text) {
    // Via a temp file + rename, as editors do: a new inode each time, so the change is seen
    // even within one mtime tick.
    const std::string tmp = path_ + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << text;
    }
    std::filesystem::rename(tmp, path_);
  }
  std::filesystem::path dir_;
  std::string path_;
  FakeClock clock_;
  XidRing ring_{16};
  SourceContext ctx_;
};

TEST_F(FileSourceTest, ReadsReReadsAndKeepsLastGoodOnBadJson) {
  FileSource src(clock_, {path_, 1s});
  src.PollOnce(ctx_);
  EXPECT_EQ(src.Snapshot().status.state, api::SourceState::kUnavailable);

  Write(R"({"gpus":[{"index":0,"uuid":"GPU-a","temperatureC":45},{"index":1,"uuid":"GPU-b"}],
            "xids":[{"xid":79,"gpuUUID":"GPU-b","count":1}]})");
  src.PollOnce(ctx_);
  auto s = src.Snapshot();
  EXPECT_EQ(s.status.state, api::SourceState::kOk) << s.status.message;
  ASSERT_EQ(s.gpus.size(), 2u);
  EXPECT_EQ(s.gpus[0].temperature_c, 45);
  ASSERT_EQ(ring_.size(), 1u);
  EXPECT_EQ(ring_.Entries()[0].count, 1);

  // Unchanged file: not re-read, the Xid is not counted again.
  src.PollOnce(ctx_);
  EXPECT_EQ(src.reloads(), 1u);
  EXPECT_EQ(ring_.Entries()[0].count, 1);

  // Edited: temperature and the Xid count go up; only the increment reaches the ring.
  Write(
      R"({"gpus":[{"index":0,"uuid":"GPU-a","temperatureC":93},{"index":1,"uuid":"GPU-b","lost":true}],
            "xids":[{"xid":79,"gpuUUID":"GPU-b","count":3}]})");
  src.PollOnce(ctx_);
  s = src.Snapshot();
  EXPECT_EQ(s.gpus[0].temperature_c, 93);
  EXPECT_TRUE(s.gpus[1].lost);
  EXPECT_EQ(ring_.Entries()[0].count, 3);

  // Broken edit: Degraded with the parse error, last good GPUs kept.
  Write(R"({"gpus":[{"index":0,"temperatureC":"hot"}]})");
  src.PollOnce(ctx_);
  s = src.Snapshot();
  EXPECT_EQ(s.status.state, api::SourceState::kDegraded);
  EXPECT_NE(s.status.message.find("status.gpus[0].temperatureC: expected integer"),
            std::string::npos)
      << s.status.message;
  ASSERT_EQ(s.gpus.size(), 2u);
  EXPECT_EQ(s.gpus[0].temperature_c, 93);

  Write("{not json");
  src.PollOnce(ctx_);
  EXPECT_EQ(src.Snapshot().status.state, api::SourceState::kDegraded);

  // Fixed again.
  Write(R"({"gpus":[{"index":0,"uuid":"GPU-a","temperatureC":40}]})");
  src.PollOnce(ctx_);
  s = src.Snapshot();
  EXPECT_EQ(s.status.state, api::SourceState::kOk);
  EXPECT_EQ(s.gpus.size(), 1u);

  // Removed: Unavailable, last good kept.
  std::filesystem::remove(path_);
  src.PollOnce(ctx_);
  s = src.Snapshot();
  EXPECT_EQ(s.status.state, api::SourceState::kUnavailable);
  EXPECT_EQ(s.gpus.size(), 1u);
}

TEST_F(FileSourceTest, ThreadPicksUpEdits) {
  Write(R"({"gpus":[{"index":0,"uuid":"GPU-a","temperatureC":45}]})");
  FileSource src(clock_, {path_, 1s});
  std::atomic<int> changes{0};
  ctx_.on_change = [&] { ++changes; };
  src.Start(ctx_, {});
  ASSERT_TRUE(WaitFor([&] { return src.Snapshot().gpus.size() == 1; }));
  Write(R"({"gpus":[{"index":0,"uuid":"GPU-a","temperatureC":88}]})");
  ASSERT_TRUE(WaitFor([&] {
    clock_.Advance(1s);
    return src.Snapshot().gpus[0].temperature_c == 88;
  }));
  EXPECT_GE(changes.load(), 2);
  src.Stop();
}

TEST(KmsgSource, XidLinesReachTheRingWithTheGpuUuid) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
  FakeClock clock;
  gpu::XidClassifier classifier;
  KmsgSource src(clock, classifier, gpu::KmsgFileFromFd(fds[0]),
                 [](uint32_t, uint32_t bus, uint32_t) {
                   return bus == 0x3b ? std::string("GPU-3b") : std::string();
                 });
  XidRing ring(8);
  SourceContext ctx;
  ctx.on_xid = [&](const api::XidEvent& x, const std::string& s) { ring.Add(x, s); };
  src.Start(ctx, {});
  EXPECT_EQ(src.Snapshot().status.state, api::SourceState::kOk);
  EXPECT_FALSE(src.Snapshot().provides_gpus);
  const std::string lines =
      "4,1234,16450076435595,-;NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', "
      "name=<unknown>, GPU has fallen off the bus.\n"
      "4,1235,16450076435600,-;NVRM: Xid (PCI:0000:55:00): 48, An uncorrectable double bit "
      "error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.\n"
      "6,1236,16450076435700,-;eth0: link up\n";
  ASSERT_EQ(::write(fds[1], lines.data(), lines.size()), static_cast<ssize_t>(lines.size()));
  ASSERT_TRUE(WaitFor([&] { return ring.size() == 2; }));
  auto e = ring.Entries();
  const api::XidEvent* x79 = e[0].xid == 79 ? &e[0] : &e[1];
  const api::XidEvent* x48 = e[0].xid == 48 ? &e[0] : &e[1];
  EXPECT_EQ(x79->gpu_uuid, "GPU-3b");
  EXPECT_EQ(x79->pci_bus_id, "0000:3b:00.0");
  EXPECT_EQ(x79->recommended_action, "RESTART_BM");
  EXPECT_EQ(x48->gpu_uuid, "");  // not mapped to a GPU
  EXPECT_EQ(x48->pci_bus_id, "0000:55:00.0");
  src.Stop();
  ::close(fds[1]);
}

}  // namespace
}  // namespace gg::agent
