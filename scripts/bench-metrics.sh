#!/usr/bin/env bash
# What metrics cost the broker, same run (issue #25): metricsExporterType=PROM and a scrape every second against DISABLE.
# The cells, variants, environment and output: scripts/bench-variants.sh.
#
#   scripts/bench-metrics.sh
#   BENCH_ROUNDS=5 BENCH_DOC=docs/perf.md scripts/bench-metrics.sh
exec "$(dirname "$0")/bench-variants.sh" metrics "$@"
