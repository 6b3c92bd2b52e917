"""RocketMQ 5's Python SDK (PyPI rocketmq-python-client 5.1.2, unchanged) against ringmq's
gRPC edge: transactional messages decided by the client (commit, rollback) and by the
broker's check-back (the SDK's TransactionChecker, reached through Telemetry).

Usage: python grpc_transaction.py ENDPOINT TOPIC

Four half messages: `txn-commit` (committed), `txn-rollback` (rolled back), `check-commit`
and `check-rollback` (left undecided: the check-back asks the checker, which commits the
first and rolls back the second). A SimpleConsumer must get exactly the two committed ones.
Prints `ok:` lines, `checked BODY` per check-back answered, and `delivered ID BODY` per
message received; exits non-zero with a `FAIL:` line on the first failed check.
"""

import sys
import threading
import time

from rocketmq import (ClientConfiguration, Credentials, FilterExpression, Message,
                      Producer, SimpleConsumer, TransactionChecker, TransactionResolution)

from common import fail, start_watchdog

WATCHDOG_S = 100
RECEIVE_DEADLINE_S = 45
INVISIBLE_S = 20




class Checker(TransactionChecker):
    def __init__(self):
        self.lock = threading.Lock()
        self.checked = []

    def check(self, message):
        body = message.body.decode()
        with self.lock:
            self.checked.append(body)
        if body == "check-commit":
            return TransactionResolution.COMMIT
        return TransactionResolution.ROLLBACK


def main():
    endpoint, topic = sys.argv[1], sys.argv[2]
    start_watchdog(WATCHDOG_S)
    config = ClientConfiguration(endpoint, Credentials())
    checker = Checker()
    producer = Producer(config, (topic,), checker)
    producer.startup()
    print("ok: transaction producer started", flush=True)

    ids = {}
    for body in ("txn-commit", "txn-rollback", "check-commit", "check-rollback"):
        tx = producer.begin_transaction()
        m = Message()
        m.topic = topic
        m.body = body.encode()
        r = producer.send(m, tx)
        if not r.transaction_id:
            fail(f"the half {body} answered no transaction id")
        ids[body] = r.message_id
        if body == "txn-commit":
            tx.commit()
        elif body == "txn-rollback":
            tx.rollback()
    print("ok: 4 halves sent, 1 committed, 1 rolled back, 2 left to the check-back", flush=True)

    consumer = SimpleConsumer(config, "grpc-txn", {topic: FilterExpression("*")}, await_duration=5)
    consumer.startup()
    got = []
    deadline = time.time() + RECEIVE_DEADLINE_S
    while len(got) < 2 and time.time() < deadline:
        for m in consumer.receive(32, INVISIBLE_S) or []:
            consumer.ack(m)
            got.append(m)
    late = consumer.receive(32, INVISIBLE_S) or []
    for m in late:
        consumer.ack(m)
    got += late
    consumer.shutdown()
    bodies = sorted(m.body.decode() for m in got)
    if bodies != ["check-commit", "txn-commit"]:
        fail(f"delivered {bodies}, want the committed ['check-commit', 'txn-commit']")
    for m in got:
        if m.message_id != ids[m.body.decode()]:
            fail(f"{m.body!r} came with message id {m.message_id}, sent as {ids[m.body.decode()]}")
    with checker.lock:
        checked = sorted(set(checker.checked))
    if "check-commit" not in checked or "check-rollback" not in checked:
        fail(f"the checker was asked about {checked}, want both undecided halves")
    print("ok: exactly the two committed messages came; the checker decided the undecided two", flush=True)
    producer.shutdown()
    for body in checked:
        print(f"checked {body}", flush=True)
    for m in got:
        print(f"delivered {m.message_id} {m.body.decode()}", flush=True)


if __name__ == "__main__":
    main()
