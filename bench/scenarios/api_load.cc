// scenario_api_load: what the operator costs the API server and itself in steady state, once
// with the real design (one LIST, then WATCH) and once in the polling mode that reproduces the
// seed (`--mode poll`: a full LIST of every collection each 30 s, no watch), same workload.
//
// The simulator runs in this process; the operator is the real gpu-guardian-operator binary
// (build/bin) in a child process, so its RSS, CPU and bytes read are its own (/proc/PID).
// N nodes (~14 KB each) with a healthy GPUNodeHealth report each; "agents" in this process
// write straight into the sim's store (not over HTTP, so the sim's request counters are the
// operator's alone): a heartbeat per node every 5 simulated minutes (the agent's default; as
// the agent does, a renew of the node's Lease gpu-guardian/gpu-guardian-agent-<node>, the
// report left as it is; the Leases exist before the operator starts, as in a running fleet) and
// random report changes (a GPU temperature, N/1000 per simulated second), none of which fences.
// Time is scaled: `--time-scale X` runs X simulated seconds per wall second, heartbeats and
// the poll interval (30 s / X) alike, so `--sim-minutes 10` at X=10 takes 60 s of wall time.
// Bytes from the API server: the operator talks to the sim through a loopback proxy in this
// process that counts what the sim sent (response headers and bodies, watch streams).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "api/gpu_node_health.h"
#include "bench/scenarios/bench_util.h"
#include "bench/scenarios/fleet.h"
#include "bench/scenarios/populate.h"
#include "bench/scenarios/proc.h"
#include "common/log.h"
#include "common/time_util.h"
#include "sim/population.h"
#include "sim/server.h"

using namespace gg;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

struct ModeResult {
  std::string mode;
  bool ok = false;
  std::string error;
  double sync_s = 0, reconcile_s = 0;
  double wall_s = 0, sim_s = 0;
  std::map<std::string, double> verbs;  // requests in the window
  double list_nodes = 0, list_reports = 0;
  double bytes = 0;  // sim → operator, through the proxy
  double cpu_s = 0;
  long rss = 0, hwm = 0;
  double reconciles = 0;
  long heartbeats = 0, changes = 0;
};

constexpr char kLeasesPath[] = "/apis/coordination.k8s.io/v1/namespaces/gpu-guardian/leases";

// The agent's heartbeat Lease of `node` (agent/node_lease.cc writes the same), renewed now.
json AgentLease(const std::string& node) {
  return {{"apiVersion", "coordination.k8s.io/v1"},
          {"kind", "Lease"},
          {"metadata",
           {{"name", api::kAgentLeasePrefix + node},
            {"namespace", "gpu-guardian"},
            {"labels",
             {{api::kAgentLeaseLabel, "true"},
              {"app.kubernetes.io/managed-by", "gpu-guardian-agent"}}}}},
          {"spec",
           {{"holderIdentity", node},
            {"leaseDurationSeconds", 900},
            {"renewTime", FormatRfc3339Micro(std::chrono::system_clock::now())}}}};
}

// The namespace and every node's Lease, as a running fleet of agents has them.
bool CreateLeases(sim::SimServer& srv, const sim::PopulationSpec& spec, long n) {
  if (!srv.Create("/api/v1/namespaces", {{"metadata", {{"name", "gpu-guardian"}}}}).ok())
    return false;
  for (long i = 0; i < n; ++i) {
    if (!srv.Create(kLeasesPath, AgentLease(bench::NodeName(spec, i))).ok()) return false;
  }
  return true;
}

class Agents {
 public:
  Agents(sim::SimServer& srv, const sim::PopulationSpec& spec, long n, double time_scale)
      : srv_(srv), spec_(spec), n_(n), scale_(time_scale) {}

  // Writes for `wall_s` seconds: heartbeats round-robin at n/300 per simulated second,
  // temperature changes on random nodes at n/1000 per simulated second.
  void Run(double wall_s, long* heartbeats, long* changes) {
    const double hb_rate = n_ / 300.0 * scale_;  // per wall second
    const double ch_rate = n_ / 1000.0 * scale_;
    std::atomic<long> hb{0}, ch{0};
    double t0 = bench::Now();
    auto worker = [&](int id, int threads) {
      std::mt19937_64 rng(1234 + id);
      long hb_next = id, done_hb = 0, done_ch = 0;
      while (true) {
        double el = bench::Now() - t0;
        if (el >= wall_s) break;
        long hb_due = static_cast<long>(hb_rate * el / threads);
        long ch_due = static_cast<long>(ch_rate * el / threads);
        if (done_hb >= hb_due && done_ch >= ch_due) {
          std::this_thread::sleep_for(2ms);
          continue;
        }
        if (done_hb < hb_due) {
          Heartbeat(bench::NodeName(spec_, hb_next % n_));
          hb_next += threads;
          ++done_hb;
          hb.fetch_add(1);
        }
        if (done_ch < ch_due) {
          long i = static_cast<long>(rng() % static_cast<std::uint64_t>(n_));
          Write(bench::NodeName(spec_, i), 41 + static_cast<int>(rng() % 20));
          ++done_ch;
          ch.fetch_add(1);
        }
      }
    };
    {
      std::vector<std::jthread> ts;
      for (int i = 0; i < 2; ++i) ts.emplace_back(worker, i, 2);
    }
    *heartbeats = hb.load();
    *changes = ch.load();
  }

 private:
  void Heartbeat(const std::string& node) {
    auto r = srv_.Update(std::string(kLeasesPath) + "/" + api::kAgentLeasePrefix + node,
                         AgentLease(node));
    if (!r.ok())
      std::fprintf(stderr, "heartbeat %s: %s\n", node.c_str(), r.status().ToString().c_str());
  }
  void Write(const std::string& node, int temperature) {
    auto st =
        json::parse(api::EncodeGpuNodeHealthStatus(bench::AgentReport(node, false, temperature)));
    auto r = srv_.MergePatch(std::string(bench::kReportsPath) + "/" + node, {{"status", st}});
    if (!r.ok())
      std::fprintf(stderr, "report %s: %s\n", node.c_str(), r.status().ToString().c_str());
  }
  sim::SimServer& srv_;
  const sim::PopulationSpec& spec_;
  long n_;
  double scale_;
};

// Starts the operator binary against `url`; waits for /readyz and a quiet node queue.
struct OperatorProc {
  pid_t pid = 0;
  std::string metrics_url;
  std::string log;
  ~OperatorProc() { Stop(); }
  void Stop() {
    if (pid > 0) bench::StopChild(pid);
    pid = 0;
  }
  bool Start(const std::string& url, const std::string& mode, double poll_s, std::string* err) {
    int port = bench::FreePort();
    metrics_url = "http://127.0.0.1:" + std::to_string(port);
    log = "/tmp/gg-bench-operator-" + mode + "-" + std::to_string(getpid()) + ".log";
    std::vector<std::string> argv = {bench::BinDir() + "/gpu-guardian-operator",
                                     "--server",
                                     url,
                                     "--leader-elect=false",
                                     "--metrics-addr",
                                     "127.0.0.1:" + std::to_string(port),
                                     "--log-level",
                                     "warn",
                                     "--mode",
                                     mode};
    if (mode == "poll") {
      argv.push_back("--poll-interval");
      argv.push_back(std::to_string(static_cast<long>(poll_s * 1000)) + "ms");
    }
    pid = bench::Spawn(argv, log);
    if (pid <= 0) {
      *err = "cannot spawn " + argv[0];
      return false;
    }
    return true;
  }
  // Ready = caches synced (the operator's /readyz).
  bool WaitReady(double timeout_s) {
    double end = bench::Now() + timeout_s;
    while (bench::Now() < end) {
      if (!bench::Alive(pid)) return false;
      if (bench::HttpGet(metrics_url, "/readyz").first == 200) return true;
      std::this_thread::sleep_for(100ms);
    }
    return false;
  }
  double Metric(const std::string& name, const std::vector<std::string>& labels) {
    auto [code, body] = bench::HttpGet(metrics_url, "/metrics");
    return code == 200 ? bench::PromSum(body, name, labels) : -1;
  }
  // The node queue empty and no new adds for `quiet_s`.
  bool WaitQuiet(double quiet_s, double timeout_s) {
    double end = bench::Now() + timeout_s, since = -1, last_adds = -1;
    while (bench::Now() < end) {
      double depth = Metric("workqueue_depth", {"name=\"node\""});
      double adds = Metric("workqueue_adds_total", {"name=\"node\""});
      if (depth == 0 && adds == last_adds) {
        if (since < 0) since = bench::Now();
        if (bench::Now() - since >= quiet_s) return true;
      } else {
        since = -1;
      }
      last_adds = adds;
      std::this_thread::sleep_for(250ms);
    }
    return false;
  }
};

ModeResult RunMode(sim::SimServer& srv, const sim::PopulationSpec& spec, long n,
                   const std::string& mode, double time_scale, double sim_s) {
  ModeResult r;
  r.mode = mode;
  OperatorProc op;
  bench::CountingProxy proxy;
  if (!proxy.Start(bench::UrlPort(srv.Url()))) {
    r.error = "proxy";
    return r;
  }
  double t0 = bench::Now();
  if (!op.Start("http://127.0.0.1:" + std::to_string(proxy.port()), mode, 30.0 / time_scale,
                &r.error)) {
    return r;
  }
  if (!op.WaitReady(1800)) {
    r.error = "operator not ready (log " + op.log + ")";
    return r;
  }
  r.sync_s = bench::Now() - t0;
  double r0 = bench::Now();
  if (!op.WaitQuiet(mode == "poll" ? 2.0 * 30.0 / time_scale : 2.0, 3600)) {
    r.error = "node queue never settled";
    return r;
  }
  r.reconcile_s = bench::Now() - r0;
  double adds0 = op.Metric("workqueue_adds_total", {"name=\"node\""});
  auto m0 = bench::HttpGet(srv.Url(), "/metrics").second;
  auto p0 = bench::SampleProc(op.pid);
  long b0 = proxy.served();
  double w0 = bench::Now();
  Agents agents(srv, spec, n, time_scale);
  agents.Run(sim_s / time_scale, &r.heartbeats, &r.changes);
  r.wall_s = bench::Now() - w0;
  r.sim_s = r.wall_s * time_scale;
  auto p1 = bench::SampleProc(op.pid);
  r.bytes = static_cast<double>(proxy.served() - b0);
  auto m1 = bench::HttpGet(srv.Url(), "/metrics").second;
  double adds1 = op.Metric("workqueue_adds_total", {"name=\"node\""});
  auto v0 = bench::RequestsByVerb(m0), v1 = bench::RequestsByVerb(m1);
  for (auto& [k, v] : v1) r.verbs[k] = v - v0[k];
  auto lists = [](const std::string& t, const char* res) {
    return bench::PromSum(t, "apiserver_request_total",
                          {"verb=\"list\"", std::string("resource=\"") + res + "\""});
  };
  r.list_nodes = lists(m1, "nodes") - lists(m0, "nodes");
  r.list_reports = lists(m1, "gpunodehealths") - lists(m0, "gpunodehealths");
  r.cpu_s = p1.cpu_s - p0.cpu_s;
  r.rss = p1.rss;
  r.hwm = p1.hwm;
  r.reconciles = adds1 - adds0;
  r.ok = bench::Alive(op.pid);
  if (!r.ok) r.error = "operator exited (log " + op.log + ")";
  op.Stop();
  proxy.Stop();
  return r;
}

// RSS of the operator settled against an empty fleet (CRDs and the policy only): the fixed
// cost that the per-node figure leaves out.
long EmptyFleetRss(std::string* err) {
  sim::SimOptions o;
  o.kubelet = o.scheduler = o.controllers = false;
  o.http_threads = 16;
  auto srv = sim::SimServer::Start(o);
  if (!srv.ok() || !bench::CreateCrds(**srv) ||
      !(*srv)->Create(bench::kPoliciesPath, bench::XidPolicy()).ok()) {
    *err = "empty sim";
    return -1;
  }
  OperatorProc op;
  if (!op.Start((*srv)->Url(), "watch", 0, err) || !op.WaitReady(120)) return -1;
  std::this_thread::sleep_for(2s);
  long rss = bench::SampleProc(op.pid).rss;
  op.Stop();
  (*srv)->Stop();
  return rss;
}

}  // namespace

int main(int argc, char** argv) {
  bench::Args args = bench::ParseArgs(argc, argv, {"time-scale", "sim-minutes", "modes"});
  if (!args.ok) return 2;
  const long n = args.nodes ? args.nodes : (args.mode == "scale" ? 100000 : 10000);
  const double scale = args.Num("time-scale", args.mode == "scale" ? 2 : 10);
  const double sim_s = args.Num("sim-minutes", 10) * 60;
  const std::string modes = args.Str("modes", "watch,poll");
  Logger::SetGlobalLevel(LogLevel::kWarn);
  bench::Report rep("scenario_api_load", args);
  rep.Param("nodes", n);
  rep.Param("time_scale", scale);
  rep.Param("simulated_seconds", sim_s);
  rep.Param("poll_interval_simulated_s", 30);
  rep.Param("heartbeat_simulated_s", 300);
  rep.Param("report_changes_per_simulated_s", n / 1000.0);

  std::string err;
  long empty_rss = EmptyFleetRss(&err);
  if (empty_rss < 0) {
    std::fprintf(
        stderr, "operator against an empty fleet failed: %s (is %s/gpu-guardian-operator built?)\n",
        err.c_str(), bench::BinDir().c_str());
    return 1;
  }

  sim::SimOptions o;
  o.kubelet = o.scheduler = o.controllers = false;
  o.http_threads = 32;
  o.watch_history = 500000;
  auto srvr = sim::SimServer::Start(o);
  if (!srvr.ok()) return 1;
  auto& srv = **srvr;
  sim::PopulationSpec spec;
  spec.nodes = static_cast<int>(n);
  double p0 = bench::Now();
  if (!bench::CreateCrds(srv) || !bench::PopulateNodes(srv, spec, n) ||
      !bench::CreateReports(srv, spec, n) || !CreateLeases(srv, spec, n) ||
      !srv.Create(bench::kPoliciesPath, bench::XidPolicy()).ok()) {
    return 1;
  }
  rep.Add("populate nodes + reports", bench::Now() - p0, "s", -1, false);

  std::vector<ModeResult> results;
  for (const std::string m : {"watch", "poll"}) {
    if (modes.find(m) == std::string::npos) continue;
    std::printf("  running --mode %s for %.0f s of wall time ...\n", m.c_str(), sim_s / scale);
    std::fflush(stdout);
    results.push_back(RunMode(srv, spec, n, m, scale, sim_s));
    if (!results.back().ok) {
      std::fprintf(stderr, "mode %s: %s\n", m.c_str(), results.back().error.c_str());
      return 1;
    }
  }

  // Per simulated second / minute: what a real cluster would see over the same 10 minutes.
  std::printf("\n  %-40s", "figure (per simulated time)");
  for (auto& r : results) std::printf(" %14s", r.mode.c_str());
  if (results.size() == 2) std::printf(" %12s", "poll/watch");
  std::printf("\n");
  auto row = [&](const std::string& name, auto fn, const char* unit) {
    std::printf("  %-40s", (name + " [" + unit + "]").c_str());
    std::vector<double> v;
    for (auto& r : results) {
      v.push_back(fn(r));
      std::printf(" %14s", bench::Report::Fmt(v.back()).c_str());
    }
    if (v.size() == 2) {
      std::printf(" %12s",
                  v[0] > 0 ? bench::Report::Fmt(v[1] / v[0]).c_str() : (v[1] > 0 ? "inf" : "-"));
    }
    std::printf("\n");
    json j;
    for (std::size_t i = 0; i < results.size(); ++i) j[results[i].mode] = v[i];
    j["unit"] = unit;
    rep.Param("table/" + name, j);
  };
  for (const char* verb : {"list", "watch", "get", "patch", "create", "update"}) {
    row(
        std::string("requests/s ") + verb,
        [&](const ModeResult& r) {
          auto it = r.verbs.find(verb);
          return it == r.verbs.end() ? 0.0 : it->second / r.sim_s;
        },
        "1/s");
  }
  row(
      "LIST requests, nodes (pages, whole window)",
      [](const ModeResult& r) { return r.list_nodes; }, "n");
  row(
      "LIST requests, reports (pages)", [](const ModeResult& r) { return r.list_reports; }, "n");
  const double pages = std::ceil(n / 500.0);
  row(
      "full LISTs of nodes (polls) per 10 min",
      [&](const ModeResult& r) { return r.list_nodes / pages / r.sim_s * 600; }, "n");
  row(
      "bytes from API server per minute",
      [](const ModeResult& r) { return r.bytes / r.sim_s * 60 / 1e6; }, "MB");
  // A poll's cost does not depend on the time scale; when the scaled interval was too short
  // for every poll to happen, this is what 20 polls per 10 minutes (30 s) cost.
  row(
      "bytes per minute at the real interval",
      [&](const ModeResult& r) {
        if (r.mode != "poll" || r.list_nodes <= 0) return r.bytes / r.sim_s * 60 / 1e6;
        return r.bytes / (r.list_nodes / pages) * 2 / 1e6;
      },
      "MB");
  row(
      "operator CPU per minute", [](const ModeResult& r) { return r.cpu_s / r.sim_s * 60; }, "s");
  row(
      "operator RSS at end", [](const ModeResult& r) { return r.rss / 1048576.0; }, "MiB");
  row(
      "operator RSS per node (minus empty)",
      [&](const ModeResult& r) { return (r.rss - empty_rss) / double(n); }, "B");
  row(
      "reconciles per minute", [](const ModeResult& r) { return r.reconciles / r.sim_s * 60; },
      "n");
  row(
      "start → caches synced (wall)", [](const ModeResult& r) { return r.sync_s; }, "s");
  std::printf("\n");
  std::fflush(stdout);

  rep.Add("operator RSS, empty fleet", empty_rss / 1048576.0, "MiB", -1, false);
  for (auto& r : results) {
    std::string p = r.mode + ": ";
    rep.Add(p + "heartbeats + changes written", double(r.heartbeats + r.changes), "", -1, false,
            std::to_string(r.heartbeats) + " + " + std::to_string(r.changes) + " in " +
                bench::Report::Fmt(r.wall_s) + " s wall");
    rep.Add(p + "bytes from API server", r.bytes / 1e6, "MB", -1, false,
            "over " + bench::Report::Fmt(r.sim_s / 60) + " simulated min");
    rep.Add(p + "operator CPU", r.cpu_s, "s", -1, false,
            bench::Report::Fmt(100 * r.cpu_s / r.wall_s) + "% of a core over the window");
    rep.Add(p + "operator VmHWM", r.hwm / 1048576.0, "MiB", -1, false);
  }
  for (auto& r : results) {
    if (r.mode != "watch") continue;
    rep.Add("watch: periodic LISTs in the window", r.verbs["list"], "", 0, false);
    rep.Add("watch: operator RSS per node, settled", (r.rss - empty_rss) / double(n), "B", 2048,
            false, "RSS at end minus empty-fleet RSS, / N");
  }
  if (results.size() == 2) {
    double ratio = results[0].bytes > 0 ? results[1].bytes / results[0].bytes : 0;
    rep.Add("bytes from API server, poll / watch, as run", ratio, "x", -1, false,
            "polls done / due: " + bench::Report::Fmt(results[1].list_nodes / pages) + " / " +
                bench::Report::Fmt(results[1].sim_s / 30));
    double per_poll =
        results[1].list_nodes > 0 ? results[1].bytes / (results[1].list_nodes / pages) : 0;
    double poll_real = per_poll * results[1].sim_s / 30.0;
    double watch_bytes = results[0].bytes / results[0].sim_s * results[1].sim_s;
    rep.Add("bytes from API server, poll / watch, 30 s interval",
            watch_bytes > 0 ? poll_real / watch_bytes : 0, "x", 100, true,
            "poll = bytes per poll x polls due; target at 10k nodes; N=" + std::to_string(n));
    rep.Add("operator CPU, poll / watch",
            results[0].cpu_s > 0 ? results[1].cpu_s / results[0].cpu_s : 0, "x", -1, false);
  }
  for (auto& r : results) {
    if (r.mode != "poll") continue;
    double polls = r.list_nodes / pages, expected = r.sim_s / 30.0;
    rep.Add("poll: full LISTs of nodes done / due", polls / expected, "x", -1, false,
            bench::Report::Fmt(polls) + " of " + bench::Report::Fmt(expected) +
                (polls < 0.95 * expected ? ": a poll took a noticeable part of the scaled "
                                           "interval, so poll figures understate the real cost"
                                         : ""));
  }
  rep.Note(
      "agents write into the sim's store directly, so request counts are the operator's; "
      "watch reconnects (every 5-10 real minutes) are not time-scaled and may not occur "
      "in a short window");
  srv.Stop();
  return rep.Write() ? 0 : 1;
}
