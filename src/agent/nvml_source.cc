// NvmlSource and ScriptSource (see nvml_source.h).
#include "agent/nvml_source.h"

#include <cstdio>
#include <utility>

namespace gg::agent {

NvmlSource::NvmlSource(gpu::NvmlApi& api, Clock& clock, const gpu::XidClassifier& classifier,
                       NvmlSourceOptions options)
    : clock_(clock),
      classifier_(classifier),
      options_(std::move(options)),
      collector_(api, clock,
                 [this] {
                   auto o = options_.collector;
                   o.source_name = options_.name;
                   return o;
                 }()),
      waker_(clock) {
  snapshot_.provides_gpus = true;
  snapshot_.status = {options_.name, api::SourceState::kUnavailable, "not collected yet"};
}

NvmlSource::~NvmlSource() { Stop(); }

void NvmlSource::SweepAndStore() {
  gpu::SweepResult r;
  {
    std::scoped_lock lock(sweep_mu_);
    if (!init_attempted_) {
      // Failure is recorded in the collector's source status; Sweep() retries it every
      // CollectorOptions::init_retry.
      init_attempted_ = true;
      collector_.Init().IgnoreError();
    }
    r = collector_.Sweep();
  }
  SourceSnapshot s;
  s.provides_gpus = true;
  s.gpus = std::move(r.gpus);
  s.status = collector_.source_status();
  if (s.status.name.empty()) s.status.name = options_.name;
  s.clock_event_masks.reserve(r.extras.size());
  for (const auto& e : r.extras) s.clock_event_masks.push_back(e.clock_event_mask);
  s.driver_version = r.driver_version;
  std::scoped_lock lock(mu_);
  snapshot_ = std::move(s);
}

void NvmlSource::EnsureEvents(const SourceContext& ctx) {
  if (!options_.events || events_started_ || !collector_.initialized()) return;
  auto on_xid = ctx.on_xid;
  auto on_change = ctx.on_change;
  Status st = collector_.StartEvents([this, on_xid, on_change](const gpu::GpuEvent& e) {
    if (auto x = gpu::ToXidEvent(e, classifier_); x && on_xid) on_xid(*x, options_.name);
    switch (e.kind) {
      case gpu::GpuEvent::Kind::kXid:
        if (on_change) on_change();
        break;
      default:
        // Counters / lost state changed: sweep now instead of at the next interval.
        waker_.Notify();
        break;
    }
  });
  events_started_ = st.ok();
}

void NvmlSource::Loop(SourceContext ctx, std::stop_token stop) {
  while (!stop.stop_requested()) {
    SweepAndStore();
    EnsureEvents(ctx);
    if (ctx.on_change) ctx.on_change();
    waker_.Wait(options_.sweep_interval, stop);
  }
}

void NvmlSource::Start(const SourceContext& ctx, std::stop_token stop) {
  if (thread_.joinable()) return;
  thread_ = std::jthread([this, ctx](std::stop_token own) { Loop(ctx, own); });
  forward_stop_ = std::make_unique<StopForward>(stop, [this] {
    thread_.request_stop();
    waker_.Notify();
  });
}

void NvmlSource::Stop() {
  forward_stop_.reset();
  if (thread_.joinable()) {
    thread_.request_stop();
    waker_.Notify();
    thread_.join();
  }
  collector_.StopEvents();
  events_started_ = false;
}

void NvmlSource::PollOnce(const SourceContext& ctx) {
  (void)ctx;
  SweepAndStore();
}

SourceSnapshot NvmlSource::Snapshot() const {
  std::scoped_lock lock(mu_);
  return snapshot_;
}

std::string NvmlSource::UuidForPci(uint32_t domain, uint32_t bus, uint32_t device) const {
  return collector_.UuidForPci(domain, bus, device);
}

namespace {
uint64_t Fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}
}  // namespace

std::string FakeGpuUuid(std::string_view node, int index) {
  std::string s = std::string(node) + "/" + std::to_string(index);
  char hex[33];
  std::snprintf(hex, sizeof(hex), "%016llx%016llx", static_cast<unsigned long long>(Fnv1a64(s)),
                static_cast<unsigned long long>(Fnv1a64(s + "~")));
  std::string h(hex, 32);
  return "GPU-" + h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" +
         h.substr(16, 4) + "-" + h.substr(20, 12);
}

StatusOr<std::unique_ptr<ScriptSource>> ScriptSource::Create(
    const std::string& path, const std::string& node_name, Clock& clock,
    const gpu::XidClassifier& classifier, double time_scale, NvmlSourceOptions options) {
  auto script = gpu::LoadFaultScript(path);
  if (!script.ok()) return script.status().WithContext("fault script " + path);
  return FromScript(std::move(script).value(), node_name, clock, classifier, time_scale,
                    std::move(options));
}

StatusOr<std::unique_ptr<ScriptSource>> ScriptSource::FromScript(
    gpu::FaultScript script, const std::string& node_name, Clock& clock,
    const gpu::XidClassifier& classifier, double time_scale, NvmlSourceOptions options) {
  if (time_scale <= 0) return InvalidArgumentError("time scale must be > 0");
  std::unique_ptr<ScriptSource> s(new ScriptSource());
  if (script.uuids.empty()) {
    for (int i = 0; i < script.gpus; ++i) script.uuids.push_back(FakeGpuUuid(node_name, i));
  }
  s->script_ = script;
  s->nvml_ = std::make_unique<gpu::FakeNvml>(script.gpus);
  gpu::ApplyFaultScriptSetup(script, *s->nvml_);
  s->player_ = std::make_unique<gpu::FaultPlayer>(std::move(script), *s->nvml_, clock, time_scale);
  if (options.name == "nvml") options.name = "script";
  s->inner_ = std::make_unique<NvmlSource>(*s->nvml_, clock, classifier, std::move(options));
  return s;
}

ScriptSource::~ScriptSource() { Stop(); }

void ScriptSource::Start(const SourceContext& ctx, std::stop_token stop) {
  if (!started_) {
    started_ = true;
    player_->Start();
  }
  inner_->Start(ctx, stop);
}

void ScriptSource::Stop() {
  if (inner_) inner_->Stop();
  if (player_) player_->Stop();
}

void ScriptSource::PollOnce(const SourceContext& ctx) {
  // Without a running timeline (--once), the events at t=0 still describe the start state.
  if (!started_) {
    for (const auto& e : script_.timeline)
      if (e.at <= Duration::zero()) gpu::ApplyFaultEvent(e, *nvml_);
  }
  inner_->PollOnce(ctx);
}

}  // namespace gg::agent
