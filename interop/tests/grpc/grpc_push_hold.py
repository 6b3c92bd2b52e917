"""RocketMQ 5's Python SDK (PyPI rocketmq-python-client 5.1.2, unchanged) PushConsumer against
ringmq's gRPC edge, holding one message longer than the invisible time it was received with:
the SDK receives with auto_renew and leaves the message's invisibility to the server, so the
edge must renew it, and the SDK's ack (with the receipt handle it was given) must still settle
it.

Usage: python grpc_push_hold.py ENDPOINT TOPIC N HOLD_S

N messages; the listener keeps `hold-0` for HOLD_S seconds before it succeeds. Prints `ok:`
lines and `consumed BODY ATTEMPT` per listener call; exits non-zero with a `FAIL:` line.
"""

import sys
import threading
import time

from rocketmq import (ClientConfiguration, ConsumeResult, Credentials, FilterExpression,
                      Message, MessageListener, Producer, PushConsumer)

from common import fail, start_watchdog

# After the hold: how long a redelivery of a message acked with a stale handle would still
# be looked for.
AFTER_HOLD_S = 5




class Listener(MessageListener):
    def __init__(self, hold_s):
        self.hold_s = hold_s
        self.lock = threading.Lock()
        self.calls = []
        self.released = None

    def consume(self, message):
        body = message.body.decode()
        with self.lock:
            self.calls.append((body, message.delivery_attempt, message.message_id))
        if body == "hold-0":
            time.sleep(self.hold_s)
            with self.lock:
                self.released = time.time()
        return ConsumeResult.SUCCESS


def main():
    endpoint, topic, n, hold_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    start_watchdog(hold_s + 45)
    config = ClientConfiguration(endpoint, Credentials())
    listener = Listener(hold_s)
    consumer = PushConsumer(config, "grpc-push-hold", listener, {topic: FilterExpression("*")})
    consumer.startup()
    print("ok: push consumer started", flush=True)

    producer = Producer(config, (topic,))
    producer.startup()
    ids = {}
    for i in range(n):
        m = Message()
        m.topic = topic
        m.body = f"hold-{i}".encode()
        ids[f"hold-{i}"] = producer.send(m).message_id
    producer.shutdown()
    print(f"ok: sent {n}", flush=True)

    deadline = time.time() + hold_s + 30
    while time.time() < deadline:
        with listener.lock:
            if listener.released is not None and len(listener.calls) >= n:
                break
        time.sleep(0.2)
    time.sleep(AFTER_HOLD_S)
    consumer.shutdown()
    with listener.lock:
        calls = list(listener.calls)
        released = listener.released
    if released is None:
        fail("hold-0 was never released")
    bodies = sorted(b for b, _, _ in calls)
    expected = sorted(f"hold-{i}" for i in range(n))
    if bodies != expected:
        fail(f"listener calls {bodies}, want every message once")
    for b, a, mid in calls:
        if a != 1:
            fail(f"{b} came with delivery attempt {a}, want 1")
        if mid != ids[b]:
            fail(f"{b} came with message id {mid}, sent as {ids[b]}")
    print(f"ok: every message consumed once, hold-0 held {hold_s:.0f} s", flush=True)
    for b, a, _ in calls:
        print(f"consumed {b} {a}", flush=True)


if __name__ == "__main__":
    main()
