#!/usr/bin/env bash
# RocketMQ (remoting) and native clients against `ringmq standalone --shards 1` and
# `--shards 2`, same run (issue #40 item 1): each round starts a fresh node of each shard
# count (which goes first alternates) and runs the same ringmq-perf cells on it, each
# protocol's closed-loop and fixed-rate sends; 1 KiB records, ASYNC_FLUSH, release build.
# Broker CPU per message from /proc/<pid>/stat (utime + stime of the node over the cell).
# The table goes to stdout and, with BENCH_DOC, into that file between the bench-shards.sh
# markers.
#
#   scripts/bench-shards.sh                     # 3 rounds, ~4 minutes
# A closed-loop cell writes up to ~5 GB at 8 s; the node refuses writes when the disk is
# fuller than diskSpaceWarningLevelRatio (BENCH_DISK_RATIO, 90 %), and a cell with any
# refused send stops the run.
#   BENCH_ROUNDS=5 BENCH_DOC=docs/perf.md scripts/bench-shards.sh
#
# Cells, on each node (before each, the broker is left to go idle):
#   closed loop  BENCH_BATCH (32) records per send, 2 producers x 8 in flight, as fast as it
#                goes: remoting (JSON headers), native
#   @ rate       the same at BENCH_SEND_RATE (100000) msgs/s, open loop, so every node and
#                protocol carries the same load: remoting, native
#
# Environment: BENCH_ROUNDS (3), BENCH_SECONDS (8), BENCH_BATCH (32), BENCH_SEND_RATE
# (100000), BENCH_DOC ("-" = stdout only), BENCH_DIR (work directory, removed at the end
# unless BENCH_KEEP=1), BENCH_NO_BUILD=1 (use target/release as it is), BENCH_RINGMQ (the
# server binary), BENCH_COMMIT (the commit to name, when the binaries were built elsewhere).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench-lib.sh
. scripts/bench-lib.sh

rounds=${BENCH_ROUNDS:-3}
secs=${BENCH_SECONDS:-8}
batch=${BENCH_BATCH:-32}
send_rate=${BENCH_SEND_RATE:-100000}
doc=${BENCH_DOC:--}
disk_ratio=${BENCH_DISK_RATIO:-90}
work=${BENCH_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/ringmq-bench-shards.XXXXXX")}

if [ "${BENCH_NO_BUILD:-0}" = 1 ]; then
  command -v jq >/dev/null || { echo "bench-shards.sh needs jq" >&2; exit 2; }
  ringmq=${BENCH_RINGMQ:-target/release/ringmq}
  perf=target/release/ringmq-perf
  commit=$(bench_commit)
else
  bench_setup bench-shards.sh
fi
commit=${BENCH_COMMIT:-$commit}
mkdir -p "$work"

node_pid=""
cleanup() {
  [ -n "$node_pid" ] && kill -TERM "$node_pid" 2>/dev/null && wait "$node_pid" 2>/dev/null || true
  rm -rf "$work"/data.*
  [ "${BENCH_KEEP:-0}" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT

cells=(max-remoting max-native rate-remoting rate-native)
declare -A label=(
  [max-remoting]="send batched $batch, closed loop, remoting"
  [max-native]="send batched $batch, closed loop, native"
  [rate-remoting]="send batched $batch @ $send_rate/s, remoting"
  [rate-native]="send batched $batch @ $send_rate/s, native"
)
declare -A native_of=([max-remoting]=max-native [rate-remoting]=rate-native)

run_cell() { # round shards cell protocol topic [more args]
  local round=$1 shards=$2 cell=$3 protocol=$4 topic=$5; shift 5
  local json="$work/r$round-s$shards-$cell.json"
  bench_settle "$node_pid"
  printf '[round %d/%d, %d shard(s)] %-40s ' "$round" "$rounds" "$shards" "${label[$cell]}" >&2
  "$perf" produce -n "$namesrv" --node-pid "$node_pid" -q --json "$json" --protocol "$protocol" \
    --topic "$topic" --batch "$batch" --producers 2 --inflight 8 --duration "${secs}s" "$@" \
    >"$json.out" 2>&1 || { echo "failed:" >&2; cat "$json.out" >&2; exit 1; }
  [ "$(jq .messages "$json")" -gt 0 ] || { echo "no message:" >&2; cat "$json.out" >&2; exit 1; }
  # A refused send (e.g. the disk over diskSpaceWarningLevelRatio: each closed-loop cell
  # writes GBs) makes the cell's figures meaningless.
  [ "$(jq .errors "$json")" = 0 ] || { echo "errors:" >&2; grep -m3 -i error "$json.out" >&2; exit 1; }
  jq -r '"\(.msgs_per_s | floor) msgs/s, p99 \(.latency_us.p99) µs, errors \(.errors), broker \(.cpu.node_us_per_msg) µs/msg"' "$json" >&2
}

echo "work directory: $work; $rounds rounds, $secs s per cell; load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
memory_before=$(scripts/bench-memory.sh status)
for round in $(seq 1 "$rounds"); do
  if [ $((round % 2)) = 1 ]; then order=(1 2); else order=(2 1); fi
  for shards in "${order[@]}"; do
    data=$(mktemp -d "$work/data.XXXXXX")
    # Each node its own output file: the ready line of the node before must not be read.
    out="$work/node-r$round-s$shards.out"
    RUST_LOG=warn "$ringmq" standalone --data "$data" --namesrv-port 0 --broker-port 0 \
      --flush async --shards "$shards" --set "diskSpaceWarningLevelRatio=$disk_ratio" \
      >"$out" 2>"${out%.out}.err" &
    node_pid=$!
    bench_wait_line "$out" ready "ringmq standalone"
    namesrv=$(grep -o 'namesrv [0-9.:]*' "$out" | cut -d' ' -f2)
    "$perf" produce -n "$namesrv" --protocol remoting --topic warmup --count 16 --inflight 1 -q \
      >"$work/warmup.out" 2>&1 || { echo "warm-up failed:" >&2; cat "$work/warmup.out" >&2; exit 1; }
    if [ $((round % 2)) = 1 ]; then
      run_cell "$round" "$shards" max-remoting remoting bs-max-remoting
      run_cell "$round" "$shards" max-native native bs-max-native
      run_cell "$round" "$shards" rate-remoting remoting bs-rate-remoting --rate "$send_rate"
      run_cell "$round" "$shards" rate-native native bs-rate-native --rate "$send_rate"
    else
      run_cell "$round" "$shards" max-native native bs-max-native
      run_cell "$round" "$shards" max-remoting remoting bs-max-remoting
      run_cell "$round" "$shards" rate-native native bs-rate-native --rate "$send_rate"
      run_cell "$round" "$shards" rate-remoting remoting bs-rate-remoting --rate "$send_rate"
    fi
    kill -TERM "$node_pid"; wait "$node_pid" 2>/dev/null || true; node_pid=""
    rm -rf "$data"
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# The median over the rounds of a per-round ratio of two files' JQ values.
ratio() { # glob-a-of-round glob-b-of-round jq
  for r in $(seq 1 "$rounds"); do
    jq -n --slurpfile a "${1//@/$r}" --slurpfile b "${2//@/$r}" "\$a[0] | $3 as \$x | \$b[0] | $3 as \$y | \$x / \$y"
  done | sort -g | awk '{ v[NR] = $1 } END { printf "%.2f", v[int((NR + 1) / 2)] }'
}
cpu='.cpu.node_us_per_msg'
table=$(
  echo "<!-- bench-shards.sh:begin (generated by scripts/bench-shards.sh; edits here are overwritten) -->"
  echo "Commit \`$commit\`, $(date -u +%Y-%m-%d), $(nproc) cores, \`ringmq standalone --flush async"
  echo "--shards 1|2\` (release), load generator \`ringmq-perf\` on the same cores; load average"
  echo "$load_before before, $load_after after. 1 KiB records, $secs s per cell, medians of $rounds"
  echo "rounds (a fresh node of each shard count per round, which goes first alternating). Broker"
  echo "CPU: \`/proc/<pid>/stat\` utime + stime of the node over the cell, per message."
  echo
  echo "Memory at the start: $memory_before (scripts/bench-memory.sh)."
  echo
  echo "| cell | shards | msgs/s | p99 µs | errors | broker CPU µs/msg | remoting / native CPU |"
  echo "|---|---|---|---|---|---|---|"
  for cell in "${cells[@]}"; do
    for s in 1 2; do
      g="$work/r*-s$s-$cell.json"
      rat=""
      [ -n "${native_of[$cell]:-}" ] && rat=$(ratio "$work/r@-s$s-$cell.json" "$work/r@-s$s-${native_of[$cell]}.json" "$cpu")
      echo "| ${label[$cell]} | $s | $(bench_median "$g" '.msgs_per_s | floor') | $(bench_median "$g" '.latency_us.p99') | $(bench_median "$g" '.errors') | $(bench_median "$g" "$cpu | values * 100 | round / 100") | $rat |"
    done
  done
  echo
  echo "2 shards over 1 shard, per round, median of the rounds:"
  echo
  echo "| cell | msgs/s | broker CPU µs/msg |"
  echo "|---|---|---|"
  for cell in "${cells[@]}"; do
    echo "| ${label[$cell]} | $(ratio "$work/r@-s2-$cell.json" "$work/r@-s1-$cell.json" '.msgs_per_s') | $(ratio "$work/r@-s2-$cell.json" "$work/r@-s1-$cell.json" "$cpu") |"
  done
  echo
  echo "Every round (round 1 / 2 / ...), msgs/s and broker CPU µs/msg:"
  echo
  echo "| cell | shards | msgs/s | broker CPU µs/msg |"
  echo "|---|---|---|---|"
  for cell in "${cells[@]}"; do
    for s in 1 2; do
      files=$(for r in $(seq 1 "$rounds"); do echo "$work/r$r-s$s-$cell.json"; done)
      # shellcheck disable=SC2086
      echo "| ${label[$cell]} | $s | $(jq -s -r '[.[] | .msgs_per_s | floor | tostring] | join(" / ")' $files) | $(jq -s -r "[.[] | $cpu | . * 100 | round / 100 | tostring] | join(\" / \")" $files) |"
    done
  done
  echo "<!-- bench-shards.sh:end -->"
)
echo
echo "$table"
bench_write_doc bench-shards.sh "$table" "$doc"
