#!/usr/bin/env bash
# ringmq against Apache Iggy on this machine, side by side (issue #26 item 4): builds Iggy's
# server and its `iggy-bench` from source, builds ringmq's release binaries, and runs the same
# closed-loop cells against a fresh `ringmq standalone` and a fresh `iggy-server` per round,
# the brokers alternating which goes first. The server is pinned to one core
# (BENCH_SERVER_CPU, 0) and the load generator to another (BENCH_CLIENT_CPU, 1) with
# `taskset`; both servers keep their data on the same file system (BENCH_DATA). Medians over
# the rounds go to stdout as a markdown table and, with BENCH_DOC, into that file between the
# bench-iggy.sh markers. Progress goes to stderr.
#
#   git clone https://github.com/apache/iggy /tmp/iggy         # or any git dir / checkout of it
#   IGGY_SRC=/tmp/iggy scripts/bench-iggy.sh                   # first build ~40 min, runs ~5 min
#   IGGY_SRC=/tmp/iggy BENCH_ROUNDS=5 BENCH_DOC=docs/perf.md scripts/bench-iggy.sh
#   IGGY_SRC=/tmp/iggy BENCH_BUILD_ONLY=1 scripts/bench-iggy.sh  # build both, run nothing
#
# Iggy's source: IGGY_SRC is a checkout (built in place, with its target directory in the
# work directory) or a git directory, bare or not (IGGY_REF, default HEAD, is exported with
# `git archive` into the work directory and built there). The build is
#   RUSTUP_TOOLCHAIN=stable cargo build --release -p server -p iggy-bench \
#     --no-default-features --features server/mimalloc --bin iggy-server --bin iggy-bench
# (Iggy's own release profile: fat LTO, one codegen unit; the stable toolchain instead of the
# one its rust-toolchain.toml pins). Nothing of Iggy enters this repository.
#
# Iggy's server links the system's hwloc and udev (Debian/Ubuntu: apt-get install libhwloc-dev
# libudev-dev pkg-config); the script checks for hwloc before building.
#
# Iggy's server runs with its defaults except: IGGY_HTTP_ENABLED, IGGY_QUIC_ENABLED,
# IGGY_WEBSOCKET_ENABLED = false (TCP only), IGGY_SYSTEM_SHARDING_CPU_ALLOCATION = 1 (one
# shard, on the one core it is allowed), IGGY_TCP_ADDRESS = 127.0.0.1:BENCH_IGGY_PORT,
# IGGY_SYSTEM_PATH = a fresh directory, IGGY_SYSTEM_LOGGING_LEVEL = warn, root user iggy/iggy.
# ringmq runs `ringmq standalone --shards 1` with RUST_LOG=warn: ASYNC_FLUSH, a send is
# acknowledged once written to the page cache (it survives the process). Iggy acknowledges
# from its in-memory journal and writes it to the segment file every 1024 messages or 1 MiB
# (the topic's messages_required_to_save and size_of_messages_required_to_save, iggy-bench's
# defaults): what it acknowledged since the last write is lost if the process dies.
# BENCH_IGGY_SAVE=N creates Iggy's topics with messages_required_to_save = N (1: every send
# written before its acknowledgement, as ringmq); the script patches iggy-bench's topic
# creation to read it from the environment (IGGY_BENCH_MESSAGES_REQUIRED_TO_SAVE), so it
# needs an Iggy built by this script, and its table goes between its own markers.
# BENCH_RINGMQ_SET="KEY=VALUE ..." passes each pair to ringmq as `--set KEY=VALUE` (e.g.
# flushIntervalCommitLog=60000: no periodic fdatasync within a cell, as Iggy makes none); its
# table goes between markers of its own.
# Generators: `ringmq-perf --threads 1 --inflight 1` and `iggy-bench ... tcp --nodelay`
# (ringmq's client sets TCP_NODELAY too); iggy-bench's runtime sizes itself to the one core
# taskset leaves it.
#
# Cells, in this order each round (1 KiB messages, one request in flight per producer, and per
# queue or partition a consumer reads):
#   batch 100, 1 producer    BENCH_BATCHES (20000) sends of 100 messages. ringmq: a topic with
#                            1 queue; Iggy: pinned-producer, 1 stream of 1 partition
#   unbatched, 1 producer    BENCH_UNBATCHED (60000) sends of 1 message, same layout
#   batch 100, 2 producers   BENCH_BATCHES2 (15000) sends of 100 messages per producer.
#                            ringmq: a topic with 2 queues; Iggy: 2 streams of 1 partition
#   consume, 1 consumer      catching up on the 2-producer cell's data from its start, polls of
#                            BENCH_POLL_BATCH (100) messages: BENCH_BATCHES2 x 100 messages.
#                            ringmq: `ringmq-perf consume --from first --pull-ahead 1` (a new
#                            group), which reads both queues of the topic, one pull in flight
#                            per queue (the next starts when a poll takes the last one's
#                            messages; `consume`'s default pulls 2 answers ahead); Iggy:
#                            pinned-consumer (offset polls of stream 1, one partition)
#   consume, 2 consumers     the same with 2 consumers, twice the messages (Iggy: streams 1, 2)
# Both brokers get the same number of messages per cell. iggy-bench deletes the streams it
# finds before each producer cell, so Iggy starts those cells holding no data; ringmq gets a
# fresh node on an empty directory before each producer cell, and its consume cells read the
# 2-producer cell's node.
#
# Figures per cell and broker: msgs/s and p50/p99 latency as the generator reports them
# (ringmq-perf: per send request; iggy-bench: per batch, the mean over producers of each one's
# percentile, printed in ms with 2 decimals, so 10 µs steps), and the server's CPU per
# message: utime+stime of the server process (/proc/PID/stat) from just before the generator
# starts to just after it exits (connection set-up and topic/stream creation included),
# divided by the cell's messages; and the load generator's CPU per message: its user+system
# time as GNU time (/usr/bin/time, Debian's `time` package) reports it, set-up included,
# divided by the cell's messages. With one request in flight, both CPUs are in every round
# trip. Before each cell the script runs `sync` (untimed), so what earlier cells left dirty
# in the page cache is written back before it, not during it; and it reports the steal time
# over the cell (/proc/stat: the hypervisor running something else while a vCPU wanted to
# run; on the VM of docs/perf.md it rises while a broker writes to the disk). Consume cells show no latency: ringmq-perf reports the age of the messages there,
# iggy-bench the poll round trip.
#
# The table also records free page reporting (scripts/bench-memory.sh status) at the start and
# how much memory the guest handed back to the host during the run: on a VM that backs guest
# memory lazily, a broker writing into pages it gets back pays a host fault per page. Run
# `sudo scripts/bench-memory.sh prepare` once after boot to compare the brokers on backed
# memory.
#
# Environment: IGGY_SRC (required unless IGGY_BIN), IGGY_REF (HEAD), IGGY_BIN (a directory
# holding iggy-server and iggy-bench already built: no Iggy build; IGGY_COMMIT names it),
# BENCH_ROUNDS (3; fewer is refused unless BENCH_FEWER_ROUNDS=1), BENCH_BATCHES (20000), BENCH_BATCHES2 (15000), BENCH_UNBATCHED (60000),
# BENCH_POLL_BATCH (100; must divide BENCH_BATCHES2 x 100), BENCH_SERVER_CPU (0),
# BENCH_CLIENT_CPU (1), BENCH_IGGY_PORT (18090), BENCH_RINGMQ_SET (""), BENCH_DIR (work directory, kept between runs
# for the Iggy build; default ${TMPDIR:-/tmp}/ringmq-bench-iggy; must be outside the
# repository), BENCH_DATA (parent of the servers' data directories, default BENCH_DIR/data;
# removed at exit), BENCH_DOC ("-" = stdout only, the default), BENCH_NO_BUILD=1 (use
# target/release as it is), BENCH_COMMIT (the ringmq commit to name), BENCH_BUILD_ONLY=1,
# BENCH_REPORT_ONLY=1 (only the table, from the results of the last run in BENCH_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench-lib.sh
. scripts/bench-lib.sh

case "${1:-}" in
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "bench-iggy.sh takes no arguments (see --help)" >&2; exit 2 ;;
esac

rounds=${BENCH_ROUNDS:-3}
batches=${BENCH_BATCHES:-20000}
batches2=${BENCH_BATCHES2:-15000}
unbatched=${BENCH_UNBATCHED:-60000}
poll=${BENCH_POLL_BATCH:-100}
server_cpu=${BENCH_SERVER_CPU:-0}
client_cpu=${BENCH_CLIENT_CPU:-1}
iggy_port=${BENCH_IGGY_PORT:-18090}
doc=${BENCH_DOC:--}
work=${BENCH_DIR:-${TMPDIR:-/tmp}/ringmq-bench-iggy}
size=1024

for tool in jq taskset git; do
  command -v "$tool" >/dev/null || { echo "bench-iggy.sh needs $tool" >&2; exit 2; }
done
# GNU time (Debian/Ubuntu: apt-get install time): each load generator's own CPU.
for tool in /usr/bin/time; do
  [ -x "$tool" ] || { echo "bench-iggy.sh needs $tool (GNU time)" >&2; exit 2; }
done
if [ "$rounds" -lt 3 ] && [ "${BENCH_REPORT_ONLY:-0}" != 1 ] && [ "${BENCH_FEWER_ROUNDS:-0}" != 1 ]; then
  echo "BENCH_ROUNDS=$rounds: the comparison holds with 3 rounds or more (BENCH_FEWER_ROUNDS=1 for a trial run)" >&2
  exit 2
fi
[ $((batches2 * 100 % poll)) = 0 ] || { echo "BENCH_POLL_BATCH must divide BENCH_BATCHES2 x 100" >&2; exit 2; }
mkdir -p "$work"
work=$(cd "$work" && pwd -P)
repo=$(pwd -P)
case "$work/" in "$repo"/*) echo "BENCH_DIR ($work) must be outside the repository" >&2; exit 2 ;; esac
data_parent=${BENCH_DATA:-$work/data}
run=$work/run
hz=$(getconf CLK_TCK)
# reported_kib: KiB of freed memory the guest has handed back to the host since boot (free
# page reporting; scripts/bench-memory.sh), empty without it.
reported_kib() { cat /sys/module/page_reporting/parameters/reported_kib 2>/dev/null || true; }

cells=(b100p1 b1p1 b100p2 c1 c2)
declare -A label=(
  [b100p1]="batch 100, 1 producer"
  [b1p1]="unbatched, 1 producer"
  [b100p2]="batch 100, 2 producers"
  [c1]="catch-up consume, 1 consumer"
  [c2]="catch-up consume, 2 consumers"
)
declare -A messages=(
  [b100p1]=$((batches * 100))
  [b1p1]=$unbatched
  [b100p2]=$((2 * batches2 * 100))
  [c1]=$((batches2 * 100))
  [c2]=$((2 * batches2 * 100))
)

# --- builds ---------------------------------------------------------------------------------

# iggy_build: sets $iggy_server, $iggy_bench and $iggy_commit, building them when needed.
iggy_build() {
  if [ -n "${IGGY_BIN:-}" ]; then
    iggy_server=$IGGY_BIN/iggy-server iggy_bench=$IGGY_BIN/iggy-bench
    iggy_commit=${IGGY_COMMIT:-unknown}
    return 0
  fi
  [ -n "${IGGY_SRC:-}" ] || { echo "set IGGY_SRC to Apache Iggy's source (see --help)" >&2; exit 2; }
  local src ref=${IGGY_REF:-HEAD} t0=$SECONDS
  if [ -f "$IGGY_SRC/Cargo.toml" ]; then
    src=$(cd "$IGGY_SRC" && pwd -P)
    iggy_commit=$(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)
    git -C "$src" diff --quiet HEAD 2>/dev/null || iggy_commit="$iggy_commit (with uncommitted changes)"
  elif iggy_commit=$(git --git-dir="$IGGY_SRC" rev-parse --verify -q "$ref^{commit}"); then
    src=$work/iggy/src-${iggy_commit:0:12}
    if [ ! -f "$src.exported" ]; then
      echo "exporting Iggy $iggy_commit into $src ..." >&2
      rm -rf "$src" && mkdir -p "$src"
      git --git-dir="$IGGY_SRC" archive "$iggy_commit" | tar -x -C "$src"
      touch "$src.exported"
    fi
  else
    echo "IGGY_SRC ($IGGY_SRC) is neither a checkout nor a git directory with $ref" >&2; exit 2
  fi
  pkg-config --exists 'hwloc >= 2.0.0' 2>/dev/null \
    || { echo "Iggy's server needs hwloc >= 2 and pkg-config (apt-get install libhwloc-dev libudev-dev pkg-config)" >&2; exit 2; }
  # iggy-bench creates its topic with Iggy's default flush cadence (messages_required_to_save
  # 1024, size_of_messages_required_to_save 1 MiB: a send is acknowledged from the in-memory
  # journal, written to the segment file once that much is waiting). So that a run can set
  # it (BENCH_IGGY_SAVE), the topic's messages_required_to_save is read from the environment.
  local bench_rs="$src/core/bench/src/benchmarks/benchmark.rs"
  if ! grep -q IGGY_BENCH_MESSAGES_REQUIRED_TO_SAVE "$bench_rs"; then
    grep -q 'enforce_fsync: enforce_fsync.then_some(true),' "$bench_rs" \
      || { echo "cannot patch $bench_rs (no enforce_fsync topic option line)" >&2; exit 2; }
    echo "patching $bench_rs: topic messages_required_to_save from IGGY_BENCH_MESSAGES_REQUIRED_TO_SAVE" >&2
    sed -i 's/^\( *\)enforce_fsync: enforce_fsync.then_some(true),/&\n\1messages_required_to_save: std::env::var("IGGY_BENCH_MESSAGES_REQUIRED_TO_SAVE").ok().and_then(|v| v.parse().ok()),/' "$bench_rs"
  fi
  echo "building Iggy (iggy-server, iggy-bench) in $src, target $work/iggy/target ..." >&2
  (cd "$src" && RUSTUP_TOOLCHAIN=stable CARGO_TARGET_DIR="$work/iggy/target" \
    cargo build --release -p server -p iggy-bench --no-default-features --features server/mimalloc \
      --bin iggy-server --bin iggy-bench) >&2
  echo "Iggy build: $((SECONDS - t0)) s" >&2
  iggy_server=$work/iggy/target/release/iggy-server iggy_bench=$work/iggy/target/release/iggy-bench
}

if [ "${BENCH_REPORT_ONLY:-0}" != 1 ]; then
  t0=$SECONDS
  if [ "${BENCH_NO_BUILD:-0}" = 1 ]; then
    ringmq=${BENCH_RINGMQ:-target/release/ringmq} perf=target/release/ringmq-perf
    commit=${BENCH_COMMIT:-$(bench_commit)}
  else
    bench_setup bench-iggy.sh
    echo "ringmq build: $((SECONDS - t0)) s" >&2
  fi
  commit=${BENCH_COMMIT:-$commit}
  iggy_build
  [ "${BENCH_BUILD_ONLY:-0}" = 1 ] && exit 0
  # Copies, so a rebuild in the tree during the run does not change what is measured.
  rm -rf "$run" && mkdir -p "$run/bin" "$data_parent"
  if [ -n "${BENCH_IGGY_SAVE:-}" ] && ! grep -q IGGY_BENCH_MESSAGES_REQUIRED_TO_SAVE "$iggy_bench"; then
    echo "BENCH_IGGY_SAVE needs an iggy-bench built by this script (it reads the topic's" >&2
    echo "messages_required_to_save from IGGY_BENCH_MESSAGES_REQUIRED_TO_SAVE); $iggy_bench does not" >&2
    exit 2
  fi
  cp "$ringmq" "$perf" "$iggy_server" "$iggy_bench" "$run/bin/"
  ringmq=$run/bin/ringmq perf=$run/bin/ringmq-perf
  iggy_server=$run/bin/iggy-server iggy_bench=$run/bin/iggy-bench
  jq -n --arg commit "$commit" --arg iggy "$iggy_commit" --arg data "$data_parent" \
    --arg ringmq_set "${BENCH_RINGMQ_SET:-}" \
    --arg fs "$(stat -f -c %T "$data_parent")" --argjson rounds "$rounds" \
    --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" \
    --arg memory "$(scripts/bench-memory.sh status)" --arg reported "$(reported_kib)" \
    '{commit: $commit, iggy_commit: $iggy, data: $data, fs: $fs, rounds: $rounds, load_before: $load,
      ringmq_set: $ringmq_set, memory_before: $memory, reported_kib_before: $reported}' >"$run/meta.json"
fi

# --- servers --------------------------------------------------------------------------------

server_pid=""
stop_server() {
  [ -n "$server_pid" ] || return 0
  bench_stop 30 "$server_pid"
  server_pid=""
}
cleanup() {
  stop_server
  rm -rf "$data_parent"/bench-iggy-data.*
  rm -rf "$run/bin"
}
trap cleanup EXIT

start_ringmq() { # DATA_DIR
  local sets=() kv
  for kv in ${BENCH_RINGMQ_SET:-}; do sets+=(--set "$kv"); done
  RUST_LOG=warn taskset -c "$server_cpu" "$ringmq" standalone --data "$1" --namesrv-port 0 \
    --broker-port 0 --shards 1 "${sets[@]}" >"$run/ringmq.out" 2>"$run/ringmq.err" &
  server_pid=$!
  bench_wait_line "$run/ringmq.out" ready "ringmq standalone"
  namesrv=$(grep -o 'namesrv [0-9.:]*' "$run/ringmq.out" | cut -d' ' -f2)
}

start_iggy() { # DATA_DIR
  bench_port_open "$iggy_port" && { echo "port $iggy_port is in use (set BENCH_IGGY_PORT)" >&2; exit 1; }
  # From DATA_DIR: no core/server/config.toml there, so the server takes its built-in defaults.
  (cd "$1" && IGGY_SYSTEM_PATH="$1/iggy" IGGY_TCP_ADDRESS="127.0.0.1:$iggy_port" \
    IGGY_HTTP_ENABLED=false IGGY_QUIC_ENABLED=false IGGY_WEBSOCKET_ENABLED=false \
    IGGY_SYSTEM_SHARDING_CPU_ALLOCATION=1 IGGY_SYSTEM_LOGGING_LEVEL=warn \
    IGGY_ROOT_USERNAME=iggy IGGY_ROOT_PASSWORD=iggy \
    exec taskset -c "$server_cpu" "$iggy_server") >"$run/iggy.out" 2>"$run/iggy.err" &
  server_pid=$!
  bench_wait_port "$iggy_port" "$server_pid" iggy-server "$run/iggy.out" "$run/iggy.err"
}

# --- cells ----------------------------------------------------------------------------------

# cell_begin / cell_end: around each cell. cell_begin first writes back whatever earlier
# cells left dirty in the page cache (`sync`, untimed), so neither broker's deferred
# write-back lands in a later cell of the other; then notes the machine's steal time
# (/proc/stat: time the hypervisor ran something else while a vCPU wanted to run) and the
# clock. cell_end sets $steal_ticks and $wall_ms for the cell.
cell_begin() {
  sync
  steal0=$(awk '$1 == "cpu" { print $9 }' /proc/stat) t0_ms=$(date +%s%3N)
}
cell_end() {
  steal_ticks=$(( $(awk '$1 == "cpu" { print $9 }' /proc/stat) - steal0 ))
  wall_ms=$(( $(date +%s%3N) - t0_ms ))
}

# record ROUND BROKER CELL MSGS_PER_S P50_US P99_US TICKS MESSAGES CLIENT_TIME_FILE: one
# result file per cell and broker (the time file: the generator's user and system seconds,
# as GNU time's "%U %S" wrote them), with the steal of cell_end.
record() {
  local f="$run/r$1-$2-$3.json" client_s
  client_s=$(awk '{ s = $1 + $2 } END { print s + 0 }' "$9")
  jq -n --argjson msgs_per_s "$4" --argjson p50 "$5" --argjson p99 "$6" --argjson ticks "$7" \
    --argjson hz "$hz" --argjson messages "$8" --argjson client_s "$client_s" \
    --argjson steal "$steal_ticks" --argjson wall_ms "$wall_ms" \
    '{msgs_per_s: ($msgs_per_s | floor), p50_us: $p50, p99_us: $p99, messages: $messages,
      server_cpu_s: ($ticks / $hz), server_us_per_msg: ($ticks / $hz * 1e6 / $messages),
      client_cpu_s: $client_s, client_us_per_msg: ($client_s * 1e6 / $messages),
      steal_s: ($steal / $hz), wall_s: ($wall_ms / 1000),
      steal_ms_per_s: (if $wall_ms > 0 then $steal / $hz * 1e6 / $wall_ms else null end)}' >"$f"
  jq -r '"\(.msgs_per_s) msgs/s, p50 \(.p50_us // "-") µs, p99 \(.p99_us // "-") µs, server \(.server_cpu_s) s CPU = \(.server_us_per_msg * 100 | round / 100) µs/msg, generator \(.client_us_per_msg * 100 | round / 100) µs/msg, steal \(.steal_ms_per_s | round) ms/s"' "$f" >&2
}

ringmq_cell() { # ROUND CELL ringmq-perf-args...
  local round=$1 cell=$2 c0 c1 out; shift 2
  out="$run/r$round-ringmq-$cell.perf"
  printf '[round %d/%d] ringmq %-30s ' "$round" "$rounds" "${label[$cell]}" >&2
  cell_begin
  c0=$(bench_cpu_ticks "$server_pid")
  /usr/bin/time -f '%U %S' -o "$out.time" \
    taskset -c "$client_cpu" "$perf" "$@" -n "$namesrv" --node-pid "$server_pid" --threads 1 -q \
    --json "$out.json" >"$out.out" 2>&1 || { echo "failed:" >&2; tail -n 20 "$out.out" >&2; exit 1; }
  c1=$(bench_cpu_ticks "$server_pid")
  cell_end
  # A consumer may take a few pulls beyond --count (those in flight when it is reached): the
  # CPU is divided by what was delivered.
  local got; got=$(jq .messages "$out.json")
  [ "$got" -ge "${messages[$cell]}" ] || { echo "ringmq-perf moved $got messages, not ${messages[$cell]}" >&2; exit 1; }
  if [ "${cell:0:1}" = c ]; then
    record "$round" ringmq "$cell" "$(jq .msgs_per_s "$out.json")" null null $((c1 - c0)) "$got" \
      "$out.time"
  else
    record "$round" ringmq "$cell" "$(jq .msgs_per_s "$out.json")" \
      "$(jq .latency_us.p50 "$out.json")" "$(jq .latency_us.p99 "$out.json")" $((c1 - c0)) "$got" \
      "$out.time"
  fi
}

iggy_cell() { # ROUND CELL MESSAGES_PER_BATCH BATCHES_PER_ACTOR iggy-bench-kind-args...
  local round=$1 cell=$2 mpb=$3 nb=$4 c0 c1 out line; shift 4
  out="$run/r$round-iggy-$cell.out"
  printf '[round %d/%d] Iggy   %-30s ' "$round" "$rounds" "${label[$cell]}" >&2
  cell_begin
  c0=$(bench_cpu_ticks "$server_pid")
  IGGY_BENCH_MESSAGES_REQUIRED_TO_SAVE=${BENCH_IGGY_SAVE:-} \
  NO_COLOR=1 RUST_LOG=warn /usr/bin/time -f '%U %S' -o "$out.time" \
    taskset -c "$client_cpu" "$iggy_bench" --message-size "$size" \
    --messages-per-batch "$mpb" --message-batches "$nb" --username iggy --password iggy "$@" \
    tcp --server-address "127.0.0.1:$iggy_port" --nodelay >"$out" 2>&1 \
    || { echo "failed:" >&2; tail -n 20 "$out" >&2; exit 1; }
  c1=$(bench_cpu_ticks "$server_pid")
  cell_end
  line=$(sed 's/\x1b\[[0-9;]*m//g' "$out" | grep -E '(Producers|Consumers) Results: ' | head -n 1)
  [ -n "$line" ] || { echo "no results line in $out" >&2; exit 1; }
  local msgs p50 p99
  msgs=$(sed -n 's/.* \([0-9.]*\) messages\/s.*/\1/p' <<<"$line")
  p50=$(sed -n 's/.*p50 latency: \([0-9.]*\) ms.*/\1/p' <<<"$line")
  p99=$(sed -n 's/.*p99 latency: \([0-9.]*\) ms.*/\1/p' <<<"$line")
  if [ "${cell:0:1}" = c ]; then
    record "$round" iggy "$cell" "$msgs" null null $((c1 - c0)) "${messages[$cell]}" "$out.time"
  else
    record "$round" iggy "$cell" "$msgs" "$(jq -n "$p50 * 1000 | round")" "$(jq -n "$p99 * 1000 | round")" \
      $((c1 - c0)) "${messages[$cell]}" "$out.time"
  fi
}

# ringmq_fresh: stops the node (if any), removes its data, and starts a new one on an empty
# directory: what iggy-bench's producer cells start from on Iggy's side, since iggy-bench
# deletes the streams it finds before a producer benchmark (after the batch 100 x 1 and
# 2-producer cells Iggy holds only the latter's 3M messages).
ringmq_data=""
ringmq_fresh() {
  stop_server
  [ -n "$ringmq_data" ] && rm -rf "$ringmq_data"
  ringmq_data=$(mktemp -d "$data_parent/bench-iggy-data.XXXXXX")
  start_ringmq "$ringmq_data"
}

ringmq_round() { # ROUND
  local common=(--size "$size" --inflight 1 --send-timeout 30s)
  ringmq_fresh
  ringmq_cell "$1" b100p1 produce --topic b100p1 --queues 1 --batch 100 --producers 1 "${common[@]}" --count "${messages[b100p1]}"
  ringmq_fresh
  ringmq_cell "$1" b1p1 produce --topic b1p1 --queues 1 --batch 1 --producers 1 "${common[@]}" --count "${messages[b1p1]}"
  ringmq_fresh
  ringmq_cell "$1" b100p2 produce --topic b100p2 --queues 2 --batch 100 --producers 2 "${common[@]}" --count "${messages[b100p2]}"
  ringmq_cell "$1" c1 consume --topic b100p2 --from first --consumers 1 --pull-batch "$poll" --count "${messages[c1]}" --pull-ahead 1 --idle-exit 5s
  ringmq_cell "$1" c2 consume --topic b100p2 --from first --consumers 2 --pull-batch "$poll" --count "${messages[c2]}" --pull-ahead 1 --idle-exit 5s
  stop_server
  rm -rf "$ringmq_data"
  ringmq_data=""
}

iggy_round() { # ROUND
  local data; data=$(mktemp -d "$data_parent/bench-iggy-data.XXXXXX")
  start_iggy "$data"
  iggy_cell "$1" b100p1 100 "$batches" pinned-producer --producers 1
  iggy_cell "$1" b1p1 1 "$unbatched" pinned-producer --producers 1
  iggy_cell "$1" b100p2 100 "$batches2" pinned-producer --producers 2
  iggy_cell "$1" c1 "$poll" $((batches2 * 100 / poll)) pinned-consumer --consumers 1
  iggy_cell "$1" c2 "$poll" $((batches2 * 100 / poll)) pinned-consumer --consumers 2
  stop_server
  rm -rf "$data"
}

if [ "${BENCH_REPORT_ONLY:-0}" != 1 ]; then
  echo "work directory: $run; $rounds rounds; server on CPU $server_cpu, generator on CPU $client_cpu" >&2
  for round in $(seq 1 "$rounds"); do
    if [ $((round % 2)) = 1 ]; then ringmq_round "$round"; iggy_round "$round"
    else iggy_round "$round"; ringmq_round "$round"; fi
  done
  jq --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" --arg reported "$(reported_kib)" \
    '. + {load_after: $load, reported_kib_after: $reported}' "$run/meta.json" >"$run/meta.tmp"
  mv "$run/meta.tmp" "$run/meta.json"
fi

# --- table ----------------------------------------------------------------------------------

med() { bench_median "$run/r*-$1-$2.json" "$3"; }
per_round() { jq -s -r '[.[] | .msgs_per_s | tostring] | join(" / ")' "$run"/r*-"$1"-"$2".json; }
lat() { # BROKER CELL
  [ "${2:0:1}" = c ] && { echo "—"; return; }
  echo "$(med "$1" "$2" .p50_us) / $(med "$1" "$2" .p99_us)"
}
meta() { jq -r ".$1 // \"not recorded\"" "$run/meta.json"; }
# memory_line: free page reporting at the start and what it handed back to the host during the
# run (pages the brokers then touch again cost a host fault each: scripts/bench-memory.sh).
memory_line() {
  local before after
  before=$(meta reported_kib_before) after=$(meta reported_kib_after)
  [ "$(meta memory_before)" = "not recorded" ] && return 0
  case "$before$after" in
    *[!0-9]* | "") echo "Memory at the start: $(meta memory_before)." ;;
    *) echo "Memory at the start: $(meta memory_before); $(((after - before) / 1024)) MiB handed back to the host during the run." ;;
  esac
}
# steal1 VALUE: ms/s to 1 decimal; "-" when not recorded.
steal1() { jq -rn --argjson v "$1" 'if $v == null then "-" else ($v * 10 | round / 10 | tostring) end'; }
# cpu2 VALUE: µs per message to 2 decimals; "-" when not recorded (results of an older run).
cpu2() { jq -rn --argjson v "$1" 'if $v == null then "-" else ($v * 100 | round / 100 | tostring) end'; }
# round_ratios CELL: ringmq's msgs/s over Iggy's in each round, "a / b / ..."; and min_ratio
# CELL: the smallest of them (the goal must hold in every round, not only in the median).
round_ratio_list() {
  local r
  for r in $(seq 1 "$(meta rounds)"); do
    [ -f "$run/r$r-ringmq-$1.json" ] && [ -f "$run/r$r-iggy-$1.json" ] || continue
    jq -n --slurpfile a "$run/r$r-ringmq-$1.json" --slurpfile b "$run/r$r-iggy-$1.json" \
      'if $b[0].msgs_per_s > 0 then $a[0].msgs_per_s / $b[0].msgs_per_s * 100 | round / 100 else empty end'
  done
}
round_ratios() { round_ratio_list "$1" | paste -sd/ | sed 's#/# / #g'; }
min_ratio() { round_ratio_list "$1" | sort -g | head -n 1; }
# goal CELL: the goal of issue #40 for the cell and whether the run met it (in every round
# for msgs/s; on the medians for p99).
goal() {
  local want=1.5 m
  [ "${1:0:1}" = c ] && want=3
  m=$(min_ratio "$1")
  local ok; ok=$(jq -n "${m:-0} >= $want")
  local text="≥ ${want}x msgs/s every round: $([ "$ok" = true ] && echo met || echo "not met (lowest ${m:-?}x)")"
  if [ "$1" = b1p1 ]; then
    local rp ip; rp=$(med ringmq b1p1 .p99_us) ip=$(med iggy b1p1 .p99_us)
    text="$text; p99 ≤ ½ Iggy's: $(jq -rn "if $rp * 2 <= $ip then \"met\" else \"not met\" end") ($rp vs $ip µs)"
  fi
  echo "$text"
}

marker=bench-iggy.sh save_note=""
if [ -n "${BENCH_IGGY_SAVE:-}" ]; then
  marker="bench-iggy.sh save=$BENCH_IGGY_SAVE" save_note=", BENCH_IGGY_SAVE=$BENCH_IGGY_SAVE"
fi
ringmq_set=$(meta ringmq_set)
[ "$ringmq_set" = "not recorded" ] && ringmq_set=""
if [ -n "$ringmq_set" ]; then
  marker="$marker set=$ringmq_set" save_note="$save_note, BENCH_RINGMQ_SET=$ringmq_set"
fi
table=$(
  echo "<!-- $marker:begin (generated by scripts/bench-iggy.sh; edits here are overwritten) -->"
  echo "### ringmq and Apache Iggy side by side (scripts/bench-iggy.sh$save_note)"
  echo
  if [ -n "$ringmq_set" ]; then
    echo "ringmq \`$(meta commit)\` (\`ringmq standalone --shards 1\`, ASYNC_FLUSH, with \`--set\` $ringmq_set) and Apache Iggy"
  else
    echo "ringmq \`$(meta commit)\` (\`ringmq standalone --shards 1\`, ASYNC_FLUSH) and Apache Iggy"
  fi
  echo "\`$(meta iggy_commit)\` (\`iggy-server\` with mimalloc, TCP only, 1 shard), $(date -u +%Y-%m-%d),"
  echo "$(nproc) cores: the server pinned to CPU $server_cpu, the load generator (\`ringmq-perf\` / \`iggy-bench\`) to"
  echo "CPU $client_cpu. Data on $(meta fs) (\`$(meta data)\`), a fresh directory and server per round and broker;"
  echo "each producer cell starts on no data (iggy-bench deletes its streams first; ringmq gets a fresh node)."
  echo "1 KiB messages, one request in flight per producer, and per queue or partition a consumer reads"
  echo "(closed loop; ringmq's consumer starts a queue's next pull when a poll takes its messages, Iggy's"
  echo "polls again after the last poll's messages: the one-consumer cell reads 2 queues of ringmq's topic"
  echo "and 1 partition of Iggy's stream), the same"
  echo "number of messages for both. Medians of $(meta rounds) rounds, the brokers alternating which goes"
  echo "first. Latency: µs per send request (iggy-bench: mean of its producers' percentiles, 10 µs"
  echo "steps). Server CPU: utime+stime of the server process over the cell, per message. Generator"
  echo "CPU: user+system time of \`ringmq-perf\` / \`iggy-bench\` (GNU time), set-up included, per message."
  echo "Before each cell the script writes back what earlier cells left dirty (\`sync\`, untimed). Steal:"
  echo "the time the hypervisor ran something else while one of this VM's vCPUs wanted to run, summed"
  echo "over the CPUs (/proc/stat), per second of the cell."
  if [ -n "${BENCH_IGGY_SAVE:-}" ]; then
    echo "Iggy's topics with messages_required_to_save = $BENCH_IGGY_SAVE (\`BENCH_IGGY_SAVE=$BENCH_IGGY_SAVE\`): a send"
    echo "is acknowledged once every $BENCH_IGGY_SAVE message(s) are written to the segment file."
  else
    echo "Iggy's topics with its default flush cadence: a send is acknowledged from its in-memory"
    echo "journal, which is written to the segment file every 1024 messages or 1 MiB."
  fi
  echo
  echo "Load average $(meta load_before) before the run, $(meta load_after) after."
  memory_line
  echo
  echo "| cell | messages | ringmq msgs/s | Iggy msgs/s | ringmq / Iggy | ringmq p50 / p99 µs | Iggy p50 / p99 µs | ringmq server CPU µs/msg | Iggy server CPU µs/msg | Iggy / ringmq CPU | ringmq-perf CPU µs/msg | iggy-bench CPU µs/msg | steal ms/s, ringmq / Iggy |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  for cell in "${cells[@]}"; do
    r=$(med ringmq "$cell" .msgs_per_s) i=$(med iggy "$cell" .msgs_per_s)
    ratio=$(jq -n "if $i > 0 then ($r / $i * 100 | round / 100 | tostring) + \"x\" else \"-\" end" -r)
    rc=$(med ringmq "$cell" .server_us_per_msg) ic=$(med iggy "$cell" .server_us_per_msg)
    cratio=$(jq -rn "if $rc > 0 then ($ic / $rc * 100 | round / 100 | tostring) + \"x\" else \"-\" end")
    rg=$(med ringmq "$cell" '(.client_us_per_msg // null)') ig=$(med iggy "$cell" '(.client_us_per_msg // null)')
    rs=$(med ringmq "$cell" '(.steal_ms_per_s // null)') is=$(med iggy "$cell" '(.steal_ms_per_s // null)')
    echo "| ${label[$cell]} | ${messages[$cell]} | $r | $i | $ratio | $(lat ringmq "$cell") | $(lat iggy "$cell") | $(jq -n "$rc * 100 | round / 100") | $(jq -n "$ic * 100 | round / 100") | $cratio | $(cpu2 "$rg") | $(cpu2 "$ig") | $(steal1 "$rs") / $(steal1 "$is") |"
  done
  echo
  echo "ringmq / Iggy msgs/s in each round, and the goals (issue #40):"
  echo
  for cell in "${cells[@]}"; do
    echo "- ${label[$cell]}: $(round_ratios "$cell"); $(goal "$cell")."
  done
  echo
  echo "Per round (msgs/s, ringmq; Iggy):"
  for cell in "${cells[@]}"; do
    echo "${label[$cell]}: $(per_round ringmq "$cell"); $(per_round iggy "$cell")."
  done
  echo "<!-- $marker:end -->"
)
echo
echo "$table"
bench_write_doc "$marker" "$table" "$doc"
