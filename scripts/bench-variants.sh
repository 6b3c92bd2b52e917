#!/usr/bin/env bash
# What a broker feature costs, same run: the same ringmq-perf cells against variants of
# `ringmq standalone` (ASYNC_FLUSH, release build), a fresh node per variant and round, the
# variants' order rotated each round. Run through a suite's wrapper:
#
#   scripts/bench-security.sh   (suite "security", issue #24): plain, acl, tls, acl+tls
#     plain    no ACL, no TLS
#     acl      aclEnable=true, an ACL file with an admin account for the broker's own
#              registrations and one for perf, which signs every request (BLAKE3 keyed-hash
#              trailer)
#     tls      tls.server.mode=enforcing (every listener), tls.enable=true (the broker's own
#              connections); perf speaks TLS with --ca
#     acl+tls  both
#   scripts/bench-metrics.sh    (suite "metrics", issue #25): off, on
#     off      metricsExporterType=DISABLE (the default: nothing recorded, nothing published)
#     on       metricsExporterType=PROM, and a scraper fetching /metrics every
#              BENCH_SCRAPE_S (1) seconds for the node's whole life, so scrapes are in the
#              broker's CPU too (their time and size go to scrapes.tsv in the work directory)
#
# 1 KiB records; medians over the rounds and each variant's ratio of the broker's CPU per
# message to the first variant's in the same round (median of the rounds' ratios). The table
# goes to stdout and, with BENCH_DOC, into that file between the suite's markers
# (bench-security.sh / bench-metrics.sh). For "security" the CA and the node's certificate
# (IP SAN 127.0.0.1) are made with the openssl CLI in the work directory.
#
#   scripts/bench-security.sh                         # 3 rounds, ~8 minutes
#   BENCH_ROUNDS=5 BENCH_DOC=docs/perf.md scripts/bench-metrics.sh
#
# Cells, each variant and round (before each, the broker is left to finish what the cell
# before it caused, until it is idle):
#   send unbatched @ rate  --batch 1, 2 producers x 16 in flight, open loop at
#                      BENCH_RATE_UNBATCHED (20000) msgs/s, a rate every variant sustains
#   send batched @ rate    --batch BENCH_BATCH (64), 2 producers x 8 in flight, open loop at
#                      BENCH_RATE_BATCHED (100000) msgs/s
#   pull, catching up  one consumer (a new group) reading the batched cell's topic from the
#                      start, --pull-batch 1024 (under TLS the log runs are read and
#                      encrypted instead of spliced); BENCH_PULL=0 leaves it out
#
# Environment: BENCH_ROUNDS (3), BENCH_SECONDS (8), BENCH_BATCH (64), BENCH_RATE_UNBATCHED
# (20000), BENCH_RATE_BATCHED (100000), BENCH_PULL (1), BENCH_SCRAPE_S (1), BENCH_SEGMENT
# (CommitLog segment bytes, mappedFileSizeCommitLog; 268435456), BENCH_SHARDS (default one
# per core), BENCH_DOC ("-" = stdout only, the default), BENCH_DIR (work directory, removed
# at the end unless BENCH_KEEP=1), BENCH_NO_BUILD=1 (use the binaries in target/release as
# they are), BENCH_RINGMQ (server binary), BENCH_COMMIT (the commit to name, when the
# binaries were built elsewhere), BENCH_REPORT_ONLY=1 (only the table, from the results
# already in BENCH_DIR). The binaries are copied into the work directory first, so a
# rebuild of target/release during the run does not change what is measured.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench-lib.sh
. scripts/bench-lib.sh

suite=${1:-}
case $suite in
  security) variants=(plain acl tls acl+tls) ;;
  metrics) variants=(off on) ;;
  *) echo "usage: scripts/bench-variants.sh security|metrics (or scripts/bench-security.sh, scripts/bench-metrics.sh)" >&2; exit 2 ;;
esac
name=bench-$suite.sh
base=${variants[0]}

rounds=${BENCH_ROUNDS:-3}
secs=${BENCH_SECONDS:-8}
batch=${BENCH_BATCH:-64}
rate_unbatched=${BENCH_RATE_UNBATCHED:-20000}
rate_batched=${BENCH_RATE_BATCHED:-100000}
pull=${BENCH_PULL:-1}
segment=${BENCH_SEGMENT:-268435456}
doc=${BENCH_DOC:--}
work=${BENCH_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/ringmq-$name.XXXXXX")}
scrape_s=${BENCH_SCRAPE_S:-1}

[ "$suite" = security ] && ! command -v openssl >/dev/null && { echo "$name needs openssl" >&2; exit 2; }
if [ "${BENCH_NO_BUILD:-0}" = 1 ] || [ "${BENCH_REPORT_ONLY:-0}" = 1 ]; then
  command -v jq >/dev/null || { echo "$name needs jq" >&2; exit 2; }
  ringmq=${BENCH_RINGMQ:-target/release/ringmq}
  perf=target/release/ringmq-perf
  commit=$(bench_commit)
else
  bench_setup "$name"
fi
commit=${BENCH_COMMIT:-$commit}
mkdir -p "$work"
if [ "${BENCH_REPORT_ONLY:-0}" != 1 ]; then
  cp "$ringmq" "$work/ringmq"; cp "$perf" "$work/ringmq-perf"
  ringmq=$work/ringmq; perf=$work/ringmq-perf
fi

node_pid=""
scraper_pid=""
cleanup() {
  [ -n "$scraper_pid" ] && kill "$scraper_pid" 2>/dev/null || true
  [ -n "$node_pid" ] && kill -TERM "$node_pid" 2>/dev/null && wait "$node_pid" 2>/dev/null || true
  rm -rf "$work"/data.* "$work/ringmq" "$work/ringmq-perf"
  [ "${BENCH_KEEP:-0}" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT

# --- credentials and certificates (made fresh each run; nothing here leaves $work) ---
if [ "${BENCH_REPORT_ONLY:-0}" != 1 ] && [ "$suite" = security ]; then
  inner_secret=$(openssl rand -hex 16)
  bench_secret=$(openssl rand -hex 16)
  cat >"$work/plain_acl.yml" <<EOF
accounts:
  - accessKey: root
    secretKey: $inner_secret
    admin: true
  - accessKey: bench
    secretKey: $bench_secret
    admin: true
EOF
  chmod 600 "$work/plain_acl.yml"
  (
    cd "$work"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
      -subj "/CN=ringmq bench CA" -keyout ca.key -out ca.pem
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
      -subj "/CN=ringmq bench node" -keyout node.key -out node.csr
    printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' >node.ext
    openssl x509 -req -in node.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
      -extfile node.ext -out node.pem
  ) >"$work/openssl.out" 2>&1 || { echo "openssl failed:" >&2; cat "$work/openssl.out" >&2; exit 1; }
fi

# node_args VARIANT / perf_args VARIANT: what each variant adds to the node and to perf.
node_args() {
  case $1 in *acl*)
    echo "--set aclEnable=true --set aclFilePath=$work/plain_acl.yml --set innerAccessKey=root"
    echo "--set innerSecretKey=$inner_secret" ;;
  esac
  case $1 in on)
    echo "--set metricsExporterType=PROM --set metricsPromExporterHost=127.0.0.1"
    echo "--set metricsPromExporterPort=0" ;;
  esac
  case $1 in *tls*)
    echo "--set tls.server.mode=enforcing --set tls.server.certPath=$work/node.pem"
    echo "--set tls.server.keyPath=$work/node.key --set tls.enable=true"
    echo "--set tls.client.trustCertPath=$work/ca.pem" ;;
  esac
}
perf_args() {
  case $1 in *acl*) echo "--access-key bench" ;; esac
  case $1 in *tls*) echo "--ca $work/ca.pem" ;; esac
}
# perf_run VARIANT ARGS...: perf with the variant's flags; the secret reaches it through
# the environment only (not in its argv). The broker's inner secret is on its command line:
# a throwaway key made for this run.
perf_run() {
  local variant=$1; shift
  # shellcheck disable=SC2046
  case $variant in
    *acl*) RINGMQ_SECRET_KEY=$bench_secret "$perf" "$@" $(perf_args "$variant") ;;
    *) "$perf" "$@" $(perf_args "$variant") ;;
  esac
}
unset RINGMQ_ACCESS_KEY RINGMQ_SECRET_KEY RINGMQ_TLS RINGMQ_CA RINGMQ_TLS_CERT RINGMQ_TLS_KEY

kinds=(send1 sendb)
[ "$pull" = 1 ] && kinds+=(pull)
declare -A kind_label=(
  [send1]="send unbatched @ $rate_unbatched/s"
  [sendb]="send batched $batch @ $rate_batched/s"
  [pull]="pull, catching up"
)

run_cell() { # round variant kind mode args...
  local round=$1 variant=$2 kind=$3 mode=$4; shift 4
  local json="$work/r$round-$variant-$kind.json"
  bench_settle "$node_pid"
  printf '[round %d/%d] %-8s %-30s ' "$round" "$rounds" "$variant" "${kind_label[$kind]}" >&2
  perf_run "$variant" "$mode" -n "$namesrv" --node-pid "$node_pid" -q --json "$json" "$@" \
    >"$json.out" 2>&1 \
    || { echo "failed:" >&2; cat "$json.out" >&2; exit 1; }
  [ "$(jq .messages "$json")" -gt 0 ] || { echo "no message:" >&2; cat "$json.out" >&2; exit 1; }
  jq -r '"\(.msgs_per_s | floor) msgs/s, p50 \(.latency_us.p50) µs, p99 \(.latency_us.p99) µs, errors \(.errors), CPU/msg broker \(.cpu.node_us_per_msg) µs perf \(.cpu.generator_us_per_msg) µs"' "$json" >&2
}

# scrape_loop URL ROUND: GET URL every $scrape_s s until killed; one line per scrape to
# scrapes.tsv: round, seconds, bytes.
scrape_loop() {
  while sleep "$scrape_s"; do
    curl -s -o /dev/null -w "$2\t%{time_total}\t%{size_download}\n" "$1" >>"$work/scrapes.tsv" || true
  done
}

run_variant() { # round variant
  local round=$1 variant=$2 data
  data=$(mktemp -d "$work/data.XXXXXX")
  local args=(standalone --data "$data" --namesrv-port 0 --broker-port 0 --flush async
    --set "mappedFileSizeCommitLog=$segment")
  [ -n "${BENCH_SHARDS:-}" ] && args+=(--shards "$BENCH_SHARDS")
  # shellcheck disable=SC2207
  args+=($(node_args "$variant"))
  # a log per node: a "ready" left in a shared file by the node before would be read as this one's
  local log="$work/node-r$round-$variant"
  RUST_LOG=warn "$ringmq" "${args[@]}" >"$log.out" 2>"$log.err" &
  node_pid=$!
  bench_wait_line "$log.out" ready "ringmq standalone ($variant)"
  namesrv=$(grep -o 'namesrv [0-9.:]*' "$log.out" | cut -d' ' -f2)
  if [ "$variant" = on ]; then
    local metrics_url
    metrics_url=$(grep -o 'http://[0-9.:]*/metrics' "$log.out" | head -n 1)
    scrape_loop "$metrics_url" "$round" &
    scraper_pid=$!
  fi
  shards=$(grep -o '([0-9]* shards)' "$log.out" | tr -dc 0-9)
  perf_run "$variant" produce -n "$namesrv" --topic warmup --count 16 --inflight 1 \
    --send-timeout 60s -q >"$work/warmup.out" 2>&1 \
    || { echo "warm-up ($variant) failed:" >&2; cat "$work/warmup.out" >&2; exit 1; }

  run_cell "$round" "$variant" send1 produce --topic bs-unbatched --batch 1 --producers 2 \
    --inflight 16 --rate "$rate_unbatched" --duration "${secs}s"
  run_cell "$round" "$variant" sendb produce --topic bs-batched --batch "$batch" --producers 2 \
    --inflight 8 --rate "$rate_batched" --duration "${secs}s"
  if [ "$pull" = 1 ]; then
    run_cell "$round" "$variant" pull consume --topic bs-batched --from first --pull-batch 1024 \
      --idle-exit 4s --duration "${secs}s"
  fi

  if [ -n "$scraper_pid" ]; then kill "$scraper_pid" 2>/dev/null || true; wait "$scraper_pid" 2>/dev/null || true; scraper_pid=""; fi
  kill -TERM "$node_pid"; wait "$node_pid" 2>/dev/null || true; node_pid=""
  rm -rf "$data"
}

echo "work directory: $work; $rounds rounds, $secs s per cell; load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
load_before=${BENCH_LOAD_BEFORE:-$(cut -d' ' -f1-3 /proc/loadavg)}
memory_before=$(scripts/bench-memory.sh status)
shards=${BENCH_SHARDS:-}
[ "${BENCH_REPORT_ONLY:-0}" = 1 ] && rounds_to_run=0 || rounds_to_run=$rounds
for round in $(seq 1 "$rounds_to_run"); do
  # rotate: round 1 starts with the first variant, round 2 with the second, ...
  n=${#variants[@]}
  for i in $(seq 0 $((n - 1))); do
    run_variant "$round" "${variants[$(((round - 1 + i) % n))]}"
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
[ -n "$shards" ] || shards=$(nproc)

us() { bench_median "$work/r*-$1.json" '.cpu.node_us_per_msg | values * 100 | round / 100'; }
# ratio of two cells' broker µs/msg, each round apart, then the median of the rounds' ratios.
ratio() {
  for r in $(seq 1 "$rounds"); do
    jq -n --slurpfile a "$work/r$r-$1.json" --slurpfile b "$work/r$r-$2.json" \
      '$a[0].cpu.node_us_per_msg / $b[0].cpu.node_us_per_msg'
  done | sort -g | awk '{ v[NR] = $1 } END { printf "%.2f", v[int((NR + 1) / 2)] }'
}
per_round() { jq -s -r "[.[] | $2 | tostring] | join(\" / \")" $(for r in $(seq 1 "$rounds"); do echo "$work/r$r-$1.json"; done); }

# what_varies: the suite's variants, for the table's preamble.
what_varies() {
  case $suite in
    security)
      echo "acl: \`aclEnable=true\`, perf signs with \`--access-key\` (an admin account): every"
      echo "request on plain TCP, only each connection's HELLO over TLS (a TLS connection signs in"
      echo "once); tls: \`tls.server.mode=enforcing\` + \`tls.enable=true\`, perf \`--ca\` (P-256"
      echo "certificate, rustls)." ;;
    metrics)
      echo "off: \`metricsExporterType=DISABLE\` (the default); on: \`metricsExporterType=PROM\`, with"
      echo "\`curl\` scraping \`/metrics\` every ${scrape_s} s for the node's whole life (scrapes: $(scrape_summary))." ;;
  esac
}
# scrape_summary: count, median time and median size of the scrapes of this run.
scrape_summary() {
  [ -s "$work/scrapes.tsv" ] || { echo "none recorded"; return; }
  awk -F'\t' '{ print $2 * 1000 }' "$work/scrapes.tsv" | sort -g | awk '{ v[NR] = $1 } END { printf "%d, median %.2f ms", NR, v[int((NR + 1) / 2)] }'
  awk -F'\t' '{ print $3 }' "$work/scrapes.tsv" | sort -g | awk '{ v[NR] = $1 } END { printf ", median %d bytes", v[int((NR + 1) / 2)] }'
}

table=$(
  echo "<!-- $name:begin (generated by scripts/$name; edits here are overwritten) -->"
  echo "Commit \`$commit\`, $(date -u +%Y-%m-%d), $(nproc) cores, \`ringmq standalone --flush async\`"
  echo "($shards shards, release, \`mappedFileSizeCommitLog=$segment\`), load generator \`ringmq-perf\`"
  echo "on the same machine; load average $load_before before, $load_after after. 1 KiB records;"
  echo "medians of $rounds rounds, a fresh node per variant and round, the variants' order rotated"
  echo "each round; ${secs} s per cell. $(what_varies) Broker CPU: \`/proc/<pid>/stat\` of the node"
  echo "process over the cell, per message sent or received. Ratio: the variant's broker µs/msg"
  echo "over \`$base\`'s in the same round, median of the rounds. Pull latency is not shown: a"
  echo "catching-up consumer's delivery latency is the age of the backlog."
  echo
  echo "Memory at the start: $memory_before (scripts/bench-memory.sh)."
  echo
  echo "| cell | variant | msgs/s | p50 µs | p99 µs | errors | broker CPU µs/msg | perf CPU µs/msg | ratio to $base |"
  echo "|---|---|---|---|---|---|---|---|---|"
  for kind in "${kinds[@]}"; do
    for variant in "${variants[@]}"; do
      cell="$variant-$kind"
      g="$work/r*-$cell.json"
      rat="1"
      [ "$variant" != "$base" ] && rat=$(ratio "$cell" "$base-$kind")
      if [ "$kind" = pull ]; then p50="–"; p99="–"; else
        p50=$(bench_median "$g" '.latency_us.p50'); p99=$(bench_median "$g" '.latency_us.p99'); fi
      echo "| ${kind_label[$kind]} | $variant | $(bench_median "$g" '.msgs_per_s | floor') | $p50 | $p99 | $(bench_median "$g" '.errors') | $(us "$cell") | $(bench_median "$g" '.cpu.generator_us_per_msg | values * 100 | round / 100') | $rat |"
    done
  done
  if [ "$suite" = security ]; then
    echo
    echo "ACL's own cost, same round: broker µs/msg with ACL over without, median of the rounds."
    echo
    echo "| cell | acl / plain | acl+tls / tls |"
    echo "|---|---|---|"
    for kind in "${kinds[@]}"; do
      echo "| ${kind_label[$kind]} | $(ratio "acl-$kind" "plain-$kind") | $(ratio "acl+tls-$kind" "tls-$kind") |"
    done
  fi
  echo
  echo "Every round (round 1 / 2 / ...):"
  echo
  echo "| cell | variant | msgs/s | broker CPU µs/msg | messages |"
  echo "|---|---|---|---|---|"
  for kind in "${kinds[@]}"; do
    for variant in "${variants[@]}"; do
      cell="$variant-$kind"
      echo "| ${kind_label[$kind]} | $variant | $(per_round "$cell" '.msgs_per_s | floor') | $(per_round "$cell" '.cpu.node_us_per_msg | . * 100 | round / 100') | $(per_round "$cell" '.messages') |"
    done
  done
  echo "<!-- $name:end -->"
)
echo
echo "$table"
bench_write_doc "$name" "$table" "$doc"
