#!/usr/bin/env bash
# What ACL and TLS cost the broker, same run (issue #24).
# The cells, variants, environment and output: scripts/bench-variants.sh.
#
#   scripts/bench-security.sh
#   BENCH_ROUNDS=5 BENCH_DOC=docs/perf.md scripts/bench-security.sh
exec "$(dirname "$0")/bench-variants.sh" security "$@"
