#!/usr/bin/env python3
"""Runs the workspace's test binaries a few at a time instead of one after another.

`cargo test` runs each test binary only after the previous one ended. Most of ringmq's
integration tests spend their time waiting on the real processes they start (brokers, name
servers, RocketMQ's own clients, Prometheus, Chromium), so on the 2-core CI machine the cores
sit idle for much of the ~15 minutes the binaries take in a row. This runner builds them with
`cargo test --no-run`, then runs `--jobs` binaries at once (default 2, `RINGMQ_TEST_JOBS`),
each exactly as cargo would: in its package's folder, with cargo's test-time environment, its
own tests on the test harness's threads. Then `cargo test --doc` runs the doc tests.

Why not cargo-nextest: installing it means building it from crates.io on a machine that has
only the package registries, minutes of a 30-minute CI budget; and it runs each test in a
process of its own, where ringmq's binaries run their tests in one process as `cargo test`
does. This file only schedules whole binaries and reports.

Output: each binary's output is printed whole when it ends (never interleaved), then one
line per binary with its time, then the failures. Exit status 1 when any binary failed or
was killed, 2 when the build failed.

    scripts/run-tests.py [--jobs N] [-- CARGO_TEST_ARGS...]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

# Binaries known to run longest go first, so that they overlap with the many short ones
# instead of running alone at the end. Order only: a name not here runs after these.
LONGEST_FIRST = [
    "simulator",
    "grpc_python",
    "rust_client",
    "grpc_cluster",
    "grpc_rust_sdk",
    "ctl_dashboard",
    "perf_pop_kill9",
    "cpp_client",
    "perf_kill9_features",
    "grpc_acl_tls",
]


def build(cargo_args):
    """Builds every test binary; returns [(name, executable, package folder)]."""
    cmd = ["cargo", "test", "--workspace", "--no-run", "--message-format=json-render-diagnostics"]
    cmd += cargo_args
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    binaries = []
    for line in proc.stdout:
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
            continue
        if not msg.get("profile", {}).get("test"):
            continue
        target = msg["target"]
        kind = target["kind"][0]
        name = target["name"] if kind != "lib" else f"{target['name']} (unit)"
        binaries.append((name, msg["executable"], os.path.dirname(msg["manifest_path"])))
    if proc.wait() != 0:
        sys.exit(f"run-tests: cargo test --no-run failed (exit {proc.returncode})")
    rank = {n: i for i, n in enumerate(LONGEST_FIRST)}
    binaries.sort(key=lambda b: (rank.get(b[0], len(rank)), b[0]))
    return binaries


def run_one(binary, lock, results, harness_args):
    name, exe, folder = binary
    env = dict(os.environ)
    # What cargo sets for a test binary at run time.
    env["CARGO_MANIFEST_DIR"] = folder
    env.setdefault("CARGO", "cargo")
    start = time.monotonic()
    with tempfile.TemporaryFile(mode="w+") as out:
        code = subprocess.call([exe] + harness_args, cwd=folder, env=env, stdout=out,
                               stderr=subprocess.STDOUT)
        out.seek(0)
        text = out.read()
    took = time.monotonic() - start
    with lock:
        rel = os.path.relpath(exe)
        print(f"     Running {name} ({rel}) in {folder}", flush=True)
        sys.stdout.write(text)
        if code != 0:
            print(f"run-tests: {name} FAILED (exit {code}) after {took:.1f} s", flush=True)
        sys.stdout.flush()
        results.append((name, code, took))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("RINGMQ_TEST_JOBS", "2")),
                        help="test binaries run at once (default 2, RINGMQ_TEST_JOBS)")
    parser.add_argument("--harness", default="",
                        help="arguments for every test binary, space-separated (e.g. '--nocapture')")
    parser.add_argument("cargo_args", nargs="*", help="after --: more `cargo test` arguments")
    args = parser.parse_args()
    if args.jobs < 1:
        sys.exit("run-tests: --jobs must be at least 1")

    binaries = build(args.cargo_args)
    print(f"run-tests: {len(binaries)} test binaries, {args.jobs} at a time", flush=True)
    lock = threading.Lock()
    results = []
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for b in binaries:
            pool.submit(run_one, b, lock, results, args.harness.split())
    wall = time.monotonic() - start

    print("\nrun-tests: doc tests", flush=True)
    doc = subprocess.call(["cargo", "test", "--workspace", "--doc"] + args.cargo_args)

    failed = [r for r in results if r[1] != 0]
    print(f"\nrun-tests: {len(results)} binaries in {wall:.0f} s "
          f"(their times add up to {sum(r[2] for r in results):.0f} s), {len(failed)} failed; "
          f"doc tests {'passed' if doc == 0 else 'FAILED'}")
    for name, _, took in sorted(results, key=lambda r: -r[2])[:10]:
        print(f"  {took:7.1f} s  {name}")
    for name, code, _ in failed:
        print(f"FAILED: {name} (exit {code})")
    sys.exit(1 if failed or doc != 0 else 0)


if __name__ == "__main__":
    main()
