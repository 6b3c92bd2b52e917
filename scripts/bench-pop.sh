#!/usr/bin/env bash
# POP consumption against queue-based (push) consumption, same node, same run (issue #28).
# One `ringmq standalone` (2 shards); per round and per kind, `ringmq-perf e2e` on a topic of
# its own: one producer, open loop at BENCH_RATE msgs/s for BENCH_SECONDS, 1 KiB bodies,
# --verify (lost must be 0), consumers: N push consumers, or N simple consumers (--pop,
# batches of 16, 30 s invisible time, each batch acked in one request). Rounds alternate the
# kinds. Prints one markdown row per run: received msgs/s, e2e latency p50/p99 (µs), broker
# CPU per message (µs), lost, and for POP the acks and messages delivered again after an
# acknowledged ack.
#
#   scripts/bench-pop.sh
#   BENCH_RATE=20000 BENCH_ROUNDS=5 scripts/bench-pop.sh
#
# Environment: BENCH_RATE (10000), BENCH_SECONDS (10), BENCH_ROUNDS (3), BENCH_CONSUMERS (2),
# BENCH_NO_BUILD=1 (use target/release as is), BENCH_DIR (work directory, removed unless
# BENCH_KEEP=1).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench-lib.sh
. scripts/bench-lib.sh

rate=${BENCH_RATE:-10000}
seconds=${BENCH_SECONDS:-10}
rounds=${BENCH_ROUNDS:-3}
consumers=${BENCH_CONSUMERS:-2}
work=${BENCH_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/ringmq-bench-pop.XXXXXX")}
if [ "${BENCH_NO_BUILD:-0}" = 1 ]; then
  command -v jq >/dev/null || { echo "bench-pop.sh needs jq" >&2; exit 2; }
  ringmq=${BENCH_RINGMQ:-target/release/ringmq}; perf=target/release/ringmq-perf; commit=$(bench_commit)
else
  bench_setup bench-pop.sh
fi
mkdir -p "$work"
node_pid=""
cleanup() {
  [ -n "$node_pid" ] && kill -TERM "$node_pid" 2>/dev/null && wait "$node_pid" 2>/dev/null || true
  [ "${BENCH_KEEP:-0}" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT

RUST_LOG=warn "$ringmq" standalone --data "$work/data" --namesrv-port 0 --broker-port 0 \
  --shards 2 --set mappedFileSizeCommitLog=1073741824 \
  >"$work/node.out" 2>"$work/node.err" &
node_pid=$!
bench_wait_line "$work/node.out" ready "ringmq standalone"
namesrv=$(grep -o 'namesrv [0-9.:]*' "$work/node.out" | cut -d' ' -f2)

echo "commit $commit; $rate msgs/s open loop for $seconds s, 1 KiB, $consumers consumers, $rounds rounds" >&2
echo "| round | consumers | msgs/s received | e2e p50 µs | e2e p99 µs | broker CPU µs/msg | lost | POP acked | acked then delivered again |"
echo "|---|---|---|---|---|---|---|---|---|"
for round in $(seq 1 "$rounds"); do
  for kind in push pop; do
    topic="bench-pop-$kind-$round"
    args=(--topic "$topic" --queues 8 --size 1024 --rate "$rate" --duration "${seconds}s"
      --consumers "$consumers" --verify "$work/$topic.acks" --idle-exit 5s)
    [ "$kind" = pop ] && args+=(--pop --pull-batch 16 --invisible-time 30s)
    echo "[round $round $kind] running ..." >&2
    "$perf" e2e -n "$namesrv" "${args[@]}" --node-pid "$node_pid" -q \
      --json "$work/$topic.json" >"$work/$topic.out" 2>&1 \
      || { echo "e2e failed:" >&2; cat "$work/$topic.out" >&2; exit 1; }
    jq -r --arg r "$round" --arg k "$kind" \
      '"| \($r) | \($k) | \(.msgs_per_s | floor) | \(.latency_us.p50) | \(.latency_us.p99) | \(.cpu.node_us_per_msg) | \(.lost) | \(.pop.acked // "-") | \(.pop.acked_redelivered // "-") |"' \
      "$work/$topic.json"
  done
done
