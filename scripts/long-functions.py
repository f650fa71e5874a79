#!/usr/bin/env python3
"""Lists non-test functions longer than N lines (default 80), longest first.

Heuristic for this tree's clang-format (Google) style: a definition starts at column 0 (a
signature with '(' whose statement ends in '{') and ends at the next line that is exactly '}'.
Tests, benchmarks, fuzzers and test-only headers are skipped.
Usage: scripts/long-functions.py [--max N] [--exclude-dir src/sim] [PATHS...]
"""
import argparse
import os
import re
import sys

SKIP = re.compile(r'(_test|_bench|_fuzz)\.cc$|(^|/)(fakes|fake|test_[a-z_]+)\.h$|/test/|^test/|/bench/|^bench/|/fuzz/|^fuzz/')
NOT_FN = re.compile(r'^(#|//|namespace|}|class |struct |enum |union |using |typedef |template\s*<[^>]*>\s*$|static_assert|extern "C"|return |if |for |while |switch )')


def functions(path):
    with open(path, encoding='utf-8', errors='replace') as f:
        lines = f.read().split('\n')
    i = 0
    while i < len(lines):
        line = lines[i]
        # Column 0, or a member defined inside a class body (indented 2, outside any function).
        indent = '  ' if line.startswith('  ') and not line.startswith('   ') else ''
        body = line[len(indent):]
        # A deeper-indented line is inside something else (e.g. a constructor's initializer
        # list), never the start of a definition.
        if body and not body[0].isspace() and not NOT_FN.match(body) and '(' in body:
            # gather the signature until '{' or ';'
            j = i
            sig = line
            while '{' not in sig and ';' not in sig and j < i + 30 and j + 1 < len(lines):
                j += 1
                sig += ' ' + lines[j].strip()
            if sig.rstrip().endswith('{') and '=' not in sig.split('(')[0]:
                k = j + 1
                while k < len(lines) and lines[k] != indent + '}' and not lines[k].startswith(indent + '}  //'):
                    k += 1
                name = re.sub(r'\s+', ' ', sig.split('(')[0]).split(' ')[-1]
                yield name, i + 1, k - i + 1
                i = k
        i += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--max', type=int, default=80)
    ap.add_argument('--exclude-dir', action='append', default=[])
    ap.add_argument('paths', nargs='*', default=['src', 'cmd'])
    a = ap.parse_args()
    found = []
    for root in a.paths:
        for d, _, files in os.walk(root):
            if any(d == x or d.startswith(x.rstrip('/') + '/') for x in a.exclude_dir):
                continue
            for fn in files:
                p = os.path.join(d, fn)
                if not fn.endswith(('.cc', '.h')) or SKIP.search(p):
                    continue
                for name, line, n in functions(p):
                    if n > a.max:
                        found.append((n, p, line, name))
    for n, p, line, name in sorted(found, reverse=True):
        print(f'{n:5d}  {p}:{line}  {name}')
    print(f'{len(found)} function(s) over {a.max} lines', file=sys.stderr)


if __name__ == '__main__':
    main()
