#!/usr/bin/env bash
# The standard benchmark matrix, against a fresh `ringmq standalone` (release build) per flush
# policy, written as a Markdown table with the commit id into docs/perf.md (between the
# bench.sh markers; the rest of the file is left alone).
#
#   scripts/bench.sh            # full matrix, ~6-8 minutes on 2 cores
#   BENCH_SECONDS=3 scripts/bench.sh
#
# Matrix: 1 KiB and 16 KiB records x batch 1 and 64 x 1 and 4 producers x async and sync
# flush (produce cells, closed loop, 8 sends in flight per producer); then per flush policy
# and size: a consumer catching up on what the batch-64 cells wrote, and a consumer tailing
# an open-loop producer (e2e latency). Cells are short (BENCH_SECONDS each, default 6 s,
# capped at BENCH_CELL_BYTES of payload) so a full run stays under ~10 minutes: the figures
# are indicative; docs/perf.md has the longer, repeated measurements.
#
# The load generator (ringmq-perf) runs on the same machine as the broker; each row shows the
# CPU seconds both used, so a generator-bound cell is visible as such.
#
# Environment: BENCH_SECONDS (6), BENCH_CELL_BYTES (2147483648), BENCH_SHARDS (broker shards,
# default one per core), BENCH_THREADS (perf worker threads, 2), BENCH_TAIL_RATE_1K (10000),
# BENCH_TAIL_RATE_16K (2000), BENCH_DOC (docs/perf.md; "-" = stdout only), BENCH_DIR (work
# directory, default a new one under $TMPDIR; removed at the end unless BENCH_KEEP=1).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench-lib.sh
. scripts/bench-lib.sh

secs=${BENCH_SECONDS:-6}
cell_bytes=${BENCH_CELL_BYTES:-2147483648}
threads=${BENCH_THREADS:-2}
tail_1k=${BENCH_TAIL_RATE_1K:-10000}
tail_16k=${BENCH_TAIL_RATE_16K:-2000}
doc=${BENCH_DOC:-docs/perf.md}
work=${BENCH_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/ringmq-bench.XXXXXX")}

bench_setup bench.sh

node_pid=""
cleanup() {
  [ -n "$node_pid" ] && kill -TERM "$node_pid" 2>/dev/null && wait "$node_pid" 2>/dev/null || true
  [ "${BENCH_KEEP:-0}" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT

# CPU seconds (user + system) of a process, from /proc/PID/stat (USER_HZ = 100).
cpu_s() { awk '{ printf "%.2f", ($14 + $15) / 100 }' "/proc/$1/stat"; }
# /proc/stat: "total steal" ticks (steal: time the hypervisor ran someone else on our vCPUs).
steal_ticks() { awk '/^cpu / { t = 0; for (i = 2; i <= 9; i++) t += $i; print t, $9 }' /proc/stat; }
# Percent of all cores busy over one second.
busy_pct() {
  read -r _ a b c d e f g _ < /proc/stat; t1=$((a + b + c + d + e + f + g)); i1=$((d + e))
  sleep 1
  read -r _ a b c d e f g _ < /proc/stat; t2=$((a + b + c + d + e + f + g)); i2=$((d + e))
  echo $(( 100 - 100 * (i2 - i1) / (t2 - t1 + 1) ))
}

start_node() { # flush
  local dir="$work/node-$1"
  rm -rf "$dir"; mkdir -p "$dir"
  local args=(standalone --data "$dir/data" --namesrv-port 0 --broker-port 0 --flush "$1")
  [ -n "${BENCH_SHARDS:-}" ] && args+=(--shards "$BENCH_SHARDS")
  RUST_LOG=warn "$ringmq" "${args[@]}" >"$dir/out" 2>"$dir/err" &
  node_pid=$!
  for _ in $(seq 1 300); do grep -q ready "$dir/out" 2>/dev/null && break; sleep 0.1; done
  grep -q ready "$dir/out" || { echo "ringmq did not start:" >&2; cat "$dir/err" >&2; exit 1; }
  namesrv=$(grep -o 'namesrv [0-9.:]*' "$dir/out" | cut -d' ' -f2)
  shards=$(grep -o '([0-9]* shards)' "$dir/out" | tr -dc 0-9)
  # Untimed warm-up: a fresh shard prepares (allocates and pre-writes) its first segment
  # after "ready", and the first appends wait for it (seconds for 1 GiB segments). One
  # message per queue reaches every shard.
  "$perf" produce -n "$namesrv" --topic bench-warmup --count 16 --inflight 1 \
    --send-timeout 60s -q >"$dir/warmup.out" 2>&1 || { echo "warm-up failed:" >&2; cat "$dir/warmup.out" >&2; exit 1; }
}

stop_node() { # flush
  kill -TERM "$node_pid"; wait "$node_pid" 2>/dev/null || true; node_pid=""
  # The data (GiBs) goes now; logs stay with BENCH_KEEP=1.
  rm -rf "$work/node-$1/data"
}

rows=()
cells_total=$(( 16 + 8 ))
cell=0
# run_cell LABEL FLUSH SIZE BATCH PRODUCERS MODE PERF-ARGS...
run_cell() {
  local label=$1 flush=$2 size=$3 batch=$4 producers=$5 mode=$6; shift 6
  cell=$((cell + 1))
  local json="$work/cell-$cell.json" b0 b1 s0 s1 steal
  printf '[%2d/%d] %-34s ' "$cell" "$cells_total" "$label" >&2
  b0=$(cpu_s "$node_pid")
  s0=$(steal_ticks)
  if ! "$perf" "$mode" -n "$namesrv" --threads "$threads" -q --json "$json" "$@" >"$work/cell-$cell.out" 2>&1; then
    echo "failed (see $work/cell-$cell.out)" >&2
    BENCH_KEEP=1
    rows+=("| $label | $flush | $size | $batch | $producers | failed | | | | | | | | |")
    return
  fi
  b1=$(cpu_s "$node_pid")
  s1=$(steal_ticks)
  steal=$(awk -v a="$s0" -v b="$s1" 'BEGIN { split(a, x, " "); split(b, y, " ");
    printf "%.0f", 100 * (y[2] - x[2]) / (y[1] - x[1] + 1) }')
  local r
  r=$(jq -r --arg bcpu "$(awk -v a="$b0" -v b="$b1" 'BEGIN { printf "%.1f", b - a }')" '
    [ (.msgs_per_s | floor), (.mb_per_s * 10 | round / 10), .latency_us.p50, .latency_us.p99,
      .latency_us.p999, .latency_us.max, .errors, (.cpu.generator_s * 10 | round / 10), $bcpu,
      (.elapsed_s * 10 | round / 10) ] | @tsv' "$json")
  local msgs mb p50 p99 p999 max errs gcpu bcpu el
  read -r msgs mb p50 p99 p999 max errs gcpu bcpu el <<<"$r"
  printf '%9s msgs/s %7s MB/s  p99 %7s µs  errors %s  steal %s%%\n' "$msgs" "$mb" "$p99" "$errs" "$steal" >&2
  rows+=("| $label | $flush | $size | $batch | $producers | $msgs | $mb | $p50 | $p99 | $p999 | $max | $errs | $gcpu / $bcpu in ${el}s | $steal |")
}

echo "work directory: $work; $secs s per cell (short: indicative figures)" >&2
echo "machine busy before the run: $(busy_pct)% of all cores" >&2
for flush in async sync; do
  start_node "$flush"
  echo "ringmq standalone --flush $flush: $shards shards, name server $namesrv" >&2
  for size in 1024 16384; do
    count=$(( cell_bytes / size ))
    for batch in 1 64; do
      for producers in 1 4; do
        topic="bench-$flush-$size-b$batch-p$producers"
        run_cell "produce $((size / 1024)) KiB b$batch p$producers" "$flush" "$size" "$batch" "$producers" \
          produce --topic "$topic" --size "$size" --batch "$batch" --producers "$producers" \
          --duration "${secs}s" --count "$count"
      done
    done
  done
  for size in 1024 16384; do
    run_cell "consume $((size / 1024)) KiB catching up" "$flush" "$size" "-" 1 \
      consume --topic "bench-$flush-$size-b64-p4" --from first --pull-batch 1024 \
      --duration "${secs}s" --idle-exit 2s
    rate=$tail_1k; [ "$size" = 16384 ] && rate=$tail_16k
    run_cell "e2e $((size / 1024)) KiB tailing @ $rate/s" "$flush" "$size" 1 1 \
      e2e --topic "bench-$flush-$size-tail" --size "$size" --rate "$rate" --inflight 64 \
      --duration "${secs}s" --idle-exit 3s
  done
  stop_node "$flush"
done

table=$(
  echo "<!-- bench.sh:begin (generated by scripts/bench.sh; edits here are overwritten) -->"
  echo "### Standard matrix (scripts/bench.sh)"
  echo
  echo "Commit \`$commit\`, $(date -u +%Y-%m-%d), $(nproc) cores, broker \`ringmq standalone\` ($shards shards, release),"
  echo "load generator \`ringmq-perf --threads $threads\` on the same machine. ${secs} s per cell (at most"
  echo "$((cell_bytes >> 20)) MiB of payload): short runs, indicative. \"async\" = acked from page cache,"
  echo "\"sync\" = acked after fdatasync. Produce cells: closed loop, 8 sends in flight per producer,"
  echo "latency per send request. Consume: one consumer reading the batch-64 x4 topic from the start."
  echo "e2e: one producer at a fixed rate (open loop) and one tailing consumer; latency from the"
  echo "send's intended time to receipt. CPU: seconds used by perf / by the broker over the cell."
  echo "Steal: % of CPU time the hypervisor gave to other guests during the cell (this VM shares"
  echo "its host; above a few % the latency tails are the host's)."
  echo
  echo "| cell | flush | bytes | batch | producers | msgs/s | MB/s | p50 µs | p99 µs | p99.9 µs | max µs | errors | CPU s perf / broker | steal % |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo "<!-- bench.sh:end -->"
)
echo
echo "$table"
bench_write_doc bench.sh "$table" "$doc"
