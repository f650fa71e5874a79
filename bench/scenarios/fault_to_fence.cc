// scenario_fault_to_fence: two processes, as in a cluster. The simulator (standing in for
// kube-apiserver) runs in a child process seeded with N realistic GPU nodes, a healthy
// GPUNodeHealth report each and a GPUHealthPolicy fencing on Xid 79; the whole operator runs in
// the runner's process (its own informers over loopback HTTP) with glibc's malloc defaults.
// Faults are written as an agent writes them (merge patch of the report's status over HTTP); a
// node watch records when taint+cordon become visible. Latency = fence seen on the watch −
// report observedAt, split into the write and the operator step. Then a burst of simultaneous
// faults: time until all are cordoned. CPU figures are given per process.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api/gpu_node_health.h"
#include "api/test_reports.h"
#include "bench/scenarios/bench_util.h"
#include "bench/scenarios/fleet.h"
#include "bench/scenarios/populate.h"
#include "bench/scenarios/proc.h"
#include "bench/scenarios/sim_process.h"
#include "common/clock.h"
#include "common/log.h"
#include "k8s/codec.h"
#include "k8s/rest_client.h"
#include "metrics/registry.h"
#include "operator/operator.h"
#include "sim/population.h"
#include "sim/server.h"
#include "sim/test_objects.h"

using namespace gg;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

using SysTime = std::chrono::system_clock::time_point;
using Sec = std::chrono::duration<double>;

double Ms(SysTime later, SysTime earlier) { return Sec(later - earlier).count() * 1000; }

// The simulator child's allocator (a yardstick property; the runner's process, where the
// operator runs, keeps glibc's defaults). glibc keeps 7 freed chunks per size class per thread
// (tcache); the rest of a request's thousands of small JSON nodes go to the arena's fast bins,
// which the next large request merges and sorts into shared bins under the arena lock. On the
// heap of 100k nodes those bins span gigabytes. A deeper tcache keeps a request's garbage on
// its thread for the next one; no fast bins means no deferred merge. One arena: a node version
// freed by one HTTP thread is reused by the next write on any thread, as in the one heap of the
// Go API server it stands for; with an arena per thread group the store's memory grew by a new
// 15 KB node version per write (358k page faults in a 100k-node reconcile, 142k with one).
// docs/reference/glibc-malloc.md.
constexpr char kSimTunables[] =
    "glibc.malloc.tcache_count=4096:glibc.malloc.mxfast=0:glibc.malloc.arena_max=1";

double Pct(std::vector<double> v, double p) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  std::size_t i = static_cast<std::size_t>(p * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// Round trip of one node PATCH over loopback HTTP (the operator's write path).
void ProbePatch(k8s::RestClient& client, const sim::PopulationSpec& spec, long n,
                bench::Report& rep) {
  std::vector<double> lat;
  for (int i = 0; i < 50; ++i) {
    std::string body =
        R"({"metadata":{"labels":{"bench.gpuguardian.io/probe":")" + std::to_string(i) + R"("}}})";
    double t = bench::Now();
    auto r =
        client.Patch(k8s::kNodes, "", bench::NodeName(spec, i % n), k8s::PatchType::kMerge, body);
    if (!r.ok()) break;
    lat.push_back((bench::Now() - t) * 1000);
  }
  rep.Add("node PATCH round trip over HTTP p50", Pct(lat, 0.5), "ms", -1, false, "50 sequential");
  rep.Add("node PATCH round trip over HTTP max", Pct(lat, 1.0), "ms", -1, false);
}

// A node watch from `rv`: the first time each node shows our taint and unschedulable.
class FenceWatch {
 public:
  FenceWatch(k8s::RestClient& client, std::string rv)
      : client_(client), thread_([this, rv](std::stop_token st) { Run(rv, st); }) {}
  ~FenceWatch() { thread_.request_stop(); }

  // Until every name is fenced (true) or `timeout` seconds pass.
  bool WaitAll(const std::vector<std::string>& names, double timeout) {
    double end = bench::Now() + timeout;
    std::size_t seen = 0;  // names[0, seen) are fenced: each name is looked up until it is
    while (bench::Now() < end) {
      {
        std::scoped_lock l(mu_);
        while (seen < names.size() && fenced_.count(names[seen])) ++seen;
        if (seen == names.size()) return true;
      }
      std::this_thread::sleep_for(2ms);
    }
    return false;
  }
  std::optional<SysTime> When(const std::string& name) {
    std::scoped_lock l(mu_);
    auto it = fenced_.find(name);
    return it == fenced_.end() ? std::nullopt : std::optional<SysTime>(it->second);
  }

 private:
  void Run(std::string rv, std::stop_token st) {
    k8s::WatchOptions wo;
    wo.resource_version = std::move(rv);
    while (!st.stop_requested()) {
      (void)client_.Watch(
          k8s::kNodes, "", wo, [&](std::string_view line) { return OnLine(line, wo); }, st);
    }
  }
  bool OnLine(std::string_view line, k8s::WatchOptions& wo) {
    // Most events (the initial reconcile's 100k condition writes) cannot carry our taint: keep
    // only their resourceVersion (metadata's is the first unescaped one; annotations sort
    // before it but hold no such key here) instead of decoding the whole node. A watcher that
    // lags behind the flood inflates every measured step.
    if (line.find(api::kTaintKey) == std::string_view::npos) {
      constexpr std::string_view kRv = "\"resourceVersion\":\"";
      if (auto at = line.find(kRv); at != std::string_view::npos) {
        auto end = line.find('"', at + kRv.size());
        if (end != std::string_view::npos)
          wo.resource_version = std::string(line.substr(at + kRv.size(), end - at - kRv.size()));
      }
      return true;
    }
    auto ev = k8s::ParseWatchEvent<k8s::Node>(line, true);
    if (!ev.ok()) return true;
    if (!ev->object.meta.resource_version.empty())
      wo.resource_version = ev->object.meta.resource_version;
    if (ev->object.unschedulable && ev->object.FindTaint(api::kTaintKey)) {
      auto now = std::chrono::system_clock::now();
      std::scoped_lock l(mu_);
      fenced_.try_emplace(ev->object.meta.name, now);
    }
    return true;
  }

  k8s::RestClient& client_;
  std::mutex mu_;
  std::map<std::string, SysTime> fenced_;
  std::jthread thread_;  // last: stops and joins before the members it uses go
};

// The runner's state after the operator synced: the sim, the fence watch, the names.
struct Run {
  k8s::RestClient& writer;  // the agents' client: reports go over HTTP, as an agent writes them
  pid_t sim_pid;
  metrics::Registry& registry;
  FenceWatch& watch;
  bench::Report& rep;
  const sim::PopulationSpec& spec;
  long n, paced, burst, early, stride;

  // Writes an Xid 79 report for `node` the agent's way (merge patch of the status
  // subresource over HTTP): (its observedAt, when the write returned).
  std::pair<SysTime, SysTime> WriteFault(const std::string& node) {
    auto rs = bench::AgentReport(node, true);
    const std::string body = R"({"status":)" + api::EncodeGpuNodeHealthStatus(rs) + "}";
    auto r = writer.Patch(k8s::kGpuNodeHealths, "", node, k8s::PatchType::kMerge, body, "status");
    if (!r.ok())
      std::fprintf(stderr, "report %s: %s\n", node.c_str(), r.status().ToString().c_str());
    return {rs.observed_at, std::chrono::system_clock::now()};
  }
  // CPU seconds of the runner's process (operator + runner) and of the simulator child.
  std::pair<double, double> Cpu() const {
    return {bench::CpuSeconds(), bench::SampleProc(sim_pid).cpu_s};
  }
  void AddCpu(const std::string& what, std::pair<double, double> cpu0, double per, double scale,
              const std::string& unit, const std::string& note);
  double QueueDepth() { return registry.Value("workqueue_depth", {"node"}); }
  void EarlyFaults();
  void InitialReconcile(double r0, std::pair<double, double> cpu0);
  void PacedFaults();
  void Burst();
};

// Faults on nodes between the paced ones, written while the initial reconcile runs.
void Run::EarlyFaults() {
  std::vector<std::string> names;
  std::map<std::string, SysTime> written;
  double depth_at_first = QueueDepth();
  for (long i = 0; i < early && stride > 1; ++i) {
    std::string nm = bench::NodeName(spec, i * stride + 1);
    names.push_back(nm);
    written[nm] = WriteFault(nm).second;
    std::this_thread::sleep_for(50ms);
  }
  if (names.empty()) return;
  bool all = watch.WaitAll(names, 120);
  double depth_after = QueueDepth();
  std::vector<double> step;
  for (auto& nm : names) {
    if (auto t = watch.When(nm)) step.push_back(Ms(*t, written[nm]));
  }
  rep.Add("faults during the initial reconcile, fenced", double(step.size()), "",
          double(names.size()), true, all ? "" : "timeout 120 s");
  rep.Add("  their operator step p50", Pct(step, 0.5), "ms", -1, false);
  rep.Add("  their operator step p99", Pct(step, 0.99), "ms", 50, false,
          "housekeeping queued: " + bench::Report::Fmt(depth_at_first) + " nodes at the first, " +
              bench::Report::Fmt(depth_after) + " when all were fenced");
  rep.Add("  their operator step max", Pct(step, 1.0), "ms", -1, false);
}

// Three CPU figures for a phase: the runner's process (operator + runner's watch and writes),
// the simulator child (the API server's share), and both.
void Run::AddCpu(const std::string& what, std::pair<double, double> cpu0, double per, double scale,
                 const std::string& unit, const std::string& note) {
  const auto [op1, sim1] = Cpu();
  const double op = op1 - cpu0.first, sim = sim1 - cpu0.second;
  rep.Add(what + " (operator process)", op / per * scale, unit, -1, false, note);
  rep.Add(what + " (simulator process)", sim / per * scale, unit, -1, false);
  rep.Add(what + " (both)", (op + sim) / per * scale, unit, -1, false);
}

// The initial reconcile of every node (GPUHealthy condition written): wait until the node
// queue has stayed empty for 1 s, so the paced faults measure the steady state.
void Run::InitialReconcile(double r0, std::pair<double, double> cpu0) {
  int quiet = 0;
  while (quiet < 10 && bench::Now() - r0 < 1200) {
    std::this_thread::sleep_for(100ms);
    quiet = QueueDepth() == 0 ? quiet + 1 : 0;
  }
  double rs = bench::Now() - r0 - 1.0;
  std::fprintf(stderr, "fault_to_fence: initial reconcile done\n");
  rep.Add("initial reconcile of all nodes", rs, "s", -1, false,
          bench::Report::Fmt(n / std::max(rs, 1e-3)) + " nodes/s");
  rep.Add("initial reconcile rate", n / std::max(rs, 1e-3), "nodes/s", n >= 100000 ? 1400 : -1,
          true, "target is for 100k nodes");
  // CPU per node: robust to load, unlike nodes/s; it should not grow with the fleet.
  AddCpu("  CPU per node", cpu0, double(n), 1e6, "us", "operator, its informers, runner's watch");
}

// Faults at 20/s in the steady state.
void Run::PacedFaults() {
  std::vector<std::string> names;
  std::map<std::string, std::pair<SysTime, SysTime>> written;
  for (long i = 0; i < paced; ++i) {
    std::string nm = bench::NodeName(spec, i * stride);
    names.push_back(nm);
    written[nm] = WriteFault(nm);
    std::this_thread::sleep_for(50ms);
  }
  bool all = watch.WaitAll(names, 120);
  std::vector<double> total, op_step, write_leg;
  for (auto& nm : names) {
    auto t = watch.When(nm);
    if (!t) continue;
    total.push_back(Ms(*t, written[nm].first));
    op_step.push_back(Ms(*t, written[nm].second));
    write_leg.push_back(Ms(written[nm].second, written[nm].first));
  }
  rep.Add("paced faults fenced", double(total.size()), "", double(paced), true,
          all ? "" : "timeout 120 s");
  rep.Add("report write (HTTP PATCH) p99", Pct(write_leg, 0.99), "ms", -1, false);
  rep.Add("operator step p50 (write → fence on watch)", Pct(op_step, 0.5), "ms", -1, false);
  rep.Add("operator step p90", Pct(op_step, 0.9), "ms", -1, false);
  rep.Add("operator step p99", Pct(op_step, 0.99), "ms", 50, false,
          "target is for 100k nodes; N=" + std::to_string(n));
  rep.Add("operator step max", Pct(op_step, 1.0), "ms", -1, false);
  rep.Add("observedAt → fence p50", Pct(total, 0.5), "ms", -1, false);
  rep.Add("observedAt → fence p99", Pct(total, 0.99), "ms", -1, false);
  rep.Add("observedAt → fence max", Pct(total, 1.0), "ms", -1, false);
}

// `burst` faults written at once on the last nodes (by 8 writers, as many agents write at
// the same time): time until all are cordoned.
void Run::Burst() {
  std::vector<std::string> names;
  for (long i = n - burst; i < n; ++i) names.push_back(bench::NodeName(spec, i));
  std::fprintf(stderr, "fault_to_fence: burst running\n");
  const auto cpu0 = Cpu();
  double b0 = bench::Now();
  {
    std::vector<std::jthread> writers;
    constexpr std::size_t kWriters = 8;
    for (std::size_t w = 0; w < kWriters; ++w) {
      writers.emplace_back([&, w] {
        for (std::size_t i = w; i < names.size(); i += kWriters) WriteFault(names[i]);
      });
    }
  }
  double bw = bench::Now() - b0;
  bool all = watch.WaitAll(names, 300);
  double bt = bench::Now() - b0;
  std::fprintf(stderr, "fault_to_fence: burst done\n");
  std::size_t got = 0;
  for (auto& nm : names) got += watch.When(nm) ? 1 : 0;
  rep.Add("burst faults cordoned", double(got), "", double(burst), true);
  rep.Add("burst: writing the reports", bw, "s", -1, false, "HTTP PATCH, 8 writers");
  rep.Add("burst: first report → all cordoned", all ? bt : -1, "s", 5.0, false,
          all ? "" : "not all within 300 s");
  AddCpu("  burst CPU per fault", cpu0, double(std::max<long>(burst, 1)), 1e3, "ms",
         "report write, fence, condition, drain, record, Events");
}

}  // namespace

int main(int argc, char** argv) {
  if (int rc = bench::SimProcess::MaybeRunChild(argc, argv); rc >= 0) return rc;
  bench::Args args = bench::ParseArgs(
      argc, argv, {"early-faults", "watch-history", "tune-malloc", "sim-tunables"});
  if (!args.ok) return 2;
  const long n = args.nodes ? args.nodes : (args.mode == "scale" ? 10000 : 1000);
  const long k = args.events ? args.events : std::min<long>(200, n / 4);
  const long burst = std::min<long>(1000, n - k);
  Logger::SetGlobalLevel(LogLevel::kWarn);  // one info line per fenced node otherwise
  bench::Report rep("scenario_fault_to_fence", args);
  rep.Param("nodes", n);
  rep.Param("paced_faults", k);
  rep.Param("burst_faults", burst);
  // Faults written while the initial reconcile (housekeeping: the GPUHealthy condition of every
  // node) is still queued: they must not wait behind it (the node queue's urgent lane).
  const long early = std::min<long>(static_cast<long>(args.Num("early-faults", 20)), k);
  rep.Param("early_faults", early);
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  rep.Param("operator_glibc_tunables", tunables ? tunables : "");

  // The simulator in its own process, started before any thread of ours (fork).
  bench::SimProcessOptions so;
  so.nodes = n;
  // Per resource, kube-apiserver's watch cache holds at most 100 × 1024 events (and at least
  // 75 s of them); the simulator keeps the same window, so an initial reconcile that rewrites
  // every node frees the versions its window drops, as the real server's cache does.
  so.watch_history = static_cast<std::size_t>(args.Num("watch-history", 102400));
  so.glibc_tunables = args.Str("sim-tunables", args.Num("tune-malloc", 1) != 0 ? kSimTunables : "");
  rep.Param("sim_glibc_tunables", so.glibc_tunables);
  bench::SimProcess sim;
  if (!sim.Start(so)) return 1;
  rep.Add("populate nodes + healthy reports", sim.populate_seconds(), "s", -1, false,
          "in the simulator process, direct store writes");
  k8s::ClientConfig cfg;
  cfg.server = sim.url();
  cfg.timeout = 120000ms;
  auto client = k8s::RestClient::Create(cfg, RealClock::Default());
  if (!client.ok()) return 1;
  sim::PopulationSpec spec;
  ProbePatch(**client, spec, n, rep);

  metrics::Registry registry;
  auto op_client = k8s::RestClient::Create(cfg, RealClock::Default());
  if (!op_client.ok()) return 1;
  op::OperatorConfig oc;
  oc.metrics_addr = "127.0.0.1:0";
  oc.leader_elect = false;
  oc.identity = "bench";
  oc.max_running_drains = 10000;
  op::Operator oper(**op_client, RealClock::Default(), registry, oc);
  std::stop_source op_stop;
  Status op_result;
  double s0 = bench::Now();
  std::jthread op_thread([&] { op_result = oper.Run(op_stop.get_token()); });
  while (!oper.Synced() && bench::Now() - s0 < 600) std::this_thread::sleep_for(10ms);
  if (!oper.Synced()) {
    std::fprintf(stderr, "operator did not sync: %s\n", op_result.ToString().c_str());
    return 1;
  }
  rep.Add("operator cache sync", bench::Now() - s0, "s", -1, false);
  const double initial_r0 = bench::Now();  // the initial reconcile starts with the sync
  const std::pair<double, double> initial_cpu0{bench::CpuSeconds(),
                                               bench::SampleProc(sim.pid()).cpu_s};
  // Progress on stderr, so a profiler can attach for the initial reconcile's window alone.
  std::fprintf(stderr, "fault_to_fence: synced, initial reconcile running (sim pid %d)\n",
               static_cast<int>(sim.pid()));
  {
    FenceWatch watch(**client, std::to_string(sim.ResourceVersion()));
    std::this_thread::sleep_for(300ms);
    const long stride = std::max<long>(1, (n - burst) / std::max<long>(k, 1));
    Run run{**client, sim.pid(), registry, watch, rep, spec, n, k, burst, early, stride};
    run.EarlyFaults();
    run.InitialReconcile(initial_r0, initial_cpu0);
    run.PacedFaults();
    run.Burst();
    rep.Add("operator RSS (operator process: operator + runner)", bench::RssBytes() / 1048576.0,
            "MiB", -1, false);
    rep.Add("simulator RSS (its own process)", bench::SampleProc(sim.pid()).rss / 1048576.0, "MiB",
            -1, false);
  }
  op_stop.request_stop();
  op_thread.join();
  sim.Stop();
  return rep.Write() ? 0 : 1;
}
