#!/usr/bin/env bash
# Where a closed-loop request waits (issue #26): one `ringmq standalone` (1 shard) pinned to
# one core, `ringmq-perf produce` pinned to the other, one batch in flight per producer.
# Around each cell it reads, for every thread of both processes, /proc/<pid>/task/<tid>/
# schedstat (time on CPU, time runnable but waiting for a CPU, timeslices) and status
# (voluntary and involuntary context switches), and the broker's own stage histograms from
# its metrics endpoint (ringmq_request_stage_latency_seconds, ringmq_rpc_latency_seconds,
# ringmq_store_append_latency_seconds). Per request it prints:
#   round trip           the client's median send latency (ringmq-perf, µs)
#   broker stages        mean µs: read_to_handler, handler (SEND_MESSAGE / SEND_BATCH_MESSAGE),
#                        queued_to_written, and the append inside the handler
#   outside the broker   round trip minus the three broker stages: kernel loopback both
#                        ways, the client's own turn (its runtime waking the waiting task,
#                        encoding the next batch), and time the broker thread was asleep
#                        before the read completed
#   per thread           CPU µs, runqueue wait µs, voluntary switches (went to sleep) and
#                        involuntary switches (preempted), each per request, for the
#                        threads that ran
#
#   scripts/waits.sh                       # the three cells, 10 s each
#   WAITS_SECONDS=20 WAITS_CELLS="b100p1" scripts/waits.sh
#
# Cells (WAITS_CELLS, space separated): b100p1 (batch 100, 1 producer), b100p2 (batch 100,
# 2 producers), b1p1 (unbatched, 1 producer). Environment: WAITS_SECONDS (10),
# WAITS_SERVER_CPU (0), WAITS_CLIENT_CPU (1), WAITS_NO_BUILD=1 (use target/release as is),
# WAITS_RINGMQ (the server binary; A/B runs against a saved build), WAITS_DIR (work
# directory; removed unless WAITS_KEEP=1).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench-lib.sh
. scripts/bench-lib.sh

secs=${WAITS_SECONDS:-10}
cells=${WAITS_CELLS:-"b100p1 b100p2 b1p1"}
server_cpu=${WAITS_SERVER_CPU:-0}
client_cpu=${WAITS_CLIENT_CPU:-1}
work=${WAITS_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/ringmq-waits.XXXXXX")}
command -v taskset >/dev/null || { echo "waits.sh needs taskset (util-linux)" >&2; exit 2; }
command -v curl >/dev/null || { echo "waits.sh needs curl" >&2; exit 2; }
if [ "${WAITS_NO_BUILD:-0}" = 1 ]; then
  command -v jq >/dev/null || { echo "waits.sh needs jq" >&2; exit 2; }
  ringmq=${WAITS_RINGMQ:-target/release/ringmq}; perf=target/release/ringmq-perf; commit=$(bench_commit)
else
  bench_setup waits.sh
fi
mkdir -p "$work"
cp "$ringmq" "$work/ringmq"; cp "$perf" "$work/ringmq-perf"
ringmq=$work/ringmq; perf=$work/ringmq-perf

node_pid=""
cleanup() {
  [ -n "$node_pid" ] && kill -TERM "$node_pid" 2>/dev/null && wait "$node_pid" 2>/dev/null || true
  [ "${WAITS_KEEP:-0}" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT

# threads PID: one line per thread: "tid name run_ns wait_ns slices voluntary involuntary"
threads() {
  local pid=$1 t
  for t in /proc/"$pid"/task/*; do
    [ -r "$t/schedstat" ] || continue
    printf '%s %s %s %s %s\n' "${t##*/}" "$(tr ' ' '_' <"$t/comm")" "$(cat "$t/schedstat")" \
      "$(awk '/^voluntary_ctxt_switches/ { print $2 }' "$t/status")" \
      "$(awk '/^nonvoluntary_ctxt_switches/ { print $2 }' "$t/status")"
  done 2>/dev/null
}

# diff_threads BEFORE AFTER REQUESTS LABEL: per-request deltas of the threads that ran.
diff_threads() {
  awk -v n="$3" -v label="$4" '
    NR == FNR { run[$1] = $3; wait[$1] = $4; vol[$1] = $6; inv[$1] = $7; next }
    {
      dr = ($3 - run[$1]) / 1000 / n; dw = ($4 - wait[$1]) / 1000 / n
      dv = ($6 - vol[$1]) / n; di = ($7 - inv[$1]) / n
      if (dr >= 0.05)
        printf "  %-7s %-16s CPU %8.1f µs  runqueue wait %7.1f µs  sleeps %5.2f  preempted %5.2f\n", label, $2, dr, dw, dv, di
    }' "$1" "$2"
}

# metric FILE NAME: the value of the one series NAME (exact, labels included).
metric() { awk -v s="$2" 'index($0, s " ") == 1 { print $NF; exit }' "$1"; }
# mean_us BEFORE AFTER SERIES: mean µs of a histogram's new samples (SERIES: name{labels}
# without _sum/_count; "-" when none).
mean_us() {
  local base=${3%%\{*} labels=""
  [ "$3" != "$base" ] && labels="{${3#*\{}"
  local s0 s1 c0 c1
  s0=$(metric "$1" "${base}_sum$labels"); s1=$(metric "$2" "${base}_sum$labels")
  c0=$(metric "$1" "${base}_count$labels"); c1=$(metric "$2" "${base}_count$labels")
  awk -v s0="${s0:-0}" -v s1="${s1:-0}" -v c0="${c0:-0}" -v c1="${c1:-0}" \
    'BEGIN { if (c1 - c0 > 0) printf "%.1f", (s1 - s0) / (c1 - c0) * 1e6; else print "-" }'
}

run_cell() { # cell batch producers
  local cell=$1 batch=$2 producers=$3 data log
  data=$(mktemp -d "$work/data.XXXXXX"); log="$work/node-$cell"
  RUST_LOG=warn taskset -c "$server_cpu" "$ringmq" standalone --data "$data" --namesrv-port 0 \
    --broker-port 0 --shards 1 --set metricsExporterType=PROM \
    --set metricsPromExporterHost=127.0.0.1 --set metricsPromExporterPort=0 \
    --set mappedFileSizeCommitLog=1073741824 >"$log.out" 2>"$log.err" &
  node_pid=$!
  bench_wait_line "$log.out" ready "ringmq standalone"
  local namesrv url
  namesrv=$(grep -o 'namesrv [0-9.:]*' "$log.out" | cut -d' ' -f2)
  url=$(grep -o 'http://[0-9.:]*/metrics' "$log.out" | head -n 1)
  taskset -c "$client_cpu" "$perf" produce -n "$namesrv" --topic warmup --count 2000 \
    --batch "$batch" --inflight 1 -q >/dev/null 2>&1
  sleep 1.5
  curl -s "$url" >"$work/$cell.m0"
  threads "$node_pid" >"$work/$cell.t0"
  echo "[$cell] batch $batch, $producers producer(s), closed loop, ${secs} s ..." >&2
  taskset -c "$client_cpu" "$perf" produce -n "$namesrv" --topic "waits-$cell" --batch "$batch" \
    --producers "$producers" --inflight 1 --size 1024 --duration "${secs}s" --threads 1 \
    --node-pid "$node_pid" -q --json "$work/$cell.json" >"$work/$cell.perf.out" 2>&1 &
  local perf_pid=$!
  sleep 1
  threads "$perf_pid" >"$work/$cell.c0"
  local c_at0; c_at0=$(date +%s.%N)
  sleep $((secs - 2))
  threads "$perf_pid" >"$work/$cell.c1"
  local c_at1; c_at1=$(date +%s.%N)
  wait "$perf_pid" || { echo "perf failed:" >&2; cat "$work/$cell.perf.out" >&2; exit 1; }
  threads "$node_pid" >"$work/$cell.t1"
  sleep 1.5
  curl -s "$url" >"$work/$cell.m1"
  kill -TERM "$node_pid"; wait "$node_pid" 2>/dev/null || true; node_pid=""
  rm -rf "$data"

  local msgs reqs p50 msgps code rt_req
  msgs=$(jq .messages "$work/$cell.json"); msgps=$(jq '.msgs_per_s | floor' "$work/$cell.json")
  reqs=$(( msgs / batch )); p50=$(jq .latency_us.p50 "$work/$cell.json")
  # the client's threads were sampled over part of the cell: scale to its requests
  rt_req=$(awk -v a="$c_at0" -v b="$c_at1" -v r="$reqs" -v s="$secs" 'BEGIN { printf "%d", r * (b - a) / s }')
  [ "$batch" = 1 ] && code=SEND_MESSAGE || code=SEND_BATCH_MESSAGE
  local read handle write append
  read=$(mean_us "$work/$cell.m0" "$work/$cell.m1" 'ringmq_request_stage_latency_seconds{stage="read_to_handler"}')
  handle=$(mean_us "$work/$cell.m0" "$work/$cell.m1" "ringmq_rpc_latency_seconds{request_code=\"$code\",response_code=\"SUCCESS\",protocol=\"native\"}")
  write=$(mean_us "$work/$cell.m0" "$work/$cell.m1" 'ringmq_request_stage_latency_seconds{stage="queued_to_written"}')
  append=$(mean_us "$work/$cell.m0" "$work/$cell.m1" 'ringmq_store_append_latency_seconds')
  echo
  echo "== $cell: batch $batch, $producers producer(s): $msgps msgs/s, $reqs requests, round trip p50 $p50 µs"
  echo "  broker stages (mean µs): read_to_handler $read, handler $handle (append $append), queued_to_written $write"
  awk -v p="$p50" -v r="$read" -v h="$handle" -v w="$write" \
    'BEGIN { if (r != "-" && h != "-" && w != "-") printf "  outside the broker stages (p50 round trip minus the means): %.1f µs\n", p - r - h - w }'
  diff_threads "$work/$cell.t0" "$work/$cell.t1" "$reqs" broker
  diff_threads "$work/$cell.c0" "$work/$cell.c1" "$rt_req" client
}

echo "commit $commit; server on CPU $server_cpu, load generator on CPU $client_cpu; load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for cell in $cells; do
  case $cell in
    b100p1) run_cell b100p1 100 1 ;;
    b100p2) run_cell b100p2 100 2 ;;
    b1p1) run_cell b1p1 1 1 ;;
    *) echo "unknown cell $cell (b100p1, b100p2, b1p1)" >&2; exit 2 ;;
  esac
done
