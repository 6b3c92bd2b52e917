#!/usr/bin/env bash
# Fuzz every ringmq-wire decoder (wire/fuzz, a cargo-fuzz project outside the workspace) for
# a bounded time per target. Not part of CI.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET]     # default 60
#
# Needs cargo-fuzz (installed here if missing) and libFuzzer's -Z flags: on a stable
# toolchain RUSTC_BOOTSTRAP=1 lets rustc accept them (the stable toolchain ships the ASan
# runtime). Findings are left in wire/fuzz/artifacts/<target>/; the script exits non-zero
# if any target found a crash.
set -euo pipefail
seconds="${1:-60}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
    echo "usage: $0 [SECONDS_PER_TARGET]" >&2
    exit 2
fi
cd "$(dirname "$0")/../wire"

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi
if ! rustc --version | grep -q nightly; then
    export RUSTC_BOOTSTRAP=1
fi
if ! cargo fuzz build -O -a >/tmp/ringmq-fuzz-build.log 2>&1; then
    echo "cargo fuzz cannot build the targets on this toolchain ($(rustc --version))." >&2
    echo "It needs nightly, or a stable rustc with RUSTC_BOOTSTRAP=1 and a C++ compiler for" >&2
    echo "libFuzzer. Build log: /tmp/ringmq-fuzz-build.log" >&2
    tail -20 /tmp/ringmq-fuzz-build.log >&2
    exit 1
fi

failed=()
for target in $(cargo fuzz list); do
    echo "== fuzz $target for ${seconds}s"
    mkdir -p "fuzz/corpus/$target"
    # Seeds kept in git (the corpus is not): e.g. a signed request for `auth`.
    if [ -d "fuzz/seeds/$target" ]; then
        cp -n "fuzz/seeds/$target"/* "fuzz/corpus/$target"/
    fi
    log="/tmp/ringmq-fuzz-$target.log"
    status=0
    cargo fuzz run -O -a "$target" "fuzz/corpus/$target" -- \
        -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
        >"$log" 2>&1 || status=$?
    grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb|SUMMARY|thread .* panicked|Test unit written)' "$log" || true
    if [ "$status" -ne 0 ]; then
        echo "   $target failed (exit $status); log: $log" >&2
        failed+=("$target")
    fi
done

if [ "${#failed[@]}" -ne 0 ]; then
    echo "FAILED targets: ${failed[*]} (inputs in wire/fuzz/artifacts/)" >&2
    exit 1
fi
echo "all fuzz targets ran ${seconds}s without a finding"
