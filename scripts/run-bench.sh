#!/usr/bin/env bash
# Runs the benchmarks built in BUILD_DIR and writes JSON results to bench/results/.
# Usage: scripts/run-bench.sh BUILD_DIR quick|scale
set -euo pipefail
build=${1:-build-release}
mode=${2:-quick}
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/bench/results"
mkdir -p "$out"
echo "# gpu-guardian benchmarks ($mode) on $(nproc) cores, $(uname -m), $(date -u +%FT%TZ)"
for bin in "$build"/bench/*_bench; do
  [ -x "$bin" ] || continue
  name=$(basename "$bin")
  echo "== $name"
  "$bin" --benchmark_min_time=0.2 --benchmark_out="$out/$name.json" --benchmark_out_format=json \
    --benchmark_counters_tabular=true
done
for bin in "$build"/bench/scenario_*; do
  [ -x "$bin" ] || continue
  name=$(basename "$bin")
  echo "== $name ($mode)"
  "$bin" --mode "$mode" --out "$out/$name.json"
done
