// scenario_drain: eviction throughput. The simulator with its kubelet, scheduler and
// controllers on (grace periods divided by --time-scale), N nodes with 8 GPU pods each (workloads
// of 4 nodes: Deployments with a PDB — maxUnavailable 1 or minAvailable 50% — and Jobs), plus
// spare empty nodes so evicted pods are rescheduled and the PDBs keep allowing progress. The
// whole operator in-process (informers over loopback HTTP). Xid 79 reports on every 4th node at
// once (so each workload loses one node; `--pdbs 0` drops the budgets to isolate the
// operator's own rate); evictions are counted from the sim's
// apiserver_request_total for pods/eviction until no workload pod is left on a fenced node.
// Replacements are realistic about readiness: the workloads' containers have a readiness
// probe with initialDelaySeconds `--ready-delay` (simulated seconds, default 60), so a budget
// frees up only that long after each eviction. The drain time is printed next to the minimum
// the budgets impose (per workload: its evictions in waves of disruptionsAllowed, a readiness
// delay between waves, then the last pod's termination grace) and must stay within 20 % of it.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bench/scenarios/bench_util.h"
#include "bench/scenarios/fleet.h"
#include "bench/scenarios/populate.h"
#include "bench/scenarios/proc.h"
#include "common/clock.h"
#include "common/log.h"
#include "k8s/rest_client.h"
#include "metrics/registry.h"
#include "operator/operator.h"
#include "sim/population.h"
#include "sim/server.h"

using namespace gg;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

struct Evictions {
  double ok = 0, refused = 0, other = 0;
};

Evictions CountEvictions(const std::string& metrics) {
  Evictions e;
  double all = bench::PromSum(metrics, "apiserver_request_total", {"verb=\"create\"", "eviction"});
  e.ok = bench::PromSum(metrics, "apiserver_request_total",
                        {"verb=\"create\"", "eviction", "code=\"201\""}) +
         bench::PromSum(metrics, "apiserver_request_total",
                        {"verb=\"create\"", "eviction", "code=\"200\""});
  e.refused = bench::PromSum(metrics, "apiserver_request_total",
                             {"verb=\"create\"", "eviction", "code=\"429\""});
  e.other = all - e.ok - e.refused;
  return e;
}

// Workload pods (namespace ml) bound to one of `nodes` (terminating ones included).
long PodsOn(sim::SimServer& srv, const std::set<std::string>& nodes) {
  auto l = srv.List("/api/v1/namespaces/ml/pods");
  if (!l.ok()) return -1;
  long c = 0;
  for (const auto& p : (*l)["items"]) {
    std::string nn = p["spec"].value("nodeName", "");
    if (nodes.count(nn)) ++c;
  }
  return c;
}

// Every workload container gets a readiness probe whose first run is `delay_s` after start.
void AddReadinessProbe(json& obj, double delay_s) {
  const std::string kind = obj.value("kind", "");
  if (kind != "Deployment" && kind != "ReplicaSet" && kind != "Job") return;
  for (auto& c : obj["spec"]["template"]["spec"]["containers"]) {
    c["readinessProbe"] = {{"exec", {{"command", {"true"}}}},
                           {"initialDelaySeconds", static_cast<long>(delay_s)},
                           {"periodSeconds", 10}};
  }
}

// The shortest drain the budgets allow, in wall seconds: per app label on the fenced nodes,
// P pods under a budget allowing k disruptions go in ceil(P/k) waves, each after the previous
// wave's replacements turned Ready (`ready_s`); the last wave's pods then take their grace
// period (`grace_s` each pod's own) to go. Apps without a budget: one wave.
double BudgetMinimum(sim::SimServer& srv, const std::set<std::string>& nodes, double ready_s,
                     double time_scale) {
  std::map<std::string, int> allowed;  // app -> disruptionsAllowed
  if (auto l = srv.List("/apis/policy/v1/namespaces/ml/poddisruptionbudgets"); l.ok()) {
    for (const auto& b : (*l)["items"]) {
      std::string app = b["spec"]["selector"]["matchLabels"].value("app", "");
      allowed[app] = b.value("status", json::object()).value("disruptionsAllowed", 0);
    }
  }
  std::map<std::string, std::pair<int, double>> pods;  // app -> (pods, longest grace s)
  if (auto l = srv.List("/api/v1/namespaces/ml/pods"); l.ok()) {
    for (const auto& p : (*l)["items"]) {
      if (!nodes.count(p["spec"].value("nodeName", ""))) continue;
      auto& [n, grace] = pods[p["metadata"]["labels"].value("app", "")];
      ++n;
      grace = std::max(grace, p["spec"].value("terminationGracePeriodSeconds", 30.0) / time_scale);
    }
  }
  double worst = 0;
  for (const auto& [app, pg] : pods) {
    const auto& [n, grace] = pg;
    double waves = 1;
    if (auto it = allowed.find(app); it != allowed.end())
      waves = std::ceil(static_cast<double>(n) / std::max(1, it->second));
    worst = std::max(worst, (waves - 1) * ready_s + grace);
  }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  bench::Args args =
      bench::ParseArgs(argc, argv, {"time-scale", "pods-per-node", "pdbs", "ready-delay"});
  if (!args.ok) return 2;
  const long n = args.nodes ? args.nodes : (args.mode == "scale" ? 512 : 128);
  const long faults = n / 4;
  const long spare = faults;
  const int pods_per_node = static_cast<int>(args.Num("pods-per-node", 8));
  const double time_scale = args.Num("time-scale", 30);
  const double ready_delay = args.Num("ready-delay", 60);  // simulated seconds
  Logger::SetGlobalLevel(LogLevel::kError);
  bench::Report rep("scenario_drain", args);
  rep.Param("nodes", n);
  rep.Param("spare_nodes", spare);
  rep.Param("fenced_nodes", faults);
  rep.Param("pods_per_node", pods_per_node);
  rep.Param("sim_time_scale", time_scale);
  rep.Param("replacement_ready_delay_s", ready_delay);

  sim::SimOptions o;
  o.http_threads = 64;
  o.time_scale = time_scale;
  o.watch_history = 200000;
  o.defer_controllers = true;  // started once the population is in
  auto srvr = sim::SimServer::Start(o);
  if (!srvr.ok()) return 1;
  auto& srv = **srvr;
  if (!bench::CreateCrds(srv)) return 1;
  sim::PopulationSpec spec;
  spec.nodes = static_cast<int>(n);
  spec.pods_per_node = pods_per_node;
  // --pdbs 0: no budgets at all, so the figure is the operator + API path alone.
  spec.pdbs = args.Num("pdbs", 1) != 0;
  rep.Param("pdbs", spec.pdbs);
  Status s = sim::GeneratePopulation(spec, [&](json&& obj) -> Status {
    // PriorityClasses where served (the pods name theirs; admission checks it).
    if (obj.value("kind", "") == "PriorityClass") {
      (void)srv.Insert(obj);
      return OkStatus();
    }
    AddReadinessProbe(obj, ready_delay);
    return srv.Insert(obj);
  });
  if (!s.ok()) {
    std::fprintf(stderr, "population: %s\n", s.ToString().c_str());
    return 1;
  }
  for (long j = 0; j < spare; ++j) {
    long i = n + j;
    if (!srv.Insert(sim::MakeGpuNode(spec, static_cast<int>(i), bench::NodeName(spec, i),
                                     spec.gpus_per_node, spec.gpu_product))
             .ok()) {
      return 1;
    }
  }
  srv.StartControllers();
  if (!bench::CreateReports(srv, spec, n + spare) ||
      !srv.Create(bench::kPoliciesPath, bench::XidPolicy("GPUPods")).ok()) {
    return 1;
  }

  k8s::ClientConfig cfg;
  cfg.server = srv.Url();
  cfg.timeout = 120000ms;
  metrics::Registry registry;
  auto op_client = k8s::RestClient::Create(cfg, RealClock::Default());
  if (!op_client.ok()) return 1;
  op::OperatorConfig oc;
  oc.metrics_addr = "127.0.0.1:0";
  oc.leader_elect = false;
  oc.identity = "bench";
  oc.max_running_drains = 100000;
  op::Operator oper(**op_client, RealClock::Default(), registry, oc);
  std::stop_source op_stop;
  Status op_result;
  std::jthread op_thread([&] { op_result = oper.Run(op_stop.get_token()); });
  double s0 = bench::Now();
  while (!oper.Synced() && bench::Now() - s0 < 300) std::this_thread::sleep_for(10ms);
  if (!oper.Synced()) {
    std::fprintf(stderr, "operator did not sync: %s\n", op_result.ToString().c_str());
    return 1;
  }
  {
    int quiet = 0;
    double r0 = bench::Now();
    while (quiet < 10 && bench::Now() - r0 < 300) {
      std::this_thread::sleep_for(100ms);
      quiet = registry.Value("workqueue_depth", {"node"}) == 0 ? quiet + 1 : 0;
    }
  }

  std::set<std::string> fenced;
  for (long i = 0; i < n && static_cast<long>(fenced.size()) < faults; i += 4)
    fenced.insert(bench::NodeName(spec, i));
  const long to_evict = PodsOn(srv, fenced);
  rep.Param("pods_on_fenced_nodes", to_evict);
  const double minimum = BudgetMinimum(srv, fenced, ready_delay / time_scale, time_scale);
  Evictions e0 = CountEvictions(bench::HttpGet(srv.Url(), "/metrics").second);
  double cpu0 = bench::CpuSeconds();
  double t0 = bench::Now();
  for (const auto& node : fenced) {
    auto st = json::parse(api::EncodeGpuNodeHealthStatus(bench::AgentReport(node, true)));
    auto r = srv.MergePatch(std::string(bench::kReportsPath) + "/" + node, {{"status", st}});
    if (!r.ok()) return 1;
  }
  double first_ok = -1, last_ok = -1, done = -1;
  Evictions e;
  double prev_ok = 0;
  while (bench::Now() - t0 < 600) {
    std::this_thread::sleep_for(100ms);
    Evictions cur = CountEvictions(bench::HttpGet(srv.Url(), "/metrics").second);
    e = {cur.ok - e0.ok, cur.refused - e0.refused, cur.other - e0.other};
    double now = bench::Now() - t0;
    if (e.ok > 0 && first_ok < 0) first_ok = now;
    if (e.ok > prev_ok) last_ok = now;
    prev_ok = e.ok;
    if (PodsOn(srv, fenced) == 0) {
      done = now;
      break;
    }
  }
  double cpu = bench::CpuSeconds() - cpu0;
  rep.Add("workload pods on fenced nodes", double(to_evict), "", -1, false,
          std::to_string(fenced.size()) + " nodes fenced at once");
  rep.Add("evictions accepted", e.ok, "", double(to_evict), true);
  rep.Add("evictions refused (429, PDB)", e.refused, "", -1, false);
  rep.Add("evictions failed otherwise", e.other, "", -1, false);
  rep.Add("first report → first eviction", first_ok, "s", -1, false);
  double span = last_ok - std::max(first_ok, 0.0);
  // With budgets the pace is theirs (the row below); the operator's own rate is judged without.
  rep.Add("evictions/s (first → last accepted)", span > 0 ? e.ok / span : 0, "1/s",
          spec.pdbs ? -1 : 50, true);
  rep.Add("evictions/s (report → last accepted)", last_ok > 0 ? e.ok / last_ok : 0, "1/s", -1,
          false);
  rep.Add("budget-imposed minimum drain time", minimum, "s", -1, false,
          "replacements Ready " + bench::Report::Fmt(ready_delay / time_scale) + " s after start");
  // Judged against the budgets' minimum only where there are budgets (without, the minimum
  // is one grace period and the row is the operator's reaction plus its eviction rate).
  rep.Add("report → no workload pod left on fenced nodes", done < 0 ? 600 : done, "s",
          spec.pdbs ? minimum * 1.2 : -1, false,
          done < 0 ? "not within 600 s"
                   : "within 20 % of the budgets' minimum; sim grace periods / " +
                         bench::Report::Fmt(time_scale));
  rep.Add("process CPU (sim + operator) over the drain", cpu, "s", -1, false);

  op_stop.request_stop();
  op_thread.join();
  srv.Stop();
  return rep.Write() ? 0 : 1;
}
