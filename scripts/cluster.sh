#!/usr/bin/env bash
# Starts, stops or shows a RocketMQ-style deployment on this machine (loopback):
#   scripts/cluster.sh up|down|status 2m-noslave|2m-2s-async|2m-2s-sync|controller-1m-2s
# Two name servers and the brokers of conf/MODE/, each with its own ports and data directory
# under $RINGMQ_CLUSTER_DIR (default: a directory in $TMPDIR named after the mode). A mode with
# namesrv-*.properties files (controller-1m-2s) starts one name server per file instead, with
# its embedded controller (the Raft peers are the name servers' ports), and its brokers in
# controller mode (controllerAddr = the name servers): the controllers choose the masters.
# Environment: RINGMQ_BIN (the ringmq binary; default target/release or target/debug, built if
# missing), RINGMQ_PORT_BASE (default 10900), RINGMQ_NAMESRV_PORT (default 9876, and +1),
# RINGMQ_SEGMENT_BYTES (mappedFileSizeCommitLog, default 64 MiB so a local cluster does not
# pre-write GiBs), RINGMQ_SHARDS (default: one per core).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: $0 up|down|status 2m-noslave|2m-2s-async|2m-2s-sync|controller-1m-2s" >&2; exit 2; }
[ $# -eq 2 ] || usage
action=$1 mode=$2
[ -d "conf/$mode" ] || { echo "no such mode: conf/$mode" >&2; usage; }

dir=${RINGMQ_CLUSTER_DIR:-${TMPDIR:-/tmp}/ringmq-cluster-$mode}
base=${RINGMQ_PORT_BASE:-10900}
ns_port=${RINGMQ_NAMESRV_PORT:-9876}
segment=${RINGMQ_SEGMENT_BYTES:-67108864}
# Name server confs of a controller mode (none: two plain name servers).
ns_confs=(conf/"$mode"/namesrv-*.properties)
[ -e "${ns_confs[0]}" ] || ns_confs=()
ns_count=2
[ ${#ns_confs[@]} -gt 0 ] && ns_count=${#ns_confs[@]}
namesrv="" peers=""
for i in $(seq 0 $((ns_count - 1))); do
  namesrv+="${namesrv:+;}127.0.0.1:$((ns_port + i))"
  peers+="${peers:+;}n$i-127.0.0.1:$((ns_port + i))"
done

bin=${RINGMQ_BIN:-}
if [ -z "$bin" ]; then
  # The newest build, so a stale release binary never hides a fresh debug one.
  bin=$(ls -t target/release/ringmq target/debug/ringmq 2>/dev/null | head -n 1 || true)
fi
if [ -z "$bin" ] && [ "$action" = up ]; then
  echo "building ringmq (cargo build --release --bin ringmq) ..."
  cargo build --release --bin ringmq
  bin=target/release/ringmq
fi

# broker name -> port offset from $base
port_of() {
  case $1 in
    broker-a) echo $((base + 11)) ;; broker-a-s) echo $((base + 21)) ;;
    broker-b) echo $((base + 31)) ;; broker-b-s) echo $((base + 41)) ;;
    broker-a-n0) echo $((base + 11)) ;; broker-a-n1) echo $((base + 21)) ;;
    broker-a-n2) echo $((base + 31)) ;;
    *) echo "unknown broker $1" >&2; exit 2 ;;
  esac
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

wait_ready() { # log file, what
  for _ in $(seq 1 100); do
    grep -q "ready" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "$2 did not start; see $1" >&2
  tail -n 20 "${1%.out}.err" >&2 || true
  return 1
}

up() {
  mkdir -p "$dir"
  echo "cluster $mode in $dir"
  for i in $(seq 0 $((ns_count - 1))); do
    p=$((ns_port + i)) name=namesrv-$i
    args=(namesrv --host 127.0.0.1 --port "$p")
    if [ ${#ns_confs[@]} -gt 0 ]; then
      name=namesrv-n$i
      # The file's peers name the default ports; the ports in use replace them.
      args+=(-c "conf/$mode/$name.properties" --set "controllerDLegerPeers=$peers"
        --set "controllerDLegerSelfId=n$i" --set "controllerStorePath=$dir/$name")
    fi
    if alive "$dir/$name.pid"; then echo "  $name already running"; continue; fi
    "$bin" "${args[@]}" >"$dir/$name.out" 2>"$dir/$name.err" &
    echo $! >"$dir/$name.pid"
    wait_ready "$dir/$name.out" "$name"
    echo "  $name  127.0.0.1:$p"
  done
  for conf in conf/"$mode"/*.properties; do
    name=$(basename "$conf" .properties)
    case $name in namesrv-*) continue ;; esac
    port=$(port_of "$name")
    if alive "$dir/$name.pid"; then echo "  $name already running"; continue; fi
    args=(broker -c "$conf" -n "$namesrv"
      --set "listenPort=$port" --set "haListenPort=$((port + 1))"
      --set "storePathRootDir=$dir/$name" --set "mappedFileSizeCommitLog=$segment")
    [ ${#ns_confs[@]} -gt 0 ] && args+=(--set "controllerAddr=$namesrv")
    [ -n "${RINGMQ_SHARDS:-}" ] && args+=(--shards "$RINGMQ_SHARDS")
    "$bin" "${args[@]}" >"$dir/$name.out" 2>"$dir/$name.err" &
    echo $! >"$dir/$name.pid"
    wait_ready "$dir/$name.out" "$name"
    echo "  $name  127.0.0.1:$port (HA $((port + 1)))  $(grep -o 'brokerRole=.*' "$conf")"
  done
  echo "name servers: $namesrv"
}

down() {
  for pid in "$dir"/*.pid; do
    [ -f "$pid" ] || continue
    name=$(basename "$pid" .pid)
    if alive "$pid"; then
      kill -TERM "$(cat "$pid")"
      for _ in $(seq 1 100); do alive "$pid" || break; sleep 0.1; done
      if alive "$pid"; then kill -KILL "$(cat "$pid")"; echo "  $name killed (did not stop in 10 s)"; else echo "  $name stopped"; fi
    fi
    rm -f "$pid"
  done
}

status() {
  echo "cluster $mode in $dir"
  for pid in "$dir"/*.pid; do
    [ -f "$pid" ] || { echo "  nothing running"; return 0; }
    name=$(basename "$pid" .pid)
    if alive "$pid"; then state="running (pid $(cat "$pid"))"; else state="not running"; fi
    printf '  %-12s %s  %s\n' "$name" "$state" "$(head -n 1 "$dir/$name.out" 2>/dev/null)"
  done
  ctl=${bin%/ringmq}/ringmq-ctl
  if [ -x "$ctl" ]; then
    "$ctl" -n "$namesrv" cluster list || true
    if [ ${#ns_confs[@]} -gt 0 ]; then
      "$ctl" -n "$namesrv" cluster controller || true
      "$ctl" -n "$namesrv" cluster replicas || true
    fi
  fi
}

case $action in
  up) up ;; down) down ;; status) status ;; *) usage ;;
esac
