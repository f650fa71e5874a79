// Seeds N realistic GPU nodes (sim::MakeGpuNode, ~15 KB each) into a SimServer's store from
// several threads: at 100k nodes single-threaded generation dominates a benchmark's run time.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "sim/population.h"
#include "sim/server.h"

namespace gg::bench {

inline std::string NodeName(const sim::PopulationSpec& spec, long i) {
  char b[64];
  std::snprintf(b, sizeof b, "%s%05ld", spec.node_prefix.c_str(), i);
  return b;
}

// Returns false (message on stderr) when an insert fails.
inline bool PopulateNodes(sim::SimServer& srv, const sim::PopulationSpec& spec, long n) {
  long threads = std::max(1L, std::min(8L, sysconf(_SC_NPROCESSORS_ONLN)));
  std::atomic<bool> ok{true};
  std::vector<std::jthread> ts;
  for (long t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      for (long i = t; i < n && ok.load(); i += threads) {
        std::string name = NodeName(spec, i);
        auto node = sim::MakeGpuNode(spec, static_cast<int>(i), name, spec.gpus_per_node,
                                     spec.gpu_product, spec.extra_node_labels);
        Status s = srv.Insert(node);
        if (!s.ok()) {
          std::fprintf(stderr, "insert %s: %s\n", name.c_str(), s.ToString().c_str());
          ok = false;
        }
      }
    });
  }
  ts.clear();
  return ok.load();
}

}  // namespace gg::bench
