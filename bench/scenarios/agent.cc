// scenario_agent: the real gpu-guardian-agent binary (build/bin, a child process) on one
// simulated 8-GPU node, fed by its `script` source (a YAML fault timeline played into the
// fake NVML, through the same Collector as real NVML), publishing to the in-process simulator.
//   - event → publish latency: K Xid events one per --event-gap seconds (distinct Xid/GPU
//     pairs); for each, the time its entry first appears on a watch of GPUNodeHealths minus
//     the entry's firstSeen (stamped by the agent when the event arrived);
//   - RSS (VmRSS settled, VmHWM) and CPU of the agent process;
//   - sweep cost: the agent's CPU over an idle window with --sweep-interval 100ms, per sweep
//     and per GPU (whole process: sweep + report rebuild + metrics refresh). The collector's
//     own per-GPU cost is collector_bench's BM_SweepFakeNvml / BM_SweepStub.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/scenarios/bench_util.h"
#include "bench/scenarios/fleet.h"
#include "bench/scenarios/populate.h"
#include "bench/scenarios/proc.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/time_util.h"
#include "k8s/resource.h"
#include "k8s/rest_client.h"
#include "sim/population.h"
#include "sim/server.h"

using namespace gg;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

double Pct(std::vector<double> v, double p) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  std::size_t i = static_cast<std::size_t>(p * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

int main(int argc, char** argv) {
  bench::Args args = bench::ParseArgs(argc, argv, {"event-gap", "idle-seconds"});
  if (!args.ok) return 2;
  const long k = args.events ? args.events : (args.mode == "scale" ? 60 : 20);
  const double gap = args.Num("event-gap", 1.0);
  const double idle_s = args.Num("idle-seconds", args.mode == "scale" ? 60 : 20);
  Logger::SetGlobalLevel(LogLevel::kWarn);
  bench::Report rep("scenario_agent", args);
  rep.Param("xid_events", k);
  rep.Param("event_gap_s", gap);
  rep.Param("idle_window_s", idle_s);

  sim::SimOptions o;
  o.kubelet = o.scheduler = o.controllers = false;
  o.http_threads = 16;
  auto srvr = sim::SimServer::Start(o);
  if (!srvr.ok()) return 1;
  auto& srv = **srvr;
  sim::PopulationSpec spec;
  spec.nodes = 1;
  if (!bench::CreateCrds(srv) || !bench::PopulateNodes(srv, spec, 1)) return 1;
  const std::string node = bench::NodeName(spec, 0);

  // Distinct (Xid, GPU) pairs, so every event adds an entry to the report.
  const int codes[] = {48, 63, 64, 74, 79, 92, 94, 95, 119, 120};
  std::string script = "gpus: 8\ntimeline:\n";
  const double lead = 3.0;  // agent startup before the first event
  for (long i = 0; i < k; ++i) {
    char line[128];
    std::snprintf(line, sizeof line, "- {at: %ldms, gpu: %ld, xid: %d}\n",
                  static_cast<long>((lead + i * gap) * 1000), i % 8, codes[(i / 8) % 10]);
    script += line;
  }
  std::string script_path = "/tmp/gg-bench-agent-" + std::to_string(getpid()) + ".yaml";
  std::ofstream(script_path) << script;

  // Watch reports before the agent starts: first time each (xid, uuid) entry is seen.
  k8s::ClientConfig cfg;
  cfg.server = srv.Url();
  auto client = k8s::RestClient::Create(cfg, RealClock::Default());
  if (!client.ok()) return 1;
  std::mutex mu;
  std::map<std::string, double> latency_ms;  // key xid/uuid -> seen − firstSeen
  long report_writes = 0;
  std::jthread watcher([&](std::stop_token st) {
    k8s::WatchOptions wo;
    wo.resource_version = std::to_string(srv.ResourceVersion());
    while (!st.stop_requested()) {
      (void)(*client)->Watch(
          k8s::kGpuNodeHealths, "", wo,
          [&](std::string_view line) {
            auto seen = std::chrono::system_clock::now();
            json ev = json::parse(line, nullptr, false);
            if (ev.is_discarded() || !ev.contains("object")) return true;
            const json& obj = ev["object"];
            if (obj.contains("metadata"))
              wo.resource_version = obj["metadata"].value("resourceVersion", wo.resource_version);
            if (ev.value("type", "") == "BOOKMARK" || !obj.contains("status")) return true;
            std::scoped_lock l(mu);
            ++report_writes;
            for (const auto& x : obj["status"].value("xids", json::array())) {
              std::string key = std::to_string(x.value("xid", 0)) + "/" +
                                x.value("gpuUUID", x.value("gpuUuid", ""));
              if (latency_ms.count(key)) continue;
              auto fs = ParseRfc3339(x.value("firstSeen", ""));
              if (!fs.ok()) continue;
              latency_ms[key] = std::chrono::duration<double, std::milli>(seen - *fs).count();
            }
            return true;
          },
          st);
    }
  });
  std::this_thread::sleep_for(200ms);

  int port = bench::FreePort();
  std::string log = "/tmp/gg-bench-agent-" + std::to_string(getpid()) + ".log";
  std::vector<std::string> argv_agent = {bench::BinDir() + "/gpu-guardian-agent",
                                         "--node-name",
                                         node,
                                         "--server",
                                         srv.Url(),
                                         "--source",
                                         "script",
                                         "--script",
                                         script_path,
                                         "--sweep-interval",
                                         "100ms",
                                         "--metrics-addr",
                                         "127.0.0.1:" + std::to_string(port),
                                         "--log-level",
                                         "warn"};
  double a0 = bench::Now();
  pid_t pid = bench::Spawn(argv_agent, log);
  if (pid <= 0) return 1;
  const double events_end = lead + k * gap + 3.0;
  while (bench::Now() - a0 < events_end && bench::Alive(pid)) std::this_thread::sleep_for(100ms);
  if (!bench::Alive(pid)) {
    std::fprintf(stderr, "agent exited early; log %s\n", log.c_str());
    return 1;
  }
  auto p_events = bench::SampleProc(pid);
  // Idle window: no events, sweeps every 100 ms.
  auto p0 = bench::SampleProc(pid);
  double i0 = bench::Now();
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<long>(idle_s * 1000)));
  auto p1 = bench::SampleProc(pid);
  double iw = bench::Now() - i0;
  auto [mcode, mbody] = bench::HttpGet("http://127.0.0.1:" + std::to_string(port), "/metrics");
  const double threads = bench::ProcThreads(pid);
  bench::StopChild(pid);
  watcher.request_stop();
  watcher = {};

  std::vector<double> lat;
  {
    std::scoped_lock l(mu);
    for (auto& [key, v] : latency_ms) lat.push_back(v);
  }
  rep.Add("Xid events published", double(lat.size()), "", double(k), true);
  rep.Add("event → visible on a watch p50", Pct(lat, 0.5), "ms", -1, false,
          "entry firstSeen → watch");
  rep.Add("event → visible on a watch p99", Pct(lat, 0.99), "ms", -1, false);
  rep.Add("event → visible on a watch max", Pct(lat, 1.0), "ms", -1, false);
  rep.Add("report writes seen", double(report_writes), "", -1, false);
  double sweeps = iw / 0.1;
  rep.Add("agent CPU per sweep per GPU (idle, whole process)",
          (p1.cpu_s - p0.cpu_s) / sweeps / 8 * 1e6, "us", -1, false,
          "sweep every 100 ms, fake NVML");
  rep.Add("agent CPU, idle at 100 ms sweeps", 100 * (p1.cpu_s - p0.cpu_s) / iw, "% core", -1,
          false);
  rep.Add("agent CPU at the default 10 s sweep (scaled)", 100 * (p1.cpu_s - p0.cpu_s) / iw / 100,
          "% core", -1, false, "idle CPU / 100");
  rep.Add("agent RSS settled", p1.rss / 1048576.0, "MiB", 5, false);
  rep.Add("agent VmHWM", p1.hwm / 1048576.0, "MiB", -1, false);
  rep.Add("agent RSS: anonymous (heap, stacks)", p1.rss_anon / 1048576.0, "MiB", -1, false);
  rep.Add("agent RSS: file-backed (binary, .so)", p1.rss_file / 1048576.0, "MiB", -1, false);
  rep.Add("agent threads", threads, "", -1, false);
  rep.Add("agent CPU during the event phase", p_events.cpu_s, "s", -1, false,
          bench::Report::Fmt(events_end) + " s incl. startup");
  if (mcode == 200) {
    rep.Add("agent /metrics size", double(mbody.size()), "B", -1, false);
  }
  srv.Stop();
  return rep.Write() ? 0 : 1;
}
