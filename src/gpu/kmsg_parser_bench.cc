// Kernel-log parsing throughput: ParseKmsgLine on a realistic mix, and KmsgReader::Feed on a
// flood (target: 100k lines/s without falling behind).
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "common/clock.h"
#include "gpu/kmsg_parser.h"
#include "gpu/kmsg_reader.h"

namespace gg::gpu {
namespace {

std::vector<std::string> Mix() {
  std::vector<std::string> lines;
  for (int i = 0; i < 90; ++i)
    lines.push_back("6," + std::to_string(1000 + i) +
                    ",16450076435595,-;eth0: renamed from veth1234 link becomes ready");
  for (int i = 0; i < 10; ++i)
    lines.push_back(
        "4," + std::to_string(2000 + i) +
        ",16450076435595,-;NVRM: Xid (PCI:0000:3b:00): 13, pid=1797828, name=pt_main_thread, "
        "Graphics SM Warp Exception on (GPC 1, TPC 3, SM 0): Out Of Range Address");
  return lines;
}

void BM_ParseKmsgLineMix(benchmark::State& state) {
  auto lines = Mix();
  size_t i = 0;
  for (auto _ : state) {
    auto x = ParseKmsgLine(lines[i]);
    benchmark::DoNotOptimize(x);
    if (++i == lines.size()) i = 0;
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_ParseKmsgLineMix);

void BM_ParseKmsgLineXid(benchmark::State& state) {
  const std::string line =
      "4,1234,16450076435595,-;NVRM: Xid (PCI:0000:3b:00 GPU-I:01 GPU-CI:00): 79, pid='<unknown>', "
      "name=<unknown>, GPU has fallen off the bus.";
  for (auto _ : state) {
    auto x = ParseKmsgLine(line);
    benchmark::DoNotOptimize(x);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_ParseKmsgLineXid);

// All-Xid flood through the reader (rate limiting + aggregation included).
void BM_KmsgReaderFloodFeed(benchmark::State& state) {
  std::string chunk;
  const int kLines = 10000;
  for (int i = 0; i < kLines; ++i)
    chunk += "4," + std::to_string(i) +
             ",1,-;NVRM: Xid (PCI:0000:3b:00): 13, pid=1, name=a, Graphics exception\n";
  FakeClock clock;
  int64_t delivered = 0;
  KmsgReader reader(nullptr, clock, {}, [&](const KmsgXid&, int64_t n) { delivered += n; });
  for (auto _ : state) reader.Feed(chunk);
  reader.FlushAggregates();
  benchmark::DoNotOptimize(delivered);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kLines);
}
BENCHMARK(BM_KmsgReaderFloodFeed);

}  // namespace
}  // namespace gg::gpu
