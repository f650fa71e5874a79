#!/usr/bin/env bash
# make lint / make lint-all: the style of the whole tree, and clang-tidy's checks.
#  - clang-format 14 (.clang-format) on EVERY .h/.cc under src/ cmd/ test/ bench/ fuzz/: the
#    tree was formatted once as a whole (.git-blame-ignore-revs), so any drift fails here;
#  - clang-tidy (.clang-tidy: identifier naming + a few bug-finding checks) on the C++ source
#    files changed since BASE (default: where this branch left main, or HEAD~1 on main), with
#    build/compile_commands.json (configured when missing). LINT_TIDY_ALL=1 (make lint-all)
#    runs it on every compiled file instead: slow on 2 cores, so not in CI.
# Usage: scripts/lint.sh [BASE]      LINT_FORMAT_ONLY=1 skips clang-tidy.
set -euo pipefail
cd "$(dirname "$0")/.."
# Debian 12's clang-format 14 is the pinned formatter (scripts/bootstrap-deps.sh installs it):
# other majors format some constructs differently.
fmt=$(command -v clang-format-14 || true)
if [ -z "$fmt" ]; then
  echo "lint: clang-format-14 not found (scripts/bootstrap-deps.sh installs it)" >&2
  exit 1
fi
tidy=$(command -v clang-tidy-14 || command -v clang-tidy)

status=0
mapfile -t all < <(git ls-files -co --exclude-standard -- \
  'src/*.h' 'src/*.cc' 'cmd/*.h' 'cmd/*.cc' 'test/*.h' 'test/*.cc' \
  'bench/*.h' 'bench/*.cc' 'fuzz/*.h' 'fuzz/*.cc' | sort -u)
existing=()
for f in "${all[@]}"; do [ -f "$f" ] && existing+=("$f"); done
echo "== clang-format ($("$fmt" --version | sed 's/.*version //'), ${#existing[@]} files)"
bad=()
for f in "${existing[@]}"; do
  "$fmt" --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  printf '  not formatted: %s\n' "${bad[@]}"
  echo "!! format: run  make fmt  (or $fmt -i on the files above)"
  status=1
fi

if [ "${LINT_FORMAT_ONLY:-0}" != 1 ]; then
  if [ "${LINT_TIDY_ALL:-0}" = 1 ]; then
    changed=("${existing[@]}")
    echo "== clang-tidy (every compiled file)"
  else
    base=${1:-}
    if [ -z "$base" ]; then
      base=$(git merge-base HEAD main 2>/dev/null || git merge-base HEAD origin/main 2>/dev/null ||
             git rev-parse HEAD)
      [ "$base" = "$(git rev-parse HEAD)" ] && base=$(git rev-parse --verify -q HEAD~1 || echo HEAD)
    fi
    mapfile -t changed < <(git diff --name-only --diff-filter=ACMR "$base" -- \
      'src/*.cc' 'src/*.h' 'cmd/*.cc' 'cmd/*.h' 'test/*.cc' 'test/*.h' 'bench/*.cc' 'fuzz/*.cc' |
      sort -u)
    echo "== clang-tidy (${#changed[@]} C++ file(s) changed since $(git rev-parse --short "$base"))"
  fi
  if [ ${#changed[@]} -gt 0 ]; then
    [ -f build/compile_commands.json ] || cmake --preset dev >/dev/null
    mapfile -t sources < <(printf '%s\n' "${changed[@]}" | grep -E '\.cc$' || true)
    # Changed headers are checked through the files that include them.
    headers=$(printf '%s\n' "${changed[@]}" | grep -E '\.h$' | sed 's/[.]/\\./g' | paste -sd'|' || true)
    for f in "${sources[@]}"; do
      grep -q "\"file\": \".*/$f\"" build/compile_commands.json || continue  # not compiled
      if ! "$tidy" -p build --quiet --warnings-as-errors='*' --header-filter="${headers:-^$}" \
          "$f" 2>/dev/null; then
        echo "!! clang-tidy: $f"
        status=1
      fi
    done
  fi
fi
[ $status -eq 0 ] && echo "lint: ok"
exit $status
