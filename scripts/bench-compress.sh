#!/usr/bin/env bash
# Compressed bodies (issue #28): throughput, CPU and bytes on disk for compressible and
# incompressible payloads, each compression against none, same node. One `ringmq standalone`
# (metrics on, for the CommitLog's growth: ringmq_commitlog_max_offset_bytes summed over
# shards) and, per cell, `ringmq-perf produce --size SIZE --batch 10 --count N` closed loop
# with 4 in flight, then a consumer reading the cell's topic back (bodies inflated by the
# client; it must get every message, its rate is not shown: group start-up dominates a
# run this short). Cells: payload pattern (a repeating alphabet) and random (xorshift bytes), each
# with no compression and with --compress-over 4096 --compression zlib / lz4 / zstd.
#
#   scripts/bench-compress.sh
#   BENCH_SIZE=65536 BENCH_COUNT=5000 scripts/bench-compress.sh
#
# Environment: BENCH_SIZE (16384 bytes), BENCH_COUNT (20000 messages per cell),
# BENCH_NO_BUILD=1 (use target/release as is), BENCH_DIR (work directory, removed unless
# BENCH_KEEP=1). Prints a markdown table: msgs/s, MB/s of original bodies, broker and
# generator CPU per message (µs), CommitLog bytes per message.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench-lib.sh
. scripts/bench-lib.sh

size=${BENCH_SIZE:-16384}
count=${BENCH_COUNT:-20000}
work=${BENCH_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/ringmq-bench-compress.XXXXXX")}
command -v curl >/dev/null || { echo "bench-compress.sh needs curl" >&2; exit 2; }
if [ "${BENCH_NO_BUILD:-0}" = 1 ]; then
  command -v jq >/dev/null || { echo "bench-compress.sh needs jq" >&2; exit 2; }
  ringmq=${BENCH_RINGMQ:-target/release/ringmq}; perf=target/release/ringmq-perf; commit=$(bench_commit)
else
  bench_setup bench-compress.sh
fi
mkdir -p "$work"
node_pid=""
cleanup() {
  [ -n "$node_pid" ] && kill -TERM "$node_pid" 2>/dev/null && wait "$node_pid" 2>/dev/null || true
  [ "${BENCH_KEEP:-0}" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT

RUST_LOG=warn "$ringmq" standalone --data "$work/data" --namesrv-port 0 --broker-port 0 \
  --set metricsExporterType=PROM --set metricsPromExporterHost=127.0.0.1 \
  --set metricsPromExporterPort=0 --set mappedFileSizeCommitLog=1073741824 \
  >"$work/node.out" 2>"$work/node.err" &
node_pid=$!
bench_wait_line "$work/node.out" ready "ringmq standalone"
namesrv=$(grep -o 'namesrv [0-9.:]*' "$work/node.out" | cut -d' ' -f2)
url=$(grep -o 'http://[0-9.:]*/metrics' "$work/node.out" | head -n 1)
log_bytes() {
  curl -s "$url" | awk '/^ringmq_commitlog_max_offset_bytes\{/ { s += $NF } END { printf "%d", s }'
}

echo "commit $commit; $size-byte bodies, $count per cell, batch 10, 4 in flight" >&2
echo "| payload | compression | msgs/s | MB/s (original bodies) | broker CPU µs/msg | generator CPU µs/msg | CommitLog bytes/msg |"
echo "|---|---|---|---|---|---|---|"
for payload in pattern random; do
  for comp in none zlib lz4 zstd; do
    topic="compress-$payload-$comp"
    args=(--size "$size" --batch 10 --inflight 4 --count "$count" --payload "$payload")
    [ "$comp" != none ] && args+=(--compress-over 4096 --compression "$comp")
    before=$(log_bytes)
    echo "[$payload $comp] producing ..." >&2
    "$perf" produce -n "$namesrv" --topic "$topic" "${args[@]}" --node-pid "$node_pid" -q \
      --json "$work/$topic.json" >"$work/$topic.out" 2>&1 \
      || { echo "produce failed:" >&2; cat "$work/$topic.out" >&2; exit 1; }
    sleep 1.5
    after=$(log_bytes)
    echo "[$payload $comp] consuming ..." >&2
    "$perf" consume -n "$namesrv" --topic "$topic" --from first --idle-exit 2s -q \
      --json "$work/$topic-c.json" >"$work/$topic-c.out" 2>&1 \
      || { echo "consume failed:" >&2; cat "$work/$topic-c.out" >&2; exit 1; }
    got=$(jq .messages "$work/$topic-c.json")
    [ "$got" -ge "$count" ] || { echo "consumed $got of $count" >&2; exit 1; }
    jq -r --arg p "$payload" --arg c "$comp" --argjson b "$((after - before))" \
      '"| \($p) | \($c) | \(.msgs_per_s | floor) | \(.msgs_per_s * '"$size"' / 1e6 * 10 | round / 10) | \(.cpu.node_us_per_msg) | \(.cpu.generator_us_per_msg) | \($b / .messages | floor) |"' \
      "$work/$topic.json"
  done
done
