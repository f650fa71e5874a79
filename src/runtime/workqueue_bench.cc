// Micro-benchmarks for the WorkQueue hot path (Add → Get → Done), with and without metrics,
// and de-duplicated adds (the informer delivering many events for the same few keys).
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "common/clock.h"
#include "metrics/registry.h"
#include "runtime/workqueue.h"

namespace gg::runtime {
namespace {

std::vector<std::string> Keys(int n) {
  std::vector<std::string> keys;
  keys.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) keys.push_back("gpu-node-" + std::to_string(i));
  return keys;
}

// One key through the whole cycle per iteration.
void BM_AddGetDone(benchmark::State& state) {
  const bool with_metrics = state.range(0) != 0;
  metrics::Registry registry;
  WorkQueue q("bench", RealClock::Default(), with_metrics ? &registry : nullptr);
  auto keys = Keys(1024);
  std::size_t i = 0;
  for (auto _ : state) {
    const std::string& k = keys[i++ & 1023];
    q.Add(k);
    auto got = q.TryGet();
    q.Done(*got);
    benchmark::DoNotOptimize(got);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AddGetDone)->Arg(0)->Arg(1)->ArgName("metrics");

// Batches: 1024 distinct keys added, then drained.
void BM_AddBatchThenDrain(benchmark::State& state) {
  metrics::Registry registry;
  WorkQueue q("bench", RealClock::Default(), &registry);
  auto keys = Keys(1024);
  for (auto _ : state) {
    for (const auto& k : keys) q.Add(k);
    while (auto k = q.TryGet()) q.Done(*k);
  }
  state.SetItemsProcessed(state.iterations() * 1024);
}
BENCHMARK(BM_AddBatchThenDrain);

// Events for keys already queued: de-duplicated, the common case under event storms.
void BM_AddDuplicate(benchmark::State& state) {
  metrics::Registry registry;
  WorkQueue q("bench", RealClock::Default(), &registry);
  auto keys = Keys(64);
  for (const auto& k : keys) q.Add(k);
  std::size_t i = 0;
  for (auto _ : state) q.Add(keys[i++ & 63]);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AddDuplicate);

}  // namespace
}  // namespace gg::runtime
