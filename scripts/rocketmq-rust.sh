#!/usr/bin/env bash
# The Rust port of RocketMQ (github.com/mxsm/rocketmq-rust, crates.io 1.0.0), installed once for
# the side-by-side benchmarks (scripts/bench-rocketmq.sh, scripts/bench-grpc.sh). Run it to
# install, or source it for its functions.
#
#   scripts/rocketmq-rust.sh            # install what is missing, print the binaries' paths
#   scripts/rocketmq-rust.sh --check    # exit 0 when everything is installed, 1 otherwise
#
# What it installs under RMQ_RUST_ROOT (default ~/.cache/ringmq/rocketmq-rust):
#   bin/rocketmq-namesrv-rust   cargo install --locked rocketmq-namesrv@1.0.0 (default features: tls)
#   bin/rocketmq-broker-rust    cargo install --locked rocketmq-broker@1.0.0 (default features:
#                               local_file_store; the RocksDB store is a feature, not built)
#   bin/rocketmq-proxy-rust     cargo install --locked rocketmq-proxy@1.0.0 --no-default-features
#                               --features cluster-mode (the gRPC proxy in front of a name server
#                               and brokers; local mode, a broker inside the proxy, not built)
#   bin/client-production-benchmark
#                               the example of that name in rocketmq-client-rust 1.0.0 (the
#                               port's client and its own benchmark), built from the crate's
#                               source with its Cargo.lock (--locked)
# The three installs share one target directory (RMQ_RUST_ROOT/build, removed afterwards) so
# their common dependencies build once. Each step is skipped when its binary is there; the
# time of each is appended to RMQ_RUST_ROOT/install-times.txt and printed. A first install on
# 2 cores takes tens of minutes (see docs/perf.md).
#
# The port's binaries read ROCKETMQ_HOME and want it to name a writable folder (its logs and
# default store go there); the benchmark scripts give each run its own.
set -euo pipefail

RMQ_RUST_VERSION=1.0.0
RMQ_RUST_ROOT=${RMQ_RUST_ROOT:-$HOME/.cache/ringmq/rocketmq-rust}
rmq_namesrv=$RMQ_RUST_ROOT/bin/rocketmq-namesrv-rust
rmq_broker=$RMQ_RUST_ROOT/bin/rocketmq-broker-rust
rmq_proxy=$RMQ_RUST_ROOT/bin/rocketmq-proxy-rust
rmq_bench_client=$RMQ_RUST_ROOT/bin/client-production-benchmark

# rmq_rust_installed: true when every binary is present.
rmq_rust_installed() {
  [ -x "$rmq_namesrv" ] && [ -x "$rmq_broker" ] && [ -x "$rmq_proxy" ] && [ -x "$rmq_bench_client" ]
}

# rmq_rust_exec DATA COMMAND...: execs COMMAND in DATA/home with the port's environment (in a
# subshell): ROCKETMQ_HOME and HOME DATA/home, RUST_LOG=warn, and the security profile that
# runs it without TLS and ACL (the port then checks that every listener is on loopback).
rmq_rust_exec() {
  local data=$1; shift
  export ROCKETMQ_HOME="$data/home" HOME="$data/home" RUST_LOG=warn \
    ROCKETMQ_SECURITY_PROFILE=development-insecure-loopback
  cd "$data/home" && exec "$@"
}

# rmq_rust_start DATA FLUSH_DISK_TYPE CLUSTER: the port's name server and one master broker,
# for the benchmark scripts (needs scripts/bench-lib.sh): free ports on 127.0.0.1, both pinned
# to CPU $server_cpu, logs $work/namesrv.out and $work/broker.out; sets $namesrv and $pids
# (name server, broker). conf/broker.toml as the port's README shows for a single local
# master, plus flushDiskType and autoCreateTopicEnable; no defaultTopicQueueNums (broker 1.0.0
# stops at start, printing only "core.service.failed", when it is set; new topics get 8 queues).
rmq_rust_start() {
  local data=$1 flush=$2 cluster=$3 ns_port br_port
  mkdir -p "$data/home/conf" "$data/store"
  ns_port=$(bench_free_port)
  (rmq_rust_exec "$data" taskset -c "$server_cpu" "$rmq_namesrv" --listenPort "$ns_port" \
    --bindAddress 127.0.0.1) >"$work/namesrv.out" 2>&1 &
  pids=($!)
  bench_wait_port "$ns_port" "${pids[0]}" "rocketmq-namesrv-rust" "$work/namesrv.out"
  namesrv=127.0.0.1:$ns_port
  br_port=$(bench_free_port)
  cat >"$data/home/conf/broker.toml" <<EOF
[broker]
namesrvAddr = "$namesrv"
brokerIp1 = "127.0.0.1"
listenPort = $br_port
storePathRootDir = "$data/store"
autoCreateTopicEnable = true

[broker.brokerServerConfig]
bindAddress = "127.0.0.1"

[broker.brokerIdentity]
brokerName = "bench-broker-a"
brokerClusterName = "$cluster"
brokerId = 0

[store]
storeType = "LocalFile"
brokerRole = "ASYNC_MASTER"
flushDiskType = "$flush"
storePathRootDir = "$data/store"
haListenAddress = "127.0.0.1"
haListenPort = $((br_port + 1))
EOF
  (rmq_rust_exec "$data" taskset -c "$server_cpu" "$rmq_broker" -c "$data/home/conf/broker.toml" \
    -n "$namesrv") >"$work/broker.out" 2>&1 &
  pids+=($!)
  bench_wait_port "$br_port" "${pids[1]}" "rocketmq-broker-rust" "$work/broker.out"
}

# rmq_rust_timed WHAT COMMAND...: runs COMMAND (output to stderr), records its wall time.
rmq_rust_timed() {
  local what=$1 t0=$SECONDS; shift
  echo "rocketmq-rust: $what ..." >&2
  "$@" >&2
  local took=$((SECONDS - t0))
  echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) $what: ${took} s on $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)" \
    >>"$RMQ_RUST_ROOT/install-times.txt"
  echo "rocketmq-rust: $what took ${took} s" >&2
}

# rmq_rust_install_crate CRATE BIN [cargo install flags...]
rmq_rust_install_crate() {
  local crate=$1 bin=$2; shift 2
  [ -x "$RMQ_RUST_ROOT/bin/$bin" ] && return 0
  rmq_rust_timed "cargo install $crate@$RMQ_RUST_VERSION" \
    cargo install --locked --root "$RMQ_RUST_ROOT" --target-dir "$RMQ_RUST_ROOT/build" \
      "$crate@$RMQ_RUST_VERSION" "$@"
  [ -x "$RMQ_RUST_ROOT/bin/$bin" ] || { echo "cargo install $crate did not install $bin" >&2; return 1; }
}

# rmq_rust_build_bench_client: fetches rocketmq-client-rust's source with cargo (a throwaway
# package that depends on it) and builds its client-production-benchmark example.
rmq_rust_build_bench_client() {
  [ -x "$rmq_bench_client" ] && return 0
  command -v jq >/dev/null || { echo "rocketmq-rust.sh needs jq" >&2; return 2; }
  local fetch=$RMQ_RUST_ROOT/fetch src
  rm -rf "$fetch" && mkdir -p "$fetch/src"
  printf '[package]\nname = "fetch-client"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\nrocketmq-client-rust = { version = "=%s", default-features = false }\n[workspace]\n' \
    "$RMQ_RUST_VERSION" >"$fetch/Cargo.toml"
  : >"$fetch/src/lib.rs"
  (cd "$fetch" && cargo fetch >&2)
  src=$(cd "$fetch" && cargo metadata --format-version 1 \
    | jq -r '.packages[] | select(.name == "rocketmq-client-rust") | .manifest_path' | xargs dirname)
  [ -f "$src/examples/benchmark/client_production_benchmark.rs" ] \
    || { echo "rocketmq-client-rust $RMQ_RUST_VERSION has no client_production_benchmark example" >&2; return 1; }
  rm -rf "$RMQ_RUST_ROOT/src" && mkdir -p "$RMQ_RUST_ROOT/src"
  cp -r "$src" "$RMQ_RUST_ROOT/src/rocketmq-client-rust"
  rmq_rust_timed "rocketmq-client-rust $RMQ_RUST_VERSION example client-production-benchmark" \
    bash -c "cd '$RMQ_RUST_ROOT/src/rocketmq-client-rust' && cargo build --release --locked \
      --example client-production-benchmark --target-dir '$RMQ_RUST_ROOT/build'"
  mkdir -p "$RMQ_RUST_ROOT/bin"
  cp "$RMQ_RUST_ROOT/build/release/examples/client-production-benchmark" "$rmq_bench_client"
  rm -rf "$fetch"
}

# rmq_rust_install: everything missing, then the shared build directory removed.
rmq_rust_install() {
  mkdir -p "$RMQ_RUST_ROOT"
  rmq_rust_installed && return 0
  rmq_rust_install_crate rocketmq-namesrv rocketmq-namesrv-rust
  rmq_rust_install_crate rocketmq-broker rocketmq-broker-rust
  rmq_rust_install_crate rocketmq-proxy rocketmq-proxy-rust --no-default-features --features cluster-mode
  rmq_rust_build_bench_client
  rm -rf "$RMQ_RUST_ROOT/build"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  case "${1:-}" in
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    --check)
      rmq_rust_installed && exit 0
      echo "the Rust port of RocketMQ is not installed in $RMQ_RUST_ROOT (run scripts/rocketmq-rust.sh)" >&2
      exit 1 ;;
    "") ;;
    *) echo "rocketmq-rust.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  rmq_rust_install
  printf '%s\n' "$rmq_namesrv" "$rmq_broker" "$rmq_proxy" "$rmq_bench_client"
fi
