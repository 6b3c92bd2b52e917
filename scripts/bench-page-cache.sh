#!/usr/bin/env bash
# A closed-loop producer that writes many GB into one node, with the CommitLog's page-cache
# release off (`commitLogCacheKeepBytes=0`) and on (1 GiB), interleaved (docs/perf.md,
# "The append that slows down after a few GB"). Each arm: a fresh `ringmq standalone`
# (2 shards, metrics on), BENCH_RUNS back-to-back runs of `ringmq-perf produce --size 1024
# --batch 100 --producers 1 --inflight 1 --duration 5s --metrics-url ...`, then
# BENCH_UNBATCHED runs of the same with --batch 1; per run: msgs/s, the broker's CPU per
# message (/proc utime+stime), the store's append p50 and p99 (histogram bucket bounds),
# the broker's minor faults per message, its VmRSS and the machine's page cache (Cached in
# /proc/meminfo) after the run. Then the node stops, its
# data is removed and the script waits BENCH_SETTLE seconds before the next arm.
#
#   scripts/bench-page-cache.sh                 # 3 rounds, arms alternating (A B, B A, A B)
#   BENCH_ROUNDS=1 BENCH_RUNS=4 scripts/bench-page-cache.sh
#
# Environment: BENCH_ROUNDS (3), BENCH_RUNS (6), BENCH_UNBATCHED (2), BENCH_SETTLE (30),
# BENCH_KEEP (the "on" arm's commitLogCacheKeepBytes; default 1073741824, the node's
# default where free page reporting is on),
# BENCH_RINGMQ (server binary). Results: one line per run on stdout, JSON in $BENCH_OUT
# (a temporary directory unless set).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench-lib.sh
. scripts/bench-lib.sh

rounds=${BENCH_ROUNDS:-3}
runs=${BENCH_RUNS:-6}
unbatched=${BENCH_UNBATCHED:-2}
settle=${BENCH_SETTLE:-30}
out=${BENCH_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/ringmq-page-cache.XXXXXX")}
mkdir -p "$out"
node_pid=""
data=""
cleanup() {
  [ -n "$node_pid" ] && kill -TERM "$node_pid" 2>/dev/null && wait "$node_pid" 2>/dev/null || true
  [ -n "$data" ] && rm -rf "$data"
}
trap cleanup EXIT

bench_setup bench-page-cache.sh
echo "commit $commit, results in $out" >&2

# run_arm ROUND ARM: one node, its runs, then stop and clean up.
run_arm() {
  local round=$1 arm=$2 keep_args=()
  case $arm in
    off) keep_args=(--set commitLogCacheKeepBytes=0) ;;
    on) keep_args=(--set "commitLogCacheKeepBytes=${BENCH_KEEP:-1073741824}") ;;
  esac
  data=$(mktemp -d "${TMPDIR:-/tmp}/ringmq-page-cache-data.XXXXXX")
  RUST_LOG=warn "$ringmq" standalone --data "$data" --namesrv-port 0 --broker-port 0 \
    --set metricsExporterType=PROM --set metricsPromExporterPort=0 "${keep_args[@]}" \
    >"$out/node.out" 2>"$out/node.err" &
  node_pid=$!
  bench_wait_line "$out/node.out" ready "ringmq standalone"
  local ns metrics
  ns=$(grep -o 'namesrv [0-9.:]*' "$out/node.out" | cut -d' ' -f2)
  metrics=$(grep -o 'http://[0-9.]*:[0-9]*/metrics' "$out/node.out" | sed 's#0\.0\.0\.0#127.0.0.1#')
  local i batch f0 f1 j
  for i in $(seq 1 $((runs + unbatched))); do
    batch=100
    [ "$i" -gt "$runs" ] && batch=1
    j="$out/r$round-$arm-$i.json"
    f0=$(awk '{ print $10 }' "/proc/$node_pid/stat")
    "$perf" produce -n "$ns" --topic t --size 1024 --batch "$batch" --producers 1 --inflight 1 \
      --duration 5s --metrics-url "$metrics" -q --json "$j" >"$out/run.out" 2>&1 \
      || { cat "$out/run.out" >&2; exit 1; }
    f1=$(awk '{ print $10 }' "/proc/$node_pid/stat")
    jq -r --arg round "$round" --arg arm "$arm" --arg run "$i" --arg batch "$batch" \
      --arg flt $((f1 - f0)) --arg rss "$(awk '/VmRSS/ { print $2 }' "/proc/$node_pid/status")" \
      --arg cached "$(awk '/^Cached:/ { print int($2 / 1024) }' /proc/meminfo)" '
      [$round, $arm, $run, $batch, (.msgs_per_s | floor), .cpu.node_us_per_msg,
       (first(.broker_stages[]? | select(.name == "append") | .p50_us_at_most) // "-"),
       (first(.broker_stages[]? | select(.name == "append") | .p99_us_at_most) // "-"),
       (($flt | tonumber) / .messages * 100 | round / 100), (($rss | tonumber) / 1024 | floor), $cached]
      | "round \(.[0]) \(.[1]) run \(.[2]) batch \(.[3]): \(.[4]) msgs/s, broker \(.[5]) us/msg, append p50 <= \(.[6]) p99 <= \(.[7]) us, minflt/msg \(.[8]), RSS \(.[9]) MiB, page cache (all) \(.[10]) MiB"' "$j"
  done
  kill -TERM "$node_pid"; wait "$node_pid" 2>/dev/null || true; node_pid=""
  rm -rf "$data"; data=""
  sleep "$settle"
}

for round in $(seq 1 "$rounds"); do
  if [ $((round % 2)) -eq 1 ]; then arms="off on"; else arms="on off"; fi
  for arm in $arms; do
    run_arm "$round" "$arm"
  done
done
