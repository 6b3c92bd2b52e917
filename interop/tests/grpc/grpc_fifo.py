"""RocketMQ 5's Python SDK (PyPI rocketmq-python-client 5.1.2, unchanged) consuming FIFO
messages from ringmq's gRPC edge as a FIFO consumer group (the group's orderly flag set on
the brokers before this script runs).

Usage: python grpc_fifo.py ENDPOINT TOPIC PUSH_GROUP SIMPLE_GROUP GROUPS PER_GROUP

A Producer sends GROUPS x PER_GROUP FIFO messages, the message groups interleaved. Then:
- a PushConsumer of PUSH_GROUP must be told `fifo` by the server's Settings and consume every
  message group in send order; its listener fails `g0-0` once, which the SDK retries in place
  (FIFO: the rest of g0 waits);
- a SimpleConsumer of SIMPLE_GROUP receives without acking at first: while a message is
  held (invisible, unacked), no later message of its queue may come; after the ack the next
  one comes. Every message group arrives in send order.

Prints `ok:` lines, `sent ID BODY GROUP` per message and `push BODY ATTEMPT` per listener
call; exits non-zero with a `FAIL:` line.
"""

import os
import sys
import threading
import time

from rocketmq import (ClientConfiguration, ConsumeResult, Credentials, FilterExpression,
                      Message, MessageListener, Producer, PushConsumer, SimpleConsumer)

from common import fail, start_watchdog

WATCHDOG_S = 150
PUSH_DEADLINE_S = 60
SIMPLE_DEADLINE_S = 60




class Listener(MessageListener):
    def __init__(self):
        self.lock = threading.Lock()
        self.calls = []

    def consume(self, message):
        body = message.body.decode()
        with self.lock:
            self.calls.append((body, message.message_group, message.delivery_attempt))
            first = sum(1 for c in self.calls if c[0] == body) == 1
        if body == "g0-0" and first:
            return ConsumeResult.FAILURE
        return ConsumeResult.SUCCESS


def in_order(bodies_by_group, per_group, what):
    for g, bodies in sorted(bodies_by_group.items()):
        seqs = [int(b.split("-")[1]) for b in bodies]
        if seqs != list(range(per_group)):
            fail(f"{what}: message group {g} came as {seqs}")


def send(endpoint, topic, groups, per_group):
    config = ClientConfiguration(endpoint, Credentials())
    producer = Producer(config, (topic,))
    producer.startup()
    for i in range(per_group):
        for g in range(groups):
            m = Message()
            m.topic = topic
            m.body = f"g{g}-{i}".encode()
            m.message_group = f"g{g}"
            r = producer.send(m)
            print(f"sent {r.message_id} g{g}-{i} g{g}", flush=True)
    producer.shutdown()
    print(f"ok: sent {groups * per_group}", flush=True)


def push(endpoint, topic, group, groups, per_group):
    config = ClientConfiguration(endpoint, Credentials())
    listener = Listener()
    consumer = PushConsumer(config, group, listener, {topic: FilterExpression("*")})
    consumer.startup()
    if not consumer.fifo:
        fail("the server's Settings did not tell the push consumer fifo")
    print("ok: push consumer told fifo", flush=True)
    want = groups * per_group + 1  # g0-0 twice
    deadline = time.time() + PUSH_DEADLINE_S
    while time.time() < deadline:
        with listener.lock:
            if len(listener.calls) >= want:
                break
        time.sleep(0.2)
    time.sleep(2)  # anything consumed again would show up now
    consumer.shutdown()
    with listener.lock:
        calls = list(listener.calls)
    for body, _, attempt in calls:
        print(f"push {body} {attempt}", flush=True)
    if len(calls) != want:
        fail(f"push: {len(calls)} listener calls, want {want}")
    by_group = {}
    for body, g, _ in calls:
        by_group.setdefault(g, []).append(body)
    g0 = by_group.get("g0", [])
    if g0[:2] != ["g0-0", "g0-0"]:
        fail(f"push: g0 starts {g0[:3]}, want g0-0 retried in place before g0-1")
    by_group["g0"] = g0[1:]
    in_order(by_group, per_group, "push")
    print(f"ok: push consumed {groups} message groups in order", flush=True)


def simple(endpoint, topic, group, groups, per_group):
    config = ClientConfiguration(endpoint, Credentials())
    consumer = SimpleConsumer(config, group, {topic: FilterExpression("*")}, await_duration=5)
    consumer.startup()
    got = {}
    total = 0
    held_checks = 0
    deadline = time.time() + SIMPLE_DEADLINE_S
    while total < groups * per_group and time.time() < deadline:
        held = consumer.receive(32, 30)
        if not held:
            continue
        # Holding these unacked: nothing later of their queues may come.
        more = consumer.receive(32, 30)
        for m in more:
            for h in held:
                if m.message_group == h.message_group:
                    fail(f"simple: {m.body.decode()} came while {h.body.decode()} of its group was unacked")
        held_checks += 1
        for m in held + more:
            consumer.ack(m)
            got.setdefault(m.message_group, []).append(m.body.decode())
            total += 1
    consumer.shutdown()
    if total != groups * per_group:
        fail(f"simple: received {total}, want {groups * per_group}")
    in_order(got, per_group, "simple")
    print(f"ok: simple received {groups} message groups in order, {held_checks} holds checked", flush=True)


def main():
    endpoint, topic, push_group, simple_group = sys.argv[1:5]
    groups, per_group = int(sys.argv[5]), int(sys.argv[6])
    start_watchdog(WATCHDOG_S)
    send(endpoint, topic, groups, per_group)
    push(endpoint, topic, push_group, groups, per_group)
    simple(endpoint, topic, simple_group, groups, per_group)
    print("ok: done", flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
