#!/usr/bin/env bash
# Where a live harness's CPU goes by library (kernel, CPython, uvloop, httptools, orjson, …) while it streams
# 256 paced streams (10 ms a token, one event a read) from bench/ref/sse_server.js: `perf record` on the running
# process for 4 s of its phase, `perf report --sort dso`. Needs perf (linux-perf) and node; loopback only.
#
#   bash bench/perf_split.sh
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-$here/.venv/bin/python}
work=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
taskset -c 1 node "$here/bench/ref/sse_server.js" --itl-ms 10 > "$work/port" &
server=$!
sleep 0.5
port=$("$py" -c "import json,sys; print(json.load(open(sys.argv[1]))['port'])" "$work/port")
cat > "$work/s.yaml" <<YAML
{"name": "perf", "seed": 1, "endpoint": {"scrape_interval_s": 0},
 "workload": {"prompt_tokens": 16, "output_tokens": 256},
 "phases": [{"name": "p", "load": {"type": "concurrency", "concurrency": 256, "requests": 768}}]}
YAML
taskset -c 0 "$py" -m harness run "$work/s.yaml" --endpoint "http://127.0.0.1:$port/v1" --model ref \
  --progress off --no-pin --reports-dir "$work/r" > /dev/null 2>&1 &
harness=$!
sleep 3  # start-up and the pool's warm-up are not the per-token path
perf record -q -F 2000 -p "$harness" -o "$work/perf.data" -- sleep 4 2> /dev/null
wait "$harness" || true
perf report -q -i "$work/perf.data" --sort dso --stdio 2> /dev/null | head -15
