#!/usr/bin/env bash
# `make run` as a user first meets the operator: the simulator behind `kubectl proxy`, the
# Makefile's own command line (default flags: no leader election), one agent reporting a
# fatal Xid — the node must be fenced, with no Lease anywhere. Also: asking for leader election
# outside a pod without a namespace is a loud start-up error naming the flag to pass.
#   make_run_test.sh SOURCE_DIR BIN_DIR
set -euo pipefail
src=$1
bin=$2
command -v kubectl >/dev/null || { echo "SKIP: kubectl not found"; exit 77; }
work=$(mktemp -d /tmp/gg-make-run.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null || kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$work"/*.log; do echo "---- $f"; tail -30 "$f"; done; exit 1; }
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

setsid "$bin/gpu-guardian-sim" --listen 127.0.0.1:0 --write-kubeconfig "$work/kubeconfig" --nodes 2 \
  --apply "$src/deploy/crds" --apply "$src/deploy/samples/default-policy.yaml" >"$work/sim.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do grep -q "listening on" "$work/sim.log" && break; sleep 0.1; done
grep -q "listening on" "$work/sim.log" || fail "the simulator did not start"
export KUBECONFIG="$work/kubeconfig"
node=$(kubectl get nodes -l nvidia.com/gpu.present=true -o jsonpath='{.items[0].metadata.name}')
[ -n "$node" ] || fail "no GPU node"

port=$(free_port)
setsid kubectl proxy --port="$port" >"$work/proxy.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$port/version" >/dev/null 2>&1 && break; sleep 0.1
done
curl -sf "http://127.0.0.1:$port/version" >/dev/null || fail "kubectl proxy did not come up"

# Leader election asked for outside a pod, no namespace anywhere: exit 2 and say which flag.
set +e
env -u POD_NAMESPACE "$bin/gpu-guardian-operator" --server "http://127.0.0.1:$port" --leader-elect \
  --metrics-addr 127.0.0.1:0 >"$work/le.log" 2>&1
rc=$?
set -e
[ "$rc" = 2 ] || fail "--leader-elect without a namespace exited $rc, want 2"
grep -q -- "--leader-election-namespace" "$work/le.log" || fail "the error does not name the flag"
echo "ok   --leader-elect outside a pod without a namespace: exit 2 naming the flag"

# The Makefile's own command line (its build prerequisite skipped: the binary is given).
metrics_port=$(free_port)
setsid make -s -C "$src" -o operator-bin run BIN="$bin" PROXY_PORT="$port" \
  ARGS="--metrics-addr 127.0.0.1:$metrics_port" >"$work/operator.log" 2>&1 &
pids+=($!)
cat >"$work/faults.yaml" <<YAML
gpus: 8
timeline:
  - {at: 1s, gpu: 3, xid: 79}
YAML
setsid "$bin/gpu-guardian-agent" --node-name "$node" --kubeconfig "$KUBECONFIG" --source script \
  --script "$work/faults.yaml" --heartbeat 30s --metrics-addr 0 >"$work/agent.log" 2>&1 &
pids+=($!)

fenced() {
  kubectl get node "$node" -o json | python3 -c '
import json, sys
n = json.load(sys.stdin)["spec"]
taint = any(t["key"] == "gpuguardian.io/unhealthy" for t in n.get("taints", []))
sys.exit(0 if taint and n.get("unschedulable") else 1)'
}
for _ in $(seq 1 300); do fenced && break; sleep 0.1; done
fenced || fail "make run did not fence $node within 30 s"
echo "ok   make run (kubectl proxy, default flags) fenced $node"
leases=$(kubectl get leases -A -o name | grep -c gpu-guardian-operator || true)
[ "$leases" = 0 ] || fail "make run campaigned for a Lease ($leases found)"
echo "ok   no Lease: default flags run without leader election"
grep -q '"leader_elect": *false\|leader_elect=false' "$work/operator.log" ||
  fail "the operator's start line does not say leader_elect false"
