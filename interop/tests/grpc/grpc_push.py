"""RocketMQ 5's Python SDK (PyPI rocketmq-python-client 5.1.2, unchanged) PushConsumer against
ringmq's gRPC edge: QueryAssignment, ReceiveMessage with auto_renew, acks, and a failed
consumption handed back (ChangeInvisibleDuration with the SDK's backoff) and delivered again.

Usage: python grpc_push.py ENDPOINT TOPIC N

N messages; the listener fails `push-0` once. Prints `ok:` lines and `consumed BODY ATTEMPT`
per listener call; exits non-zero with a `FAIL:` line.
"""

import sys
import threading
import time

from rocketmq import (ClientConfiguration, ConsumeResult, Credentials, FilterExpression,
                      Message, MessageListener, Producer, PushConsumer)

from common import fail, start_watchdog

WATCHDOG_S = 90
CONSUME_DEADLINE_S = 45




class Listener(MessageListener):
    def __init__(self):
        self.lock = threading.Lock()
        self.calls = []

    def consume(self, message):
        body = message.body.decode()
        with self.lock:
            self.calls.append((body, message.delivery_attempt, message.message_id))
            first = sum(1 for c in self.calls if c[0] == body) == 1
        if body == "push-0" and first:
            return ConsumeResult.FAILURE
        return ConsumeResult.SUCCESS


def main():
    endpoint, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    start_watchdog(WATCHDOG_S)
    config = ClientConfiguration(endpoint, Credentials())
    listener = Listener()
    consumer = PushConsumer(config, "grpc-push", listener, {topic: FilterExpression("*")})
    consumer.startup()
    print("ok: push consumer started", flush=True)

    producer = Producer(config, (topic,))
    producer.startup()
    ids = {}
    for i in range(n):
        m = Message()
        m.topic = topic
        m.body = f"push-{i}".encode()
        ids[f"push-{i}"] = producer.send(m).message_id
    producer.shutdown()
    print(f"ok: sent {n}", flush=True)

    want = n + 1  # push-0 twice
    deadline = time.time() + CONSUME_DEADLINE_S
    while time.time() < deadline:
        with listener.lock:
            if len(listener.calls) >= want:
                break
        time.sleep(0.2)
    time.sleep(2)  # anything consumed a third time would show up now
    consumer.shutdown()
    with listener.lock:
        calls = list(listener.calls)
    bodies = sorted(b for b, _, _ in calls)
    expected = sorted([f"push-{i}" for i in range(n)] + ["push-0"])
    if bodies != expected:
        fail(f"listener calls {bodies}, want every message once and push-0 twice")
    attempts = [a for b, a, _ in calls if b == "push-0"]
    if sorted(attempts) != [1, 2]:
        fail(f"push-0 came with delivery attempts {attempts}, want 1 then 2")
    for b, _, mid in calls:
        if mid != ids[b]:
            fail(f"{b} came with message id {mid}, sent as {ids[b]}")
    print("ok: every message consumed once, the failed one again with delivery attempt 2", flush=True)
    for b, a, _ in calls:
        print(f"consumed {b} {a}", flush=True)


if __name__ == "__main__":
    main()
