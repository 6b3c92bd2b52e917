#!/usr/bin/env bash
# Memory the host has backed, for benchmarks on a VM that backs guest memory lazily.
#
#   scripts/bench-memory.sh status     # one line: free page reporting on or off, pages reported
#   scripts/bench-memory.sh prepare    # root: stop free page reporting, touch the free memory once
#
# On a guest with virtio_balloon free page reporting (a Firecracker VM, for one), the guest
# hands memory it freed back to the host a few seconds later, and the first write to such a
# page costs a fault in the host: writing 2 GiB into the page cache took 4.1 s of system time
# on fresh memory and 0.28 s on memory the host still backed, on the VM of docs/perf.md. A
# broker that writes GBs meets whichever kind the machine hands it, so a benchmark's figures
# depend on what ran before it and how long ago.
#
# `prepare` sets the kernel's page_reporting_order above the largest order the buddy
# allocator has (no free block is large enough to be reported, so freed memory stays backed;
# the setting lasts until the next boot or until it is set back), then touches all but 1 GiB
# of the available memory once, in a process that exits. Afterwards every broker writes into
# memory the host has backed. It changes nothing on a machine without free page reporting
# except touching the memory. `status` is what the benchmark scripts record with their tables.
#
# Environment: BENCH_MEMORY_KEEP_MIB (1024; memory `prepare` leaves untouched).
set -euo pipefail

params=/sys/module/page_reporting/parameters

# largest_order: the largest allocation order of the buddy allocator (/proc/buddyinfo has one
# column per order, after "Node N, zone NAME").
largest_order() { awk 'NR == 1 { print NF - 5 }' /proc/buddyinfo; }

status() {
  if [ ! -r "$params/page_reporting_order" ]; then
    echo "free page reporting: not in this kernel"
    return
  fi
  local order largest reported
  order=$(cat "$params/page_reporting_order") largest=$(largest_order)
  reported=$(cat "$params/reported_kib" 2>/dev/null || echo unknown)
  if [ "$order" -gt "$largest" ]; then
    echo "free page reporting: off (page_reporting_order $order, above the largest order $largest); $reported KiB reported since boot"
  else
    echo "free page reporting: on (page_reporting_order $order); $reported KiB reported since boot"
  fi
}

prepare() {
  [ "$(id -u)" = 0 ] || { echo "bench-memory.sh prepare: needs root (it writes $params)" >&2; exit 1; }
  command -v python3 >/dev/null || { echo "bench-memory.sh prepare: needs python3" >&2; exit 2; }
  if [ -w "$params/page_reporting_order" ]; then
    local above=$(($(largest_order) + 1))
    echo "$above" >"$params/page_reporting_order"
    [ "$(cat "$params/page_reporting_order")" = "$above" ] \
      || { echo "bench-memory.sh: page_reporting_order did not take $above" >&2; exit 1; }
  fi
  local keep=${BENCH_MEMORY_KEEP_MIB:-1024} avail mib
  avail=$(awk '$1 == "MemAvailable:" { print int($2 / 1024) }' /proc/meminfo)
  mib=$((avail - keep))
  [ "$mib" -gt 0 ] || { echo "bench-memory.sh: only $avail MiB available" >&2; exit 1; }
  echo "touching $mib MiB once ..." >&2
  local t0=$SECONDS
  python3 - "$mib" <<'EOF'
import mmap, sys
mib = int(sys.argv[1])
m = mmap.mmap(-1, mib << 20)
chunk = b"\x01" * (1 << 20)
for i in range(mib):
    m[i << 20:(i + 1) << 20] = chunk
EOF
  echo "touched $mib MiB in $((SECONDS - t0)) s" >&2
  status
}

case "${1:-}" in
  status) status ;;
  prepare) prepare ;;
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' ;;
  *) echo "usage: scripts/bench-memory.sh status|prepare (see --help)" >&2; exit 2 ;;
esac
