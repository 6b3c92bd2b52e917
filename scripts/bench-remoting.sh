#!/usr/bin/env bash
# RocketMQ's remoting protocol against ringmq's native protocol, same run (issue #23 item 7):
# the same ringmq-perf cells with --protocol native and --protocol remoting, interleaved, on a
# fresh `ringmq standalone` (ASYNC_FLUSH, release build) per round; 1 KiB records; medians
# over the rounds and the remoting/native ratio of the broker's CPU per message. The table
# goes to stdout and, with BENCH_DOC, into that file between the bench-remoting.sh markers.
#
#   scripts/bench-remoting.sh                         # 3 rounds, ~4 minutes
#   BENCH_ROUNDS=5 BENCH_DOC=docs/perf.md scripts/bench-remoting.sh
#
# Cells, each round (the protocols of a group alternate which goes first; before each, the
# broker is left to finish what the cell before it caused, until it is idle):
#   send batched @ rate  BENCH_BATCH (64) records per send, 2 producers x 8 in flight, open
#                      loop at BENCH_SEND_RATE (100000) msgs/s, so both protocols carry the
#                      same rate: native; remoting with JSON headers; remoting with binary
#                      (ROCKETMQ) headers. Each to its own topic.
#   send batched, closed loop  the same as fast as each goes: native; remoting (JSON)
#   pull, catching up  one consumer (a new group) reading the native rate cell's topic from
#                      the start, --pull-batch 1024: native; remoting (JSON headers)
#   e2e @ BENCH_E2E_RATE/s  one open-loop producer (64 in flight) and one tailing consumer:
#                      native; remoting (JSON headers)
#
# Environment: BENCH_ROUNDS (3), BENCH_SECONDS (8), BENCH_BATCH (64), BENCH_SEND_RATE
# (100000), BENCH_E2E_RATE (10000),
# BENCH_SHARDS (default one per core), BENCH_DOC ("-" = stdout only, the default),
# BENCH_DIR (work directory, removed at the end unless BENCH_KEEP=1), BENCH_NO_BUILD=1 (use
# the binaries in target/release as they are), BENCH_COMMIT (the commit to name, when the
# binaries were built elsewhere), BENCH_REPORT_ONLY=1 (only the table, from the results
# already in BENCH_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench-lib.sh
. scripts/bench-lib.sh

rounds=${BENCH_ROUNDS:-3}
secs=${BENCH_SECONDS:-8}
batch=${BENCH_BATCH:-64}
send_rate=${BENCH_SEND_RATE:-100000}
e2e_rate=${BENCH_E2E_RATE:-10000}
doc=${BENCH_DOC:--}
work=${BENCH_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/ringmq-bench-remoting.XXXXXX")}

if [ "${BENCH_NO_BUILD:-0}" = 1 ]; then
  command -v jq >/dev/null || { echo "bench-remoting.sh needs jq" >&2; exit 2; }
  ringmq=${BENCH_RINGMQ:-target/release/ringmq}
  perf=target/release/ringmq-perf
  commit=$(bench_commit)
else
  bench_setup bench-remoting.sh
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

cells=(send-native send-remoting send-remoting-bin max-native max-remoting pull-native pull-remoting
  e2e-native e2e-remoting)
declare -A label=(
  [send-native]="send batched $batch @ $send_rate/s, native"
  [send-remoting]="send batched $batch @ $send_rate/s, remoting (JSON)"
  [send-remoting-bin]="send batched $batch @ $send_rate/s, remoting (ROCKETMQ)"
  [max-native]="send batched $batch, closed loop, native"
  [max-remoting]="send batched $batch, closed loop, remoting (JSON)"
  [pull-native]="pull, catching up, native"
  [pull-remoting]="pull, catching up, remoting (JSON)"
  [e2e-native]="e2e @ $e2e_rate msgs/s, native"
  [e2e-remoting]="e2e @ $e2e_rate msgs/s, remoting (JSON)"
)
# The native cell each remoting cell is compared with.
declare -A base=([send-remoting]=send-native [send-remoting-bin]=send-native
  [max-remoting]=max-native [pull-remoting]=pull-native [e2e-remoting]=e2e-native)

run_cell() { # round cell mode args...
  local round=$1 cell=$2 mode=$3; shift 3
  local json="$work/r$round-$cell.json"
  bench_settle "$node_pid"
  printf '[round %d/%d] %-44s ' "$round" "$rounds" "${label[$cell]}" >&2
  "$perf" "$mode" -n "$namesrv" --node-pid "$node_pid" -q --json "$json" "$@" >"$json.out" 2>&1 \
    || { echo "failed:" >&2; cat "$json.out" >&2; exit 1; }
  [ "$(jq .messages "$json")" -gt 0 ] || { echo "no message:" >&2; cat "$json.out" >&2; exit 1; }
  jq -r '"\(.msgs_per_s | floor) msgs/s, p50 \(.latency_us.p50) µs, p99 \(.latency_us.p99) µs, errors \(.errors), CPU/msg broker \(.cpu.node_us_per_msg) µs perf \(.cpu.generator_us_per_msg) µs"' "$json" >&2
}

send_cell() { # round cell protocol header topic [more args]
  local round=$1 cell=$2 protocol=$3 header=$4 topic=$5; shift 5
  run_cell "$round" "$cell" produce --protocol "$protocol" --remoting-header "$header" \
    --topic "$topic" --batch "$batch" --producers 2 --inflight 8 --duration "${secs}s" "$@"
}
pull_cell() { # round cell protocol
  run_cell "$1" "$2" consume --protocol "$3" --topic rb-native --from first --pull-batch 1024 \
    --idle-exit 4s --duration "${secs}s"
}
e2e_cell() { # round cell protocol
  run_cell "$1" "$2" e2e --protocol "$3" --topic "rb-$2" --rate "$e2e_rate" --inflight 64 \
    --duration "${secs}s" --idle-exit 3s
}

echo "work directory: $work; $rounds rounds, $secs s per cell; load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
load_before=${BENCH_LOAD_BEFORE:-$(cut -d' ' -f1-3 /proc/loadavg)}
memory_before=$(scripts/bench-memory.sh status)
shards=${BENCH_SHARDS:-}
# BENCH_REPORT_ONLY=1: no runs, only the table of the results already in BENCH_DIR.
[ "${BENCH_REPORT_ONLY:-0}" = 1 ] && rounds_to_run=0 || rounds_to_run=$rounds
for round in $(seq 1 "$rounds_to_run"); do
  data=$(mktemp -d "$work/data.XXXXXX")
  args=(standalone --data "$data" --namesrv-port 0 --broker-port 0 --flush async)
  [ -n "${BENCH_SHARDS:-}" ] && args+=(--shards "$BENCH_SHARDS")
  RUST_LOG=warn "$ringmq" "${args[@]}" >"$work/node.out" 2>"$work/node.err" &
  node_pid=$!
  bench_wait_line "$work/node.out" ready "ringmq standalone"
  namesrv=$(grep -o 'namesrv [0-9.:]*' "$work/node.out" | cut -d' ' -f2)
  shards=$(grep -o '([0-9]* shards)' "$work/node.out" | tr -dc 0-9)
  "$perf" produce -n "$namesrv" --topic warmup --count 16 --inflight 1 --send-timeout 60s -q \
    >"$work/warmup.out" 2>&1 || { echo "warm-up failed:" >&2; cat "$work/warmup.out" >&2; exit 1; }
  "$perf" produce -n "$namesrv" --protocol remoting --topic warmup --count 16 --inflight 1 -q \
    >"$work/warmup.out" 2>&1 || { echo "remoting warm-up failed:" >&2; cat "$work/warmup.out" >&2; exit 1; }

  if [ $((round % 2)) = 1 ]; then
    send_cell "$round" send-native native json rb-native --rate "$send_rate"
    send_cell "$round" send-remoting remoting json rb-remoting --rate "$send_rate"
    send_cell "$round" send-remoting-bin remoting rocketmq rb-remoting-bin --rate "$send_rate"
    send_cell "$round" max-native native json rb-max-native
    send_cell "$round" max-remoting remoting json rb-max-remoting
    pull_cell "$round" pull-native native
    pull_cell "$round" pull-remoting remoting
    e2e_cell "$round" e2e-native native
    e2e_cell "$round" e2e-remoting remoting
  else
    send_cell "$round" send-remoting-bin remoting rocketmq rb-remoting-bin --rate "$send_rate"
    send_cell "$round" send-remoting remoting json rb-remoting --rate "$send_rate"
    send_cell "$round" send-native native json rb-native --rate "$send_rate"
    send_cell "$round" max-remoting remoting json rb-max-remoting
    send_cell "$round" max-native native json rb-max-native
    pull_cell "$round" pull-remoting remoting
    pull_cell "$round" pull-native native
    e2e_cell "$round" e2e-remoting remoting
    e2e_cell "$round" e2e-native native
  fi

  kill -TERM "$node_pid"; wait "$node_pid" 2>/dev/null || true; node_pid=""
  rm -rf "$data"
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

us() { bench_median "$work/r*-$1.json" '.cpu.node_us_per_msg | values * 100 | round / 100'; }
# ratio of two cells' broker µs/msg, each round apart, then the median of the rounds' ratios.
ratio() {
  for r in $(seq 1 "$rounds"); do
    jq -n --slurpfile a "$work/r$r-$1.json" --slurpfile b "$work/r$r-$2.json" \
      '$a[0].cpu.node_us_per_msg / $b[0].cpu.node_us_per_msg'
  done | sort -g | awk '{ v[NR] = $1 } END { printf "%.2f", v[int((NR + 1) / 2)] }'
}
per_round() { jq -s -r "[.[] | $2 | tostring] | join(\" / \")" $work/r*-"$1".json; }

table=$(
  echo "<!-- bench-remoting.sh:begin (generated by scripts/bench-remoting.sh; edits here are overwritten) -->"
  echo "Commit \`$commit\`, $(date -u +%Y-%m-%d), $(nproc) cores, \`ringmq standalone --flush async\`"
  echo "($shards shards, release), load generator \`ringmq-perf\` on the same machine; load average"
  echo "$load_before before, $load_after after. 1 KiB records; medians of $rounds rounds (a fresh node"
  echo "each, the cells of a group alternating which runs first), ${secs} s per cell. Broker CPU:"
  echo "\`/proc/<pid>/stat\` of the node process over the cell, per message sent or received."
  echo "Ratio: remoting over native broker µs/msg, taken in each round, median of the rounds."
  echo
  echo "Memory at the start: $memory_before (scripts/bench-memory.sh)."
  echo
  echo "| cell | msgs/s | p50 µs | p99 µs | errors | broker CPU µs/msg | perf CPU µs/msg | ratio to native |"
  echo "|---|---|---|---|---|---|---|---|"
  for cell in "${cells[@]}"; do
    g="$work/r*-$cell.json"
    rat="1"
    [ -n "${base[$cell]:-}" ] && rat=$(ratio "$cell" "${base[$cell]}")
    echo "| ${label[$cell]} | $(bench_median "$g" '.msgs_per_s | floor') | $(bench_median "$g" '.latency_us.p50') | $(bench_median "$g" '.latency_us.p99') | $(bench_median "$g" '.errors') | $(us "$cell") | $(bench_median "$g" '.cpu.generator_us_per_msg | values * 100 | round / 100') | $rat |"
  done
  echo
  echo "Every round (round 1 / 2 / ...):"
  echo
  echo "| cell | msgs/s | broker CPU µs/msg | messages |"
  echo "|---|---|---|---|"
  for cell in "${cells[@]}"; do
    echo "| ${label[$cell]} | $(per_round "$cell" '.msgs_per_s | floor') | $(per_round "$cell" '.cpu.node_us_per_msg | . * 100 | round / 100') | $(per_round "$cell" '.messages') |"
  done
  echo "<!-- bench-remoting.sh:end -->"
)
echo
echo "$table"
bench_write_doc bench-remoting.sh "$table" "$doc"
