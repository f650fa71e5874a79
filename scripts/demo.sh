#!/usr/bin/env bash
# make demo: gpu-guardian installed the way a user installs it, on a simulated 6-node x 8-GPU
# cluster whose kubelet runs pods as real processes.
#   1. gpu-guardian-sim --exec-images build/bin --node-root ROOT --authz rbac --tls: an API
#      server with the workloads of deploy/demo/cluster.yaml; pods whose image is one of our
#      binaries run as processes (own network/mount/UTS namespaces, service-account tokens,
#      hostPaths under ROOT/<node>/, a fake libnvidia-ml.so.1 playing ROOT/<node>/nvml.yaml).
#   2. kubectl apply -k deploy/ (the operator Deployment, the agent DaemonSet, RBAC, the
#      admission policy) and the demo's policy (deploy/demo/policy.yaml, demo-sized windows).
#   3. Faults written into the node roots — kernel-log Xid lines into ROOT/<node>/dev/kmsg,
#      NVML events into ROOT/<node>/nvml.yaml — and, mid-demo, the leading operator pod is
#      deleted so the standby takes over.
#   4. `kubectl gpu-guardian timeline` narrates; then status and the leader's metrics.
#   scripts/demo.sh [--keep-running] [--duration 150s]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="${GG_BIN_DIR:-$root/build/bin}"
keep=0
duration=150s
while [ $# -gt 0 ]; do
  case "$1" in
    --keep-running) keep=1 ;;
    --duration) duration=$2; shift ;;
    *) echo "demo: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
for b in gpu-guardian-sim gpu-guardian-operator gpu-guardian-agent kubectl-gpu_guardian; do
  [ -x "$bin/$b" ] || { echo "demo: $bin/$b is missing (make shipped)" >&2; exit 1; }
done
command -v kubectl >/dev/null ||
  { echo "demo: kubectl is needed (it is what users run; scripts/bootstrap-deps.sh installs Debian's)" >&2; exit 1; }

work=$(mktemp -d /tmp/gpu-guardian-demo.XXXXXX)
nodes="$work/nodes"
mkdir -p "$nodes"
sim_pid=""
cleanup() {
  [ -n "${timeline_pid:-}" ] && kill "$timeline_pid" 2>/dev/null || true
  if [ -n "$sim_pid" ]; then
    kill "$sim_pid" 2>/dev/null || true  # SIGTERM: the pods get theirs, then the simulator exits
    wait "$sim_pid" 2>/dev/null || true
  fi
}
trap cleanup EXIT INT TERM
t0=$(date +%s.%N)
say() { printf '[%6.1fs] == %s\n' "$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN{print a-b}')" "$*"; }

say "gpu-guardian demo (logs in $work)"
# Pod addresses are per machine: while another simulator runs pods here, wait for it (5 min).
for wait_round in $(seq 1 100); do
  "$bin/gpu-guardian-sim" --listen 127.0.0.1:0 --tls --write-kubeconfig "$work/kubeconfig" \
    --scenario "$root/deploy/demo/cluster.yaml" --exec-images "$bin" --node-root "$nodes" \
    --authz rbac >"$work/sim.log" 2>&1 &
  sim_pid=$!
  for _ in $(seq 1 200); do
    grep -q "listening on" "$work/sim.log" 2>/dev/null && break
    kill -0 "$sim_pid" 2>/dev/null || break
    sleep 0.1
  done
  grep -q "listening on" "$work/sim.log" && break
  wait "$sim_pid" 2>/dev/null || true
  sim_pid=""
  grep -q "another gpu-guardian-sim" "$work/sim.log" || break
  [ "$wait_round" = 1 ] && echo "   another simulator runs pods on this machine; waiting for it to finish"
  sleep 3
done
grep -m1 "listening on" "$work/sim.log" ||
  { echo "demo: the simulator did not start:"; cat "$work/sim.log"; exit 1; }
export KUBECONFIG="$work/kubeconfig"
k() { kubectl "$@"; }

say "kubectl apply -k deploy/"
applied=0
for attempt in 1 2; do  # the second pass creates the objects of CRDs established by the first
  if k apply -k "$root/deploy" >"$work/apply-$attempt.log" 2>&1; then applied=1; break; fi
  echo "   (attempt $attempt: $(grep -c 'created\|configured' "$work/apply-$attempt.log") objects created; the rest wait" \
    "for the CRDs to be established, as on any cluster: applying again)"
  sleep 2
done
[ "$applied" = 1 ] || { echo "demo: kubectl apply -k deploy/ failed:"; cat "$work"/apply-*.log; exit 1; }
cat "$work"/apply-*.log | grep -E 'created|configured' | sed 's/^/   /'
say "kubectl apply -f deploy/demo/policy.yaml   (the default policy, demo-sized windows)"
k apply -f "$root/deploy/demo/policy.yaml" | sed 's/^/   /'

op_sel=app.kubernetes.io/name=gpu-guardian-operator
ready_operators() {
  k -n gpu-guardian get pods -l "$op_sel" \
    -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
    awk '$2=="True"{n++} END{print n+0}'
}
holder() { k -n gpu-guardian get lease gpu-guardian-operator -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || true; }
for _ in $(seq 1 450); do
  [ "$(ready_operators)" -ge 2 ] && [ -n "$(holder)" ] && break
  sleep 0.2
done
[ "$(ready_operators)" -ge 2 ] || { echo "demo: operator pods not Ready in 90 s"; k get pods -A -o wide; exit 1; }
leader=$(holder)
say "operator pods Ready; the Lease names ${leader%_*}"
k -n gpu-guardian get pods -o wide | sed 's/^/   /'
gpu_nodes=$(k get nodes -l nvidia.com/gpu.present=true -o name | wc -l)
for _ in $(seq 1 450); do
  [ "$(k get gpunodehealths -o name 2>/dev/null | wc -l)" -ge "$gpu_nodes" ] && break
  sleep 0.2
done
say "$(k get gpunodehealths -o name | wc -l) agents reporting (one GPUNodeHealth per GPU node)"
echo

# Faults. A kernel-log line as the NVIDIA driver writes it (GPU i is on PCI bus 0x18+i).
xid() {  # xid NODE GPU XID TEXT
  local f="$nodes/$1/dev/kmsg" seq
  seq=$(wc -l <"$f" 2>/dev/null || echo 0)
  printf '3,%d,%d,-;NVRM: Xid (PCI:0000:%02x:00): %d, pid=%d, %s\n' "$seq" \
    "$(($(date +%s%N) / 1000))" $((0x18 + $2)) "$3" $((4000 + RANDOM % 1000)) "$4" >>"$f"
}
nvml() {  # nvml NODE EVENT — played by the node's fake NVML at once
  local f="$nodes/$1/nvml.yaml"
  sed -i 's/^timeline: *\[\] *$/timeline:/' "$f"
  grep -q '^timeline:' "$f" || echo "timeline:" >>"$f"
  echo "  - {at: 0s, $2}" >>"$f"
}

# The timeline watches from now on; t=0 is its start (and the demo's own lines count from it).
"$bin/kubectl-gpu_guardian" timeline --duration "$duration" --until-recovered &
t0=$(date +%s.%N)
timeline_pid=$!
sleep 3
xid dgx-4 3 79 "GPU has fallen off the bus."         # fatal: drain dgx-4
nvml dgx-4 "gpu: 3, lost: true"
sleep 3
for _ in 1 2 3; do xid dgx-1 1 13 "Graphics SM Global Exception"; done   # application Xid: ignored
sleep 3
nvml dgx-2 "gpu: 5, remap: {pending: true, correctable: 1}"             # row remap pending: cordon, no drain
sleep 4
leader_pod=$(holder); leader_pod=${leader_pod%_*}
say "deleting the leading operator pod $leader_pod (the standby takes over)"
k -n gpu-guardian delete pod "$leader_pod" --wait=false >/dev/null
for _ in $(seq 1 150); do
  h=$(holder); [ -n "$h" ] && [ "${h%_*}" != "$leader_pod" ] && break
  sleep 0.2
done
say "the Lease names ${h%_*} now"
sleep 8
nvml dgx-4 "gpu: 3, clear: true"                      # the GPU is back after a reset
nvml dgx-2 "gpu: 5, clear: true"
wait "$timeline_pid" || true
timeline_pid=""

echo
say "kubectl gpu-guardian status"
"$bin/kubectl-gpu_guardian" status --no-color
echo
leader_pod=$(holder); leader_pod=${leader_pod%_*}
say "the leader's log (kubectl -n gpu-guardian logs $leader_pod | tail -5)"
k -n gpu-guardian logs "$leader_pod" | tail -5 | cut -c1-200 | sed 's/^/   /'
ip=$(k -n gpu-guardian get pod "$leader_pod" -o jsonpath='{.status.podIP}')
echo
say "operator metrics from http://$ip:8080/metrics (selected)"
metrics=$( (exec 3<>"/dev/tcp/$ip/8080" && printf 'GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n' >&3 && cat <&3) 2>/dev/null || true)
echo "$metrics" | grep -E '^gpu_guardian_(remediations_total|nodes|brake|evictions_total|node_healthy)|^gpu_guardian_detection_to_action_seconds_(sum|count)' | grep -v ' 0$' | sed 's/^/   /' || echo "   (metrics unavailable)"

if [ "$keep" = 1 ]; then
  echo
  echo "The cluster stays up. Try:"
  echo "  export KUBECONFIG=$KUBECONFIG"
  echo "  kubectl get nodes; kubectl -n gpu-guardian get pods -o wide; kubectl get gnh"
  echo "  kubectl describe node dgx-4; kubectl get events -A; kubectl -n gpu-guardian logs -l $op_sel"
  echo "  echo '3,0,0,-;NVRM: Xid (PCI:0000:18:00): 79, pid=1, GPU has fallen off the bus.' >> $nodes/dgx-0/dev/kmsg"
  echo "  $bin/kubectl-gpu_guardian status"
  echo "Press Ctrl-C to stop."
  wait "$sim_pid"
fi
echo
say "demo finished: logs in $work"
