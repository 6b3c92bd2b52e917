#!/usr/bin/env bash
# Failover runs of docs/perf.md ("Failover"): ringmq-perf failover, which starts its own
# three controllers and three-broker set, kills the master with SIGKILL under load and reads
# everything back. Three runs: SYNC_MASTER with default settings (20 kills), the same with
# fast controller heartbeats (20 kills), ASYNC_MASTER (10 kills).
#
#   scripts/bench-failover.sh                 # ~5 minutes after the build
#   BENCH_KILLS=5 scripts/bench-failover.sh
#
# Prints each run's report (stdout) and keeps its JSON in BENCH_OUT (default: a new
# directory under /tmp, printed). Data goes to BENCH_DIR (default /dev/shm when it exists:
# three brokers store ~5 MB/s each at the default --rate, and a disk above the brokers' 90 %
# write limit fails the run); removed at the end unless a run failed. Release build (`cargo build --release`).
# Exits non-zero if a run does (1: a failover misbehaved; 3: acknowledged messages lost).
set -euo pipefail
cd "$(dirname "$0")/.."

kills=${BENCH_KILLS:-20}
base=${BENCH_DIR:-$([ -d /dev/shm ] && echo /dev/shm || echo "${TMPDIR:-/tmp}")}
work=$(mktemp -d "$base/ringmq-bench-failover.XXXXXX")
out=${BENCH_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/ringmq-bench-failover-out.XXXXXX")}
trap 'rc=$?; if [ "$rc" = 0 ]; then rm -rf "$work"; else echo "data and logs kept in $work" >&2; fi' EXIT

cargo build --release -p ringmq-node -p ringmq-perf
perf=target/release/ringmq-perf
echo "# commit $(git rev-parse --short HEAD), load average $(cut -d' ' -f1-3 /proc/loadavg)"

run() {
  local name=$1; shift
  echo "## $name: ringmq-perf failover $*"
  "$perf" failover --quiet --data "$work/$name" --json "$out/$name.json" "$@"
  rm -rf "${work:?}/$name"
}

run sync --kills "$kills"
run sync-fast --kills "$kills" --broker-set brokerHeartbeatInterval=100 \
  --broker-set controllerHeartBeatTimeoutMills=600
run async --async --kills "$(( (kills + 1) / 2 ))"
echo "# JSON in $out; load average $(cut -d' ' -f1-3 /proc/loadavg)"
