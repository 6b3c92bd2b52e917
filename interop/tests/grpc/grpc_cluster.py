"""RocketMQ 5's Python SDK (PyPI rocketmq-python-client 5.1.2, unchanged) against a ringmq
cluster of a name server and two brokers, each with its gRPC edge.

Usage: python grpc_cluster.py ENDPOINT_A ENDPOINT_B NORMAL_TOPIC FIFO_TOPIC TXN_TOPIC N

- QueryRoute through each edge (the SDK's generated stub): queues of both brokers, every
  broker's endpoint that edge's address.
- Producer (access point: broker A's edge): N normal messages, N FIFO messages in 2 message
  groups, one committed and one rolled-back transaction half.
- SimpleConsumers (access point: broker B's edge) receive and ack every normal and FIFO
  message and exactly the committed half; each FIFO message group in send order (the FIFO
  consumer group is made orderly on both brokers before this script runs), in batches of
  more than one message.

Prints `ok:` lines and `sent KIND ID BODY` per message; exits non-zero with a `FAIL:` line.
"""

import os
import sys
import time

import grpc
from rocketmq import (ClientConfiguration, Credentials, FilterExpression, Message, Producer,
                      SimpleConsumer, TransactionChecker, TransactionResolution)
from rocketmq.grpc_protocol import definition_pb2 as d
from rocketmq.grpc_protocol import service_pb2 as s
from rocketmq.grpc_protocol import service_pb2_grpc

from common import fail, start_watchdog

WATCHDOG_S = 150
RECEIVE_DEADLINE_S = 60




class Checker(TransactionChecker):
    def check(self, message):
        return TransactionResolution.ROLLBACK


def routes(endpoint, topic):
    host, port = endpoint.rsplit(":", 1)
    with grpc.insecure_channel(endpoint) as ch:
        stub = service_pb2_grpc.MessagingServiceStub(ch)
        r = stub.QueryRoute(s.QueryRouteRequest(topic=d.Resource(name=topic)),
                            metadata=[("x-mq-client-id", "grpc-cluster")], timeout=10)
    if r.status.code != d.OK:
        fail(f"QueryRoute via {endpoint}: {d.Code.Name(r.status.code)} {r.status.message}")
    brokers = sorted({q.broker.name for q in r.message_queues})
    if brokers != ["broker-a", "broker-b"]:
        fail(f"QueryRoute via {endpoint}: brokers {brokers}")
    for q in r.message_queues:
        addrs = [(a.host, a.port) for a in q.broker.endpoints.addresses]
        if addrs != [(host, int(port))]:
            fail(f"QueryRoute via {endpoint}: {q.broker.name} endpoints {addrs}")
    print(f"ok: QueryRoute via {endpoint}: {len(r.message_queues)} queues on {brokers}", flush=True)


def receive_all(config, group, topic, want):
    """Receives and acks until `want` messages came: the messages, and the size of each
    receive that carried any."""
    consumer = SimpleConsumer(config, group, {topic: FilterExpression("*")}, await_duration=5)
    consumer.startup()
    got, sizes = [], []
    deadline = time.time() + RECEIVE_DEADLINE_S
    while len(got) < want and time.time() < deadline:
        batch = consumer.receive(32, 20) or []
        if batch:
            sizes.append(len(batch))
        for m in batch:
            consumer.ack(m)
            got.append(m)
    consumer.shutdown()
    return got, sizes


def main():
    ep_a, ep_b, normal, fifo, txn, n = sys.argv[1:6] + [int(sys.argv[6])]
    start_watchdog(WATCHDOG_S)
    for ep in (ep_a, ep_b):
        for topic in (normal, fifo, txn):
            routes(ep, topic)

    config_a = ClientConfiguration(ep_a, Credentials())
    producer = Producer(config_a, (normal, fifo, txn), Checker())
    producer.startup()
    sent = {}
    for i in range(n):
        m = Message()
        m.topic = normal
        m.body = f"n-{i}".encode()
        r = producer.send(m)
        sent[r.message_id] = m.body.decode()
        print(f"sent normal {r.message_id} n-{i}", flush=True)
    for i in range(n):
        m = Message()
        m.topic = fifo
        g = f"g{i % 2}"
        m.body = f"{g}-{i // 2}".encode()
        m.message_group = g
        r = producer.send(m)
        print(f"sent fifo {r.message_id} {g}-{i // 2}", flush=True)
    for body in ("commit", "rollback"):
        tx = producer.begin_transaction()
        m = Message()
        m.topic = txn
        m.body = body.encode()
        r = producer.send(m, tx)
        print(f"sent txn {r.message_id} {body}", flush=True)
        tx.commit() if body == "commit" else tx.rollback()
    producer.shutdown()
    print(f"ok: sent {n} normal, {n} fifo, 2 halves through {ep_a}", flush=True)

    config_b = ClientConfiguration(ep_b, Credentials())
    got, _ = receive_all(config_b, "grpc-cluster-normal", normal, n)
    bodies = sorted(m.body.decode() for m in got)
    if bodies != sorted(f"n-{i}" for i in range(n)):
        fail(f"normal: received {len(got)}: {bodies}")
    for m in got:
        if sent.get(m.message_id) != m.body.decode():
            fail(f"normal: {m.body!r} came with message id {m.message_id}")
    print(f"ok: received {n} normal through {ep_b}", flush=True)

    got, sizes = receive_all(config_b, "grpc-cluster-fifo", fifo, n)
    by_group = {}
    for m in got:
        by_group.setdefault(m.message_group, []).append(int(m.body.decode().split("-")[1]))
    if sum(len(v) for v in by_group.values()) != n:
        fail(f"fifo: received {len(got)}, want {n}")
    for g, seqs in by_group.items():
        if seqs != list(range(n // 2)):
            fail(f"fifo: group {g} came as {seqs} (the group is orderly: want send order)")
    # A FIFO group's queue comes in batches (in queue order), not one message per receive.
    if max(sizes, default=0) < 2:
        fail(f"fifo: every receive carried one message ({len(sizes)} receives)")
    print(f"ok: received {n} fifo through {ep_b} in receives of {sizes}", flush=True)

    got, _ = receive_all(config_b, "grpc-cluster-txn", txn, 1)
    time.sleep(1)
    bodies = [m.body.decode() for m in got]
    if bodies != ["commit"]:
        fail(f"txn: received {bodies}, want ['commit']")
    print("ok: received exactly the committed half", flush=True)
    print("ok: done", flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
