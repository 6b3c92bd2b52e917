"""What the gRPC interop scripts share: how a check fails (a `FAIL:` line, exit 1) and a
watchdog that ends a script still running past its limit (a `FAIL:` line, exit 3), so a hung
client never hangs the test."""

import os
import sys
import threading
import time


def fail(why):
    print(f"FAIL: {why}", flush=True)
    sys.exit(1)


def watchdog(limit_s):
    time.sleep(limit_s)
    print(f"FAIL: watchdog: still running after {limit_s} s", flush=True)
    os._exit(3)


def start_watchdog(limit_s):
    threading.Thread(target=watchdog, args=(limit_s,), daemon=True).start()
