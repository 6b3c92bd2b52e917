#!/usr/bin/env bash
# Two builds of the node, same run: a closed-loop producer cell against `ringmq standalone`
# binary A and binary B, interleaved (A B, B A, A B, ...), a fresh node and data directory
# per round and arm. The node is pinned to CPU 0 and `ringmq-perf produce` to CPU 1 (as in
# scripts/bench-iggy.sh), 1 KiB messages, one batch in flight per producer.
#
#   scripts/ab-closed-loop.sh BIN_A BIN_B [ROUNDS] [SECONDS] [BATCH] [PRODUCERS]
#   scripts/ab-closed-loop.sh /tmp/ringmq-before target/release/ringmq 4 10 100 1
#
# Defaults: 4 rounds of 10 s, batch 100, 1 producer. Keep a copy of the base build first
# (`cp target/release/ringmq /tmp/ringmq-before`). Per round and arm it prints msgs/s, the
# send latency percentiles (µs) and the node's CPU per message (µs, utime+stime from /proc);
# then each arm's medians. Environment: PERF (target/release/ringmq-perf), NODE_ARGS (extra
# arguments for both nodes, e.g. "--set messageIndexEnable=false"). Needs 2 cores, uses
# ports 19876 and 19911, and writes under /tmp.
set -euo pipefail

if [[ $# -lt 2 || "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
  sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
A=$1
B=$2
ROUNDS=${3:-4}
SECS=${4:-10}
BATCH=${5:-100}
PRODUCERS=${6:-1}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PERF=${PERF:-$ROOT/target/release/ringmq-perf}
for bin in "$A" "$B" "$PERF"; do
  [[ -x "$bin" ]] || { echo "not an executable: $bin" >&2; exit 2; }
done
results=$(mktemp /tmp/ab-closed-loop.XXXX.tsv)
trap 'rm -f "$results"' EXIT

run_arm() { # label binary round
  local label=$1 bin=$2 round=$3 d np
  d=$(mktemp -d /tmp/ab-closed-loop.XXXX)
  # shellcheck disable=SC2086
  RUST_LOG=warn taskset -c 0 "$bin" standalone --shards 1 --data "$d/data" \
    --namesrv-port 19876 --broker-port 19911 ${NODE_ARGS:-} > "$d/node.log" 2>&1 &
  np=$!
  for _ in $(seq 1 100); do grep -q ready "$d/node.log" && break; sleep 0.1; done
  taskset -c 1 "$PERF" produce -n 127.0.0.1:19876 --threads 1 --inflight 1 --batch "$BATCH" \
    --size 1024 --producers "$PRODUCERS" --queues "$PRODUCERS" --topic AB \
    --duration "${SECS}s" -q --node-pid "$np" > "$d/out.txt" 2>&1 || true
  kill "$np" 2>/dev/null || true
  wait "$np" 2>/dev/null || true
  local mps lat cpu
  mps=$(awk '/^send /{gsub(",","",$6); print $6; exit}' "$d/out.txt")
  lat=$(awk '/^send /{n++} /^send /&&n==2{gsub(",",""); print $2, $4, $5, $7}' "$d/out.txt")
  cpu=$(grep -o 'node [0-9.]* µs' "$d/out.txt" | awk '{print $2}')
  if [[ -z "$mps" || -z "$lat" ]]; then
    echo "round $round $label: no result (see $d)" >&2
    return
  fi
  printf 'round %s  %-2s %9s msgs/s  p50/p99/p99.9/max %s µs  node %s µs/msg\n' \
    "$round" "$label" "$mps" "$(echo "$lat" | tr ' ' /)" "$cpu"
  printf '%s\t%s\t%s\t%s\n' "$label" "$mps" "$lat" "$cpu" | tr ' ' '\t' >> "$results"
  rm -rf "$d"
}

echo "A = $A"
echo "B = $B"
echo "$ROUNDS rounds of ${SECS} s, batch $BATCH, $PRODUCERS producer(s), node on CPU 0, generator on CPU 1"
for r in $(seq 1 "$ROUNDS"); do
  if (( r % 2 == 1 )); then
    run_arm A "$A" "$r"; run_arm B "$B" "$r"
  else
    run_arm B "$B" "$r"; run_arm A "$A" "$r"
  fi
done
median() { sort -n | awk '{v[NR]=$1} END {if (NR==0) print "-"; else if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
for arm in A B; do
  line="medians $arm:"
  for col in 2:msgs/s 3:p50 4:p99 5:p99.9 6:max 7:node_µs/msg; do
    i=${col%%:*}
    v=$(awk -F'\t' -v a="$arm" -v c="$i" '$1==a {print $c}' "$results" | median)
    line="$line ${col#*:} $v"
  done
  echo "$line"
done
