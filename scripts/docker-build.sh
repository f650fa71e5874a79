#!/usr/bin/env bash
# make docker: builds the operator and agent images under the names deploy/ pulls
# (the `images:` of deploy/kustomization.yaml, e.g. ghcr.io/gpu-guardian/gpu-guardian-agent:0.1.0).
#
#  - With a Docker engine: `docker build` of deploy/docker/Dockerfile (builds from source).
#  - Without one: Debian's buildah (root, vfs storage, chroot isolation) assembles a
#    FROM-scratch image from binaries built here: the binary, the shared libraries ldd names,
#    a CA bundle and a passwd entry for the user it runs as. No shell, no package manager.
#
#   scripts/docker-build.sh [--builder auto|docker|buildah] [--bin-dir DIR]
#                           [--storage DIR] [--oci-dir DIR] [--print-images]
#   --bin-dir   binaries to package (buildah; default: a release build in build-release/)
#   --storage   buildah storage root (default: buildah's own, /var/lib/containers/storage)
#   --oci-dir   also write each image as an OCI archive DIR/<name>.tar
#   --print-images  print the image references and exit
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

builder=auto
bin_dir=""
storage=""
oci_dir=""
print_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --builder) builder=$2; shift ;;
    --bin-dir) bin_dir=$2; shift ;;
    --storage) storage=$2; shift ;;
    --oci-dir) oci_dir=$2; shift ;;
    --print-images) print_only=1 ;;
    *) echo "docker-build: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

# name:tag for one repository basename, from deploy/kustomization.yaml's images:.
image_ref() {
  python3 - "$1" <<'PY'
import sys, yaml
want = sys.argv[1]
k = yaml.safe_load(open("deploy/kustomization.yaml"))
for i in k.get("images", []):
    if i["name"].rsplit("/", 1)[-1] == want:
        print(f'{i.get("newName", i["name"])}:{i.get("newTag", "latest")}')
        sys.exit(0)
sys.exit(f"docker-build: deploy/kustomization.yaml has no images: entry for {want}")
PY
}
operator_ref=$(image_ref gpu-guardian-operator)
agent_ref=$(image_ref gpu-guardian-agent)
if [ "$print_only" = 1 ]; then
  echo "$operator_ref"
  echo "$agent_ref"
  exit 0
fi

have_docker() { command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; }
if [ "$builder" = auto ]; then
  if have_docker; then builder=docker; else builder=buildah; fi
fi

if [ "$builder" = docker ]; then
  docker build -f deploy/docker/Dockerfile --target operator -t "$operator_ref" .
  docker build -f deploy/docker/Dockerfile --target agent -t "$agent_ref" .
  echo "built $operator_ref and $agent_ref"
  exit 0
fi

# --- buildah ---------------------------------------------------------------------------
if [ "$builder" != buildah ]; then
  echo "docker-build: --builder must be auto, docker or buildah" >&2; exit 2
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "docker-build: no Docker engine, and buildah here needs root (vfs storage, chroot" >&2
  echo "isolation). Run as root, or build with Docker elsewhere:" >&2
  echo "  docker build -f deploy/docker/Dockerfile --target operator -t $operator_ref ." >&2
  exit 1
fi
if ! command -v buildah >/dev/null 2>&1; then
  ./scripts/bootstrap-deps.sh --with-images
fi
if [ -z "$bin_dir" ]; then
  [ -f build-release/build.ninja ] ||
    cmake --preset release -DGG_BENCH=OFF -DBUILD_TESTING=OFF >/dev/null
  cmake --build build-release -j "$(nproc)" --target gpu-guardian-operator gpu-guardian-agent
  bin_dir=build-release/bin
fi
for b in gpu-guardian-operator gpu-guardian-agent; do
  [ -x "$bin_dir/$b" ] || { echo "docker-build: $bin_dir/$b is missing" >&2; exit 1; }
done

bah=(buildah --storage-driver vfs)
[ -n "$storage" ] && bah+=(--root "$storage/root" --runroot "$storage/run")
export BUILDAH_ISOLATION=chroot

ca_bundle=/etc/ssl/certs/ca-certificates.crt
[ -f "$ca_bundle" ] || { echo "docker-build: no CA bundle at $ca_bundle (apt-get install ca-certificates)" >&2; exit 1; }

# build_image NAME REF USER: one FROM-scratch image holding /usr/local/bin/NAME.
build_image() {
  local name=$1 ref=$2 user=$3
  local ctr mnt lib real
  ctr=$("${bah[@]}" from scratch)
  mnt=$("${bah[@]}" mount "$ctr")
  install -d "$mnt/usr/local/bin" "$mnt/etc/ssl/certs" "$mnt/tmp"
  chmod 1777 "$mnt/tmp"
  install -m 0755 "$bin_dir/$name" "$mnt/usr/local/bin/$name"
  strip --strip-unneeded "$mnt/usr/local/bin/$name" 2>/dev/null || true
  # Every shared library the loader resolves (absolute paths, the loader itself included),
  # copied to the same path with symlinks resolved.
  while read -r lib; do
    real=$(readlink -f "$lib")
    install -D -m "$(stat -c %a "$real")" "$real" "$mnt$lib"
  done < <(ldd "$bin_dir/$name" | grep -o '/[^ ]*' | sort -u)
  cp "$ca_bundle" "$mnt/etc/ssl/certs/ca-certificates.crt"
  printf 'root:x:0:0:root:/:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/:/sbin/nologin\n' >"$mnt/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' >"$mnt/etc/group"
  "${bah[@]}" umount "$ctr" >/dev/null
  "${bah[@]}" config --entrypoint "[\"/usr/local/bin/$name\"]" --cmd '' --user "$user" \
    --workingdir / --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    --label org.opencontainers.image.source=https://github.com/gpu-guardian/gpu-guardian \
    --label org.opencontainers.image.title="$name" "$ctr"
  "${bah[@]}" commit --quiet --rm "$ctr" "$ref" >/dev/null
  if [ -n "$oci_dir" ]; then
    mkdir -p "$oci_dir"
    rm -f "$oci_dir/$name.tar"
    "${bah[@]}" push --quiet "$ref" "oci-archive:$oci_dir/$name.tar:$ref"
  fi
  echo "built $ref ($("${bah[@]}" images --format '{{.Size}}' "$ref" | head -1))"
}

# The operator runs as the unprivileged user its Deployment names; the agent as root
# (/dev/kmsg and the NVIDIA device nodes are root-owned), as its DaemonSet says.
build_image gpu-guardian-operator "$operator_ref" 65532:65532
build_image gpu-guardian-agent "$agent_ref" 0:0
