#!/usr/bin/env python3
"""The user's path as a test: deploy/ installed with `kubectl apply -k`, exactly as shipped, and
the world it produces checked step by step.

Against the simulator (default) it starts
  gpu-guardian-sim --listen 127.0.0.1:0 --tls --write-kubeconfig KC --nodes N
                   --exec-images BIN --node-root ROOT --authz rbac
so the operator Deployment and the agent DaemonSet run as real processes with their
service-account tokens, probes and RBAC. With --kubeconfig it runs the same story against that
cluster (`make e2e` with KUBECONFIG set): nothing in the main story reads simulator internals;
faults go in as on a real node, through a privileged pod that writes an `NVRM: Xid` line to the
node's /dev/kmsg (in the simulator that hostPath is ROOT/<node>/dev/kmsg).

  shipped_test.py --src DIR --bin DIR [--kubeconfig KC] [--nodes N] [--only STEP,...]
                  [--inject file|pod] [--keep]

Every step prints `ok`/`FAIL` with its time; the first failure dumps the state that explains it
(pods, Lease, nodes, logs) and exits 1. Exit 77: the simulator cannot run pods as processes here
(no root or namespaces) — a skip, not a pass.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import yaml

NS = "gpu-guardian"
OP_LABEL = "app.kubernetes.io/name=gpu-guardian-operator"
AGENT_LABEL = "app.kubernetes.io/name=gpu-guardian-agent"
LEASE = "gpu-guardian-operator"
GPU_LABEL = "nvidia.com/gpu.present"
TAINT = "gpuguardian.io/unhealthy"
SKIP = 77


class Failure(Exception):
    pass


class Suite:
    def __init__(self, args):
        self.args = args
        self.src = os.path.abspath(args.src)
        self.bin = os.path.abspath(args.bin)
        self.work = tempfile.mkdtemp(prefix="gg-shipped.")
        self.sim = None
        self.sim_log = os.path.join(self.work, "sim.log")
        self.root = args.node_root  # simulator node root (file injection)
        self.kubeconfig = args.kubeconfig
        self.timings = {}
        self.cleanup_cmds = []

    # --- plumbing -------------------------------------------------------------------------
    def kubectl(self, *a, check=True, input=None, timeout=60, token=None):
        cmd = ["kubectl", "--kubeconfig", self.kubeconfig]
        if token:
            cmd += ["--token", token]
        cmd += list(a)
        r = subprocess.run(cmd, capture_output=True, text=True, input=input, timeout=timeout)
        if check and r.returncode != 0:
            raise Failure(f"kubectl {' '.join(a)}: exit {r.returncode}: {r.stderr.strip()}")
        return r

    def get_json(self, *a):
        return json.loads(self.kubectl(*a, "-o", "json").stdout)

    def wait(self, what, fn, timeout, interval=0.2):
        """Polls fn() until it returns a truthy value; returns it, or raises naming `what`."""
        end = time.monotonic() + timeout
        last = None
        while True:
            try:
                v = fn()
                if v:
                    return v
                last = v
            except Failure as e:
                last = str(e)
            if time.monotonic() >= end:
                raise Failure(f"{what}: not within {timeout:g} s (last: {last})")
            time.sleep(interval)

    def step(self, name, fn):
        if self.args.only and name not in self.args.only:
            return None
        t0 = time.monotonic()
        try:
            v = fn()
        except Failure as e:
            print(f"FAIL {name} ({time.monotonic() - t0:.1f} s): {e}", flush=True)
            self.dump()
            raise
        dt = time.monotonic() - t0
        self.timings[name] = dt
        print(f"ok   {name} ({dt:.1f} s){': ' + v if isinstance(v, str) and v else ''}", flush=True)
        return v

    def dump(self):
        print("---- state at failure", flush=True)
        for a in (["get", "nodes", "-o", "wide"], ["get", "pods", "-A", "-o", "wide"],
                  ["-n", NS, "get", "lease", LEASE, "-o", "yaml"], ["get", "gnh"],
                  ["get", "events", "-A", "--sort-by=.metadata.creationTimestamp"]):
            r = self.kubectl(*a, check=False)
            print(f"$ kubectl {' '.join(a)}\n{r.stdout}{r.stderr}", flush=True)
        for p in self.pods(OP_LABEL) + self.pods(AGENT_LABEL):
            name = p["metadata"]["name"]
            r = self.kubectl("-n", NS, "logs", name, "--tail", "30", check=False)
            print(f"$ kubectl -n {NS} logs {name} --tail 30\n{r.stdout}{r.stderr}", flush=True)
        if self.sim:
            print("---- simulator log (tail)")
            print("".join(open(self.sim_log, errors="replace").readlines()[-40:]), flush=True)

    # --- the cluster ----------------------------------------------------------------------
    def start_sim(self):
        """Starts the simulator as the contract says. Pod addresses are per machine, so only one
        simulator at a time runs pods as processes: while another holds the machine, wait."""
        self.root = os.path.join(self.work, "nodes")
        os.makedirs(self.root, exist_ok=True)
        self.kubeconfig = os.path.join(self.work, "kubeconfig")
        cmd = [os.path.join(self.bin, "gpu-guardian-sim"), "--listen", "127.0.0.1:0", "--tls",
               "--write-kubeconfig", self.kubeconfig, "--nodes", str(self.args.nodes),
               "--exec-images", self.bin, "--node-root", self.root, "--authz", "rbac"]
        cmd += self.args.sim_arg
        busy_until = time.monotonic() + self.args.wait_machine
        waited = 0.0
        while True:
            self.sim = subprocess.Popen(cmd, stdout=open(self.sim_log, "w"),
                                        stderr=subprocess.STDOUT, start_new_session=True)
            end = time.monotonic() + 30
            while time.monotonic() < end:
                text = open(self.sim_log, errors="replace").read()
                if "listening on" in text:
                    line = text[text.index("listening on"):].splitlines()[0]
                    return line + (f" (waited {waited:.0f} s for the machine)" if waited else "")
                if self.sim.poll() is not None:
                    break
                time.sleep(0.1)
            else:
                raise Failure("the simulator printed no `listening on` line in 30 s")
            text = open(self.sim_log, errors="replace").read()
            self.sim = None
            if "another gpu-guardian-sim" in text and time.monotonic() < busy_until:
                time.sleep(3)
                waited += 3
                continue
            if re.search(r"needs root|cannot create pid/network|is needed", text):
                print(f"SKIP: the simulator cannot run pods as processes here:\n{text}")
                sys.exit(SKIP)
            raise Failure(f"the simulator exited:\n{text}")

    def stop(self):
        for c in self.cleanup_cmds:
            subprocess.run(c, capture_output=True)
        if self.sim and self.sim.poll() is None:
            self.sim.send_signal(signal.SIGTERM)
            try:
                self.sim.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.sim.pid, signal.SIGKILL)
                self.sim.wait()
        if not self.args.keep:
            shutil.rmtree(self.work, ignore_errors=True)

    def pods(self, label):
        r = self.kubectl("-n", NS, "get", "pods", "-l", label, "-o", "json", check=False)
        return json.loads(r.stdout)["items"] if r.returncode == 0 else []

    @staticmethod
    def ready(pod):
        if pod["metadata"].get("deletionTimestamp"):
            return False
        for c in pod.get("status", {}).get("conditions", []):
            if c["type"] == "Ready":
                return c["status"] == "True"
        return False

    def gpu_nodes(self):
        return sorted(n["metadata"]["name"] for n in self.get_json("get", "nodes")["items"]
                      if n["metadata"].get("labels", {}).get(GPU_LABEL) == "true")

    def lease_holder(self):
        r = self.kubectl("-n", NS, "get", "lease", LEASE, "-o", "json", check=False)
        if r.returncode != 0:
            return ""
        return json.loads(r.stdout).get("spec", {}).get("holderIdentity") or ""

    def leader_pod(self):
        """The operator pod the Lease names (identity = <hostname>_<suffix>, hostname = pod)."""
        holder = self.lease_holder()
        for p in self.pods(OP_LABEL):
            name = p["metadata"]["name"]
            if holder == name or holder.startswith(name + "_"):
                return name
        return ""

    # --- steps ----------------------------------------------------------------------------
    def apply(self):
        """`kubectl apply -k deploy/` at most twice (the CRDs must be established first)."""
        out = ""
        for attempt in (1, 2):
            r = self.kubectl("apply", "-k", os.path.join(self.src, "deploy"), check=False,
                             timeout=120)
            out = r.stdout + r.stderr
            if r.returncode == 0:
                return f"attempt {attempt}"
            time.sleep(2)
        raise Failure(f"kubectl apply -k deploy/ failed twice:\n{out}")

    def all_accepted(self):
        rendered = subprocess.run(["kubectl", "kustomize", os.path.join(self.src, "deploy")],
                                  capture_output=True, text=True, check=True).stdout
        want = len([d for d in re.split(r"^---$", rendered, flags=re.M) if "kind:" in d])
        r = self.kubectl("get", "-k", os.path.join(self.src, "deploy"), "-o", "name")
        got = [l for l in r.stdout.splitlines() if l.strip()]
        if len(got) != want:
            raise Failure(f"{want} objects rendered, {len(got)} stored: {got}")
        return f"{len(got)} objects"

    def operators_ready(self):
        def check():
            pods = self.pods(OP_LABEL)
            want = self.get_json("-n", NS, "get", "deploy", "gpu-guardian-operator")["spec"]["replicas"]
            ready = [p for p in pods if self.ready(p)]
            if len(ready) < want:
                return None
            leader = self.leader_pod()
            return leader and (len(ready), leader)
        n, leader = self.wait("operator pods Ready and the Lease naming one of them", check, 90)
        nodes = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in self.pods(OP_LABEL)}
        return f"{n} Ready on {sorted(set(nodes.values()))}, leader {leader}"

    def one_leader(self):
        """Exactly one replica runs the leader-only controllers: its log says so, the others'
        do not."""
        leaders = []
        for p in self.pods(OP_LABEL):
            if not self.ready(p):
                continue
            log = self.kubectl("-n", NS, "logs", p["metadata"]["name"]).stdout
            if "starting leader runnables" in log:
                leaders.append(p["metadata"]["name"])
        if leaders != [self.leader_pod()]:
            raise Failure(f"replicas that started leading: {leaders}; Lease names "
                          f"{self.lease_holder()!r}")
        return leaders[0]

    def leader_logs(self):
        leader = self.leader_pod()
        log = self.kubectl("-n", NS, "logs", leader).stdout
        lines = [l for l in log.splitlines() if l.strip()]
        if not any("caches synced" in l for l in lines):
            raise Failure(f"kubectl logs {leader} lacks the operator's lines:\n{log[:2000]}")
        return f"{len(lines)} lines from {leader}"

    def agents(self):
        nodes = self.gpu_nodes()
        if not nodes:
            raise Failure("no node is labelled nvidia.com/gpu.present=true")

        def check():
            on = {p["spec"].get("nodeName") for p in self.pods(AGENT_LABEL) if self.ready(p)}
            gnh = {g["metadata"]["name"]: g for g in self.get_json("get", "gpunodehealths")["items"]}
            missing = [n for n in nodes if n not in on or n not in gnh or not gnh[n].get("status")]
            return (not missing) and gnh
        gnh = self.wait("an agent Ready on every GPU node, each with its GPUNodeHealth", check, 90)
        gpus = {n: len(gnh[n]["status"].get("gpus", [])) for n in nodes}
        self.pod_start_latency()
        if any(v == 0 for v in gpus.values()):
            raise Failure(f"reports without GPUs: {gpus}")
        return f"{len(nodes)} nodes, GPUs per report {sorted(set(gpus.values()))}"

    def pod_start_latency(self):
        """Seconds from creation to Ready of the operator and agent pods (timestamps have
        second resolution): a figure for the notes, not an assertion."""
        from datetime import datetime
        ts = lambda t: datetime.strptime(t, "%Y-%m-%dT%H:%M:%SZ").timestamp()
        out = []
        for p in self.pods(OP_LABEL) + self.pods(AGENT_LABEL):
            ready = next((c for c in p.get("status", {}).get("conditions", [])
                          if c["type"] == "Ready" and c["status"] == "True"), None)
            if ready and ready.get("lastTransitionTime"):
                out.append(ts(ready["lastTransitionTime"]) - ts(p["metadata"]["creationTimestamp"]))
        if out:
            out.sort()
            self.timings["pod_start_median"] = out[len(out) // 2]
            self.timings["pod_start_max"] = out[-1]

    def kmsg_line(self, node, xid, gpu):
        bus = 0x18 + gpu  # the fake NVML's GPU i sits on bus 0x18+i
        return f"NVRM: Xid (PCI:0000:{bus:02x}:00): {xid}, pid=4242, name=python3, GPU has fallen off the bus."

    def inject_xid(self, node, xid=79, gpu=3):
        """Appends an Xid line to the node's kernel log: the node root's file (simulator) or a
        privileged pod writing to the host's /dev/kmsg (any cluster)."""
        text = self.kmsg_line(node, xid, gpu)
        if self.args.inject == "file":
            path = os.path.join(self.root, node, "dev", "kmsg")
            if not os.path.exists(path):
                raise Failure(f"{path} does not exist (the simulator's node root)")
            seq = sum(1 for _ in open(path, errors="replace"))
            usec = int(time.monotonic() * 1e6)
            with open(path, "a") as f:
                f.write(f"3,{seq},{usec},-;{text}\n")
            return
        pod = f"gg-kmsg-{node}-{int(time.time())}"[:63]
        manifest = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod, "namespace": NS},
            "spec": {
                "nodeName": node, "restartPolicy": "Never",
                "tolerations": [{"operator": "Exists"}],
                "containers": [{"name": "kmsg", "image": self.args.kmsg_image,
                                "command": ["sh", "-c", f"echo '{text}' > /dev/kmsg"],
                                "securityContext": {"privileged": True},
                                "volumeMounts": [{"name": "kmsg", "mountPath": "/dev/kmsg"}]}],
                "volumes": [{"name": "kmsg", "hostPath": {"path": "/dev/kmsg"}}]}}
        self.kubectl("apply", "-f", "-", input=json.dumps(manifest))
        self.cleanup_cmds.append(["kubectl", "--kubeconfig", self.kubeconfig, "-n", NS, "delete",
                                  "pod", pod, "--wait=false"])

    def fenced(self, node):
        n = self.get_json("get", "node", node)
        tainted = any(t["key"] == TAINT for t in n["spec"].get("taints", []))
        return tainted and n["spec"].get("unschedulable", False)

    def fault_fences(self):
        nodes = self.gpu_nodes()
        leader_node = next((p["spec"].get("nodeName") for p in self.pods(OP_LABEL)
                            if p["metadata"]["name"] == self.leader_pod()), None)
        target = next((n for n in reversed(nodes) if n != leader_node), nodes[-1])
        self.target = target
        t0 = time.monotonic()
        self.inject_xid(target)
        self.wait(f"{target} tainted {TAINT} and cordoned", lambda: self.fenced(target), 10, 0.05)
        dt = time.monotonic() - t0
        self.timings["xid_to_fence"] = dt
        return f"{target} fenced {dt:.2f} s after the kmsg line"

    def failover(self):
        old = self.leader_pod()
        old_holder = self.lease_holder()
        t0 = time.monotonic()
        self.kubectl("-n", NS, "delete", "pod", old, "--wait=false")

        def new_leader():
            h = self.lease_holder()
            if not h or h == old_holder:
                return None
            p = self.leader_pod()
            return p if p and p != old else None
        new = self.wait("a standby takes the Lease after the leader's pod is deleted",
                        new_leader, 30)
        dt = time.monotonic() - t0
        self.timings["failover"] = dt
        self.wait("the Deployment back at full strength", lambda: len(
            [p for p in self.pods(OP_LABEL) if self.ready(p)]) >= 2, 60)
        return f"{old} → {new} in {dt:.2f} s"

    def admission(self):
        """The shipped agent, as the DaemonSet runs it but told it is another node: the
        admission policy refuses each write, and the other node's report is untouched."""
        nodes = self.gpu_nodes()
        if len(nodes) < 2:
            raise Failure("needs two GPU nodes")
        own, other = nodes[0], nodes[1]
        before = self.get_json("get", "gpunodehealth", other)["metadata"]["resourceVersion"]
        ds = self.get_json("-n", NS, "get", "daemonset", "gpu-guardian-agent")
        spec = json.loads(json.dumps(ds["spec"]["template"]["spec"]))
        spec["nodeName"] = own
        spec.pop("nodeSelector", None)
        c = spec["containers"][0]
        c["env"] = [e for e in c.get("env", []) if e["name"] != "NODE_NAME"]
        c["env"].append({"name": "NODE_NAME", "value": other})
        c.pop("livenessProbe", None)
        pod = "gg-suite-impostor-agent"
        manifest = {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": pod, "namespace": NS, "labels": {"gg-suite": "impostor"}},
                    "spec": spec}
        self.kubectl("apply", "-f", "-", input=json.dumps(manifest))
        self.cleanup_cmds.append(["kubectl", "--kubeconfig", self.kubeconfig, "-n", NS, "delete",
                                  "pod", pod, "--wait=false"])
        denied = "may only write objects of its own node"

        def refused():
            r = self.kubectl("-n", NS, "logs", pod, check=False)
            return r.returncode == 0 and denied in r.stdout and r.stdout
        log = self.wait(f"the agent pod on {own} claiming to be {other} refused", refused, 60)
        after = self.get_json("get", "gpunodehealth", other)["metadata"]["resourceVersion"]
        if after != before:
            # The real agent of `other` may have written meanwhile; the impostor's text must
            # not be there.
            status = self.get_json("get", "gpunodehealth", other).get("status", {})
            if status.get("agentVersion") and pod in json.dumps(status):
                raise Failure(f"{other}'s report was written by the impostor")
        self.kubectl("-n", NS, "delete", "pod", pod, "--wait=false")
        line = next(l for l in log.splitlines() if denied in l)
        return f"{own}'s agent refused on {other}"

    def can(self, user, verb, resource, group="", subresource="", namespace=""):
        """The API server's RBAC decision for a service account (SubjectAccessReview, as
        `kubectl auth can-i --as` asks it)."""
        ns, name = user.split(":")[2:4]
        attrs = {"verb": verb, "resource": resource, "group": group}
        if subresource:
            attrs["subresource"] = subresource
        if namespace:
            attrs["namespace"] = namespace
        sar = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
               "spec": {"user": user, "groups": ["system:serviceaccounts",
                                                 f"system:serviceaccounts:{ns}",
                                                 "system:authenticated"],
                        "resourceAttributes": attrs}}
        # --validate=false: a review is never stored; nothing to validate client-side.
        r = self.kubectl("create", "--validate=false", "-o", "json", "-f", "-", input=json.dumps(sar))
        return json.loads(r.stdout).get("status", {}).get("allowed", False)

    def rbac(self):
        agent = f"system:serviceaccount:{NS}:gpu-guardian-agent"
        op = f"system:serviceaccount:{NS}:gpu-guardian-operator"
        want = [
            (agent, "patch", "gpunodehealths", "gpuguardian.io", "status", "", True),
            (agent, "delete", "nodes", "", "", "", False),
            (agent, "update", "nodes", "", "", "", False),
            (agent, "list", "secrets", "", "", NS, False),
            (op, "create", "pods", "", "eviction", "ml", True),
            (op, "patch", "nodes", "", "", "", True),
            (op, "delete", "pods", "", "", "ml", False),
            (op, "get", "secrets", "", "", NS, False),
            (op, "update", "leases", "coordination.k8s.io", "", NS, True),
        ]
        wrong = []
        for user, verb, res, group, sub, ns, allowed in want:
            got = self.can(user, verb, res, group, sub, ns)
            if got != allowed:
                wrong.append(f"{user.split(':')[-1]} {verb} {res}{'/' + sub if sub else ''}: "
                             f"{'allowed' if got else 'denied'}")
        if wrong:
            raise Failure("RBAC decisions differ from deploy/rbac: " + "; ".join(wrong))
        return f"{len(want)} decisions as deploy/rbac grants"

    def prefers_gpu_free_node(self):
        """The cluster so far has only GPU nodes, and the operator runs there (its affinity to
        GPU-free nodes is preferred, not required). A GPU-free node joins (simulator only: on a
        real cluster the suite adds no nodes); a standby operator pod deleted is replaced there.
        """
        if not self.sim:
            return "skipped (adds a Node; simulator only)"
        node = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": "cpu-0", "labels": {"kubernetes.io/hostname": "cpu-0",
                                                         "kubernetes.io/os": "linux",
                                                         "kubernetes.io/arch": "amd64"}},
                "spec": {"podCIDR": "10.200.0.0/24"},
                "status": {"capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"},
                           "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
                           "addresses": [{"type": "InternalIP", "address": "10.0.9.1"},
                                         {"type": "Hostname", "address": "cpu-0"}],
                           # What its kubelet posts when it registers.
                           "conditions": [{"type": "Ready", "status": "True",
                                           "reason": "KubeletReady",
                                           "message": "kubelet is posting ready status"}]}}
        self.kubectl("apply", "-f", "-", input=json.dumps(node))
        self.wait("cpu-0 Ready", lambda: any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in self.get_json("get", "node", "cpu-0").get("status", {}).get("conditions", [])), 60)
        leader = self.leader_pod()
        standby = next(p["metadata"]["name"] for p in self.pods(OP_LABEL)
                       if p["metadata"]["name"] != leader and not p["metadata"].get("deletionTimestamp"))
        self.kubectl("-n", NS, "delete", "pod", standby, "--wait=false")

        def replaced_on_cpu():
            for p in self.pods(OP_LABEL):
                if p["metadata"]["name"] not in (leader, standby) and self.ready(p):
                    return p["spec"].get("nodeName")
            return None
        where = self.wait("a replacement operator pod Ready", replaced_on_cpu, 60)
        if where != "cpu-0":
            raise Failure(f"the replacement went to {where}, not the GPU-free node cpu-0")
        return "replacement scheduled on cpu-0 and Ready"

    # --- the drain: the policy's order, PDBs honoured, then recovery -----------------------
    SUITE_NS = "gg-suite"
    DRAIN_POLICY = {
        "apiVersion": "gpuguardian.io/v1alpha1", "kind": "GPUHealthPolicy",
        "metadata": {"name": "default"},
        "spec": {
            "nodeSelector": {"matchLabels": {GPU_LABEL: "true"}},
            "rules": [{"name": "fatal-xid", "xid": {"codes": [79]}, "count": 1, "window": "30s",
                       "action": "Drain"}],
            "remediation": {"taint": {"effect": "NoSchedule"},
                            "drain": {"scope": "GPUPods", "order": [{"priorityBelow": 1000}, {}],
                                      "timeout": "5m", "force": True}},
            "recovery": {"automatic": True, "healthyFor": "5s"},
            "safety": {"maxUnhealthy": "100%", "maxNodesPerHour": 100, "maxConcurrentDrains": 3}}}

    def pod(self, name, node, priority_class=None, labels=None):
        spec = {"nodeName": node, "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "work", "image": "registry.k8s.io/pause:3.10",
                                "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
        if priority_class:
            spec["priorityClassName"] = priority_class
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": self.SUITE_NS, "labels": labels or {}},
                "spec": spec}

    def apply_objs(self, objs):
        """kubectl apply of several objects as one YAML stream (not a v1 List: kubectl
        validates a List against /openapi/v2)."""
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objs))

    def suite_pods(self):
        r = self.kubectl("-n", self.SUITE_NS, "get", "pods", "-o", "json")
        return {p["metadata"]["name"]: p for p in json.loads(r.stdout)["items"]}

    def drain(self):
        """On a healthy node: two batch pods (priority 0) and three serving pods (priority
        2000) guarded by a PDB that allows no disruption. A fatal Xid drains the batch pods
        first and never a serving pod while the PDB forbids it; relaxing the PDB lets exactly
        one more go; removing it finishes the drain. Then the Xid leaves the 30 s window and
        the node is given back. (Bare pods, so the policy sets drain.force, as `kubectl drain
        --force` would be needed; evictions still go through the Eviction API and its PDBs.)"""
        node = next(n for n in self.gpu_nodes() if n != getattr(self, "target", None))
        ns = self.SUITE_NS
        objs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                 "metadata": {"name": "gg-suite-serving"}, "value": 2000},
                {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                 "metadata": {"name": "serve", "namespace": ns},
                 "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "serve"}}}}]
        self.apply_objs(objs)
        self.cleanup_cmds.append(["kubectl", "--kubeconfig", self.kubeconfig, "delete", "namespace",
                                  ns, "--wait=false"])
        pods = [self.pod(f"batch-{i}", node, labels={"app": "batch"}) for i in (1, 2)]
        pods += [self.pod(f"serve-{i}", node, "gg-suite-serving", {"app": "serve"}) for i in (1, 2, 3)]
        self.apply_objs(pods)
        self.wait("the workload pods Ready", lambda: all(self.ready(p) for p in self.suite_pods().values())
                  and len(self.suite_pods()) == 5, 60)
        self.wait("the PDB sees three healthy pods", lambda: self.get_json(
            "-n", ns, "get", "pdb", "serve").get("status", {}).get("currentHealthy") == 3, 30)
        self.kubectl("apply", "-f", "-", input=json.dumps(self.DRAIN_POLICY))
        # On a real cluster, leave the shipped default policy as it was.
        self.cleanup_cmds.insert(0, ["kubectl", "--kubeconfig", self.kubeconfig, "apply", "-f",
                                     os.path.join(self.src, "deploy/samples/default-policy.yaml")])
        time.sleep(1)  # the operator's policy cache

        gone = lambda p: p is None or bool(p["metadata"].get("deletionTimestamp"))
        t0 = time.monotonic()
        self.inject_xid(node, gpu=1)
        self.wait(f"{node} fenced", lambda: self.fenced(node), 10, 0.05)

        def batch_gone():
            ps = self.suite_pods()
            return all(gone(ps.get(f"batch-{i}")) for i in (1, 2))
        self.wait("the batch pods (below priority 1000) evicted first", batch_gone, 30)
        time.sleep(3)  # time for a wrong eviction to show
        ps = self.suite_pods()
        evicted = [n for n in ("serve-1", "serve-2", "serve-3") if gone(ps.get(n))]
        if evicted:
            raise Failure(f"serving pods evicted while the PDB allowed no disruption: {evicted}")
        blocked = [e for e in self.get_json("get", "events", "-A", "--field-selector",
                                            f"involvedObject.name={node}")["items"]
                   if e.get("reason") == "DrainBlocked"]

        self.kubectl("-n", ns, "patch", "pdb", "serve", "--type=merge", "-p",
                     json.dumps({"spec": {"minAvailable": 2}}))
        self.wait("one serving pod evicted once the PDB allows one",
                  lambda: sum(gone(self.suite_pods().get(f"serve-{i}")) for i in (1, 2, 3)) == 1, 30)
        time.sleep(3)
        n_gone = sum(gone(self.suite_pods().get(f"serve-{i}")) for i in (1, 2, 3))
        if n_gone != 1:
            raise Failure(f"{n_gone} serving pods evicted; the PDB allowed one")
        self.kubectl("-n", ns, "delete", "pdb", "serve")
        self.wait("the drain finishes without the PDB",
                  lambda: all(gone(self.suite_pods().get(f"serve-{i}")) for i in (1, 2, 3)), 30)

        def recovered():
            n = self.get_json("get", "node", node)
            return not n["spec"].get("unschedulable") and not any(
                t["key"] == TAINT for t in n["spec"].get("taints", []))
        self.wait(f"{node} given back after the Xid leaves the window", recovered, 90, 0.5)
        self.timings["drain_story"] = time.monotonic() - t0
        return (f"{node}: batch first, serving held by the PDB"
                f"{' (DrainBlocked Event)' if blocked else ''}, one per allowance, recovered")

    def run(self):
        if not self.kubeconfig:
            self.step("simulator starts", self.start_sim)
        self.step("kubectl apply -k deploy/", self.apply)
        self.step("every shipped object accepted", self.all_accepted)
        self.step("operator pods Ready, Lease names one", self.operators_ready)
        self.step("exactly one leader", self.one_leader)
        self.step("kubectl logs of the leader", self.leader_logs)
        self.step("an agent and a GPUNodeHealth per GPU node", self.agents)
        self.step("admission: an agent writes only its own node", self.admission)
        self.step("RBAC enforced as deploy/rbac grants", self.rbac)
        self.step("Xid 79 in kmsg → tainted and cordoned ≤ 10 s", self.fault_fences)
        self.step("leader pod deleted → standby leads", self.failover)
        self.step("a GPU-free node joins → the operator prefers it", self.prefers_gpu_free_node)
        self.step("drain in the policy's order, PDBs honoured, recovery", self.drain)
        print("timings: " + ", ".join(f"{k} {v:.2f} s" for k, v in self.timings.items()))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--src", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--kubeconfig", default="")
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--inject", choices=["file", "pod"], default=None,
                    help="file: append to ROOT/<node>/dev/kmsg (simulator default); "
                         "pod: a privileged pod writes /dev/kmsg (default with --kubeconfig)")
    ap.add_argument("--node-root", default=None,
                    help="with --kubeconfig and --inject file: the node root of a simulator "
                         "started by hand")
    ap.add_argument("--kmsg-image", default="busybox:1.36",
                    help="image of the privileged pod that writes /dev/kmsg (--inject pod)")
    ap.add_argument("--sim-arg", action="append", default=[],
                    help="extra simulator flag (repeatable)")
    ap.add_argument("--wait-machine", type=float, default=300,
                    help="seconds to wait while another simulator runs pods on this machine")
    ap.add_argument("--only", type=lambda s: s.split(","), default=None)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    if args.inject is None:
        args.inject = "pod" if args.kubeconfig else "file"
    if shutil.which("kubectl") is None:
        print("SKIP: kubectl not found")
        return SKIP
    s = Suite(args)
    try:
        s.run()
    except Failure:
        return 1
    finally:
        s.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
