#!/usr/bin/env bash
# CPU profiles of the broker in the headline cells (issue #16): for each cell a fresh
# `ringmq standalone --flush async`, `ringmq-perf` on the same machine, `perf record` with
# DWARF call graphs on the broker process only. Writes, per cell, a flame graph SVG (needs
# `inferno-flamegraph` on PATH: `cargo install inferno`; without it, the `perf script`
# output) and a summary of where the broker's samples went (its threads, kernel vs user).
#
#   scripts/profile-broker.sh                     # all cells into docs/flamegraphs/
#   PROFILE_CELLS="batched pull" PROFILE_OUT=/tmp/fg scripts/profile-broker.sh
#
# Cells: batched (64 x 1 KiB, 2 producers x 8 in flight), unbatched (1 producer, 1 in
# flight), pull (one consumer catching up on 1.5 M records), e2e (10,000 msgs/s, one tailing
# consumer). Environment: PROFILE_CELLS, PROFILE_OUT (docs/flamegraphs), PROFILE_SECONDS (6),
# PROFILE_FREQ (sampling rate, 499 Hz), BENCH_RINGMQ (server binary to profile).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench-lib.sh
. scripts/bench-lib.sh

command -v perf >/dev/null || { echo "profile-broker.sh needs perf (linux-tools)" >&2; exit 2; }
cells=${PROFILE_CELLS:-batched unbatched pull e2e}
out=${PROFILE_OUT:-docs/flamegraphs}
secs=${PROFILE_SECONDS:-6}
freq=${PROFILE_FREQ:-499}
work=$(mktemp -d "${TMPDIR:-/tmp}/ringmq-profile.XXXXXX")
node_pid=""
cleanup() {
  [ -n "$node_pid" ] && kill -TERM "$node_pid" 2>/dev/null && wait "$node_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

bench_setup profile-broker.sh
mkdir -p "$out"

for cell in $cells; do
  data="$work/data-$cell"
  mkdir -p "$data"
  RUST_LOG=warn "$ringmq" standalone --data "$data" --namesrv-port 0 --broker-port 0 --flush async \
    >"$work/node.out" 2>"$work/node.err" &
  node_pid=$!
  bench_wait_line "$work/node.out" ready "ringmq standalone"
  ns=$(grep -o 'namesrv [0-9.:]*' "$work/node.out" | cut -d' ' -f2)
  "$perf" produce -n "$ns" --topic warmup --count 16 -q >/dev/null
  case $cell in
    batched) args=(produce --topic c --batch 64 --producers 2 --inflight 8 --duration "${secs}s") ;;
    unbatched) args=(produce --topic c --batch 1 --producers 1 --inflight 1 --duration "${secs}s") ;;
    pull)
      echo "[$cell] filling the topic (1.5 M x 1 KiB) ..." >&2
      "$perf" produce -n "$ns" --topic c --batch 64 --producers 2 --inflight 8 --count 1500000 -q >/dev/null
      args=(consume --topic c --from first --pull-batch 1024 --idle-exit 2s --duration "${secs}s") ;;
    e2e) args=(e2e --topic c --rate 10000 --inflight 64 --duration "${secs}s" --idle-exit 3s) ;;
    *) echo "unknown cell $cell (batched, unbatched, pull, e2e)" >&2; exit 2 ;;
  esac
  echo "[$cell] profiling the broker (pid $node_pid) during: ringmq-perf ${args[*]}" >&2
  c0=$(bench_cpu_ticks "$node_pid")
  perf record -q -F "$freq" --call-graph dwarf,16384 -o "$work/$cell.data" -p "$node_pid" 2>/dev/null &
  rec=$!
  "$perf" "${args[@]}" -n "$ns" -q --json "$work/$cell.json" >"$work/$cell.out" 2>&1 \
    || { cat "$work/$cell.out" >&2; exit 1; }
  c1=$(bench_cpu_ticks "$node_pid")
  kill -INT "$rec"; wait "$rec" 2>/dev/null || true
  kill -TERM "$node_pid"; wait "$node_pid" 2>/dev/null || true; node_pid=""
  rm -rf "$data"
  msgs=$(jq .messages "$work/$cell.json")
  rate=$(jq '.msgs_per_s | floor' "$work/$cell.json")
  echo "[$cell] $rate msgs/s, broker CPU $(awk -v c=$((c1 - c0)) -v m="$msgs" 'BEGIN { printf "%.2f", c * 10000 / m }') µs/msg; folding stacks ..." >&2
  perf script -i "$work/$cell.data" 2>/dev/null >"$work/$cell.script"
  if command -v inferno-collapse-perf >/dev/null; then
    inferno-collapse-perf "$work/$cell.script" >"$work/$cell.folded"
    inferno-flamegraph --title "ringmq broker, $cell ($rate msgs/s, commit $commit)" \
      "$work/$cell.folded" >"$out/$cell.svg"
  else
    echo "inferno not on PATH: keeping perf script output only" >&2
    cp "$work/$cell.script" "$out/$cell.perf-script"
  fi
  {
    echo "# $cell: $rate msgs/s, broker CPU $(awk -v c=$((c1 - c0)) -v m="$msgs" 'BEGIN { printf "%.2f", c * 10000 / m }') µs per message, commit $commit"
    echo "# share of the broker's samples by thread and by kernel/user:"
    perf report -i "$work/$cell.data" --no-children --sort comm,dso --stdio -g none 2>/dev/null \
      | grep '%' | grep -v '^#' | head -12
  } >"$out/$cell.summary.txt"
  cat "$out/$cell.summary.txt" >&2
done
echo "profiles in $out" >&2
