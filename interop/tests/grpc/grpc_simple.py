"""RocketMQ 5's Python SDK (PyPI rocketmq-python-client 5.1.2, unchanged) against ringmq's
gRPC edge: a Producer sends normal and FIFO messages, SimpleConsumers receive and ack them.

Usage: python grpc_simple.py ENDPOINT NORMAL_TOPIC FIFO_TOPIC N_NORMAL FIFO_GROUPS PER_GROUP DELAY_TOPIC

Also a scheduled message (delivery time a few seconds ahead), received no earlier than its
time, and a second one recalled before its time by its recall handle, never received.

Prints one `ok:` line per check, then `sent normal ID BODY` / `sent fifo ID BODY GROUP` /
`sent delay ID BODY` / `recalled ID BODY` per message sent (in send order) and
`received normal N fifo M`: the Rust test checks them
against what ringmq stored. Exits non-zero with a
`FAIL:` line on the first failed check.
"""

import sys
import time

from rocketmq import (ClientConfiguration, Credentials, FilterExpression, Message,
                      Producer, SimpleConsumer)

from common import fail, start_watchdog

# The whole script's deadline; the Rust test's own bound is above it.
WATCHDOG_S = 100
RECEIVE_DEADLINE_S = 40
INVISIBLE_S = 20
# How far ahead the scheduled messages are due (seconds: the SDK sends whole seconds).
DELAY_S = 4




def send_all(producer, normal_topic, fifo_topic, n_normal, groups, per_group):
    sent = {"normal": [], "fifo": []}
    for i in range(n_normal):
        m = Message()
        m.topic = normal_topic
        m.body = f"normal-{i}".encode()
        m.tag = "TagA"
        m.keys = f"key-{i}"
        m.add_property("seq", str(i))
        r = producer.send(m)
        sent["normal"].append({"id": r.message_id, "body": f"normal-{i}", "offset": r.offset})
    for j in range(per_group):
        for g in range(groups):
            m = Message()
            m.topic = fifo_topic
            m.body = f"fifo-{g}-{j}".encode()
            m.message_group = f"group-{g}"
            r = producer.send(m)
            sent["fifo"].append({"id": r.message_id, "body": f"fifo-{g}-{j}", "group": f"group-{g}"})
    return sent


def send_scheduled(producer, topic):
    """Two messages due DELAY_S seconds ahead; the second is recalled at once."""
    due = int(time.time()) + DELAY_S
    out = []
    for body in ("delayed-kept", "delayed-recalled"):
        m = Message()
        m.topic = topic
        m.body = body.encode()
        m.delivery_timestamp = due
        r = producer.send(m)
        if not r.recall_handle:
            fail(f"the scheduled send of {body} answered no recall handle")
        out.append({"id": r.message_id, "body": body, "handle": r.recall_handle})
    producer.recall_message(topic, out[1]["handle"])
    return due, out


def receive_all(consumer, want, check, change_first=False):
    """Receives and acks until `want` messages came (or the deadline); returns them."""
    got = []
    changed = False
    deadline = time.time() + RECEIVE_DEADLINE_S
    while len(got) < want and time.time() < deadline:
        for m in consumer.receive(32, INVISIBLE_S) or []:
            check(m)
            if change_first and not changed:
                before = m.receipt_handle
                consumer.change_invisible_duration(m, INVISIBLE_S)
                if m.receipt_handle == before:
                    fail("change_invisible_duration did not give a new receipt handle")
                changed = True
            consumer.ack(m)
            got.append(m)
    return got, changed


def main():
    endpoint, normal_topic, fifo_topic = sys.argv[1], sys.argv[2], sys.argv[3]
    n_normal, groups, per_group = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
    delay_topic = sys.argv[7]
    start_watchdog(WATCHDOG_S)
    config = ClientConfiguration(endpoint, Credentials())

    producer = Producer(config, (normal_topic, fifo_topic, delay_topic))
    producer.startup()
    print("ok: producer started", flush=True)
    due, scheduled = send_scheduled(producer, delay_topic)
    print(f"ok: 2 scheduled messages due at {due}, the second recalled by its handle", flush=True)
    consumer = SimpleConsumer(config, "grpc-simple-delay", {delay_topic: FilterExpression("*")}, await_duration=5)
    consumer.startup()
    delayed = []
    deadline = time.time() + RECEIVE_DEADLINE_S
    while not delayed and time.time() < deadline:
        for m in consumer.receive(32, INVISIBLE_S) or []:
            if time.time() < due - 1:
                fail(f"scheduled message {m.body!r} came at {time.time():.1f}, before its time {due}")
            consumer.ack(m)
            delayed.append(m)
    if [m.body.decode() for m in delayed] != ["delayed-kept"]:
        fail(f"scheduled: received {[m.body for m in delayed]}, want only b'delayed-kept'")
    if delayed[0].message_id != scheduled[0]["id"]:
        fail(f"scheduled: message id {delayed[0].message_id}, sent {scheduled[0]['id']}")
    late = consumer.receive(32, INVISIBLE_S) or []
    if late:
        fail(f"after the scheduled message: {[m.body for m in late]} came too (the recalled one?)")
    consumer.shutdown()
    print("ok: the scheduled message came at its time, the recalled one never", flush=True)

    sent = send_all(producer, normal_topic, fifo_topic, n_normal, groups, per_group)
    producer.shutdown()
    ids = [s["id"] for s in sent["normal"] + sent["fifo"]]
    if len(set(ids)) != len(ids) or any(not i for i in ids):
        fail(f"message ids are not distinct and non-empty: {ids}")
    print(f"ok: sent {len(sent['normal'])} normal and {len(sent['fifo'])} FIFO messages", flush=True)

    normal_ids = {s["id"]: s for s in sent["normal"]}

    def check_normal(m):
        s = normal_ids.get(m.message_id)
        if s is None:
            fail(f"received an unknown message id {m.message_id}")
        if m.body.decode() != s["body"]:
            fail(f"message {m.message_id}: body {m.body!r}, sent {s['body']!r}")
        if m.tag != "TagA":
            fail(f"message {m.message_id}: tag {m.tag!r}")
        if m.properties.get("seq") != s["body"].split("-")[1]:
            fail(f"message {m.message_id}: properties {m.properties}")

    consumer = SimpleConsumer(config, "grpc-simple-normal", {normal_topic: FilterExpression("*")}, await_duration=5)
    consumer.startup()
    got, changed = receive_all(consumer, n_normal, check_normal, change_first=True)
    bodies = sorted(m.body.decode() for m in got)
    if bodies != sorted(s["body"] for s in sent["normal"]):
        fail(f"normal: received {len(got)} messages {bodies[:5]}..., sent {n_normal}")
    if not changed:
        fail("no message had its invisible duration changed")
    print(f"ok: received and acked {len(got)} normal messages (one after an invisible-duration change)", flush=True)
    again = consumer.receive(32, INVISIBLE_S) or []
    if again:
        fail(f"{len(again)} normal messages came again after every one was acked")
    print("ok: nothing comes again after the acks", flush=True)
    consumer.shutdown()

    fifo_ids = {s["id"]: s for s in sent["fifo"]}

    def check_fifo(m):
        s = fifo_ids.get(m.message_id)
        if s is None:
            fail(f"received an unknown FIFO message id {m.message_id}")
        if m.body.decode() != s["body"] or m.message_group != s["group"]:
            fail(f"FIFO message {m.message_id}: body {m.body!r} group {m.message_group!r}, sent {s}")

    consumer = SimpleConsumer(config, "grpc-simple-fifo", {fifo_topic: FilterExpression("*")}, await_duration=5)
    consumer.startup()
    got_fifo, _ = receive_all(consumer, len(sent["fifo"]), check_fifo)
    consumer.shutdown()
    bodies = sorted(m.body.decode() for m in got_fifo)
    if bodies != sorted(s["body"] for s in sent["fifo"]):
        fail(f"FIFO: received {len(got_fifo)} messages, sent {len(sent['fifo'])}")
    print(f"ok: received and acked {len(got_fifo)} FIFO messages with their message groups", flush=True)

    for s in sent["normal"]:
        print(f"sent normal {s['id']} {s['body']}", flush=True)
    for s in sent["fifo"]:
        print(f"sent fifo {s['id']} {s['body']} {s['group']}", flush=True)
    print(f"sent delay {scheduled[0]['id']} {scheduled[0]['body']}", flush=True)
    print(f"recalled {scheduled[1]['id']} {scheduled[1]['body']}", flush=True)
    print(f"received normal {len(got)} fifo {len(got_fifo)}", flush=True)

if __name__ == "__main__":
    main()
