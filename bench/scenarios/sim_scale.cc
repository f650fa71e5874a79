// scenario_sim_scale: the simulator alone with N GPU nodes (8 GPUs each): its RSS after
// population, one full LIST without paging, and watch fan-out to 10 watchers: live while nodes
// are patched (in-process and over HTTP, --producers P writers) and the delivery capacity alone
// (a history replay). Runs the sim in-process; the RSS figure is measured before any client exists.
#include <httplib.h>

#include <atomic>
#include <cstdio>
#include <functional>
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
  bench::Args args = bench::ParseArgs(argc, argv, {"producers"});
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
  // The capacity phase replays the m events of the first live phase from this history.
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
  // The same LIST read by a plain HTTP reader that discards the body: what serving it costs,
  // apart from the client collecting 1.3 GB into one string (page faults dominate that here).
  {
    httplib::Client raw((*srv)->Url());
    raw.set_read_timeout(300, 0);
    double best_raw = 1e30;
    for (int i = 0; i < 2; ++i) {
      std::size_t got = 0;
      double l0 = bench::Now();
      auto r = raw.Get("/api/v1/nodes", [&](const char*, std::size_t len) {
        got += len;
        return true;
      });
      double dt = bench::Now() - l0;
      if (!r || r->status != 200 || got != bytes) {
        std::fprintf(stderr, "raw list: %zu of %zu bytes\n", got, bytes);
        return 1;
      }
      best_raw = std::min(best_raw, dt);
    }
    rep.Add("full LIST served (body discarded by the reader, best of 2)", best_raw, "s",
            3.0 * n / 100000.0, false, n == 100000 ? "" : "target scaled to N (3 s per 100k)");
  }

  // Watch fan-out, three ways, each to 10 watchers counting lines:
  //  live/direct: P threads merge-patch the store in-process while the watchers read;
  //  capacity:    10 new watchers replay those m events from the history, no writer at all —
  //               what the delivery path (queues, framing, socket writes, client reads) can do;
  //  live/HTTP:   P client connections send merge-PATCHes over HTTP, as agents would.
  // On a small machine the live figures are producer-bound: a 13.5 KB node costs a parse,
  // a merge, a schema check and a serialization per write.
  const long producers = static_cast<long>(
      args.Num("producers", static_cast<double>(std::max(2L, sysconf(_SC_NPROCESSORS_ONLN)))));
  rep.Param("producers", producers);
  struct WatchSet {
    std::atomic<std::uint64_t> lines{0};
    std::vector<std::jthread> threads;
  };
  auto start_watchers = [&](WatchSet& set, const std::string& from_rv) {
    std::size_t before = (*srv)->ActiveWatches();
    for (int w = 0; w < watchers; ++w) {
      set.threads.emplace_back([&, from_rv](std::stop_token st) {
        k8s::WatchOptions wo;
        wo.resource_version = from_rv;
        wo.allow_bookmarks = false;
        auto r = (*client)->Watch(
            k8s::kNodes, "", wo,
            [&](std::string_view) {
              set.lines.fetch_add(1, std::memory_order_relaxed);
              return true;
            },
            st);
        (void)r;
      });
    }
    while ((*srv)->ActiveWatches() < before + static_cast<std::size_t>(watchers))
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  };
  auto wait_lines = [&](WatchSet& set, std::uint64_t want) {
    double deadline = bench::Now() + 600;
    while (set.lines.load() < want && bench::Now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  };
  auto patch_body = [](long i) {
    return nlohmann::json{
        {"metadata", {{"labels", {{"bench.gpuguardian.io/gen", std::to_string(i)}}}}}};
  };
  const std::uint64_t want = static_cast<std::uint64_t>(m) * watchers;

  // Live fan-out: `producers` threads write m patches (thread t writes i = t, t+P, ...) while
  // 10 watchers read; `write(t, i)` is one write. Adds the rows under `label`.
  auto live = [&](const std::string& label, const std::string& rv, const std::string& writes,
                  const std::string& write_note, const std::function<void(long, long)>& write) {
    WatchSet set;
    start_watchers(set, rv);
    double c0 = bench::CpuSeconds();
    double w0 = bench::Now();
    {
      std::vector<std::jthread> ps;
      for (long t = 0; t < producers; ++t) {
        ps.emplace_back([&, t] {
          for (long i = t; i < m; i += producers) write(t, i);
        });
      }
    }
    double produce_s = bench::Now() - w0;
    wait_lines(set, want);
    double fan_s = bench::Now() - w0;
    double cpu = bench::CpuSeconds() - c0;
    for (auto& t : set.threads) t.request_stop();
    double rate = set.lines.load() / fan_s;
    double prate = m / produce_s;
    rep.Add(label + ": " + writes, prate, "/s", -1, false, write_note);
    rep.Add(label + ": watch events delivered", double(set.lines.load()), "", double(want), true);
    rep.Add(label + ": fan-out events/s, wall", rate, "ev/s", 20000, true,
            rate < 9.0 * prate ? "" : "producer-bound (= 10 x writes/s)");
    rep.Add(label + ": events per CPU-second (whole process)", set.lines.load() / cpu, "ev/s", -1,
            false);
  };

  // 1. Live, in-process producers.
  std::string rv0 = std::to_string((*srv)->ResourceVersion());
  live("live, direct store", rv0, "patches/s (" + std::to_string(producers) + " threads)",
       "in-process MergePatch, no HTTP", [&](long, long i) {
         auto r =
             (*srv)->MergePatch("/api/v1/nodes/" + bench::NodeName(spec, i % n), patch_body(i));
         if (!r.ok()) std::fprintf(stderr, "patch: %s\n", r.status().ToString().c_str());
       });
  std::string rv1 = std::to_string((*srv)->ResourceVersion());

  // 2. Capacity: replay the m events after rv0 from the history, nothing else running.
  {
    WatchSet set;
    double c0 = bench::CpuSeconds();
    double w0 = bench::Now();
    start_watchers(set, rv0);
    wait_lines(set, want);
    double fan_s = bench::Now() - w0;
    double cpu = bench::CpuSeconds() - c0;
    for (auto& t : set.threads) t.request_stop();
    rep.Add("capacity: watch events delivered (history replay)", double(set.lines.load()), "",
            double(want), true);
    rep.Add("capacity: fan-out events/s, wall", set.lines.load() / fan_s, "ev/s", 20000, true,
            "no writer: sim delivery + 10 in-process clients reading");
    rep.Add("capacity: events per CPU-second (whole process)", set.lines.load() / cpu, "ev/s", -1,
            false);
    rep.Add("capacity: delivered bytes/s", set.lines.load() * (double(bytes) / n) / fan_s / 1e6,
            "MB/s", -1, false);
  }

  // 3. Live, HTTP producers (one connection each).
  std::vector<std::unique_ptr<k8s::RestClient>> pcs;
  for (long t = 0; t < producers; ++t) {
    auto c = k8s::RestClient::Create(cfg, clock);
    if (!c.ok()) return 1;
    pcs.push_back(std::move(*c));
  }
  live("live, HTTP", rv1, "merge-PATCHes/s (" + std::to_string(producers) + " connections)",
       "client and sim share the cores", [&](long t, long i) {
         auto r = pcs[t]->Patch(k8s::kNodes, "", bench::NodeName(spec, i % n),
                                k8s::PatchType::kMerge, patch_body(m + i).dump());
         if (!r.ok()) std::fprintf(stderr, "patch: %s\n", r.status().ToString().c_str());
       });
  rep.Add("watch event size", double(bytes) / n, "B", -1, false, "~ one node object");
  (*srv)->Stop();
  return rep.Write() ? 0 : 1;
}
