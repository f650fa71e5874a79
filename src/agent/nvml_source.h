// NVML-backed sources. NvmlSource runs gpu::Collector sweeps on its own thread every
// sweep_interval and forwards NVML events (Xid, DBE, GPU lost, recovery action) as they
// arrive; an event that changes counters also triggers an immediate sweep. ScriptSource is
// the same collector over a FakeNvml driven by a scripted fault timeline (gpu::FaultPlayer).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "agent/source.h"
#include "agent/waker.h"
#include "common/clock.h"
#include "gpu/collector.h"
#include "gpu/fake_nvml.h"
#include "gpu/fault_script.h"
#include "gpu/xid_catalog.h"

namespace gg::agent {

struct NvmlSourceOptions {
  std::string name = "nvml";
  Duration sweep_interval = std::chrono::seconds(10);
  bool events = true;  // start the NVML event thread
  gpu::CollectorOptions collector;
};

class NvmlSource final : public Source {
 public:
  // `api` and `classifier` must outlive the source.
  NvmlSource(gpu::NvmlApi& api, Clock& clock, const gpu::XidClassifier& classifier,
             NvmlSourceOptions options);
  ~NvmlSource() override;

  std::string_view Name() const override { return options_.name; }
  void Start(const SourceContext& ctx, std::stop_token stop) override;
  void Stop() override;
  void PollOnce(const SourceContext& ctx) override;
  SourceSnapshot Snapshot() const override;

  // For the kmsg source: PCI address -> GPU UUID ("" when unknown). Thread-safe.
  std::string UuidForPci(uint32_t domain, uint32_t bus, uint32_t device) const;
  gpu::Collector& collector() { return collector_; }

 private:
  void Loop(SourceContext ctx, std::stop_token stop);
  void SweepAndStore();
  void EnsureEvents(const SourceContext& ctx);

  Clock& clock_;
  const gpu::XidClassifier& classifier_;
  NvmlSourceOptions options_;
  gpu::Collector collector_;
  Waker waker_;
  std::mutex sweep_mu_;  // one Sweep at a time
  bool events_started_ = false;
  bool init_attempted_ = false;
  mutable std::mutex mu_;
  SourceSnapshot snapshot_;
  std::jthread thread_;
  std::unique_ptr<StopForward> forward_stop_;  // agent's stop -> this thread
};

// Deterministic fake GPU UUID for `index` on `node`, the simulator's convention (FNV-1a-64
// of "node/index" and "node/index~"), so scripted agents match the sim's ResourceSlices.
std::string FakeGpuUuid(std::string_view node, int index);

class ScriptSource final : public Source {
 public:
  // Loads and validates the script; the FakeNvml gets the script's GPUs (UUIDs from the
  // script, else FakeGpuUuid(node, i)).
  static StatusOr<std::unique_ptr<ScriptSource>> Create(const std::string& path,
                                                        const std::string& node_name, Clock& clock,
                                                        const gpu::XidClassifier& classifier,
                                                        double time_scale,
                                                        NvmlSourceOptions options);
  static StatusOr<std::unique_ptr<ScriptSource>> FromScript(
      gpu::FaultScript script, const std::string& node_name, Clock& clock,
      const gpu::XidClassifier& classifier, double time_scale, NvmlSourceOptions options);
  ~ScriptSource() override;

  std::string_view Name() const override { return inner_->Name(); }
  void Start(const SourceContext& ctx, std::stop_token stop) override;
  void Stop() override;
  void PollOnce(const SourceContext& ctx) override;
  SourceSnapshot Snapshot() const override { return inner_->Snapshot(); }

  gpu::FakeNvml& nvml() { return *nvml_; }
  gpu::FaultPlayer& player() { return *player_; }
  NvmlSource& inner() { return *inner_; }

 private:
  ScriptSource() = default;
  gpu::FaultScript script_;
  std::unique_ptr<gpu::FakeNvml> nvml_;
  std::unique_ptr<gpu::FaultPlayer> player_;
  std::unique_ptr<NvmlSource> inner_;
  bool started_ = false;
};

}  // namespace gg::agent
