// Agent implementation (see agent.h).
#include "agent/agent.h"

#include "agent/report_builder.h"

namespace gg::agent {
namespace {

// Placeholder states a source holds before its first collection: not worth a log line.
bool NotCollectedYet(const api::SourceStatus& s) {
  return s.state == api::SourceState::kUnavailable &&
         (s.message == "not started" || s.message == "not read yet" ||
          s.message == "not collected yet");
}

// The fault facts of one GPU that an operator wants to hear about once, when they appear
// and when they clear (key -> human detail). Counters that only grow are one fact, so a
// climbing ECC count is not a line per sweep.
std::map<std::string, std::string> GpuFaultFacts(const api::GpuStatus& g) {
  std::map<std::string, std::string> f;
  if (g.lost) f["lost"] = "GPU lost (fallen off the bus, NVML error or a hung call)";
  if (g.ecc_uncorrected_volatile && *g.ecc_uncorrected_volatile > 0)
    f["ecc-uncorrected"] = "uncorrected ECC errors: " + std::to_string(*g.ecc_uncorrected_volatile);
  if (g.remap_failure) f["row-remap-failure"] = "row remapping failed";
  if (g.remap_pending) f["row-remap-pending"] = "row remap pending (needs a GPU reset)";
  if (g.retired_pages_pending) f["retired-pages-pending"] = "page retirement pending";
  if (g.temperature_c && g.slowdown_temperature_c && *g.slowdown_temperature_c > 0 &&
      *g.temperature_c >= *g.slowdown_temperature_c)
    f["temperature"] = "temperature " + std::to_string(*g.temperature_c) +
                       " C at or above the slowdown threshold " +
                       std::to_string(*g.slowdown_temperature_c) + " C";
  std::string thermal;
  for (const auto& r : g.throttle_reasons)
    if (r.find("Thermal") != std::string::npos) thermal += (thermal.empty() ? "" : "+") + r;
  if (!thermal.empty()) f["thermal-throttle"] = "thermal clock slowdown: " + thermal;
  if (g.nvlink_links_down && *g.nvlink_links_down > 0)
    f["nvlink-down"] =
        "NVLink links down: " + std::to_string(*g.nvlink_links_down) +
        (g.nvlink_links_total ? " of " + std::to_string(*g.nvlink_links_total) : std::string());
  if (!g.recovery_action.empty() && g.recovery_action != "None")
    f["recovery-action"] = "driver recovery action " + g.recovery_action;
  return f;
}

std::string XidWhere(const api::XidEvent& x) {
  return !x.gpu_uuid.empty() ? x.gpu_uuid : !x.pci_bus_id.empty() ? x.pci_bus_id : "unknown";
}

}  // namespace

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
    NoteXid(x, source, counted);
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
  LogTransitions(in.snapshots, report);
  MaybeFlushXidSummary(false);
  return report;
}

api::GpuNodeHealthStatus Agent::CollectOnce() {
  auto ctx = Context();
  for (auto& s : sources_) s->PollOnce(ctx);
  auto report = BuildNow();
  FlushXidSummary();
  return report;
}

void Agent::NoteXid(const api::XidEvent& x, const std::string& source, int64_t counted) {
  if (counted <= 0) return;  // another source already reported these occurrences
  XidKey key{x.sxid, x.xid, XidWhere(x)};
  std::scoped_lock lock(log_mu_);
  if (logged_xids_.insert(key).second) {
    // An Xid the catalog (or an override) says to ignore is news, not a warning.
    const LogLevel level = x.recommended_action == "IGNORE" ? LogLevel::kInfo : LogLevel::kWarn;
    log_.Log(level, x.sxid ? "SXid seen" : "Xid seen",
             {{"xid", x.xid},
              {"gpu", x.gpu_uuid.empty() ? std::string("-") : x.gpu_uuid},
              {"pci", x.pci_bus_id.empty() ? std::string("-") : x.pci_bus_id},
              {"category", x.category},
              {"action", x.recommended_action},
              {"count", static_cast<long long>(counted)},
              {"source", source},
              {"message", x.message}});
    return;
  }
  if (repeated_xids_.empty()) summary_since_ = clock_.Monotonic();
  repeated_xids_[key] += counted;
}

void Agent::FlushXidSummary() { MaybeFlushXidSummary(true); }

void Agent::MaybeFlushXidSummary(bool force) {
  std::map<XidKey, int64_t> repeated;
  double seconds = 0;
  {
    std::scoped_lock lock(log_mu_);
    if (repeated_xids_.empty()) return;
    const MonoTime now = clock_.Monotonic();
    if (!force && now - summary_since_ < options_.xid_summary_interval) return;
    seconds = std::chrono::duration<double>(now - summary_since_).count();
    repeated.swap(repeated_xids_);
  }
  std::string what;
  long long total = 0;
  for (const auto& [key, n] : repeated) {
    if (!what.empty()) what += ", ";
    what += (std::get<0>(key) ? "SXid " : "Xid ") + std::to_string(std::get<1>(key)) + " on " +
            std::get<2>(key) + " x" + std::to_string(n);
    total += n;
  }
  log_.Warn(
      "Xids repeated",
      {{"total", total}, {"interval_s", static_cast<long long>(seconds + 0.5)}, {"xids", what}});
}

void Agent::LogTransitions(const std::vector<SourceSnapshot>& snapshots,
                           const api::GpuNodeHealthStatus& report) {
  std::scoped_lock lock(log_mu_);
  for (const auto& snap : snapshots) {
    const api::SourceStatus& st = snap.status;
    if (NotCollectedYet(st)) continue;
    auto it = logged_sources_.find(st.name);
    const bool first = it == logged_sources_.end();
    if (!first && it->second.state == st.state &&
        (st.state == api::SourceState::kOk || it->second.message == st.message))
      continue;
    const std::string state(api::SourceStateName(st.state));
    if (st.state == api::SourceState::kOk) {
      const char* msg = first ? "source ready" : "source recovered";
      const std::string gpus = snap.provides_gpus ? std::to_string(snap.gpus.size()) : "-";
      if (st.message.empty())
        log_.Info(msg, {{"source", st.name}, {"state", state}, {"gpus", gpus}});
      else
        log_.Info(msg,
                  {{"source", st.name}, {"state", state}, {"gpus", gpus}, {"message", st.message}});
    } else {
      log_.Warn(st.state == api::SourceState::kDegraded ? "source degraded" : "source unavailable",
                {{"source", st.name}, {"state", state}, {"error", st.message}});
    }
    logged_sources_[st.name] = st;
  }

  auto diff = [this](const std::string& where, int index,
                     const std::map<std::string, std::string>& now) {
    auto& before = logged_faults_[where];
    for (const auto& [key, detail] : now) {
      if (before.count(key)) continue;
      if (where.empty())
        log_.Warn("node fault", {{"fault", key}, {"detail", detail}});
      else
        log_.Warn(key == "lost" ? "GPU lost" : "GPU fault",
                  {{"gpu", index}, {"uuid", where}, {"fault", key}, {"detail", detail}});
    }
    for (const auto& [key, detail] : before) {
      if (now.count(key)) continue;
      if (where.empty())
        log_.Info("node fault cleared", {{"fault", key}});
      else
        log_.Info(key == "lost" ? "GPU back" : "GPU fault cleared",
                  {{"gpu", index}, {"uuid", where}, {"fault", key}});
    }
    before = now;
  };
  for (const auto& g : report.gpus) {
    if (g.uuid.empty()) continue;
    diff(g.uuid, g.index, GpuFaultFacts(g));
  }
  std::map<std::string, std::string> node_facts;
  bool gpus_known = false;  // some source that lists GPUs collected successfully
  for (const auto& snap : snapshots)
    if (snap.provides_gpus && snap.status.state != api::SourceState::kUnavailable)
      gpus_known = true;
  if (gpus_known && report.expected_gpus > 0 &&
      static_cast<int>(report.gpus.size()) < report.expected_gpus)
    node_facts["gpus-missing"] = std::to_string(report.gpus.size()) +
                                 " GPUs visible, the Node has " +
                                 std::to_string(report.expected_gpus);
  diff("", -1, node_facts);
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
