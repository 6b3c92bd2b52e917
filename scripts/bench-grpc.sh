#!/usr/bin/env bash
# RocketMQ 5's gRPC protocol on ringmq (issue #38 item 6), same run: (1) ringmq's gRPC edge
# against its native and remoting protocols on the same node, and (2) ringmq's gRPC edge
# against the Rust port of RocketMQ's gRPC proxy (rocketmq-proxy + rocketmq-namesrv +
# rocketmq-broker 1.0.0, crates.io), the same gRPC client driving both. A fresh
# `ringmq standalone --shards 1` (and a fresh port) per round, the brokers pinned to one core
# (BENCH_SERVER_CPU, 0) and every client to another (BENCH_CLIENT_CPU, 1). Medians over the
# rounds go to stdout as markdown tables and, with BENCH_DOC, into that file between the
# bench-grpc.sh markers. Progress goes to stderr.
#
#   scripts/rocketmq-rust.sh                             # once, for part (2)
#   scripts/bench-grpc.sh                                # 2 rounds
#   BENCH_ROUNDS=3 BENCH_DOC=docs/perf.md scripts/bench-grpc.sh
#   BENCH_PORT=0 scripts/bench-grpc.sh                   # part (1) only
#
# Clients: gRPC: `interop/examples/grpc_bench.rs` (RocketMQ 5's Rust SDK, crates.io `rocketmq`
# 5.0.0: Producer::batch_send / SimpleConsumer::receive_with + ack, BENCH_CONCURRENCY requests
# in flight, one client); native and remoting: `ringmq-perf` (`--protocol native|remoting`,
# one producer with BENCH_CONCURRENCY sends in flight; native POP consumption `--pop`).
# Remoting POP is not in ringmq-perf, so the consume rows have native and gRPC only.
#
# Cells, each round (closed loop, 1 KiB bodies, topics of 8 queues created before the cell):
#   send batched     BENCH_BATCHED (100000) messages in sends of BENCH_BATCH (32)
#   send unbatched   BENCH_UNBATCHED (20000) messages, one per send
#   consume          the batched cell's messages received (at most BENCH_BATCH per receive)
#                    and acked, one consumer group: native POP (until idle for 3 s: every
#                    message of the topic); gRPC ReceiveMessage + AckMessage (until --count)
# Broker CPU: utime+stime from /proc/<pid>/stat over the client's run, per message moved
# (ringmq: the one process, gRPC edge included; the port: proxy + name server + broker).
# Before each ringmq cell the node is left to go idle (at most 30 s).
#
# The port: ROCKETMQ_HOME and HOME a fresh folder, ROCKETMQ_SECURITY_PROFILE=
# development-insecure-loopback, every listener on 127.0.0.1 (free ports), ASYNC_FLUSH, its
# broker.toml as scripts/bench-rocketmq.sh writes it but in cluster DefaultCluster (the
# proxy 1.0.0 stops at start with broker.lookup.not_found when its cluster, DefaultCluster by
# default, has no broker), the proxy `--mode cluster
# --grpcListenAddr 127.0.0.1:P --namesrvAddr ...`. Its topics are created by one remoting send
# (client-production-benchmark, autoCreateTopicEnable) before the cell; ringmq's by ringmq-perf.
#
# Environment: BENCH_ROUNDS (2), BENCH_BATCHED (100000), BENCH_UNBATCHED (20000), BENCH_BATCH
# (32), BENCH_CONCURRENCY (8), BENCH_PORT (1; 0 = part (1) only), BENCH_SERVER_CPU (0),
# BENCH_CLIENT_CPU (1), BENCH_DIR (work directory, removed unless BENCH_KEEP=1), BENCH_DOC,
# BENCH_NO_BUILD=1, BENCH_COMMIT, BENCH_REPORT_ONLY=1, RMQ_RUST_ROOT, BENCH_GRPC_CLIENT (the
# grpc_bench binary, default target/release/examples/grpc_bench).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench-lib.sh
. scripts/bench-lib.sh
# shellcheck source=scripts/rocketmq-rust.sh
. scripts/rocketmq-rust.sh

case "${1:-}" in
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "bench-grpc.sh takes no arguments (see --help)" >&2; exit 2 ;;
esac

rounds=${BENCH_ROUNDS:-2}
batched=${BENCH_BATCHED:-100000}
unbatched=${BENCH_UNBATCHED:-20000}
batch=${BENCH_BATCH:-32}
conc=${BENCH_CONCURRENCY:-8}
with_port=${BENCH_PORT:-1}
server_cpu=${BENCH_SERVER_CPU:-0}
client_cpu=${BENCH_CLIENT_CPU:-1}
doc=${BENCH_DOC:--}
work=${BENCH_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/ringmq-bench-grpc.XXXXXX")}
hz=$(getconf CLK_TCK)
size=1024

for tool in jq taskset; do
  command -v "$tool" >/dev/null || { echo "bench-grpc.sh needs $tool" >&2; exit 2; }
done
mkdir -p "$work"
work=$(cd "$work" && pwd -P)

if [ "${BENCH_REPORT_ONLY:-0}" != 1 ]; then
  if [ "$with_port" = 1 ] && ! rmq_rust_installed; then
    echo "the Rust port is not installed in $RMQ_RUST_ROOT: run scripts/rocketmq-rust.sh (or BENCH_PORT=0)" >&2
    exit 2
  fi
  if [ "${BENCH_NO_BUILD:-0}" = 1 ]; then
    ringmq=${BENCH_RINGMQ:-target/release/ringmq} perf=target/release/ringmq-perf
    commit=$(bench_commit)
  else
    bench_setup bench-grpc.sh
    echo "building the gRPC client (cargo build --release -p ringmq-interop --example grpc_bench) ..." >&2
    cargo build --release -p ringmq-interop --example grpc_bench >&2
  fi
  commit=${BENCH_COMMIT:-$commit}
  mkdir -p "$work/bin"
  cp "$ringmq" "$perf" "$work/bin/"
  cp "${BENCH_GRPC_CLIENT:-target/release/examples/grpc_bench}" "$work/bin/grpc_bench"
  ringmq=$work/bin/ringmq perf=$work/bin/ringmq-perf
  jq -n --arg commit "$commit" --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" \
    --arg memory "$(scripts/bench-memory.sh status)" --argjson rounds "$rounds" \
    '{commit: $commit, load_before: $load, rounds: $rounds, memory_before: $memory}' >"$work/meta.json"
fi
grpc_bench=$work/bin/grpc_bench

# --- processes ------------------------------------------------------------------------------

pids=() # the running broker processes (bench_stop_all)
cleanup() {
  bench_stop_all
  rm -rf "$work"/data.* "$work/bin"
  [ "${BENCH_KEEP:-0}" = 1 ] || [ "${BENCH_REPORT_ONLY:-0}" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT

start_ringmq() { # DATA
  RUST_LOG=warn taskset -c "$server_cpu" "$ringmq" standalone --data "$1" --namesrv-port 0 \
    --broker-port 0 --grpc-port 0 --shards 1 --flush async >"$work/ringmq.out" 2>"$work/ringmq.err" &
  pids=($!)
  bench_wait_line "$work/ringmq.out" ready "ringmq standalone"
  namesrv=$(grep -o 'namesrv [0-9.:]*' "$work/ringmq.out" | cut -d' ' -f2)
  grpc=$(sed -n 's/^ringmq grpc: //p' "$work/ringmq.out" | head -n 1)
  [ -n "$grpc" ] || { echo "ringmq standalone printed no gRPC address" >&2; exit 1; }
}

start_port() { # DATA
  local data=$1 px_port
  rmq_rust_start "$data" ASYNC_FLUSH DefaultCluster
  px_port=$(bench_free_port)
  (rmq_rust_exec "$data" taskset -c "$server_cpu" "$rmq_proxy" --mode cluster \
    --grpcListenAddr "127.0.0.1:$px_port" --namesrvAddr "$namesrv") >"$work/proxy.out" 2>&1 &
  pids+=($!)
  bench_wait_port "$px_port" "${pids[2]}" "rocketmq-proxy-rust" "$work/proxy.out"
  grpc=127.0.0.1:$px_port
}

# create_topic BROKER TOPIC: 8 queues. ringmq: ringmq-perf creates it (one message sent);
# the port: one remoting send (autoCreateTopicEnable), retried until routes are registered.
create_topic() {
  if [ "$1" = ringmq ]; then
    "$perf" produce -n "$namesrv" --topic "$2" --queues 8 --count 1 --inflight 1 -q \
      >"$work/create.out" 2>&1 || { echo "creating $2 failed:" >&2; cat "$work/create.out" >&2; exit 1; }
    return 0
  fi
  for _ in $(seq 1 30); do
    ROCKETMQ_HOME="$work" "$rmq_bench_client" --namesrv "$namesrv" --topic "$2" --scenario sync \
      --message-count 1 --message-size "$size" --output-json "$work/create.json" >"$work/create.out" 2>&1 \
      && [ "$(jq .result.success_count "$work/create.json")" = 1 ] && return 0
    sleep 1
  done
  echo "creating $2 on the port failed:" >&2; tail -n 20 "$work/create.out" >&2; exit 1
}

# record FILE TICKS MESSAGES MSGS_PER_S P50 P99 ERRORS
record() {
  jq -n --argjson ticks "$2" --argjson hz "$hz" --argjson n "$3" --argjson r "$4" \
    --argjson p50 "$5" --argjson p99 "$6" --argjson errors "$7" \
    '{messages: $n, msgs_per_s: ($r | floor), p50_us: $p50, p99_us: $p99, errors: $errors,
      cpu_s: ($ticks / $hz), us_per_msg: (if $n > 0 then $ticks / $hz * 1e6 / $n else null end)}' >"$1"
  jq -r '"\(.msgs_per_s) msgs/s, \(.messages) messages, p50 \(.p50_us) µs, p99 \(.p99_us) µs, errors \(.errors), broker \(.cpu_s) s CPU = \((.us_per_msg // 0) * 100 | round / 100) µs/msg"' "$1" >&2
}

# perf_cell ROUND CELL ringmq-perf-args...
perf_cell() {
  local round=$1 cell=$2 c0 c1 f; shift 2
  f="$work/r$round-$cell"
  bench_settle "${pids[@]}"
  printf '[round %d/%d] %-28s ' "$round" "$rounds" "$cell" >&2
  c0=$(bench_cpu_ticks "${pids[@]}")
  taskset -c "$client_cpu" "$perf" "$@" -n "$namesrv" --threads 1 -q --json "$f.perf.json" \
    >"$f.out" 2>&1 || { echo "failed:" >&2; tail -n 20 "$f.out" >&2; exit 1; }
  c1=$(bench_cpu_ticks "${pids[@]}")
  record "$f.json" $((c1 - c0)) "$(jq .messages "$f.perf.json")" "$(jq .msgs_per_s "$f.perf.json")" \
    "$(jq '.latency_us.p50 // null' "$f.perf.json")" "$(jq '.latency_us.p99 // null' "$f.perf.json")" \
    "$(jq '.errors // 0' "$f.perf.json")"
}

# grpc_cell ROUND CELL grpc_bench-args... (a failed cell ends the run; with MAY_FAIL=1 it is
# reported under the table, its last error line in CELL.failed, and the run goes on)
grpc_cell() {
  local round=$1 cell=$2 c0 c1 f; shift 2
  f="$work/r$round-$cell"
  [ "${cell%%-*}" = ringmq ] && bench_settle "${pids[@]}"
  printf '[round %d/%d] %-28s ' "$round" "$rounds" "$cell" >&2
  c0=$(bench_cpu_ticks "${pids[@]}")
  if ! taskset -c "$client_cpu" "$grpc_bench" --endpoint "$grpc" --concurrency "$conc" "$@" \
    >"$f.out" 2>"$f.err"; then
    echo "failed:" >&2; tail -n 5 "$f.err" >&2; tail -n 2 "$f.out" >&2
    [ "${MAY_FAIL:-0}" = 1 ] || exit 1
    { grep -i 'code\|message\|error' "$f.err" || true; } | tr -s ' ' | tail -n 3 | paste -sd ' ' >"$f.failed"
    return 0
  fi
  c1=$(bench_cpu_ticks "${pids[@]}")
  local line; line=$(grep '^{"messages"' "$f.out" | tail -n 1)
  record "$f.json" $((c1 - c0)) "$(jq .messages <<<"$line")" "$(jq .msgs_per_s <<<"$line")" \
    "$(jq .latency_us.p50 <<<"$line")" "$(jq .latency_us.p99 <<<"$line")" "$(jq .errors <<<"$line")"
}

ringmq_round() { # ROUND
  local r=$1 data; data=$(mktemp -d "$work/data.XXXXXX")
  start_ringmq "$data/ringmq"
  local t
  for t in gb-native gb-remoting gb-grpc g1-native g1-remoting g1-grpc; do create_topic ringmq "$t"; done
  local common=(--size "$size" --producers 1 --inflight "$conc" --send-timeout 30s)
  # The protocols of each group alternate which goes first.
  local order=(native remoting grpc)
  [ $((r % 2)) = 0 ] && order=(grpc remoting native)
  for p in "${order[@]}"; do
    case $p in
      grpc) grpc_cell "$r" ringmq-send-batched-grpc --topic gb-grpc --count "$batched" --batch "$batch" send --size "$size" ;;
      *) perf_cell "$r" "ringmq-send-batched-$p" produce --protocol "$p" --topic "gb-$p" --batch "$batch" --count "$batched" "${common[@]}" ;;
    esac
  done
  for p in "${order[@]}"; do
    case $p in
      grpc) grpc_cell "$r" ringmq-send-unbatched-grpc --topic g1-grpc --count "$unbatched" --batch 1 send --size "$size" ;;
      *) perf_cell "$r" "ringmq-send-unbatched-$p" produce --protocol "$p" --topic "g1-$p" --batch 1 --count "$unbatched" "${common[@]}" ;;
    esac
  done
  for p in "${order[@]}"; do
    case $p in
      grpc) grpc_cell "$r" ringmq-consume-grpc --topic gb-grpc --count "$batched" --batch "$batch" receive --group "bench-grpc-$r" ;;
      native) perf_cell "$r" ringmq-consume-native consume --pop --topic gb-native --group "bench-pop-$r" --pull-batch "$batch" --consumers 1 --duration 600s --idle-exit 3s ;;
    esac
  done
  bench_stop_all
  rm -rf "$data"
}

port_round() { # ROUND
  local r=$1 data; data=$(mktemp -d "$work/data.XXXXXX")
  start_port "$data"
  create_topic port gb-grpc
  create_topic port g1-grpc
  grpc_cell "$r" port-send-batched-grpc --topic gb-grpc --count "$batched" --batch "$batch" send --size "$size"
  grpc_cell "$r" port-send-unbatched-grpc --topic g1-grpc --count "$unbatched" --batch 1 send --size "$size"
  MAY_FAIL=1 grpc_cell "$r" port-consume-grpc --topic gb-grpc --count "$batched" --batch "$batch" receive --group "bench-grpc-$r"
  bench_stop_all
  rm -rf "$data"
}

if [ "${BENCH_REPORT_ONLY:-0}" != 1 ]; then
  echo "work directory: $work; $rounds rounds; brokers on CPU $server_cpu, clients on CPU $client_cpu; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  for round in $(seq 1 "$rounds"); do
    if [ "$with_port" != 1 ]; then ringmq_round "$round"
    elif [ $((round % 2)) = 1 ]; then ringmq_round "$round"; port_round "$round"
    else port_round "$round"; ringmq_round "$round"; fi
  done
  jq --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" '. + {load_after: $load}' "$work/meta.json" >"$work/meta.tmp"
  mv "$work/meta.tmp" "$work/meta.json"
fi

# --- tables ---------------------------------------------------------------------------------

med() { bench_median "$work/r*-$1.json" "$2"; }
us() { med "$1" '.us_per_msg | values * 100 | round / 100'; }
per_round() { jq -s -r "[.[] | $2 | tostring] | join(\" / \")" "$work"/r*-"$1".json 2>/dev/null || echo "-"; }
# ratio A B: A's broker µs/msg over B's, per round, median of the rounds.
ratio() {
  local r
  for r in $(seq 1 "$(jq -r .rounds "$work/meta.json")"); do
    [ -f "$work/r$r-$1.json" ] && [ -f "$work/r$r-$2.json" ] || continue
    jq -n --slurpfile a "$work/r$r-$1.json" --slurpfile b "$work/r$r-$2.json" \
      'if $a[0].us_per_msg == null or $b[0].us_per_msg == null or $b[0].us_per_msg == 0 then empty else $a[0].us_per_msg / $b[0].us_per_msg end'
  done | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else printf "%.2fx", v[int((NR + 1) / 2)] }'
}
meta() { jq -r ".$1" "$work/meta.json"; }
row() { # LABEL CELL BASE
  local rat=1
  [ -n "$3" ] && rat=$(ratio "$2" "$3")
  echo "| $1 | $(med "$2" .messages) | $(med "$2" .msgs_per_s) | $(med "$2" .p50_us) / $(med "$2" .p99_us) | $(med "$2" .errors) | $(us "$2") | $rat | $(per_round "$2" .msgs_per_s) | $(per_round "$2" '.us_per_msg | values * 100 | round / 100') |"
}

table=$(
  echo "<!-- bench-grpc.sh:begin (generated by scripts/bench-grpc.sh; edits here are overwritten) -->"
  echo "### gRPC against native and remoting, and against the Rust port's proxy (scripts/bench-grpc.sh)"
  echo
  echo "ringmq \`$(meta commit)\` (\`ringmq standalone --shards 1 --flush async\`, gRPC edge in the same"
  echo "process), $(date -u +%Y-%m-%d), $(nproc) cores: brokers pinned to CPU $server_cpu, clients to CPU $client_cpu. Load average"
  echo "$(meta load_before) before, $(meta load_after) after. 1 KiB bodies, $conc requests in flight, batch $batch. Medians of"
  echo "$(meta rounds) rounds (a fresh node per round). gRPC client: RocketMQ 5's Rust SDK \`rocketmq\` 5.0.0"
  echo "(\`interop/examples/grpc_bench.rs\`); native and remoting: \`ringmq-perf\`. Latency: per send request,"
  echo "or per receive call. Broker CPU: utime+stime over the client's run, per message. Ratio: the"
  echo "cell's broker µs/msg over the native cell's (or over ringmq's gRPC cell for the port), per"
  echo "round, median."
  echo
  echo "Memory at the start: $(meta memory_before) (scripts/bench-memory.sh)."
  echo
  echo "| cell | messages | msgs/s | p50 / p99 µs | errors | broker CPU µs/msg | ratio | msgs/s per round | µs/msg per round |"
  echo "|---|---|---|---|---|---|---|---|---|"
  row "ringmq send batched $batch, native" ringmq-send-batched-native ""
  row "ringmq send batched $batch, remoting" ringmq-send-batched-remoting ringmq-send-batched-native
  row "ringmq send batched $batch, gRPC" ringmq-send-batched-grpc ringmq-send-batched-native
  row "ringmq send unbatched, native" ringmq-send-unbatched-native ""
  row "ringmq send unbatched, remoting" ringmq-send-unbatched-remoting ringmq-send-unbatched-native
  row "ringmq send unbatched, gRPC" ringmq-send-unbatched-grpc ringmq-send-unbatched-native
  row "ringmq consume, native POP" ringmq-consume-native ""
  row "ringmq consume, gRPC ReceiveMessage + ack" ringmq-consume-grpc ringmq-consume-native
  if ls "$work"/r*-port-*.json >/dev/null 2>&1; then
    row "port send batched $batch, gRPC" port-send-batched-grpc ringmq-send-batched-grpc
    row "port send unbatched, gRPC" port-send-unbatched-grpc ringmq-send-unbatched-grpc
    if ls "$work"/r*-port-consume-grpc.json >/dev/null 2>&1; then
      row "port consume, gRPC ReceiveMessage + ack" port-consume-grpc ringmq-consume-grpc
    fi
  fi
  for failed in "$work"/r*.failed; do
    [ -f "$failed" ] || continue
    echo
    echo "Failed: $(basename "$failed" .failed): $(cat "$failed")"
  done
  echo "<!-- bench-grpc.sh:end -->"
)
echo
echo "$table"
bench_write_doc bench-grpc.sh "$table" "$doc"
