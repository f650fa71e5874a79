// scenario_sim_scale: the simulator alone with N GPU nodes (8 GPUs each): its RSS after
// population, one full LIST without paging, and watch fan-out to 10 watchers while nodes are
// patched. Runs the sim in-process; the RSS figure is measured before any client exists.
#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "bench/scenarios/bench_util.h"
#include "bench/scenarios/populate.h"
#include "common/clock.h"
#include "k8s/rest_client.h"
#include "sim/population.h"
#include "sim/server.h"

using namespace gg;

int main(int argc, char** argv) {
  bench::Args args = bench::ParseArgs(argc, argv);
  if (!args.ok) return 2;
  const long n = args.nodes ? args.nodes : (args.mode == "scale" ? 100000 : 10000);
  const long m = args.events ? args.events : (args.mode == "scale" ? 50000 : 10000);
  const int watchers = 10;
  bench::Report rep("scenario_sim_scale", args);
  rep.Param("nodes", n);
  rep.Param("gpus_per_node", 8);
  rep.Param("watchers", watchers);
  rep.Param("patches", m);

  long rss_start = bench::RssBytes();
  sim::SimOptions o;
  o.kubelet = o.scheduler = o.controllers = false;
  o.http_threads = 64;
  o.watch_history = static_cast<std::size_t>(m) + 1000;
  auto srv = sim::SimServer::Start(o);
  if (!srv.ok()) {
    std::fprintf(stderr, "sim: %s\n", srv.status().ToString().c_str());
    return 1;
  }
  sim::PopulationSpec spec;
  spec.nodes = static_cast<int>(n);
  spec.gpus_per_node = 8;
  spec.pods_per_node = 0;
  spec.daemonset_pods = false;
  spec.pdbs = false;
  double p0 = bench::Now();
  if (!bench::PopulateNodes(**srv, spec, n)) return 1;
  double populate_s = bench::Now() - p0;
  long rss = bench::SettledRssBytes();
  double scaled_rss = double(rss - rss_start) * (100000.0 / n) / 1e9;
  rep.Add("populate (direct store, nodes only)", populate_s, "s", -1, false);
  rep.Add("sim RSS after populate", rss / 1048576.0, "MiB", -1, false);
  rep.Add("sim RSS per node", double(rss - rss_start) / n, "B", -1, false);
  rep.Add("sim RSS scaled to 100k nodes", scaled_rss, "GB", 2.0, false,
          n == 100000 ? "measured" : "linear extrapolation");

  Clock& clock = RealClock::Default();
  k8s::ClientConfig cfg;
  cfg.server = (*srv)->Url();
  cfg.timeout = std::chrono::milliseconds(300000);
  auto client = k8s::RestClient::Create(cfg, clock);
  if (!client.ok()) return 1;

  // Full LIST, no paging (best of 2; the first warms nothing server-side but the allocator).
  double best = 1e30;
  std::size_t bytes = 0;
  for (int i = 0; i < 2; ++i) {
    double l0 = bench::Now();
    auto body = (*client)->List(k8s::kNodes, "", {});
    double dt = bench::Now() - l0;
    if (!body.ok()) {
      std::fprintf(stderr, "list: %s\n", body.status().ToString().c_str());
      return 1;
    }
    bytes = body->size();
    best = std::min(best, dt);
  }
  long hwm_list = bench::HwmBytes();
  rep.Add("full LIST body", bytes / 1e9, "GB", -1, false);
  rep.Add("full LIST time (client-observed, best of 2)", best, "s", 3.0 * n / 100000.0, false,
          n == 100000 ? "" : "target scaled to N (3 s per 100k)");
  rep.Add("VmHWM incl. LIST bodies", hwm_list / 1048576.0, "MiB", -1, false);

  // Watch fan-out: 10 watchers from the current RV, m patches, count delivered lines.
  std::string rv = std::to_string((*srv)->ResourceVersion());
  std::atomic<std::uint64_t> lines{0};
  std::atomic<int> started{0};
  std::vector<std::jthread> ws;
  for (int w = 0; w < watchers; ++w) {
    ws.emplace_back([&](std::stop_token st) {
      k8s::WatchOptions wo;
      wo.resource_version = rv;
      wo.allow_bookmarks = false;
      started.fetch_add(1);
      auto r = (*client)->Watch(
          k8s::kNodes, "", wo,
          [&](std::string_view) {
            lines.fetch_add(1, std::memory_order_relaxed);
            return true;
          },
          st);
      (void)r;
    });
  }
  while (started.load() < watchers || (*srv)->ActiveWatches() < static_cast<std::size_t>(watchers))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  double c0 = bench::CpuSeconds();
  double w0 = bench::Now();
  {
    long threads = std::max(1L, std::min(8L, sysconf(_SC_NPROCESSORS_ONLN) / 2));
    std::vector<std::jthread> ps;
    for (long t = 0; t < threads; ++t) {
      ps.emplace_back([&, t] {
        for (long i = t; i < m; i += threads) {
          std::string name = "/api/v1/nodes/" + bench::NodeName(spec, i % n);
          nlohmann::json patch = {
              {"metadata", {{"labels", {{"bench.gpuguardian.io/gen", std::to_string(i)}}}}}};
          auto r = (*srv)->MergePatch(name, patch);
          if (!r.ok()) std::fprintf(stderr, "patch: %s\n", r.status().ToString().c_str());
        }
      });
    }
  }
  double produce_s = bench::Now() - w0;
  const std::uint64_t want = static_cast<std::uint64_t>(m) * watchers;
  double deadline = bench::Now() + 300;
  while (lines.load() < want && bench::Now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  double fan_s = bench::Now() - w0;
  double cpu = bench::CpuSeconds() - c0;
  for (auto& t : ws) t.request_stop();
  rep.Add("patches applied (direct store)", double(m), "", -1, false,
          "produce " + bench::Report::Fmt(produce_s) + " s");
  rep.Add("watch events delivered (10 watchers)", double(lines.load()), "", double(want), true);
  rep.Add("fan-out events/s, wall", lines.load() / fan_s, "ev/s", 20000, true,
          "patching, serving and the 10 clients share the cores");
  rep.Add("fan-out events per CPU-second (whole process)", lines.load() / cpu, "ev/s", -1, false);
  rep.Add("watch event size", double(bytes) / n, "B", -1, false, "~ one node object");
  ws.clear();
  (*srv)->Stop();
  return rep.Write() ? 0 : 1;
}
