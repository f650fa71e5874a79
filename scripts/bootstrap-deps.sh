#!/usr/bin/env bash
# Installs the Debian 12 packages gpu-guardian needs to build, test and benchmark.
# Idempotent: only missing packages are installed, and it prints what it installed.
#   scripts/bootstrap-deps.sh                 build and test
#   scripts/bootstrap-deps.sh --with-images   also buildah (`make docker` without a Docker engine)
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config g++ clang
  clang-format-14 clang-tidy-14  # the pinned formatter (make lint, make fmt): Debian 12's 14
  libcurl4-openssl-dev libssl-dev
  libsimdjson-dev nlohmann-json3-dev libyaml-cpp-dev libcpp-httplib-dev libcli11-dev
  libfmt-dev libspdlog-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-kubernetes python3-yaml
  openssl procps
  iproute2 util-linux  # gpu-guardian-sim --exec-images: pod veths (ip) and namespaces (nsenter)
  heaptrack  # per-structure memory of the operator (docs/benchmarks.md)
)
# kubectl: Debian bookworm ships 1.20 as kubernetes-client; `make demo` and the kubectl tests
# need one. Installed only when no kubectl is on PATH, so a kubectl the user has (a newer
# one, or one from another source) is never replaced. 1.20 validates manifests with
# /openapi/v2, which the simulator serves.
if ! command -v kubectl >/dev/null 2>&1; then
  PKGS+=(kubernetes-client)
fi
if [ "${1:-}" = "--with-images" ]; then
  PKGS+=(buildah ca-certificates binutils)
fi

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "bootstrap-deps: all ${#PKGS[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "bootstrap-deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1
  fi
fi
echo "bootstrap-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "bootstrap-deps: installed ${missing[*]}"
