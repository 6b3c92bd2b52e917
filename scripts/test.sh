#!/usr/bin/env bash
# The one test command (README, CI): the import arrows, formatting, clippy with warnings
# denied, every test.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== arrows point down (no import circle; the ground floor, the broker core and its features point down)"
scripts/check-arrows.sh
scripts/check-arrows.sh --self-test
echo "== cargo fmt --check"
cargo fmt --all --check
# The Rust port's mqadmin (`rocketmq-admin-cli` 1.0.0 from crates.io, built without its
# RocksDB export feature) for interop/tests/admin_cli.rs, into ~/.cache/ringmq/admin-cli;
# skipped when already there. Built in the background while clippy builds the workspace
# (its own target folder; the two share the cores), waited for before the tests.
ADMIN_CLI_LOG="$(mktemp "${TMPDIR:-/tmp}/ringmq-admin-cli-install.XXXXXX")"
bash scripts/install-admin-cli.sh >"$ADMIN_CLI_LOG" 2>&1 &
ADMIN_CLI_PID=$!
# protoc from the system's packages: grpc/build.rs compiles RocketMQ 5's protocol files with
# it. They import google/protobuf/{timestamp,duration}.proto, which Debian ships in
# libprotobuf-dev (only recommended by protobuf-compiler, so named here).
if [ -z "${PROTOC:-}" ] && { ! command -v protoc >/dev/null 2>&1 \
    || [ ! -f /usr/include/google/protobuf/timestamp.proto ]; }; then
    echo "== apt-get install protobuf-compiler libprotobuf-dev (protoc and the protocol files it imports, for grpc/build.rs)"
    export DEBIAN_FRONTEND=noninteractive
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    if ! $SUDO apt-get install -y --no-install-recommends protobuf-compiler libprotobuf-dev; then
        $SUDO apt-get update
        $SUDO apt-get install -y --no-install-recommends protobuf-compiler libprotobuf-dev
    fi
fi
echo "== cargo clippy (warnings denied)"
cargo clippy --workspace --all-targets --locked -- -D warnings
# The C++ RocketMQ client the interop tests drive (interop/tests/cpp_client.rs): PyPI's
# `rocketmq` 0.4.4 wheel carries librocketmq.so (rocketmq-client-cpp 1.2.3).
if ! python3 -c "import rocketmq" >/dev/null 2>&1; then
    echo "== pip install rocketmq==0.4.4 (the C++ RocketMQ client of the interop tests)"
    python3 -m pip install --quiet --disable-pip-version-check rocketmq==0.4.4
fi
# RocketMQ 5's Python SDK (gRPC) for interop/tests/grpc_python.rs, in a venv of its own: its
# `rocketmq` package would shadow the C++ client's above. RINGMQ_GRPC_PYTHON names another one.
GRPC_VENV="$HOME/.cache/ringmq/grpc-python"
if [ -z "${RINGMQ_GRPC_PYTHON:-}" ] && ! "$GRPC_VENV/bin/python" -c "import rocketmq.v5" >/dev/null 2>&1; then
    echo "== pip install rocketmq-python-client==5.1.2 into $GRPC_VENV (RocketMQ 5's Python SDK of the gRPC interop test)"
    python3 -m venv "$GRPC_VENV"
    "$GRPC_VENV/bin/pip" install --quiet --disable-pip-version-check rocketmq-python-client==5.1.2
fi
# Headless Chromium and chromedriver from the system's packages, for the dashboard's browser
# test (ctl/tests/ctl_dashboard.rs), which fails without them.
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    echo "== apt-get install chromium chromium-driver (the dashboard's browser test)"
    export DEBIAN_FRONTEND=noninteractive
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    if ! $SUDO apt-get install -y --no-install-recommends chromium chromium-driver; then
        $SUDO apt-get update
        $SUDO apt-get install -y --no-install-recommends chromium chromium-driver
    fi
fi
# Prometheus from the system's packages: node/tests/metrics_prometheus.rs runs it against
# `ringmq standalone`'s metrics endpoint and asks it a RocketMQ 5 dashboard's PromQL.
if [ ! -x /usr/bin/prometheus ]; then
    echo "== apt-get install prometheus (the metrics test with a real Prometheus server)"
    export DEBIAN_FRONTEND=noninteractive
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    if ! $SUDO apt-get install -y --no-install-recommends prometheus; then
        $SUDO apt-get update
        $SUDO apt-get install -y --no-install-recommends prometheus
    fi
fi
echo "== rocketmq-admin-cli (built in the background since clippy)"
if ! wait "$ADMIN_CLI_PID"; then
    tail -n 40 "$ADMIN_CLI_LOG"
    echo "scripts/install-admin-cli.sh failed (its log: $ADMIN_CLI_LOG)" >&2
    exit 1
fi
tail -n 3 "$ADMIN_CLI_LOG"
rm -f "$ADMIN_CLI_LOG"
echo "== cargo test (unit, property, integration, RocketMQ clients written by others)"
# Every test binary, two at a time (most wait on the processes they start), each as
# `cargo test` runs it, then the doc tests; every binary runs even when one fails
# (scripts/run-tests.py; RINGMQ_TEST_JOBS=1 runs them one after another).
python3 scripts/run-tests.py -- --locked
