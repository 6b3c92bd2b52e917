# Shared by the benchmark scripts (sourced, not run): process start-up, medians, and writing
# a generated table into docs/perf.md between a script's markers.

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
  git diff --quiet HEAD -- node client wire perf 2>/dev/null || dirty=" (with uncommitted changes)"
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
