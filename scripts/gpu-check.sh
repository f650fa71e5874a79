#!/usr/bin/env bash
# gpu-check.sh DIR — checks on a host with an NVIDIA GPU (binaries built elsewhere):
#   1. the `gpu`-labelled tests (real NVML): `ctest -L gpu` when a build tree and ctest exist,
#      otherwise the gpu test binaries run directly;
#   2. `gpu-guardian-agent --source nvml --once --print`.
# Logs, the report JSON and a summary go to DIR. Exit status: 0 when all passed, 1 when the
# agent failed, 3 when only the tests failed, 2 on usage errors.
# Layouts handled: a source checkout with build/ (build/bin, build/src/gpu), or a flat bundle
# (bin/ or the script's own directory holding the binaries, lib/ with shared libraries the
# host lacks — added to LD_LIBRARY_PATH).
set -u

if [[ $# -ne 1 ]]; then
  echo "usage: $0 OUTPUT_DIR" >&2
  exit 2
fi
OUT=$1
mkdir -p "$OUT" || exit 2
OUT=$(cd "$OUT" && pwd)
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }

# Shared libraries carried along (e.g. libyaml-cpp, libcurl, libssl): first lib/ found wins.
for d in "$ROOT/lib" "$HERE/lib" "$ROOT/bin/lib" "$ROOT/build/lib"; do
  if [[ -d "$d" ]]; then
    export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
done

find_bin() {  # name -> path or empty
  local name=$1 d
  for d in "${GG_BIN_DIR:-}" "$ROOT/build/bin" "$ROOT/bin" "$HERE/bin" "$HERE" "$ROOT" \
           "$ROOT/build/src/gpu" "$ROOT/build/src/agent"; do
    [[ -n "$d" && -x "$d/$name" && -f "$d/$name" ]] && { echo "$d/$name"; return; }
  done
  command -v "$name" 2>/dev/null || true
}

say "gpu-check on $(hostname) at $(date -u +%Y-%m-%dT%H:%M:%SZ)"
say "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
{ uname -a; command -v nvidia-smi >/dev/null && nvidia-smi -L; } >"$OUT/host.txt" 2>&1
command -v nvidia-smi >/dev/null && nvidia-smi -q >"$OUT/nvidia-smi.txt" 2>&1

# 1. gpu-labelled tests.
tests_rc=0
if command -v ctest >/dev/null 2>&1 && [[ -f "$ROOT/build/CTestTestfile.cmake" ]]; then
  say "tests: ctest -L gpu in $ROOT/build"
  ctest --test-dir "$ROOT/build" -L gpu --output-on-failure >"$OUT/gpu-tests.log" 2>&1
  tests_rc=$?
else
  ran=0
  for t in gpu_real_test agent_gpu_test; do
    bin=$(find_bin "$t")
    [[ -z "$bin" ]] && continue
    ran=1
    say "tests: $bin"
    "$bin" --gtest_output="xml:$OUT/$t.xml" >"$OUT/$t.log" 2>&1
    rc=$?
    say "  $t exit $rc"
    [[ $rc -ne 0 ]] && tests_rc=$rc
  done
  if [[ $ran -eq 0 ]]; then
    say "tests: no gpu test binary found (looked for gpu_real_test)"
    tests_rc=1
  fi
fi
say "gpu tests: exit $tests_rc"

# 2. The agent, one shot against real NVML.
agent=$(find_bin gpu-guardian-agent)
if [[ -z "$agent" ]]; then
  say "agent: gpu-guardian-agent not found"
  exit 1
fi
say "agent: $agent --source nvml --once --print"
"$agent" --source nvml --once --print --log-format json --log-level debug \
  >"$OUT/report.json" 2>"$OUT/agent.log"
agent_rc=$?
say "agent: exit $agent_rc"
if [[ $agent_rc -eq 0 ]] && command -v python3 >/dev/null 2>&1; then
  python3 - "$OUT/report.json" <<'PY' | tee -a "$SUMMARY"
import json, sys
r = json.load(open(sys.argv[1]))
print("report: %d GPU(s), sources %s" % (len(r.get("gpus", [])),
      ", ".join("%s=%s" % (s["name"], s["state"]) for s in r.get("sources", []))))
for g in r.get("gpus", []):
    print("  gpu %s %s %s temp=%s power=%s lost=%s" % (g.get("index"), g.get("uuid"), g.get("name"),
          g.get("temperatureC"), g.get("powerWatts"), g.get("lost", False)))
PY
fi

if [[ $agent_rc -ne 0 ]]; then exit 1; fi
if [[ $tests_rc -ne 0 ]]; then exit 3; fi
exit 0
