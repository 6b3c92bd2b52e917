#!/usr/bin/env bash
# ringmq against the Rust port of RocketMQ (rocketmq-namesrv + rocketmq-broker 1.0.0 from
# crates.io), side by side with the same RocketMQ client (issue #40 item 3), and ringmq at
# several shard counts under that client, same run (issue #40 item 1): the port's own client
# benchmark, `client-production-benchmark` of rocketmq-client-rust 1.0.0, drives a fresh
# `ringmq standalone --shards N` for each shard count of BENCH_SHARDS ("1") and a fresh port
# name server + broker per round and flush mode. The nodes go in that order (ringmq's shard
# counts as listed, then the port) in odd rounds and in the reverse order in even ones.
# Medians over the rounds go to stdout as markdown tables and, with BENCH_DOC, into that file
# between the bench-rocketmq.sh markers (the side-by-side run: one shard count and the port)
# or between the bench-rocketmq.sh/shards markers (any other run: more than one shard count
# or BENCH_PORT=0), so neither run overwrites the other's table. Progress goes to stderr.
#
#   scripts/rocketmq-rust.sh                              # once: installs the port (see there)
#   scripts/bench-rocketmq.sh                             # 2 rounds, ASYNC and SYNC_FLUSH
#   BENCH_ROUNDS=3 BENCH_DOC=docs/perf.md scripts/bench-rocketmq.sh
#   BENCH_PORT=0 BENCH_SHARDS="1 2" BENCH_FLUSH=async BENCH_SCENARIOS=batch BENCH_ROUNDS=3 \
#     BENCH_DOC=docs/perf.md scripts/bench-rocketmq.sh    # shard scaling alone
#
# Pinning (taskset): the client always on BENCH_CLIENT_CPU (1). The brokers on
# BENCH_SERVER_CPU, whose default is CPU 0 when BENCH_SHARDS is "1" and every core otherwise:
# a node of 2 shards needs 2 cores, and in a run that compares shard counts every node gets
# the same cores, so a ratio between shard counts changes one thing, the shard count, and not
# the cores as well. ringmq pins its shards itself (pinCores, on by default): shard i on CPU
# i mod the cores it may use, counted from CPU 0 (keep BENCH_SERVER_CPU starting at 0); its
# other threads (name server, gRPC edge, fdatasync and readahead helpers) run on any core of
# BENCH_SERVER_CPU. On 2 cores that is: 1 shard on CPU 0, 2 shards on CPUs 0 and 1, the
# second sharing CPU 1 with the client, the node's helpers on both. With the load generator
# on cores of its own (4+ cores: BENCH_SERVER_CPU=0-1 BENCH_CLIENT_CPU=2-3) nothing is shared.
# The port, when it runs, is on BENCH_SERVER_CPU as well.
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
# exits, divided by the messages it completed; and over the same span the cores busy, of the
# whole machine (/proc/stat) and of the node alone. ringmq standalone is name server and broker
# in one process; for the port the two processes' CPU is added. Tables: the side-by-side run
# (one shard count, with the port) has one row per flush mode and scenario, ringmq and the
# port in columns; any other run has one row per node ("ringmq 1 shard", "ringmq 2 shards",
# "port"), and with more than one shard count a second table: each count's msgs/s and broker
# CPU µs/msg over the first count's, per round (same round and flush mode), median of the
# rounds and each round's ratio.
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
# Environment: BENCH_ROUNDS (2), BENCH_SHARDS ("1"; ringmq's shard counts, e.g. "1 2", the
# first the base of the ratios), BENCH_PORT (1; 0 = no port, only the client binary of
# scripts/rocketmq-rust.sh needed), BENCH_FLUSH ("async sync"), BENCH_SCENARIOS ("sync async
# batch lite-pull"), BENCH_SYNC, BENCH_ASYNC, BENCH_BATCH, BENCH_BATCH_SIZE, BENCH_LITE_PULL,
# BENCH_TIMEOUT_MS, BENCH_SIZE (1024), BENCH_SERVER_CPU (0, or every core; see Pinning),
# BENCH_CLIENT_CPU (1), BENCH_DIR (work directory, removed at the end unless BENCH_KEEP=1),
# BENCH_DOC ("-" = stdout only), BENCH_NO_BUILD=1 (target/release as it is), BENCH_COMMIT,
# BENCH_REPORT_ONLY=1 (only the tables, from the results in BENCH_DIR, with the same
# BENCH_SHARDS, BENCH_PORT, BENCH_FLUSH and BENCH_SCENARIOS), RMQ_RUST_ROOT (where
# scripts/rocketmq-rust.sh installed the port).
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
read -ra shards <<<"${BENCH_SHARDS:-1}"
with_port=${BENCH_PORT:-1}
flushes=${BENCH_FLUSH:-async sync}
scenarios=${BENCH_SCENARIOS:-sync async batch lite-pull}
batch_size=${BENCH_BATCH_SIZE:-32}
timeout_ms=${BENCH_TIMEOUT_MS:-10000}
size=${BENCH_SIZE:-1024}
if [ "${shards[*]}" = 1 ]; then server_cpu=${BENCH_SERVER_CPU:-0}
else server_cpu=${BENCH_SERVER_CPU:-0-$(($(nproc) - 1))}; fi
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
[ "${#shards[@]}" -gt 0 ] || { echo "BENCH_SHARDS: no shard count given" >&2; exit 2; }
for n in "${shards[@]}"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "BENCH_SHARDS: $n is not a shard count" >&2; exit 2; }
  [ "$(printf '%s\n' "${shards[@]}" | grep -cx "$n")" = 1 ] \
    || { echo "BENCH_SHARDS: $n is given twice" >&2; exit 2; }
done
case $with_port in 0 | 1) ;; *) echo "BENCH_PORT: $with_port is neither 0 nor 1" >&2; exit 2 ;; esac

# The nodes of each round, in the order of odd rounds: ringmq-s<N> per shard count, the port.
nodes=()
for n in "${shards[@]}"; do nodes+=("ringmq-s$n"); done
[ "$with_port" = 1 ] && nodes+=(port)
mkdir -p "$work"
work=$(cd "$work" && pwd -P)
if [ "${BENCH_REPORT_ONLY:-0}" = 1 ] && [ ! -f "$work/meta.json" ]; then
  echo "BENCH_REPORT_ONLY: $work holds no results (no meta.json)" >&2; exit 2
fi

if [ "${BENCH_REPORT_ONLY:-0}" != 1 ]; then
  if [ "$with_port" = 1 ]; then
    rmq_rust_installed || { echo "the Rust port is not installed in $RMQ_RUST_ROOT: run scripts/rocketmq-rust.sh first (or BENCH_PORT=0)" >&2; exit 2; }
  else
    [ -x "$rmq_bench_client" ] || { echo "the client $rmq_bench_client is not installed: run scripts/rocketmq-rust.sh first" >&2; exit 2; }
  fi
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
    --arg memory "$(scripts/bench-memory.sh status)" --argjson rounds "$rounds" \
    '{commit: $commit, load_before: $load, rounds: $rounds, memory_before: $memory}' >"$work/meta.json"
fi

# --- brokers --------------------------------------------------------------------------------

pids=() # the running broker processes (bench_stop_all)
cleanup() {
  bench_stop_all
  rm -rf "$work"/data.* "$work/bin"
  [ "${BENCH_KEEP:-0}" = 1 ] || [ "${BENCH_REPORT_ONLY:-0}" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT

start_ringmq() { # DATA FLUSH SHARDS
  RUST_LOG=warn taskset -c "$server_cpu" "$ringmq" standalone --data "$1" --namesrv-port 0 \
    --broker-port 0 --grpc-port 0 --shards "$3" --flush "$2" >"$work/ringmq.out" 2>"$work/ringmq.err" &
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

# machine_ticks: "busy total" clock ticks of all cores so far (/proc/stat; busy is all but
# idle and iowait; guest time is already in user).
machine_ticks() {
  awk '/^cpu / { t = $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9; print t - $5 - $6, t }' /proc/stat
}

run_scenario() { # ROUND FLUSH NODE SCENARIO
  local round=$1 flush=$2 node=$3 s=$4 n=${count[$4]} c0 c1 m0 m1
  local f="$work/r$round-$flush-$node-$s" topic="Bench_${s/-/_}_r$round"
  # lite-pull reads the topic's queues before it sends: the topic must exist (see --help).
  [ "$s" = lite-pull ] && sync_sends "$topic" 8 create-topic
  printf '[round %d/%d] %-6s %-10s %-9s ' "$round" "$rounds" "$flush" "$node" "$s" >&2
  c0=$(bench_cpu_ticks "${pids[@]}") m0=$(machine_ticks)
  client "$s" "$topic" "$n" "$f.report.json" >"$f.out" 2>&1 || true
  c1=$(bench_cpu_ticks "${pids[@]}") m1=$(machine_ticks)
  if [ ! -f "$f.report.json" ]; then
    echo "no report:" >&2; tail -n 5 "$f.out" >&2
    jq -n --argjson n "$n" '{asked: $n, completed: 0, msgs_per_s: 0, p50_ms: null, p99_ms: null, us_per_msg: null}' >"$f.json"
    return 0
  fi
  # Cores busy over the client's run (busy ticks over elapsed ticks of one core): the whole
  # machine's, and the node's alone.
  local busy=$(( ${m1% *} - ${m0% *} )) wall=$(( (${m1#* } - ${m0#* }) / $(nproc) ))
  jq --argjson ticks $((c1 - c0)) --argjson hz "$hz" --argjson n "$n" \
    --argjson busy "$busy" --argjson wall "$wall" '.result
    | {asked: $n, completed: .success_count, failed: (.send_failed_count + .response_failed_count),
       msgs_per_s: (.throughput_messages_per_second | floor),
       p50_ms: (.latency_us.p50 / 1000), p99_ms: (.latency_us.p99 / 1000), cpu_s: ($ticks / $hz),
       us_per_msg: (if .success_count > 0 then $ticks / $hz * 1e6 / .success_count else null end),
       cores_busy: (if $wall > 0 then $busy / $wall else null end),
       node_cores: (if $wall > 0 then $ticks / $wall else null end)}' \
    "$f.report.json" >"$f.json"
  jq -r '"\(.msgs_per_s) msgs/s, \(.completed) of \(.asked), p50 \(.p50_ms) ms, p99 \(.p99_ms) ms, broker \(.cpu_s) s CPU = \((.us_per_msg // 0) * 100 | round / 100) µs/msg, cores busy \((.cores_busy // 0) * 100 | round / 100) (node \((.node_cores // 0) * 100 | round / 100))"' "$f.json" >&2
}

run_node() { # ROUND FLUSH NODE (ringmq-s<N> or port)
  local data; data=$(mktemp -d "$work/data.XXXXXX")
  case $3 in
    ringmq-s*) start_ringmq "$data/ringmq" "$2" "${3#ringmq-s}" ;;
    port) start_port "$data" "$2" ;;
  esac
  sync_sends BenchWarmup 16 warm-up
  for s in $scenarios; do run_scenario "$1" "$2" "$3" "$s"; done
  bench_stop_all
  rm -rf "$data"
}

if [ "${BENCH_REPORT_ONLY:-0}" != 1 ]; then
  echo "work directory: $work; $rounds rounds; nodes ${nodes[*]}; brokers on CPU $server_cpu, client on CPU $client_cpu; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  for round in $(seq 1 "$rounds"); do
    order=("${nodes[@]}")
    if [ $((round % 2)) = 0 ]; then
      order=()
      for ((i = ${#nodes[@]} - 1; i >= 0; i--)); do order+=("${nodes[i]}"); done
    fi
    for flush in $flushes; do
      for node in "${order[@]}"; do run_node "$round" "$flush" "$node"; done
    done
  done
  jq --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" '. + {load_after: $load}' "$work/meta.json" >"$work/meta.tmp"
  mv "$work/meta.tmp" "$work/meta.json"
fi

# --- tables ---------------------------------------------------------------------------------

med() { bench_median "$work/r*-$1-$2-$3.json" "$4"; } # FLUSH NODE SCENARIO EXPR
per_round() { jq -s -r "[.[] | $4 | tostring] | join(\" / \")" "$work"/r*-"$1-$2-$3".json; }
meta() { jq -r ".$1" "$work/meta.json"; }
ratio() { jq -n -r --argjson a "$1" --argjson b "$2" 'if $a == null or $b == null or $b == 0 then "-" else ($a / $b * 100 | round / 100 | tostring) + "x" end'; }
us='.us_per_msg | values * 100 | round / 100'
cores='.cores_busy | values * 100 | round / 100'
node_cores='.node_cores | values * 100 | round / 100'
label() { # NODE: "ringmq 1 shard", "ringmq 2 shards", "port"
  case $1 in
    ringmq-s1) echo "ringmq 1 shard" ;;
    ringmq-s*) echo "ringmq ${1#ringmq-s} shards" ;;
    *) echo "$1" ;;
  esac
}
# shard_ratio FLUSH SCENARIO NODE EXPR: "median | per round" of NODE's EXPR over that of the
# first shard count's node, each round against the same round; "-" where either is missing.
shard_ratio() {
  local r a b
  for r in $(seq 1 "$(meta rounds)"); do
    a=$work/r$r-$1-$3-$2.json b=$work/r$r-$1-${nodes[0]}-$2.json
    [ -f "$a" ] && [ -f "$b" ] || continue
    jq -n --slurpfile a "$a" --slurpfile b "$b" "(\$a[0] | $4) as \$x | (\$b[0] | $4) as \$y
      | if \$x == null or \$y == null or \$y == 0 then null else \$x / \$y end"
  done | jq -s -r 'def x: if . == null then "-" else (. * 100 | round / 100 | tostring) + "x" end;
    (map(select(. != null)) | sort | if length == 0 then null else .[(length - 1) / 2 | floor] end | x)
    + " | " + (map(x) | join(" / "))'
}

# side_by_side: one shard count and the port, one row per flush mode and scenario.
side_by_side() {
  local rq=${nodes[0]}
  echo "<!-- $marker:begin (generated by scripts/bench-rocketmq.sh; edits here are overwritten) -->"
  echo "### ringmq and the Rust port of RocketMQ with the same client (scripts/bench-rocketmq.sh)"
  echo
  echo "ringmq \`$(meta commit)\` (\`ringmq standalone --shards ${shards[0]}\`) and the Rust port's"
  echo "\`rocketmq-namesrv-rust\` + \`rocketmq-broker-rust\` $RMQ_RUST_VERSION (crates.io), $(date -u +%Y-%m-%d), $(nproc) cores:"
  echo "the brokers pinned to CPU $server_cpu, the client (rocketmq-client-rust $RMQ_RUST_VERSION's"
  echo "\`client-production-benchmark\`) to CPU $client_cpu. Load average $(meta load_before) before, $(meta load_after) after."
  echo "1 KiB bodies, batch and pull batch $batch_size. Medians of $(meta rounds) rounds (a fresh broker per round and"
  echo "flush mode, the two alternating which goes first). Completed: messages the client counted"
  echo "as sent (or pulled) of those asked. Broker CPU: utime+stime of the broker's processes"
  echo "(ringmq: one; the port: name server + broker) over the client's run, per completed message."
  echo
  echo "Memory at the start: $(meta memory_before) (scripts/bench-memory.sh)."
  echo
  echo "| flush | scenario | messages | ringmq msgs/s | port msgs/s | ringmq / port | ringmq p50 / p99 ms | port p50 / p99 ms | ringmq CPU µs/msg | port CPU µs/msg | completed ringmq; port |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  for flush in $flushes; do
    for s in $scenarios; do
      r=$(med "$flush" "$rq" "$s" .msgs_per_s) p=$(med "$flush" port "$s" .msgs_per_s)
      echo "| ${flush_name[$flush]} | $s | ${count[$s]} | $r | $p | $(ratio "$r" "$p") | $(med "$flush" "$rq" "$s" .p50_ms) / $(med "$flush" "$rq" "$s" .p99_ms) | $(med "$flush" port "$s" .p50_ms) / $(med "$flush" port "$s" .p99_ms) | $(med "$flush" "$rq" "$s" "$us") | $(med "$flush" port "$s" "$us") | $(per_round "$flush" "$rq" "$s" .completed); $(per_round "$flush" port "$s" .completed) |"
    done
  done
  echo
  echo "Per round (msgs/s, ringmq; port):"
  for flush in $flushes; do
    for s in $scenarios; do
      echo "${flush_name[$flush]} $s: $(per_round "$flush" "$rq" "$s" .msgs_per_s); $(per_round "$flush" port "$s" .msgs_per_s)."
    done
  done
  echo "<!-- $marker:end -->"
}

# per_node: one row per flush mode, scenario and node; with more than one shard count, the
# ratios of each count over the first.
per_node() {
  local what="ringmq with ${shards[0]}" node m c i
  for ((i = 1; i < ${#shards[@]}; i++)); do
    if ((i == ${#shards[@]} - 1)); then what+=" and ${shards[i]}"; else what+=", ${shards[i]}"; fi
  done
  if [ "${shards[*]}" = 1 ]; then what+=" shard"; else what+=" shards"; fi
  echo "<!-- $marker:begin (generated by scripts/bench-rocketmq.sh; edits here are overwritten) -->"
  if [ "$with_port" = 1 ]; then
    echo "### $what and the Rust port of RocketMQ with the same client (scripts/bench-rocketmq.sh)"
  else
    echo "### $what under a RocketMQ client (scripts/bench-rocketmq.sh)"
  fi
  echo
  echo "ringmq \`$(meta commit)\` (\`ringmq standalone --shards N\`, a fresh node per shard count, round and flush mode)"
  [ "$with_port" = 1 ] \
    && echo "and the Rust port's \`rocketmq-namesrv-rust\` + \`rocketmq-broker-rust\` $RMQ_RUST_VERSION (crates.io)"
  echo "under rocketmq-client-rust $RMQ_RUST_VERSION's \`client-production-benchmark\`, $(date -u +%Y-%m-%d), $(nproc) cores:"
  echo "the brokers on CPU $server_cpu (taskset; ringmq pins shard i to CPU i, its other threads run on"
  echo "any of those), the client pinned to CPU $client_cpu. Load average $(meta load_before) before, $(meta load_after) after."
  echo "1 KiB bodies, batch and pull batch $batch_size. Medians of $(meta rounds) rounds; the nodes in the order of the"
  echo "table in odd rounds, reversed in even ones. Completed: messages the client counted as sent"
  if [ "$with_port" = 1 ]; then
    echo "(or pulled) of those asked. Broker CPU: utime+stime of the broker's processes (ringmq: one;"
    echo "the port: name server + broker) over the client's run, per completed message."
  else
    echo "(or pulled) of those asked. Broker CPU: utime+stime of the node's one process (name server"
    echo "and broker) over the client's run, per completed message. Cores busy: CPU time over the"
    echo "client's run divided by its length, of the whole machine (/proc/stat: all but idle and"
    echo "iowait) and of the node alone; $(nproc) is every core busy."
  fi
  echo
  echo "Memory at the start: $(meta memory_before) (scripts/bench-memory.sh)."
  echo
  echo "| flush | scenario | messages | node | msgs/s | p50 / p99 ms | broker CPU µs/msg | cores busy: all / node | completed per round | msgs/s per round | µs/msg per round |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  for flush in $flushes; do
    for s in $scenarios; do
      for node in "${nodes[@]}"; do
        echo "| ${flush_name[$flush]} | $s | ${count[$s]} | $(label "$node") | $(med "$flush" "$node" "$s" .msgs_per_s) | $(med "$flush" "$node" "$s" .p50_ms) / $(med "$flush" "$node" "$s" .p99_ms) | $(med "$flush" "$node" "$s" "$us") | $(med "$flush" "$node" "$s" "$cores") / $(med "$flush" "$node" "$s" "$node_cores") | $(per_round "$flush" "$node" "$s" .completed) | $(per_round "$flush" "$node" "$s" .msgs_per_s) | $(per_round "$flush" "$node" "$s" "$us") |"
      done
    done
  done
  if [ "${#shards[@]}" -gt 1 ]; then
    echo
    echo "Each shard count over $(label "${nodes[0]}"), per round (the same round and flush mode), median of the rounds:"
    echo
    echo "| flush | scenario | node | msgs/s ratio | broker CPU µs/msg ratio | msgs/s ratio per round | µs/msg ratio per round |"
    echo "|---|---|---|---|---|---|---|"
    for flush in $flushes; do
      for s in $scenarios; do
        for node in "${nodes[@]:1}"; do
          [ "$node" = port ] && continue
          m=$(shard_ratio "$flush" "$s" "$node" .msgs_per_s) c=$(shard_ratio "$flush" "$s" "$node" .us_per_msg)
          echo "| ${flush_name[$flush]} | $s | $(label "$node") over $(label "${nodes[0]}") | ${m% | *} | ${c% | *} | ${m#* | } | ${c#* | } |"
        done
      done
    done
  fi
  echo "<!-- $marker:end -->"
}

if [ "${#shards[@]}" = 1 ] && [ "$with_port" = 1 ]; then
  marker=bench-rocketmq.sh
  table=$(side_by_side)
else
  marker=bench-rocketmq.sh/shards
  table=$(per_node)
fi
echo
echo "$table"
bench_write_doc "$marker" "$table" "$doc"
