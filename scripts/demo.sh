#!/usr/bin/env bash
# make demo: the simulator with a 6-node x 8-GPU cluster, one agent per node playing a
# scripted fault timeline, and the operator — real processes over loopback HTTP, the same
# binaries as production. Prints a live timeline, then a summary, and exits 0.
#   scripts/demo.sh [--keep-running] [--duration 90s]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="${GG_BIN_DIR:-$root/build/bin}"
keep=0
duration=90s
while [ $# -gt 0 ]; do
  case "$1" in
    --keep-running) keep=1 ;;
    --duration) duration=$2; shift ;;
    *) echo "demo: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

work=$(mktemp -d /tmp/gpu-guardian-demo.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

free_port() {  # a loopback port nobody listens on
  local p
  for p in $(seq 18080 18180); do
    if ! (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null; then echo "$p"; return; fi
  done
  echo "demo: no free port in 18080-18180" >&2; exit 1
}

echo "== gpu-guardian demo (logs in $work)"
"$bin/gpu-guardian-sim" --listen 127.0.0.1:0 --scenario "$root/deploy/demo/cluster.yaml" \
  --apply "$root/deploy/crds" --apply "$root/deploy/demo/policy.yaml" \
  --write-kubeconfig "$work/kubeconfig" >"$work/sim.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do
  grep -q "listening on" "$work/sim.log" 2>/dev/null && break
  sleep 0.1
done
grep "listening on" "$work/sim.log" || { echo "demo: the simulator did not start:"; cat "$work/sim.log"; exit 1; }
export KUBECONFIG="$work/kubeconfig"

metrics_port=$(free_port)
"$bin/gpu-guardian-operator" --kubeconfig "$KUBECONFIG" --metrics-addr "127.0.0.1:$metrics_port" \
  --leader-election-namespace default >"$work/operator.log" 2>&1 &
pids+=($!)
echo "   operator started (metrics on http://127.0.0.1:$metrics_port/metrics)"

# The timeline watches from now on; agents start right after, so t=0 is the agents' start.
"$bin/kubectl-gpu_guardian" timeline --duration "$duration" --until-recovered &
timeline_pid=$!
sleep 1
for f in "$root"/deploy/demo/faults/dgx-*.yaml; do
  node=$(basename "$f" .yaml)
  "$bin/gpu-guardian-agent" --node-name "$node" --kubeconfig "$KUBECONFIG" --source script \
    --script "$f" --heartbeat 30s --sweep-interval 1s --metrics-addr 0 \
    >"$work/agent-$node.log" 2>&1 &
  pids+=($!)
done
echo "   6 agents started (scripted faults: deploy/demo/faults/)"
echo
wait "$timeline_pid" || true

echo
echo "== kubectl gpu-guardian status"
"$bin/kubectl-gpu_guardian" status --no-color
echo
echo "== operator metrics (selected)"
metrics=$( (exec 3<>/dev/tcp/127.0.0.1/$metrics_port && printf 'GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n' >&3 && cat <&3) 2>/dev/null || true)
echo "$metrics" | grep -E '^gpu_guardian_(remediations_total|nodes|brake|evictions_total|node_healthy)|^gpu_guardian_detection_to_action_seconds_(sum|count)' | grep -v ' 0$' || echo "(metrics unavailable)"

if [ "$keep" = 1 ]; then
  echo
  echo "The cluster stays up. Try:"
  echo "  export KUBECONFIG=$KUBECONFIG"
  echo "  kubectl get nodes; kubectl describe node dgx-4; kubectl get ghp; kubectl get events"
  echo "  $bin/kubectl-gpu_guardian status"
  echo "Press Ctrl-C to stop."
  trap cleanup EXIT
  wait
fi
echo
echo "demo finished: logs in $work"
