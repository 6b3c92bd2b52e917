#!/usr/bin/env bash
# ringmq against the Rust port of RocketMQ (rocketmq-namesrv + rocketmq-broker 1.0.0 from
# crates.io), side by side with the same RocketMQ client (issue #40 item 3): the port's own
# client benchmark, `client-production-benchmark` of rocketmq-client-rust 1.0.0, drives a fresh
# `ringmq standalone --shards 1` and a fresh port name server + broker per round and flush mode,
# the two alternating which goes first. The brokers are pinned to one core (BENCH_SERVER_CPU,
# 0) and the client to another (BENCH_CLIENT_CPU, 1) with `taskset`. Medians over the rounds
# go to stdout as a markdown table and, with BENCH_DOC, into that file between the
# bench-rocketmq.sh markers. Progress goes to stderr.
#
#   scripts/rocketmq-rust.sh                              # once: installs the port (see there)
#   scripts/bench-rocketmq.sh                             # 2 rounds, ASYNC and SYNC_FLUSH
#   BENCH_ROUNDS=3 BENCH_DOC=docs/perf.md scripts/bench-rocketmq.sh
#
# Scenarios, each round and broker (the example's own; 1 KiB bodies, one topic per scenario,
# created by the first send with the brokers' autoCreateTopicEnable, 8 queues on both):
#   sync       BENCH_SYNC (5000) sends, one at a time (DefaultMQProducer::send)
#   async      BENCH_ASYNC (20000) sends with a callback, all issued at once; the example
#              waits at most 2 x BENCH_TIMEOUT_MS (10000) for the answers and counts the rest
#              as failed
#   batch      BENCH_BATCH (300000) messages in batches of BENCH_BATCH_SIZE (32), one batch at
#              a time
#   lite-pull  BENCH_LITE_PULL (20000) messages seeded into one queue by sync sends, then
#              pulled by a DefaultLitePullConsumer (pull batch BENCH_BATCH_SIZE); msgs/s is the
#              pull's, the broker CPU covers the seeding and the pull. The example asks the
#              name server for the topic's queues before its first send (and stops with
#              core.argument.invalid when the topic has no route), so the topic is created
#              first, outside the measured window, by 8 sync sends of the example (one per
#              queue; the pull reads the one in its queue but counts only its own tag)
# Flush modes (BENCH_FLUSH, "async sync"): ringmq `--flush async|sync`; the port
# flushDiskType=ASYNC_FLUSH|SYNC_FLUSH.
#
# Figures per scenario and broker: msgs/s, latency p50/p99 (ms) and completed messages as the
# example reports them (its --output-json), and the broker's CPU per completed message:
# utime+stime from /proc/<pid>/stat, from just before the client starts to just after it
# exits, divided by the messages it completed. ringmq standalone is name server and broker
# in one process; for the port the two processes' CPU is added.
#
# The port runs with ROCKETMQ_HOME and HOME set to a fresh folder of the work directory (its
# logs and state go there), ROCKETMQ_SECURITY_PROFILE=development-insecure-loopback (it checks
# that every listener is on loopback), free ports picked on 127.0.0.1, and a conf/broker.toml
# as its README shows for a single local master (every listener on 127.0.0.1, brokerIp1
# 127.0.0.1, ASYNC_MASTER) plus flushDiskType and autoCreateTopicEnable = true; new topics
# get the port's default of 8 queues (its broker 1.0.0 refuses to start, printing only
# "core.service.failed", when the file sets defaultTopicQueueNums). Its name server and
# broker log at warn (RUST_LOG).
#
# Environment: BENCH_ROUNDS (2), BENCH_FLUSH ("async sync"), BENCH_SCENARIOS ("sync async batch
# lite-pull"), BENCH_SYNC, BENCH_ASYNC, BENCH_BATCH, BENCH_BATCH_SIZE, BENCH_LITE_PULL,
# BENCH_TIMEOUT_MS, BENCH_SIZE (1024), BENCH_SERVER_CPU (0), BENCH_CLIENT_CPU (1), BENCH_DIR
# (work directory, removed at the end unless BENCH_KEEP=1), BENCH_DOC ("-" = stdout only),
# BENCH_NO_BUILD=1 (target/release as it is), BENCH_COMMIT, BENCH_REPORT_ONLY=1 (only the
# table, from the results in BENCH_DIR), RMQ_RUST_ROOT (where scripts/rocketmq-rust.sh
# installed the port).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench-lib.sh
. scripts/bench-lib.sh
# shellcheck source=scripts/rocketmq-rust.sh
. scripts/rocketmq-rust.sh

case "${1:-}" in
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "bench-rocketmq.sh takes no arguments (see --help)" >&2; exit 2 ;;
esac

rounds=${BENCH_ROUNDS:-2}
flushes=${BENCH_FLUSH:-async sync}
scenarios=${BENCH_SCENARIOS:-sync async batch lite-pull}
batch_size=${BENCH_BATCH_SIZE:-32}
timeout_ms=${BENCH_TIMEOUT_MS:-10000}
size=${BENCH_SIZE:-1024}
server_cpu=${BENCH_SERVER_CPU:-0}
client_cpu=${BENCH_CLIENT_CPU:-1}
doc=${BENCH_DOC:--}
work=${BENCH_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/ringmq-bench-rocketmq.XXXXXX")}
hz=$(getconf CLK_TCK)
declare -A count=(
  [sync]=${BENCH_SYNC:-5000} [async]=${BENCH_ASYNC:-20000}
  [batch]=${BENCH_BATCH:-300000} [lite-pull]=${BENCH_LITE_PULL:-20000}
)
declare -A flush_name=([async]=ASYNC_FLUSH [sync]=SYNC_FLUSH)

for tool in jq taskset; do
  command -v "$tool" >/dev/null || { echo "bench-rocketmq.sh needs $tool" >&2; exit 2; }
done
for f in $flushes; do
  [ -n "${flush_name[$f]:-}" ] || { echo "BENCH_FLUSH: $f is neither async nor sync" >&2; exit 2; }
done
for s in $scenarios; do
  [ -n "${count[$s]:-}" ] || { echo "BENCH_SCENARIOS: unknown scenario $s" >&2; exit 2; }
done
mkdir -p "$work"
work=$(cd "$work" && pwd -P)

if [ "${BENCH_REPORT_ONLY:-0}" != 1 ]; then
  rmq_rust_installed || { echo "the Rust port is not installed in $RMQ_RUST_ROOT: run scripts/rocketmq-rust.sh first" >&2; exit 2; }
  if [ "${BENCH_NO_BUILD:-0}" = 1 ]; then
    ringmq=${BENCH_RINGMQ:-target/release/ringmq}
    commit=$(bench_commit)
  else
    bench_setup bench-rocketmq.sh
  fi
  commit=${BENCH_COMMIT:-$commit}
  # Copies, so a rebuild in the tree during the run does not change what is measured.
  mkdir -p "$work/bin"
  cp "$ringmq" "$work/bin/ringmq"
  ringmq=$work/bin/ringmq
  jq -n --arg commit "$commit" --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" \
    --argjson rounds "$rounds" '{commit: $commit, load_before: $load, rounds: $rounds}' >"$work/meta.json"
fi

# --- brokers --------------------------------------------------------------------------------

pids=() # the running broker processes (bench_stop_all)
cleanup() {
  bench_stop_all
  rm -rf "$work"/data.* "$work/bin"
  [ "${BENCH_KEEP:-0}" = 1 ] || [ "${BENCH_REPORT_ONLY:-0}" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT

start_ringmq() { # DATA FLUSH
  RUST_LOG=warn taskset -c "$server_cpu" "$ringmq" standalone --data "$1" --namesrv-port 0 \
    --broker-port 0 --grpc-port 0 --shards 1 --flush "$2" >"$work/ringmq.out" 2>"$work/ringmq.err" &
  pids=($!)
  bench_wait_line "$work/ringmq.out" ready "ringmq standalone"
  namesrv=$(grep -o 'namesrv [0-9.:]*' "$work/ringmq.out" | cut -d' ' -f2)
}

start_port() { rmq_rust_start "$1" "${flush_name[$2]}" BenchCluster; } # DATA FLUSH

# client SCENARIO TOPIC COUNT JSON: the benchmark client on the client core.
client() {
  ROCKETMQ_HOME="$work" taskset -c "$client_cpu" "$rmq_bench_client" --namesrv "$namesrv" \
    --topic "$2" --scenario "$1" --message-count "$3" --message-size "$size" \
    --batch-size "$batch_size" --timeout-ms "$timeout_ms" --output-json "$4"
}

# sync_sends TOPIC COUNT WHAT: COUNT sync sends to TOPIC, again each second until all of one
# round succeed (the topic created, its route registered, the connection made), at most 30 s.
sync_sends() {
  for _ in $(seq 1 30); do
    client sync "$1" "$2" "$work/$3.json" >"$work/$3.out" 2>&1 \
      && [ "$(jq .result.success_count "$work/$3.json")" = "$2" ] && return 0
    sleep 1
  done
  echo "$3 sends did not succeed within 30 s:" >&2; tail -n 20 "$work/$3.out" >&2; exit 1
}

run_scenario() { # ROUND FLUSH BROKER SCENARIO
  local round=$1 flush=$2 broker=$3 s=$4 n=${count[$4]} c0 c1
  local f="$work/r$round-$flush-$broker-$s" topic="Bench_${s/-/_}_r$round"
  # lite-pull reads the topic's queues before it sends: the topic must exist (see --help).
  [ "$s" = lite-pull ] && sync_sends "$topic" 8 create-topic
  printf '[round %d/%d] %-6s %-7s %-9s ' "$round" "$rounds" "$flush" "$broker" "$s" >&2
  c0=$(bench_cpu_ticks "${pids[@]}")
  client "$s" "$topic" "$n" "$f.report.json" >"$f.out" 2>&1 || true
  c1=$(bench_cpu_ticks "${pids[@]}")
  if [ ! -f "$f.report.json" ]; then
    echo "no report:" >&2; tail -n 5 "$f.out" >&2
    jq -n --argjson n "$n" '{asked: $n, completed: 0, msgs_per_s: 0, p50_ms: null, p99_ms: null, us_per_msg: null}' >"$f.json"
    return 0
  fi
  jq --argjson ticks $((c1 - c0)) --argjson hz "$hz" --argjson n "$n" '.result
    | {asked: $n, completed: .success_count, failed: (.send_failed_count + .response_failed_count),
       msgs_per_s: (.throughput_messages_per_second | floor),
       p50_ms: (.latency_us.p50 / 1000), p99_ms: (.latency_us.p99 / 1000), cpu_s: ($ticks / $hz),
       us_per_msg: (if .success_count > 0 then $ticks / $hz * 1e6 / .success_count else null end)}' \
    "$f.report.json" >"$f.json"
  jq -r '"\(.msgs_per_s) msgs/s, \(.completed) of \(.asked), p50 \(.p50_ms) ms, p99 \(.p99_ms) ms, broker \(.cpu_s) s CPU = \((.us_per_msg // 0) * 100 | round / 100) µs/msg"' "$f.json" >&2
}

run_broker() { # ROUND FLUSH BROKER
  local data; data=$(mktemp -d "$work/data.XXXXXX")
  if [ "$3" = ringmq ]; then start_ringmq "$data/ringmq" "$2"; else start_port "$data" "$2"; fi
  sync_sends BenchWarmup 16 warm-up
  for s in $scenarios; do run_scenario "$1" "$2" "$3" "$s"; done
  bench_stop_all
  rm -rf "$data"
}

if [ "${BENCH_REPORT_ONLY:-0}" != 1 ]; then
  echo "work directory: $work; $rounds rounds; brokers on CPU $server_cpu, client on CPU $client_cpu; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  for round in $(seq 1 "$rounds"); do
    for flush in $flushes; do
      if [ $((round % 2)) = 1 ]; then run_broker "$round" "$flush" ringmq; run_broker "$round" "$flush" port
      else run_broker "$round" "$flush" port; run_broker "$round" "$flush" ringmq; fi
    done
  done
  jq --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" '. + {load_after: $load}' "$work/meta.json" >"$work/meta.tmp"
  mv "$work/meta.tmp" "$work/meta.json"
fi

# --- table ----------------------------------------------------------------------------------

med() { bench_median "$work/r*-$1-$2-$3.json" "$4"; } # FLUSH BROKER SCENARIO EXPR
per_round() { jq -s -r "[.[] | $4 | tostring] | join(\" / \")" "$work"/r*-"$1-$2-$3".json; }
meta() { jq -r ".$1" "$work/meta.json"; }
ratio() { jq -n -r --argjson a "$1" --argjson b "$2" 'if $a == null or $b == null or $b == 0 then "-" else ($a / $b * 100 | round / 100 | tostring) + "x" end'; }

table=$(
  echo "<!-- bench-rocketmq.sh:begin (generated by scripts/bench-rocketmq.sh; edits here are overwritten) -->"
  echo "### ringmq and the Rust port of RocketMQ with the same client (scripts/bench-rocketmq.sh)"
  echo
  echo "ringmq \`$(meta commit)\` (\`ringmq standalone --shards 1\`) and the Rust port's"
  echo "\`rocketmq-namesrv-rust\` + \`rocketmq-broker-rust\` $RMQ_RUST_VERSION (crates.io), $(date -u +%Y-%m-%d), $(nproc) cores:"
  echo "the brokers pinned to CPU $server_cpu, the client (rocketmq-client-rust $RMQ_RUST_VERSION's"
  echo "\`client-production-benchmark\`) to CPU $client_cpu. Load average $(meta load_before) before, $(meta load_after) after."
  echo "1 KiB bodies, batch and pull batch $batch_size. Medians of $(meta rounds) rounds (a fresh broker per round and"
  echo "flush mode, the two alternating which goes first). Completed: messages the client counted"
  echo "as sent (or pulled) of those asked. Broker CPU: utime+stime of the broker's processes"
  echo "(ringmq: one; the port: name server + broker) over the client's run, per completed message."
  echo
  echo "| flush | scenario | messages | ringmq msgs/s | port msgs/s | ringmq / port | ringmq p50 / p99 ms | port p50 / p99 ms | ringmq CPU µs/msg | port CPU µs/msg | completed ringmq; port |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  for flush in $flushes; do
    for s in $scenarios; do
      r=$(med "$flush" ringmq "$s" .msgs_per_s) p=$(med "$flush" port "$s" .msgs_per_s)
      echo "| ${flush_name[$flush]} | $s | ${count[$s]} | $r | $p | $(ratio "$r" "$p") | $(med "$flush" ringmq "$s" .p50_ms) / $(med "$flush" ringmq "$s" .p99_ms) | $(med "$flush" port "$s" .p50_ms) / $(med "$flush" port "$s" .p99_ms) | $(med "$flush" ringmq "$s" '.us_per_msg | values * 100 | round / 100') | $(med "$flush" port "$s" '.us_per_msg | values * 100 | round / 100') | $(per_round "$flush" ringmq "$s" .completed); $(per_round "$flush" port "$s" .completed) |"
    done
  done
  echo
  echo "Per round (msgs/s, ringmq; port):"
  for flush in $flushes; do
    for s in $scenarios; do
      echo "${flush_name[$flush]} $s: $(per_round "$flush" ringmq "$s" .msgs_per_s); $(per_round "$flush" port "$s" .msgs_per_s)."
    done
  done
  echo "<!-- bench-rocketmq.sh:end -->"
)
echo
echo "$table"
bench_write_doc bench-rocketmq.sh "$table" "$doc"
