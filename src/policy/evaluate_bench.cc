// Micro-benchmark of Evaluate(): one 8-GPU node under the default policy, healthy and with a
// full 64-entry Xid ring (an application-Xid storm), plus EvalMemory encode/decode.
#include <benchmark/benchmark.h>

#include "policy/evaluate.h"

namespace gg::policy {
namespace {

const WallTime kNow = WallTime(std::chrono::seconds(1'800'000'000));

api::GpuNodeHealthStatus Report(bool storm) {
  api::GpuNodeHealthStatus r;
  r.heartbeat_time = kNow;
  r.expected_gpus = 8;
  for (int i = 0; i < 8; ++i) {
    api::GpuStatus g;
    g.index = i;
    g.uuid = "GPU-" + std::to_string(i);
    g.temperature_c = 60;
    g.ecc_uncorrected_volatile = 0;
    g.nvlink_links_down = 0;
    r.gpus.push_back(g);
  }
  for (int i = 0; storm && i < 64; ++i) {
    api::XidEvent e;
    e.xid = api::kApplicationXids[i % 5];
    e.gpu_uuid = "GPU-" + std::to_string(i % 8);
    e.count = 1000;
    e.first_seen = kNow - std::chrono::minutes(30);
    e.last_seen = kNow;
    r.xids.push_back(e);
  }
  r.sources = {{"nvml", api::SourceState::kOk, ""}, {"kmsg", api::SourceState::kOk, ""}};
  return r;
}

void BM_EvaluateHealthy(benchmark::State& state) {
  api::GpuHealthPolicy p;
  p.name = "default";
  p.spec = api::DefaultPolicySpec();
  std::optional<api::GpuNodeHealthStatus> r = Report(false);
  for (auto _ : state) benchmark::DoNotOptimize(Evaluate(p, r, EvalMemory{}, kNow));
}
BENCHMARK(BM_EvaluateHealthy);

void BM_EvaluateXidStorm(benchmark::State& state) {
  api::GpuHealthPolicy p;
  p.name = "default";
  p.spec = api::DefaultPolicySpec();
  std::optional<api::GpuNodeHealthStatus> r = Report(true);
  for (auto _ : state) benchmark::DoNotOptimize(Evaluate(p, r, EvalMemory{}, kNow));
}
BENCHMARK(BM_EvaluateXidStorm);

void BM_EvalMemoryCodec(benchmark::State& state) {
  EvalMemory m;
  m.state = HealthState::kUnhealthy;
  m.since = kNow;
  m.matches = {{"hot", "GPU-1", kNow, false}, {"nvlink-down", "GPU-2", kNow, false}};
  for (auto _ : state) benchmark::DoNotOptimize(DecodeEvalMemory(EncodeEvalMemory(m)));
}
BENCHMARK(BM_EvalMemoryCodec);

}  // namespace
}  // namespace gg::policy
