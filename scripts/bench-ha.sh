#!/usr/bin/env bash
# Replication benchmark: the same producer load against one broker pair per mode, same
# machine, same run, modes interleaved round by round so a slow minute of the (shared) host
# hits every mode alike; medians over the rounds.
#
#   scripts/bench-ha.sh                      # 3 rounds x 3 modes x 2 cells, ~5 minutes
#   BENCH_ROUNDS=5 BENCH_SECONDS=10 scripts/bench-ha.sh
#
# Modes: "no slave" (ASYNC_MASTER alone), ASYNC_MASTER + SLAVE, SYNC_MASTER + SLAVE; every
# broker ASYNC_FLUSH (the replication is what differs), release build, one name server.
# Cells: "unbatched" = 1 producer, 1 KiB, one send in flight (latency of a single send);
# "batched" = 2 producers, batch 16 x 1 KiB, 8 sends in flight each (throughput). The slave's
# lag (bytes and ms, largest shard, sampled every second by ringmq-perf) is reported for the
# batched cell: replication lag under sustained load.
#
# Output: a Markdown table on stdout, also written into docs/perf.md between the bench-ha.sh
# markers (BENCH_DOC=- for stdout only). Environment: BENCH_ROUNDS (3), BENCH_SECONDS (8),
# BENCH_SHARDS (shards per broker, default one per core), BENCH_DIR (work directory; removed
# at the end unless BENCH_KEEP=1), BENCH_MODES (a subset of "noslave async sync"), BENCH_RINGMQ
# (the server binary, default target/release/ringmq).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench-lib.sh
. scripts/bench-lib.sh

rounds=${BENCH_ROUNDS:-3}
secs=${BENCH_SECONDS:-8}
doc=${BENCH_DOC:-docs/perf.md}
work=${BENCH_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/ringmq-bench-ha.XXXXXX")}

bench_setup bench-ha.sh

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  [ "${BENCH_KEEP:-0}" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT


mkdir -p "$work"
# start_namesrv DIR -> sets $namesrv and $namesrv_pid. A fresh one per mode and round, so a
# stopped pair's registration never routes the next pair's topic creation to a dead broker.
start_namesrv() {
  "$ringmq" namesrv --host 127.0.0.1 --port 0 >"$1-namesrv.out" 2>"$1-namesrv.err" &
  namesrv_pid=$!
  pids+=("$namesrv_pid")
  bench_wait_line "$1-namesrv.out" ready "the name server"
  namesrv=$(grep -o '127\.0\.0\.1:[0-9]*' "$1-namesrv.out" | head -n 1)
}

# start_broker DIR NAME ROLE ID -> sets $broker_pid. Slaves learn their master's HA address
# from the name server, as in RocketMQ.
start_broker() {
  local d=$1 name=$2 role=$3 id=$4
  mkdir -p "$d"
  cat >"$d.properties" <<PROPS
brokerClusterName=BenchCluster
brokerName=$name
brokerId=$id
brokerRole=$role
flushDiskType=ASYNC_FLUSH
listenPort=0
haListenPort=0
storePathRootDir=$d
mappedFileSizeCommitLog=268435456
PROPS
  local args=(broker -c "$d.properties" -n "$namesrv")
  [ -n "${BENCH_SHARDS:-}" ] && args+=(--shards "$BENCH_SHARDS")
  "$ringmq" "${args[@]}" >"$d.out" 2>"$d.err" &
  broker_pid=$!
  pids+=("$broker_pid")
  bench_wait_line "$d.out" ready "broker $name ($role)"
}

stop_pid() {
  kill -TERM "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

# One cell against the pair of mode $1 on topic $2; the JSON goes to $3.
run_perf() {
  local topic=$2 json=$3; shift 3
  "$perf" produce -n "$namesrv" --topic "$topic" --size 1024 --duration "${secs}s" -q \
    --json "$json" "$@" >"$json.out" 2>&1 || { echo "ringmq-perf failed:" >&2; cat "$json.out" >&2; exit 1; }
}

read -r -a modes <<<"${BENCH_MODES:-noslave async sync}"
declare -A role=([noslave]=ASYNC_MASTER [async]=ASYNC_MASTER [sync]=SYNC_MASTER)
declare -A label=([noslave]="ASYNC_MASTER, no slave" [async]="ASYNC_MASTER + SLAVE" [sync]="SYNC_MASTER + SLAVE")

echo "work directory: $work; $rounds rounds x ${#modes[@]} modes x 2 cells, $secs s per cell" >&2
for round in $(seq 1 "$rounds"); do
  for mode in "${modes[@]}"; do
    # A fresh pair per mode and round (brokerName differs per mode, so the name server
    # routes each topic to its own pair only).
    name="bench-$mode"
    d="$work/r$round-$mode"
    start_namesrv "$d"
    start_broker "$d-master" "$name" "${role[$mode]}" 0
    master=$broker_pid
    slave=""
    if [ "$mode" != noslave ]; then
      start_broker "$d-slave" "$name" SLAVE 1
      slave=$broker_pid
    fi
    # Untimed warm-up: the topic exists on the pair and the slave has subscribed.
    "$perf" produce -n "$namesrv" --topic "$name-t" --count 64 --inflight 1 --send-timeout 60s -q \
      >"$d.warmup" 2>&1 || { echo "warm-up failed:" >&2; cat "$d.warmup" >&2; exit 1; }
    sleep 1
    printf '[round %d/%d] %-24s ' "$round" "$rounds" "${label[$mode]}" >&2
    run_perf "$mode" "$name-t" "$d-unbatched.json" --batch 1 --producers 1 --inflight 1
    run_perf "$mode" "$name-t" "$d-batched.json" --batch 16 --producers 2 --inflight 8
    jq -r '"unbatched p50 \(.latency_us.p50) µs p99 \(.latency_us.p99) µs; "' "$d-unbatched.json" | tr -d '\n' >&2
    jq -r '"batched \(.msgs_per_s | floor) msgs/s, errors \(.errors)"' "$d-batched.json" >&2
    [ -n "$slave" ] && stop_pid "$slave"
    stop_pid "$master"
    stop_pid "$namesrv_pid"
    # The data (GiBs per pair) goes now, the logs stay with BENCH_KEEP=1: a full disk
    # (diskMaxUsedSpaceRatio) would turn the next rounds into DISK_FULL errors.
    rm -rf "$d-master" "$d-slave"
  done
done


table=$(
  echo "<!-- bench-ha.sh:begin (generated by scripts/bench-ha.sh; edits here are overwritten) -->"
  echo "### Replication modes (scripts/bench-ha.sh)"
  echo
  echo "Commit \`$commit\`, $(date -u +%Y-%m-%d), $(nproc) cores; one name server, one master and"
  echo "its slave per mode on this machine with the load generator (release builds, ASYNC_FLUSH,"
  echo "one shard per core each). Medians of $rounds rounds, modes interleaved per round, ${secs} s per cell."
  echo "Unbatched: 1 producer, 1 KiB, one send in flight. Batched: 2 producers, 16 x 1 KiB per"
  echo "send, 8 sends in flight each. Lag: the slave's largest shard lag sampled every second"
  echo "during the batched cell (median of the rounds' p50 and max)."
  echo
  echo "| mode | unbatched msgs/s | p50 µs | p99 µs | p99.9 µs | batched msgs/s | MB/s | p50 µs | p99 µs | errors | lag p50 / max bytes | lag p50 / max ms |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
  for mode in "${modes[@]}"; do
    u="$work/r*-$mode-unbatched.json" b="$work/r*-$mode-batched.json"
    lag_b="-" lag_ms="-"
    if [ "$mode" != noslave ]; then
      lag_b="$(bench_median "$b" '.replication.lag_bytes.p50') / $(bench_median "$b" '.replication.lag_bytes.max')"
      lag_ms="$(bench_median "$b" '.replication.lag_ms.p50') / $(bench_median "$b" '.replication.lag_ms.max')"
    fi
    echo "| ${label[$mode]} | $(bench_median "$u" '.msgs_per_s | floor') | $(bench_median "$u" '.latency_us.p50') | $(bench_median "$u" '.latency_us.p99') | $(bench_median "$u" '.latency_us.p999') | $(bench_median "$b" '.msgs_per_s | floor') | $(bench_median "$b" '.mb_per_s * 10 | round / 10') | $(bench_median "$b" '.latency_us.p50') | $(bench_median "$b" '.latency_us.p99') | $(bench_median "$b" '.errors') | $lag_b | $lag_ms |"
  done
  echo "<!-- bench-ha.sh:end -->"
)
echo
echo "$table"
bench_write_doc bench-ha.sh "$table" "$doc"
