#!/usr/bin/env bash
# The deterministic simulator (node/src/sim, docs/simulation.md): runs N seeds from S, each a
# name server, a master (and by the seed a slave) and clients on virtual time under injected
# faults, and prints one JSON line last: seed_start, runs, failed, events, digest (same
# arguments, same digest). Exits non-zero when a run broke an invariant; the replay command
# is printed.
#
#   scripts/sim.sh --seed S --runs N [--inject-bug NAME] [--virtual-secs T] [--verbose]
#                  [--scenario deploy|failover|pop|recall]
#
# NAME: ack-before-fsync | ack-before-slave | skip-cq-write | deliver-early | progress-ahead |
# namesrv-no-expiry (planted bugs it must find); with --scenario failover (three controllers,
# a broker set of three in controller mode): no-fencing | truncate-too-little |
# elect-out-of-sync | join-unfenced; with --scenario pop (a master crashed at random points
# under POP producers and consumers): pop-offset-before-checkpoint | pop-revive-skips |
# pop-ack-before-durable | pop-rewind-forgets-acks; with --scenario recall (a master crashed at random points under
# scheduled sends and their recalls): recall-ack-before-durable.
# Built with the `sim` profile (release optimizations, panics unwind so they are reported).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet --locked --profile sim -p ringmq-node --bin ringmq-sim
exec "${CARGO_TARGET_DIR:-./target}/sim/ringmq-sim" "$@"
