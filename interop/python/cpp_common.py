"""Shared helpers of the scenario scripts that drive the C++ RocketMQ client shipped in
PyPI's `rocketmq` 0.4.4 wheel (librocketmq.so, built from rocketmq-client-cpp 1.2.3)
against a ringmq name server.

Every script: `python3 <script> <namesrv host:port>`; prints one `ok:` line per check,
exits 0 when all passed, 1 with a `FAIL:` line on stderr at the first failed check, 2 when
the whole script overran its deadline (a watchdog ends it: the C++ client's threads must
never hang a test run). ringmq-ctl is found through $RINGMQ_CTL, then PATH, then
target/debug/ringmq-ctl of this repository.

What the binding cannot express is done with ctypes on librocketmq.so directly (see each
use): a listener that answers RECONSUME_LATER (the binding turns an exception into
CONSUME_SUCCESS), the client log level.
"""

import ctypes
import json
import os
import shutil
import subprocess
import sys
import threading
import time

try:
    from rocketmq.client import Message, Producer, PushConsumer, PullConsumer, RecvMessage
    from rocketmq.ffi import dll, MSG_CALLBACK_FUNC, MessageModel, _CLogLevel
except Exception as e:  # noqa: BLE001 - any import failure means the same to the user
    sys.stderr.write(
        "FAIL: cannot import the rocketmq package (%s): run `pip install rocketmq==0.4.4`\n" % e
    )
    sys.exit(3)

__all__ = [
    "Message", "Producer", "PushConsumer", "PullConsumer", "RecvMessage", "MessageModel",
    "dll", "start", "ok", "fail", "wait_until", "unique", "producer", "push_consumer",
    "Inbox", "ctl", "ctl_json", "create_topic", "finish", "CONSUME_SUCCESS",
    "RECONSUME_LATER", "text",
]

CONSUME_SUCCESS = 0
RECONSUME_LATER = 1

# The whole script, start to exit.
SCRIPT_DEADLINE_S = float(os.environ.get("CPP_SCENARIO_DEADLINE_S", "55"))
LOG_LEVEL = _CLogLevel.DEBUG if os.environ.get("CPP_CLIENT_DEBUG") else _CLogLevel.INFO

NAMESRV = None
_T0 = time.monotonic()
_keep = []  # ctypes callbacks and clients that must outlive their Python references


def start(name):
    """Parses argv, arms the watchdog; returns the name server address."""
    global NAMESRV
    if len(sys.argv) != 2:
        sys.stderr.write("usage: %s <namesrv host:port>\n" % sys.argv[0])
        sys.exit(64)
    NAMESRV = sys.argv[1]
    watchdog = threading.Timer(SCRIPT_DEADLINE_S, _overrun, args=(name,))
    watchdog.daemon = True
    watchdog.start()
    print("scenario %s against name server %s" % (name, NAMESRV), flush=True)
    return NAMESRV


def _overrun(name):
    sys.stderr.write("FAIL: %s overran its %.0f s deadline\n" % (name, SCRIPT_DEADLINE_S))
    sys.stderr.flush()
    sys.stdout.flush()
    os._exit(2)


def elapsed():
    return time.monotonic() - _T0


def ok(what):
    print("ok: %s (%.1f s)" % (what, elapsed()), flush=True)


def fail(what):
    sys.stdout.flush()
    sys.stderr.write("FAIL: %s (after %.1f s)\n" % (what, elapsed()))
    sys.stderr.flush()
    # os._exit: the C++ client's destructors and threads must not decide when we exit.
    os._exit(1)


def check(cond, what):
    if not cond:
        fail(what)
    ok(what)


def finish():
    """Exits 0 without running the C++ client's teardown (which may block on the network)."""
    print("all checks passed (%.1f s)" % elapsed(), flush=True)
    sys.stderr.flush()
    os._exit(0)


def wait_until(cond, timeout_s, what, poll_s=0.1):
    """Polls `cond` until it is true or `timeout_s` passed (then fails with `what`)."""
    deadline = time.monotonic() + timeout_s
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() >= deadline:
            fail("timed out after %.0f s waiting for %s" % (timeout_s, what))
        time.sleep(poll_s)


def unique(prefix):
    """A topic or group name of its own for this run."""
    return "%s_%d_%d" % (prefix, os.getpid(), int(time.time() * 1000) % 10_000_000)


def text(v):
    if v is None:
        return None
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return v


# --- clients ---------------------------------------------------------------------------


def producer(group, timeout_ms=5000):
    p = Producer(group, timeout=timeout_ms)
    p.set_namesrv_addr(NAMESRV)
    dll.SetProducerLogLevel(p._handle, LOG_LEVEL)
    p.start()
    _keep.append(p)
    return p


class Inbox:
    """What a push consumer's listener saw, thread-safe. Each entry is a dict of the
    message's fields, plus `member` (who received it) and `at` (monotonic time)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.items = []

    def add(self, item):
        with self.lock:
            self.items.append(item)

    def snapshot(self):
        with self.lock:
            return list(self.items)

    def count(self, pred=lambda m: True):
        with self.lock:
            return sum(1 for m in self.items if pred(m))


def fields(msg, member):
    """The fields of a received message (a librocketmq CMessageExt*) as a dict."""
    m = RecvMessage(msg)
    props = {}
    for k in ("UNIQ_KEY", "KEYS", "TAGS", "DELAY", "RETRY_TOPIC", "REAL_TOPIC", "WAIT"):
        v = text(m.get_property(k))
        if v:
            props[k] = v
    return {
        "member": member,
        "at": time.monotonic(),
        "topic": text(m.topic),
        "tags": text(m.tags),
        "keys": text(m.keys),
        "body": text(m.body),
        "id": text(m.id),
        "queue_id": m.queue_id,
        # A queue is (shard, queue id): a broker with several shards is one broker per shard
        # to RocketMQ clients, each numbering its queues from 0; the physical offset carries
        # the shard in its top 16 bits.
        "queue": (m.commit_log_offset >> 48, m.queue_id),
        "queue_offset": m.queue_offset,
        "reconsume_times": m.reconsume_times,
        "commit_log_offset": m.commit_log_offset,
        "born_ms": m.born_timestamp,
        "store_ms": m.store_timestamp,
        "props": props,
        "raw": m,  # only valid inside the listener
    }


def push_consumer(group, topic, inbox, member="m", expression="*", orderly=False,
                  model=MessageModel.CLUSTERING, answer=None, extra_props=(), threads=2):
    """Starts a push consumer whose listener records every message into `inbox`.

    `answer(fields) -> CONSUME_SUCCESS | RECONSUME_LATER` decides the listener's answer
    (default: success). The listener is registered with ctypes directly so that
    RECONSUME_LATER reaches the C++ client (the binding's own wrapper cannot return it)."""
    c = PushConsumer(group, orderly=orderly, message_model=model)
    c.set_namesrv_addr(NAMESRV)
    c.set_instance_name(member)
    c.set_thread_count(threads)
    dll.SetPushConsumerLogLevel(c._handle, LOG_LEVEL)

    def on_message(_consumer, msg):
        try:
            f = fields(msg, member)
            for k in extra_props:
                v = text(RecvMessage(msg).get_property(k))
                if v is not None and v != "":
                    f["props"][k] = v
            verdict = answer(f) if answer else CONSUME_SUCCESS
            f.pop("raw", None)
            f["answer"] = verdict
            inbox.add(f)
            return verdict
        except Exception as e:  # noqa: BLE001 - never let an exception cross into C++
            sys.stderr.write("listener error: %r\n" % (e,))
            return RECONSUME_LATER

    cb = MSG_CALLBACK_FUNC(on_message)
    _keep.append(cb)
    if dll.Subscribe(c._handle, topic.encode(), expression.encode()) != 0:
        fail("Subscribe(%s, %s) refused" % (topic, expression))
    register = dll.RegisterMessageCallbackOrderly if orderly else dll.RegisterMessageCallback
    if register(c._handle, cb) != 0:
        fail("registering the listener refused")
    c.start()
    _keep.append(c)
    return c


def new_message(topic, body, tags=None, keys=None, props=None, delay_level=None):
    m = Message(topic)
    m.set_body(body)
    if tags:
        m.set_tags(tags)
    if keys:
        m.set_keys(keys)
    for k, v in (props or {}).items():
        m.set_property(k, v)
    if delay_level:
        m.set_delay_time_level(delay_level)
    return m


# --- ringmq-ctl --------------------------------------------------------------------------


def _ctl_path():
    p = os.environ.get("RINGMQ_CTL")
    if p:
        return p
    p = shutil.which("ringmq-ctl")
    if p:
        return p
    here = os.path.dirname(os.path.abspath(__file__))
    p = os.path.join(here, "..", "..", "target", "debug", "ringmq-ctl")
    if os.path.exists(p):
        return p
    fail("ringmq-ctl not found: set RINGMQ_CTL or build it (cargo build --bin ringmq-ctl)")
    return None


def ctl(*args, timeout_s=20):
    """Runs ringmq-ctl against our name server; returns stdout (fails on a non-zero exit)."""
    cmd = [_ctl_path(), "-n", NAMESRV] + [str(a) for a in args]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        fail("ringmq-ctl %s took more than %d s" % (" ".join(cmd[3:]), timeout_s))
    if r.returncode != 0:
        fail("ringmq-ctl %s exited %d: %s" % (" ".join(cmd[3:]), r.returncode, r.stderr.strip()))
    return r.stdout


def ctl_json(*args, timeout_s=20):
    out = ctl(*(list(args) + ["--json"]), timeout_s=timeout_s)
    try:
        return json.loads(out)
    except ValueError:
        fail("ringmq-ctl %s printed no JSON: %r" % (" ".join(map(str, args)), out[:300]))
        return None


def create_topic(topic, queues=4):
    ctl_json("topic", "create", topic, "--queues", queues)
    ok("topic %s created with %d queues (ringmq-ctl)" % (topic, queues))
