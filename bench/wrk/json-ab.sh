#!/usr/bin/env bash
# POST /json under wrk, this build against another one, server CPU per request.
#   bench/wrk/json-ab.sh <before-dir> [redis-url]
# Each build's `sluice serve` (its own dist/) runs pinned to core 1 with a generous envoy
# rule (domain bench, key tenant, 1e9/s); wrk runs on core 0, 3 s warm-up then 10 s, at
# c=1 and c=64, two rounds alternating the builds. Prints requests, requests/s and the
# server's CPU µs per request (utime+stime from /proc). Needs wrk (Debian package wrk).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
this=$(cd "$here/../.." && pwd)
before=$(cd "${1:?usage: json-ab.sh <before-dir> [redis-url]}" && pwd)
redis=${2:-}
command -v wrk >/dev/null || { echo "wrk not found: apt-get install wrk" >&2; exit 2; }
cfg=$(mktemp -d)
trap 'rm -rf "$cfg"' EXIT
printf 'domain: bench\ndescriptors:\n  - key: tenant\n    rate_limit:\n      unit: second\n      requests_per_unit: 1000000000\n' > "$cfg/config.yaml"
tck=$(getconf CLK_TCK)
one() { # dir port conns
  local dir=$1 port=$2 c=$3 pid t0 t1 out reqs
  (cd "$dir" && PORT=$port GRPC_PORT=$((port + 1)) HOST=127.0.0.1 GRPC_HOST=127.0.0.1 LOG_LEVEL=error \
    exec taskset -c 1 node dist/cli/main.js serve --config "$cfg" ${redis:+--redis "$redis"}) > /dev/null 2>&1 &
  pid=$!
  for _ in $(seq 1 100); do curl -sf -o /dev/null "http://127.0.0.1:$port/healthcheck" && break; sleep 0.2; done
  taskset -c 0 wrk -t1 -c"$c" -d3s -s "$here/json-post.lua" "http://127.0.0.1:$port" > /dev/null
  t0=$(awk '{print $14+$15}' "/proc/$pid/stat")
  out=$(taskset -c 0 wrk -t1 -c"$c" -d10s -s "$here/json-post.lua" "http://127.0.0.1:$port")
  t1=$(awk '{print $14+$15}' "/proc/$pid/stat")
  kill "$pid"; wait "$pid" 2> /dev/null || true
  reqs=$(echo "$out" | grep -oE '^ *[0-9]+ requests' | grep -oE '[0-9]+')
  echo "$3 $(basename "$dir") requests=$reqs rps=$((reqs / 10)) server_cpu_us_per_request=$(((t1 - t0) * 1000000 / tck / reqs)) $(echo "$out" | grep -i 'non-2xx' || true)"
}
for round in 1 2; do
  for c in 1 64; do
    one "$this" 18080 "$c"
    one "$before" 18090 "$c"
  done
done
