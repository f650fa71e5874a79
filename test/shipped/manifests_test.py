#!/usr/bin/env python3
"""deploy/ as kustomize renders it, checked for what the shipped path needs:
the images are the ones `make docker` builds; the operator may schedule on an all-GPU cluster
(GPU-free nodes preferred, not required); the Deployment turns leader election on itself (the
binary's default is off) and leaves the Lease in the pod's own namespace.
  manifests_test.py SOURCE_DIR"""
import subprocess
import sys

import yaml

src = sys.argv[1]
docs = [d for d in yaml.safe_load_all(subprocess.run(
    ["kubectl", "kustomize", f"{src}/deploy"], capture_output=True, text=True, check=True).stdout) if d]
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def find(kind, name):
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


built = subprocess.run([f"{src}/scripts/docker-build.sh", "--print-images"], capture_output=True,
                       text=True, check=True).stdout.split()
pulled = sorted({c["image"] for d in docs if d["kind"] in ("Deployment", "DaemonSet")
                 for c in d["spec"]["template"]["spec"]["containers"]})
check(sorted(built) == pulled, f"make docker builds {sorted(built)}, the manifests pull {pulled}")

op = find("Deployment", "gpu-guardian-operator")["spec"]["template"]["spec"]
aff = op.get("affinity", {}).get("nodeAffinity", {})
required = aff.get("requiredDuringSchedulingIgnoredDuringExecution", {})
check(not any(e.get("key") == "nvidia.com/gpu.present"
              for t in required.get("nodeSelectorTerms", []) for e in t.get("matchExpressions", [])),
      "the operator does not require a GPU-free node (it would stay Pending on an all-GPU cluster)")
preferred = aff.get("preferredDuringSchedulingIgnoredDuringExecution", [])
check(any(e.get("key") == "nvidia.com/gpu.present" and e.get("operator") == "DoesNotExist"
          for p in preferred for e in p["preference"].get("matchExpressions", [])),
      "the operator prefers GPU-free nodes")
args = op["containers"][0].get("args", [])
check("--leader-elect=true" in args, "the Deployment turns leader election on (the binary's default is off)")
check(not any(a.startswith("--leader-election-namespace") for a in args),
      "the Lease namespace is the pod's own (no namespace pinned in args)")
env = {e["name"]: e for e in op["containers"][0].get("env", [])}
check(env.get("POD_NAMESPACE", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
      == "metadata.namespace", "POD_NAMESPACE comes from the pod's metadata.namespace")
sys.exit(1 if failures else 0)
