#!/usr/bin/env bash
# `make docker` without a Docker engine: the buildah path builds the images deploy/ pulls, and
# each image holds what its binary needs to run — checked from the image itself: its
# entrypoint and user, the binary running with nothing but the image's own files as its root
# (chroot), a CA bundle, no shell. Skips (77) where buildah or root is missing.
#   images_test.sh SOURCE_DIR BIN_DIR
set -euo pipefail
src=$1
bin=$2
if [ "$(id -u)" -ne 0 ] || ! command -v buildah >/dev/null 2>&1; then
  echo "SKIP: needs root and buildah (scripts/bootstrap-deps.sh --with-images)"
  exit 77
fi
work=$(mktemp -d /tmp/gg-images-test.XXXXXX)
bah=(buildah --storage-driver vfs --root "$work/storage/root" --runroot "$work/storage/run")
ctrs=()
cleanup() {
  for c in "${ctrs[@]}"; do "${bah[@]}" rm "$c" >/dev/null 2>&1 || true; done
  "${bah[@]}" rmi --all --force >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
fail=0
check() {  # check DESCRIPTION COMMAND...
  if "${@:2}"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi
}

"$src/scripts/docker-build.sh" --builder buildah --bin-dir "$bin" --storage "$work/storage" \
  --oci-dir "$work/oci"

# The references built are the ones the rendered manifests pull.
rendered=$(kubectl kustomize "$src/deploy" | grep -o 'image: .*' | sed 's/image: //' | sort -u)
mapfile -t refs < <("$src/scripts/docker-build.sh" --print-images)
for ref in "${refs[@]}"; do
  check "deploy/ pulls $ref" grep -qx "$ref" <<<"$rendered"
done

# The user each manifest runs as (securityContext.runAsUser), by image.
declare -A want_user=([gpu-guardian-operator]=65532:65532 [gpu-guardian-agent]=0:0)
for ref in "${refs[@]}"; do
  name=$(basename "${ref%%:*}")
  cfg=$("${bah[@]}" inspect --type image "$ref" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["OCIv1"]["config"]))')
  entry=$(python3 -c 'import json,sys; print(json.dumps(json.loads(sys.argv[1]).get("Entrypoint")))' "$cfg")
  user=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get("User",""))' "$cfg")
  check "$name entrypoint is /usr/local/bin/$name (got $entry)" \
    test "$entry" = "[\"/usr/local/bin/$name\"]"
  check "$name runs as ${want_user[$name]} (got $user)" test "$user" = "${want_user[$name]}"
  check "$name OCI archive written" test -s "$work/oci/$name.tar"

  ctr=$("${bah[@]}" from "$ref")
  ctrs+=("$ctr")
  mnt=$("${bah[@]}" mount "$ctr")
  check "$name: binary in the image" test -x "$mnt/usr/local/bin/$name"
  check "$name: CA bundle in the image" test -s "$mnt/etc/ssl/certs/ca-certificates.crt"
  check "$name: no shell in the image" test ! -e "$mnt/bin/sh"
  check "$name: passwd names the user" grep -q "^[a-z]*:x:${want_user[$name]%%:*}:" "$mnt/etc/passwd"
  # Every library the binary needs resolves inside the image: it runs with the image as root.
  check "$name --help runs from the image alone, as ${want_user[$name]}" \
    chroot --userspec="${want_user[$name]}" "$mnt" "/usr/local/bin/$name" --help >/dev/null
  size=$(du -sm "$mnt" | cut -f1)
  echo "     $name: ${size} MB unpacked, $(du -m "$work/oci/$name.tar" | cut -f1) MB OCI archive"
  "${bah[@]}" umount "$ctr" >/dev/null
done
exit $fail
