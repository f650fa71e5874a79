// Micro-benchmarks for the client's hot paths (not built by default; bench/ wires them):
// decoding a LIST page of realistic ~15 KB GPU nodes into projections (bytes/s), watch-event
// decoding, and the cache footprint of a Node projection.
#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>

#include "k8s/codec.h"
#include "k8s/transport.h"

namespace gg::k8s {
namespace {

std::string Fixture() {
  std::ifstream in(std::string(GG_SOURCE_DIR) +
                   "/src/k8s/testdata/gpu-node-gce-tesla-t4x2.node.json");
  std::ostringstream ss;
  ss << in.rdbuf();
  // Compact it (the server sends compact JSON): drop newlines and indentation outside strings.
  std::string src = ss.str(), out;
  bool in_str = false, esc = false;
  for (char c : src) {
    if (in_str) {
      out.push_back(c);
      if (esc)
        esc = false;
      else if (c == '\\')
        esc = true;
      else if (c == '"')
        in_str = false;
    } else if (c == '"') {
      in_str = true;
      out.push_back(c);
    } else if (c != ' ' && c != '\n' && c != '\t' && c != '\r') {
      out.push_back(c);
    }
  }
  return out;
}

void ReplaceAll(std::string& s, const std::string& from, const std::string& to) {
  for (auto p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) {
    s.replace(p, from.size(), to);
  }
}

// A NodeList page of `n` nodes with distinct names. `mixed`: as in a real fleet, each node
// also has its own GFD timestamp, and consecutive nodes come from 4 pools (kernel versions), so
// the fleet-wide label set alternates between 4 shapes down the list.
std::string Page(int n, bool mixed = false) {
  std::string node = Fixture();
  std::string name = "\"qa-mig-worker-gpu-1\"";
  std::string page =
      R"({"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"99","continue":"x"},"items":[)";
  for (int i = 0; i < n; ++i) {
    std::string copy = node;
    ReplaceAll(copy, name, "\"gpu-node-" + std::to_string(i) + "\"");
    if (mixed) {
      ReplaceAll(copy, "\"1674110256\"", "\"" + std::to_string(1674110256 + i) + "\"");
      ReplaceAll(copy, "\"5.4.0-1042-gcp\"", "\"5.4.0-104" + std::to_string(i % 4) + "-gcp\"");
    }
    if (i) page += ',';
    page += copy;
  }
  page += "]}";
  return page;
}

void BM_DecodeNodeListPage(benchmark::State& state) {
  const std::string page = Page(500, state.range(0) != 0);
  std::string body;
  std::size_t items = 0;
  for (auto _ : state) {
    state.PauseTiming();
    body = page;  // a fresh transport body each time (parsing pads in place)
    body.reserve(body.size() + kBodyPadding);
    state.ResumeTiming();
    auto l = ParseListInto<Node>(body, [&](Node&& n) { items += n.meta.labels.size() > 0; });
    benchmark::DoNotOptimize(l);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(page.size()));
  state.counters["nodes/s"] =
      benchmark::Counter(static_cast<double>(items), benchmark::Counter::kIsRate);
}
// Arg 0: identical label sets but the hostname; 1: mixed (see Page).
BENCHMARK(BM_DecodeNodeListPage)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_DecodeWatchEvent(benchmark::State& state) {
  std::string line = R"({"type":"MODIFIED","object":)" + Fixture() + "}";
  line.reserve(line.size() + kBodyPadding);
  for (auto _ : state) {
    auto ev = ParseWatchEvent<Node>(line, /*padded=*/true);
    benchmark::DoNotOptimize(ev);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(line.size()));
}
BENCHMARK(BM_DecodeWatchEvent);

void BM_NodeProjectionBytes(benchmark::State& state) {
  auto n = ParseObject<Node>(Fixture());
  std::size_t bytes = 0;
  for (auto _ : state) {
    bytes = sizeof(Node) + n->meta.labels.MemoryBytes() + n->meta.annotations.MemoryBytes() +
            n->meta.name.capacity() + n->meta.uid.MemoryBytes() +
            n->meta.resource_version.capacity() + n->conditions.MemoryBytes() +
            n->taints.capacity() * sizeof(Taint);
    benchmark::DoNotOptimize(bytes);
  }
  state.counters["bytes_per_node"] = static_cast<double>(bytes);
}
BENCHMARK(BM_NodeProjectionBytes);

}  // namespace
}  // namespace gg::k8s

BENCHMARK_MAIN();
