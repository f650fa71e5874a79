#!/usr/bin/env bash
# make lint: style and naming on what changed, so the check can be strict without reformatting
# the whole tree at once.
#  - clang-format (.clang-format) on the lines changed since BASE (git clang-format --diff);
#  - clang-tidy (.clang-tidy: identifier naming + a few bug-finding checks) on the C++ source
#    files changed since BASE, with build/compile_commands.json (configured when missing).
# Usage: scripts/lint.sh [BASE]   BASE defaults to where this branch left main (or HEAD~1).
#        LINT_FORMAT_ONLY=1 skips clang-tidy (CI: the format check costs seconds).
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-}
if [ -z "$base" ]; then
  base=$(git merge-base HEAD main 2>/dev/null || git merge-base HEAD origin/main 2>/dev/null ||
         git rev-parse --verify -q HEAD~1 || git rev-parse HEAD)
  [ "$base" = "$(git rev-parse HEAD)" ] && base=$(git rev-parse --verify -q HEAD~1 || echo HEAD)
fi
fmt=$(command -v clang-format-14 || command -v clang-format)
tidy=$(command -v clang-tidy-14 || command -v clang-tidy)

mapfile -t changed < <(git diff --name-only --diff-filter=ACMR "$base" -- \
  'src/*.cc' 'src/*.h' 'cmd/*.cc' 'cmd/*.h' 'test/*.cc' 'test/*.h' 'bench/*.cc' 'fuzz/*.cc' |
  sort -u)
echo "lint: ${#changed[@]} changed C++ file(s) since $(git rev-parse --short "$base")"
[ "${#changed[@]}" -eq 0 ] && exit 0

status=0
echo "== clang-format (changed lines)"
if ! out=$(git clang-format --binary "$fmt" --diff "$base" -- "${changed[@]}" 2>&1); then
  status=1
fi
if [ -n "$out" ] && ! grep -q -e '^no modified files to format' -e '^clang-format did not modify' <<<"$out"; then
  echo "$out"
  echo "!! format: run  git clang-format $base  (or make fmt on the files above)"
  status=1
fi

if [ "${LINT_FORMAT_ONLY:-0}" != 1 ]; then
  echo "== clang-tidy (changed files)"
  [ -f build/compile_commands.json ] || cmake --preset dev >/dev/null
  mapfile -t sources < <(printf '%s\n' "${changed[@]}" | grep -E '\.cc$' || true)
  # Changed headers are checked through the files that include them.
  headers=$(printf '%s\n' "${changed[@]}" | grep -E '\.h$' | sed 's/[.]/\\./g' | paste -sd'|' || true)
  for f in "${sources[@]}"; do
    grep -q "\"file\": \".*/$f\"" build/compile_commands.json || continue  # not compiled (yet)
    if ! "$tidy" -p build --quiet --warnings-as-errors='*' --header-filter="${headers:-^$}" \
        "$f" 2>/dev/null; then
      echo "!! clang-tidy: $f"
      status=1
    fi
  done
fi
exit $status
