#!/usr/bin/env bash
# make docker: builds the operator and agent images where a Docker engine is reachable.
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${TAG:-0.1.0}
if ! command -v docker >/dev/null 2>&1 || ! docker info >/dev/null 2>&1; then
  echo "make docker: no Docker engine found (the docker client alone is not enough)." >&2
  echo "Build elsewhere with: docker build -f deploy/docker/Dockerfile --target operator ." >&2
  exit 1
fi
docker build -f deploy/docker/Dockerfile --target operator -t "gpu-guardian-operator:$tag" .
docker build -f deploy/docker/Dockerfile --target agent -t "gpu-guardian-agent:$tag" .
