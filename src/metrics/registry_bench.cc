// Micro-benchmarks for metric updates (cached handles, label lookups) and exposition.
#include <benchmark/benchmark.h>

#include <string>
#include <thread>

#include "metrics/registry.h"

namespace gg::metrics {
namespace {

void BM_CounterInc(benchmark::State& state) {
  static Registry registry;
  static Counter& c = registry.AddCounter("bench_total", "Bench.", {"k"}).WithLabels({"v"});
  for (auto _ : state) c.Inc();
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CounterInc)->Threads(1)->Threads(2);

void BM_HistogramObserve(benchmark::State& state) {
  Registry registry;
  Histogram& h = registry.AddHistogram("bench_seconds", "Bench.").WithLabels({});
  double v = 0;
  for (auto _ : state) {
    h.Observe(v);
    v += 0.001;
    if (v > 20) v = 0;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_HistogramObserve);

void BM_WithLabelsLookup(benchmark::State& state) {
  Registry registry;
  auto& f = registry.AddCounter("bench_total", "Bench.", {"node", "gpu"});
  for (int i = 0; i < 1000; ++i) f.WithLabels({"node-" + std::to_string(i), "0"});
  for (auto _ : state) f.WithLabels({"node-500", "0"}).Inc();
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_WithLabelsLookup);

void BM_ExposeText(benchmark::State& state) {
  Registry registry;
  auto& f = registry.AddGauge("node_healthy", "Bench.", {"node"});
  auto& h = registry.AddHistogram("latency_seconds", "Bench.", {"op"});
  for (int i = 0; i < state.range(0); ++i) f.WithLabels({"node-" + std::to_string(i)}).Set(1);
  for (int i = 0; i < 10; ++i) h.WithLabels({"op" + std::to_string(i)}).Observe(0.1);
  std::size_t bytes = 0;
  for (auto _ : state) {
    std::string text = registry.ExposeText();
    bytes += text.size();
    benchmark::DoNotOptimize(text);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
}
BENCHMARK(BM_ExposeText)->Arg(100)->Arg(10000);

}  // namespace
}  // namespace gg::metrics
