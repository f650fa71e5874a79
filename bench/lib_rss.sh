#!/usr/bin/env bash
# What merely loading a shared-library set costs in RSS, before any of our code runs.
# Explains the agent's RSS figure (scenario_agent): it builds a do-nothing program linked
# against each library set the agent could use and prints VmRSS / anonymous memory of each
# while it sleeps. Usage: bench/lib_rss.sh   (needs g++ and the -dev packages the build uses)
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/idle.cc" <<'EOF'
#include <unistd.h>
#include <string>
int main(int argc, char**) { std::string s(static_cast<std::size_t>(argc), 'x'); pause(); return static_cast<int>(s.size()); }
EOF

probe() {  # name, extra link flags...
  local name=$1; shift
  g++ -O2 "$tmp/idle.cc" -o "$tmp/$name" -Wl,--no-as-needed "$@"
  "$tmp/$name" & local pid=$!
  sleep 0.3
  local rss anon
  rss=$(awk '/^Rss:/{print $2}' "/proc/$pid/smaps_rollup")
  anon=$(awk '/^Anonymous:/{print $2}' "/proc/$pid/smaps_rollup")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  printf '%-46s %6d KiB RSS %6d KiB anonymous\n' "$name" "$rss" "$anon"
}

probe "libc + libstdc++ (dynamic)"
probe "libc, static libstdc++" -static-libstdc++ -static-libgcc
probe "+ OpenSSL 3 (libssl, libcrypto)" -lssl -lcrypto
probe "+ cpp-httplib (+ OpenSSL, zlib, brotli)" -lcpp-httplib -lssl -lcrypto
probe "+ libcurl (OpenSSL flavour, 25 more libraries)" -lcurl
probe "agent's set: curl, httplib, simdjson, yaml-cpp" -lcurl -lcpp-httplib -lsimdjson -lyaml-cpp
