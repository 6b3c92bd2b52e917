# Shared by the benchmark scripts (sourced, not run): process start-up, ports, stopping and CPU
# time of processes, medians, and writing a generated table into docs/perf.md between a
# script's markers.

# bench_wait_line FILE PATTERN WHAT: waits up to 20 s for PATTERN in FILE (a process's
# stdout); on timeout prints the tail of its stderr (FILE with .out -> .err) and exits.
bench_wait_line() {
  for _ in $(seq 1 200); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "$3 did not start:" >&2
  tail -n 20 "${1%.out}.err" >&2 || true
  exit 1
}

# bench_median 'GLOB' JQ_EXPR: the median (lower middle) of JQ_EXPR over the JSON files of
# GLOB (quoted; expanded here), nulls skipped; "null" when there is none.
bench_median() {
  # shellcheck disable=SC2086
  jq -s "[.[] | ($2)] | map(select(. != null)) | sort
         | if length == 0 then null else .[(length - 1) / 2 | floor] end" $1
}

# bench_write_doc NAME TABLE DOC: replaces the block between "<!-- NAME:begin" and
# "<!-- NAME:end -->" in DOC with TABLE (which carries both markers), or appends TABLE when
# DOC has no such block. DOC "-" = do nothing.
bench_write_doc() {
  local name=$1 table=$2 doc=$3
  [ "$doc" = "-" ] && return 0
  if [ -f "$doc" ] && grep -q "<!-- $name:begin" "$doc"; then
    REPL="$table" NAME="$name" awk '
      index($0, "<!-- " ENVIRON["NAME"] ":begin") { print ENVIRON["REPL"]; skip = 1; next }
      index($0, "<!-- " ENVIRON["NAME"] ":end") { skip = 0; next }
      !skip { print }' "$doc" >"$doc.tmp" && mv "$doc.tmp" "$doc"
  else
    { [ -f "$doc" ] && echo; echo "$table"; } >>"$doc"
  fi
  echo "written to $doc" >&2
}

# bench_commit: "abc1234" or "abc1234 (with uncommitted changes)" for the code under test.
bench_commit() {
  local dirty=""
  # wire/fuzz is a crate of its own, not in the binaries under test.
  git diff --quiet HEAD -- node client wire perf ':!wire/fuzz' 2>/dev/null || dirty=" (with uncommitted changes)"
  echo "$(git rev-parse --short HEAD)$dirty"
}

# bench_setup NAME: checks for jq, builds the release binaries, and sets $ringmq, $perf and
# $commit (the scripts run from the repository root). BENCH_RINGMQ overrides the server
# binary (A/B runs against a saved build).
bench_setup() {
  command -v jq >/dev/null || { echo "$1 needs jq" >&2; exit 2; }
  echo "building release binaries (cargo build --release -p ringmq-node -p ringmq-perf) ..." >&2
  cargo build --release -p ringmq-node -p ringmq-perf >&2
  ringmq=${BENCH_RINGMQ:-target/release/ringmq}
  perf=target/release/ringmq-perf
  commit=$(bench_commit)
}

# --- processes: ports, stopping, CPU time (utime + stime from /proc/PID/stat, clock ticks) --

# bench_port_open PORT: true when something accepts TCP connections on 127.0.0.1:PORT.
bench_port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# bench_free_port: a port P of 127.0.0.1 with P-2, P, P+1 unused (the Rust port's broker uses all).
bench_free_port() {
  local p
  for _ in $(seq 1 100); do
    p=$((20000 + RANDOM % 30000))
    bench_port_open $((p - 2)) || bench_port_open "$p" || bench_port_open $((p + 1)) \
      || { echo "$p"; return 0; }
  done
  echo "no free port found" >&2; exit 1
}

# bench_wait_port PORT PID WHAT LOG...: waits 30 s at most for PORT to open, or exits showing LOGs.
bench_wait_port() {
  local port=$1 pid=$2 what=$3; shift 3
  for _ in $(seq 1 300); do
    bench_port_open "$port" && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "$what did not start:" >&2; tail -n 20 "$@" >&2 || true; exit 1
}

# bench_stop SECONDS PID...: TERM to each PID, KILL to any still running SECONDS later; reaps them.
bench_stop() {
  local tries=$(($1 * 10)) p; shift
  for p in "$@"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "$@"; do
    for _ in $(seq 1 "$tries"); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
}

# bench_stop_all: bench_stop 10 on every process of the caller's array $pids, then empties it.
bench_stop_all() { bench_stop 10 "${pids[@]}"; pids=(); }

# bench_cpu_ticks PID...: the CPU time the processes have used so far, summed, in clock ticks.
bench_cpu_ticks() {
  local t=0 p
  for p in "$@"; do t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat"))); done
  echo "$t"
}

# bench_settle PID...: waits (30 s at most) for the processes to go idle (<= 5 ticks in 0.5 s).
bench_settle() {
  local a b
  for _ in $(seq 1 60); do
    a=$(bench_cpu_ticks "$@"); sleep 0.5; b=$(bench_cpu_ticks "$@")
    [ $((b - a)) -le 5 ] && return 0
  done
  echo "(the broker did not go idle within 30 s)" >&2
}
