#!/usr/bin/env bash
# Every C++ source file is named in some CMakeLists.txt: source lists are explicit, so a file
# added without being listed would silently not be built or tested.
set -euo pipefail
cd "$(dirname "$0")/.."
lists=$(git ls-files --cached --others --exclude-standard '*CMakeLists.txt' 2>/dev/null || find . -name CMakeLists.txt -not -path './build*')
missing=0
while IFS= read -r f; do
  base=$(basename "$f")
  if ! grep -qw -- "$base" $lists; then
    echo "not in any CMakeLists.txt: $f"
    missing=1
  fi
done < <(git ls-files --cached --others --exclude-standard 'src/*.cc' 'cmd/*.cc' 'test/*.cc' 'bench/*.cc' 'fuzz/*.cc' | grep -v '^src/sim/data/')
[ "$missing" -eq 0 ] && echo "every source file is listed"
exit "$missing"
