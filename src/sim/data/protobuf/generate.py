#!/usr/bin/env python3
"""Builds messages.json, the protobuf field table the simulator decodes request bodies with.

Reads the upstream `generated.proto` files (field numbers, types) and `types.go` files (the Go
JSON tags: which fields are `omitempty` and which are pointers) of kubernetes/api and
kubernetes/apimachinery checkouts. Usage:
  generate.py API_REPO APIMACHINERY_REPO > messages.json
Each message becomes {"fields": {"<number>": [jsonName, type, label, omitZero]}} where type is
a scalar name, a fully qualified message name or "map<K,V>", label "opt" or "rep", and
omitZero says a zero scalar is dropped (a non-pointer `omitempty` Go field: the Go JSON
encoder would not write it, while the protobuf encoder always does).
"""
import json
import os
import re
import sys

API_GROUPS = [
    "core/v1", "apps/v1", "batch/v1", "policy/v1", "rbac/v1", "scheduling/v1",
    "coordination/v1", "events/v1", "authorization/v1", "authentication/v1",
    "resource/v1", "resource/v1beta1", "resource/v1beta2", "resource/v1alpha3",
    "admissionregistration/v1", "networking/v1", "discovery/v1", "storage/v1",
]
MACHINERY = ["pkg/apis/meta/v1", "pkg/runtime", "pkg/runtime/schema", "pkg/util/intstr",
             "pkg/api/resource"]

MSG_RE = re.compile(r"^message (\w+) \{")
FIELD_RE = re.compile(
    r"^\s*(optional|repeated)?\s*(map<\s*[\w.]+\s*,\s*[\w.]+\s*>|[\w.]+)\s+(\w+)\s*=\s*(\d+)")
GO_FIELD_RE = re.compile(r"^\s*(\w+)\s+(\S+)\s+`[^`]*json:\"([^\"]*)\"")
STRUCT_RE = re.compile(r"^type (\w+) struct \{")


def parse_proto(text):
    pkg = re.search(r"^package ([\w.]+);", text, re.M).group(1)
    msgs = {}
    cur = None
    depth = 0
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("//"):
            continue
        if cur is None:
            m = MSG_RE.match(s)
            if m:
                cur = m.group(1)
                msgs[cur] = []
                depth = 1
            continue
        depth += s.count("{") - s.count("}")
        if depth <= 0:
            cur = None
            continue
        m = FIELD_RE.match(s)
        if m:
            label, typ, name, num = m.groups()
            typ = typ.replace(" ", "")
            msgs[cur].append((int(num), name, typ, "rep" if label == "repeated" else "opt"))
    return pkg, msgs


def parse_go(text):
    """struct -> {jsonName: (omitempty, pointer)}"""
    out = {}
    cur = None
    for line in text.splitlines():
        m = STRUCT_RE.match(line)
        if m:
            cur = m.group(1)
            out[cur] = {}
            continue
        if cur and line.startswith("}"):
            cur = None
            continue
        if not cur:
            continue
        m = GO_FIELD_RE.match(line)
        if m:
            _, gotype, tag = m.groups()
            parts = tag.split(",")
            out[cur][parts[0]] = ("omitempty" in parts[1:], gotype.startswith("*"))
    return out


def qualify(pkg, typ):
    scalars = {"string", "int32", "int64", "bool", "bytes", "double", "float", "uint32",
               "uint64", "sint32", "sint64", "fixed32", "fixed64"}
    if typ.startswith("map<"):
        k, v = typ[4:-1].split(",")
        return "map<%s,%s>" % (qualify(pkg, k), qualify(pkg, v))
    if typ in scalars:
        return typ
    if typ.startswith("."):
        return typ[1:]
    if "." in typ:
        return typ
    return pkg + "." + typ


def load(repo_dir, rel):
    out = []
    d = os.path.join(repo_dir, rel)
    with open(os.path.join(d, "generated.proto")) as f:
        pkg, msgs = parse_proto(f.read())
    go = {}
    for name in sorted(os.listdir(d)):
        if name.startswith("types") and name.endswith(".go") and not name.endswith("_test.go"):
            with open(os.path.join(d, name)) as f:
                go.update(parse_go(f.read()))
    for msg, fields in msgs.items():
        tags = go.get(msg, {})
        entry = {}
        for num, name, typ, label in fields:
            omit, pointer = tags.get(name, (True, False))
            entry[str(num)] = [name, qualify(pkg, typ), label, bool(omit and not pointer)]
        out.append((pkg + "." + msg, {"fields": entry}))
    return out


def main():
    api, machinery = sys.argv[1], sys.argv[2]
    result = {}
    for rel in API_GROUPS:
        for k, v in load(api, rel):
            result[k] = v
    for rel in MACHINERY:
        for k, v in load(machinery, rel):
            result[k] = v
    json.dump(result, sys.stdout, sort_keys=True, separators=(",", ":"))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
