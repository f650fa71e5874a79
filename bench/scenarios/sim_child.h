// A simulator in a forked child process, so the parent's RSS/VmHWM/CPU figures are the client's
// alone. Fork happens before the parent starts any thread. Line protocol over two pipes:
// parent → child "update K" (K merge-patches of node labels, round-robin), "quit";
// child → parent "url URL populate_s", "done seconds".
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "bench/scenarios/bench_util.h"
#include "bench/scenarios/piped_child.h"
#include "bench/scenarios/populate.h"
#include "sim/population.h"
#include "sim/server.h"

namespace gg::bench {

class SimChild : public PipedChild {
 public:
  // Returns false on failure (message on stderr).
  bool Start(long nodes, std::size_t watch_history) {
    int to_child[2], to_parent[2];
    if (pipe(to_child) != 0 || pipe(to_parent) != 0) return false;
    pid_ = fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      close(to_child[1]);
      close(to_parent[0]);
      _exit(ChildMain(nodes, watch_history, fdopen(to_child[0], "r"), fdopen(to_parent[1], "w")));
    }
    close(to_child[0]);
    close(to_parent[1]);
    return Attach(to_child[1], to_parent[0]);
  }
  // Makes the child apply `k` label updates, without waiting for its "done" (WaitDone()).
  void UpdateAsync(long k) {
    std::fprintf(out_, "update %ld\n", k);
    std::fflush(out_);
  }
  // The child's seconds for the last update command.
  double WaitDone() {
    double s = -1;
    if (std::fscanf(in_, " done %lf", &s) != 1) return -1;
    return s;
  }

 private:
  static int ChildMain(long nodes, std::size_t history, FILE* in, FILE* out) {
    sim::SimOptions o;
    o.kubelet = o.scheduler = o.controllers = false;
    o.http_threads = 32;
    o.watch_history = history;
    auto srv = sim::SimServer::Start(o);
    if (!srv.ok()) {
      std::fprintf(stderr, "sim: %s\n", srv.status().ToString().c_str());
      return 1;
    }
    double t0 = Now();
    sim::PopulationSpec spec;
    spec.nodes = static_cast<int>(nodes);
    spec.pods_per_node = 0;
    spec.daemonset_pods = false;
    spec.pdbs = false;
    if (!PopulateNodes(**srv, spec, nodes)) return 1;
    std::fprintf(out, "url %s %f\n", (*srv)->Url().c_str(), Now() - t0);
    std::fflush(out);
    long gen = 0;
    char cmd[64];
    while (std::fscanf(in, "%63s", cmd) == 1) {
      std::string c = cmd;
      if (c == "quit") break;
      if (c == "update") {
        long k = 0;
        if (std::fscanf(in, "%ld", &k) != 1) break;
        double u0 = Now();
        // Several producers so the sim's patch path is not the bottleneck of the watch figure.
        long threads = std::max(1L, std::min(8L, sysconf(_SC_NPROCESSORS_ONLN) / 2));
        {
          std::vector<std::jthread> ts;
          for (long t = 0; t < threads; ++t) {
            ts.emplace_back([&, t] {
              for (long i = t; i < k; i += threads) {
                long g = gen + i;
                std::string name = "/api/v1/nodes/" + NodeName(spec, g % nodes);
                nlohmann::json patch = {
                    {"metadata", {{"labels", {{"bench.gpuguardian.io/gen", std::to_string(g)}}}}}};
                auto r = (*srv)->MergePatch(name, patch);
                if (!r.ok())
                  std::fprintf(stderr, "patch %s: %s\n", name.c_str(),
                               r.status().ToString().c_str());
              }
            });
          }
        }
        gen += k;
        std::fprintf(out, "done %f\n", Now() - u0);
        std::fflush(out);
      }
    }
    (*srv)->Stop();
    return 0;
  }
};

}  // namespace gg::bench
