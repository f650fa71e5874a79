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
# Runners in order of cost; one that fails is reported and the others still run.
failed=()
for name in scenario_agent scenario_drain scenario_fault_to_fence scenario_sim_scale \
            scenario_informer_sync scenario_api_load; do
  bin="$build/bench/$name"
  [ -x "$bin" ] || { echo "== $name: not built, skipped"; continue; }
  echo "== $name ($mode)"
  "$bin" --mode "$mode" --out "$out/$name.json" || failed+=("$name")
done
for bin in "$build"/bench/scenario_*; do
  name=$(basename "$bin")
  case " scenario_agent scenario_drain scenario_fault_to_fence scenario_sim_scale scenario_informer_sync scenario_api_load " in
    *" $name "*) continue ;;
  esac
  [ -x "$bin" ] || continue
  echo "== $name ($mode)"
  "$bin" --mode "$mode" --out "$out/$name.json" || failed+=("$name")
done
echo "== binary sizes"
"$root/bench/binary_sizes.sh" "$build" "$out/binary_sizes.json"
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed: ${failed[*]}" >&2
  exit 1
fi
