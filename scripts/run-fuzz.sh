#!/usr/bin/env bash
# Runs every libFuzzer target for a bounded time, growing its corpus in fuzz/corpus/<target>.
# Usage: scripts/run-fuzz.sh BUILD_DIR SECONDS_PER_TARGET
set -euo pipefail
build=${1:-build-fuzz}
secs=${2:-30}
root=$(cd "$(dirname "$0")/.." && pwd)
status=0
for bin in "$build"/fuzz/*_fuzz; do
  [ -x "$bin" ] || continue
  name=$(basename "$bin")
  corpus="$root/fuzz/corpus/$name"
  mkdir -p "$corpus" "$build/fuzz-artifacts/$name"
  echo "== $name for ${secs}s"
  if ! "$bin" "$corpus" -max_total_time="$secs" -max_len=65536 -timeout=10 \
      -artifact_prefix="$build/fuzz-artifacts/$name/" -print_final_stats=1 2>&1 | tail -n 12; then
    echo "!! $name found a crash: see $build/fuzz-artifacts/$name/"
    status=1
  fi
done
exit $status
