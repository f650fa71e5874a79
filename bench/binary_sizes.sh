#!/usr/bin/env bash
# Stripped size of each binary in BUILD/bin next to the original gpu-guardian-operator design's 5.62 MB static Go binary, and
# the shared libraries each one loads (a static Go binary carries its whole runtime; ours are
# dynamically linked against Debian's libcurl, OpenSSL, libstdc++ ... so both are shown).
# Usage: bench/binary_sizes.sh [BUILD_DIR] [OUT.json]   (BUILD_DIR from the release preset:
#   CMAKE_CXX_COMPILER_LAUNCHER=ccache cmake --preset release && cmake --build build-release)
set -euo pipefail
build=${1:-build-release}
out=${2:-}
original_bytes=5620000  # the original gpu-guardian-operator's published figure: 5.62 MB, static, `go build -ldflags="-s -w"`
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '# binary sizes: %s (%s), %s\n' "$build" \
  "$(grep -m1 CMAKE_BUILD_TYPE: "$build/CMakeCache.txt" 2>/dev/null | cut -d= -f2)" "$(date -u +%FT%TZ)"
printf '%-24s %12s %10s %8s %14s %s\n' binary stripped_bytes MB vs_original shared_libs_MB libs
json="["
for bin in "$build"/bin/*; do
  [ -x "$bin" ] && [ -f "$bin" ] || continue
  name=$(basename "$bin")
  cp "$bin" "$tmp/$name"
  strip --strip-all "$tmp/$name"
  size=$(stat -c %s "$tmp/$name")
  libs=$(ldd "$bin" | awk '/=> \//{print $3}' | sort -u)
  libs_bytes=0
  for l in $libs; do libs_bytes=$((libs_bytes + $(stat -L -c %s "$l"))); done
  nlibs=$(echo "$libs" | grep -c . || true)
  ratio=$(awk -v a="$size" -v b="$original_bytes" 'BEGIN{printf "%.2f", a/b}')
  printf '%-24s %12d %10.2f %7sx %14.2f %d\n' "$name" "$size" "$(awk -v a="$size" 'BEGIN{print a/1e6}')" \
    "$ratio" "$(awk -v a="$libs_bytes" 'BEGIN{print a/1e6}')" "$nlibs"
  [ "$json" = "[" ] || json+=","
  json+="{\"binary\":\"$name\",\"stripped_bytes\":$size,\"vs_original\":$ratio,\"shared_libs_bytes\":$libs_bytes,\"shared_libs\":$nlibs}"
done
json+="]"
echo "original gpu-guardian-operator: 5.62 MB static Go binary (goal: each binary smaller)"
if [ -n "$out" ]; then
  printf '{"scenario":"binary_sizes","build":"%s","original_bytes":%d,"binaries":%s}\n' "$build" "$original_bytes" "$json" >"$out"
fi
