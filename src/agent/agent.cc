// Agent implementation (see agent.h).
#include "agent/agent.h"

#include "agent/report_builder.h"

namespace gg::agent {

Agent::Agent(AgentOptions options, Clock& clock, AgentMetrics* metrics, Logger log)
    : options_(std::move(options)),
      clock_(clock),
      metrics_(metrics),
      log_(std::move(log)),
      ring_(options_.xid_ring_size),
      waker_(clock),
      expected_gpus_(options_.expected_gpus) {}

Agent::~Agent() { Stop(); }

void Agent::AddSource(std::unique_ptr<Source> source) {
  if (metrics_) metrics_->RegisterSource(source->Name());
  sources_.push_back(std::move(source));
}

void Agent::AddPublisher(std::unique_ptr<Publisher> publisher) {
  publishers_.push_back(std::move(publisher));
}

void Agent::SetExpectedGpus(int n) { expected_gpus_.store(n); }

SourceContext Agent::Context() {
  SourceContext ctx;
  ctx.on_xid = [this](const api::XidEvent& x, const std::string& source) {
    int64_t counted = ring_.Add(x, source);
    if (metrics_) metrics_->CountXid(x.xid, counted);
    waker_.Notify();
  };
  ctx.on_change = [this] { waker_.Notify(); };
  return ctx;
}

Source* Agent::FindSource(std::string_view name) {
  for (auto& s : sources_)
    if (s->Name() == name) return s.get();
  return nullptr;
}

api::GpuNodeHealthStatus Agent::BuildNow() {
  ReportInputs in;
  in.node_name = options_.node_name;
  in.agent_version = options_.agent_version;
  in.expected_gpus = expected_gpus_.load();
  in.snapshots.reserve(sources_.size());
  std::vector<std::pair<std::string, uint64_t>> masks;
  for (const auto& s : sources_) {
    in.snapshots.push_back(s->Snapshot());
    const auto& snap = in.snapshots.back();
    for (std::size_t i = 0; i < snap.gpus.size() && i < snap.clock_event_masks.size(); ++i)
      masks.emplace_back(snap.gpus[i].uuid, snap.clock_event_masks[i]);
  }
  in.xids = ring_.Entries();
  auto report = BuildReport(in, clock_.Now());
  if (metrics_) metrics_->Observe(report, masks);
  return report;
}

api::GpuNodeHealthStatus Agent::CollectOnce() {
  auto ctx = Context();
  for (auto& s : sources_) s->PollOnce(ctx);
  return BuildNow();
}

void Agent::Start(std::stop_token stop) {
  if (started_) return;
  started_ = true;
  for (auto& p : publishers_) p->Start();
  auto ctx = Context();
  for (auto& s : sources_) s->Start(ctx, stop);
  thread_ = std::jthread([this](std::stop_token own) { Loop(own); });
  forward_stop_ = std::make_unique<StopForward>(stop, [this] {
    thread_.request_stop();
    waker_.Notify();
  });
}

void Agent::Stop() {
  forward_stop_.reset();
  // Sources first (they call back into the ring), then the builder, then publishers.
  for (auto& s : sources_) s->Stop();
  if (thread_.joinable()) {
    thread_.request_stop();
    waker_.Notify();
    thread_.join();
  }
  for (auto& p : publishers_) p->Stop();
}

void Agent::Loop(std::stop_token stop) {
  // The first report waits for a source to finish its first collection (or one interval),
  // so the API never sees a report made only of "not collected yet" placeholders.
  waker_.Wait(options_.rebuild_interval, stop);
  while (!stop.stop_requested()) {
    auto report = BuildNow();
    for (auto& p : publishers_) p->Offer(report);
    {
      std::scoped_lock lock(mu_);
      latest_ = std::move(report);
    }
    builds_.fetch_add(1);
    last_build_ns_.store(clock_.Monotonic().time_since_epoch().count());
    waker_.Wait(options_.rebuild_interval, stop);
  }
}

std::optional<api::GpuNodeHealthStatus> Agent::Latest() const {
  std::scoped_lock lock(mu_);
  return latest_;
}

double Agent::SecondsSinceLastBuild() const {
  const int64_t last = last_build_ns_.load();
  if (last == 0) return 0;
  const int64_t now = clock_.Monotonic().time_since_epoch().count();
  return static_cast<double>(now - last) / 1e9;
}

}  // namespace gg::agent
