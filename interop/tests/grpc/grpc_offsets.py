"""The offset-based RPCs of ringmq's gRPC edge (PullMessage, UpdateOffset, GetOffset,
QueryOffset) through the generated stubs of RocketMQ 5's Python SDK (PyPI
rocketmq-python-client 5.1.2; the SDK itself has no pull consumer).

Usage:
  python grpc_offsets.py ENDPOINT TOPIC GROUP N first
      TOPIC has one queue; sends N messages, checks QueryOffset by each policy, pulls the
      queue (status, messages, next offset), a pull past the end (MESSAGE_NOT_FOUND after a
      long poll) and outside the queue (ILLEGAL_OFFSET), GetOffset before any commit
      (OFFSET_NOT_FOUND), UpdateOffset to 4 and GetOffset again.
  python grpc_offsets.py ENDPOINT TOPIC GROUP N second OFFSET
      the group's offset was set to OFFSET by another client: GetOffset answers it, and a
      pull from it gets the rest of the queue.

Prints `ok:` lines; exits non-zero with a `FAIL:` line.
"""

import os
import sys
import time

import grpc
from google.protobuf import timestamp_pb2
from rocketmq import ClientConfiguration, Credentials, Message, Producer
from rocketmq.grpc_protocol import definition_pb2 as d
from rocketmq.grpc_protocol import service_pb2 as s
from rocketmq.grpc_protocol import service_pb2_grpc

from common import fail, start_watchdog

WATCHDOG_S = 60
ID = [("x-mq-client-id", "grpc-offsets")]




def expect(what, status, code):
    if status.code != code:
        fail(f"{what}: answered {d.Code.Name(status.code)} ({status.message}), want {d.Code.Name(code)}")


def queue(stub, topic):
    r = stub.QueryRoute(s.QueryRouteRequest(topic=d.Resource(name=topic)), metadata=ID, timeout=10)
    expect("QueryRoute", r.status, d.OK)
    if len(r.message_queues) != 1:
        fail(f"QueryRoute: {len(r.message_queues)} queues, want 1")
    return r.message_queues[0]


def pull(stub, group, mq, offset, batch, poll_s=0):
    req = s.PullMessageRequest(group=d.Resource(name=group), message_queue=mq, offset=offset,
                               batch_size=batch,
                               filter_expression=d.FilterExpression(type=d.TAG, expression="*"))
    if poll_s:
        req.long_polling_timeout.seconds = poll_s
    status, bodies, next_offset, order = None, [], None, []
    for r in stub.PullMessage(req, metadata=ID, timeout=30):
        kind = r.WhichOneof("content")
        order.append(kind)
        if kind == "status":
            status = r.status
        elif kind == "message":
            bodies.append(r.message.body.decode())
        else:
            next_offset = r.next_offset
    if order[0] != "status" or order[-1] != "next_offset":
        fail(f"PullMessage stream came as {order}: want status, messages, next_offset")
    return status, bodies, next_offset


def get_offset(stub, group, mq):
    return stub.GetOffset(s.GetOffsetRequest(group=d.Resource(name=group), message_queue=mq),
                          metadata=ID, timeout=10)


def query(stub, mq, policy, ts_ms=None):
    req = s.QueryOffsetRequest(message_queue=mq, query_offset_policy=policy)
    if ts_ms is not None:
        req.timestamp.CopyFrom(timestamp_pb2.Timestamp(seconds=ts_ms // 1000, nanos=(ts_ms % 1000) * 1_000_000))
    r = stub.QueryOffset(req, metadata=ID, timeout=10)
    expect(f"QueryOffset {d.QueryOffsetPolicy.Name(policy)}", r.status, d.OK)
    return r.offset


def first(stub, endpoint, topic, group, n):
    config = ClientConfiguration(endpoint, Credentials())
    producer = Producer(config, (topic,))
    producer.startup()
    before_ms = int(time.time() * 1000) - 1000
    for i in range(n):
        m = Message()
        m.topic = topic
        m.body = f"off-{i}".encode()
        producer.send(m)
    producer.shutdown()
    print(f"ok: sent {n}", flush=True)
    mq = queue(stub, topic)

    if query(stub, mq, d.BEGINNING) != 0:
        fail("QueryOffset BEGINNING is not 0")
    if query(stub, mq, d.END) != n:
        fail(f"QueryOffset END is not {n}")
    if query(stub, mq, d.TIMESTAMP, before_ms) != 0:
        fail("QueryOffset TIMESTAMP before the sends is not 0")
    if query(stub, mq, d.TIMESTAMP, int(time.time() * 1000) + 3_600_000) != n:
        fail(f"QueryOffset TIMESTAMP an hour ahead is not {n}")
    r = stub.QueryOffset(s.QueryOffsetRequest(message_queue=mq, query_offset_policy=d.TIMESTAMP),
                         metadata=ID, timeout=10)
    expect("QueryOffset TIMESTAMP without a time", r.status, d.BAD_REQUEST)
    print("ok: QueryOffset BEGINNING, END, TIMESTAMP", flush=True)

    status, bodies, nxt = pull(stub, group, mq, 0, 4)
    expect("PullMessage from 0", status, d.OK)
    if bodies != [f"off-{i}" for i in range(4)] or nxt != 4:
        fail(f"PullMessage from 0: {bodies}, next {nxt}")
    status, bodies, nxt = pull(stub, group, mq, 4, 32)
    if bodies != [f"off-{i}" for i in range(4, n)] or nxt != n:
        fail(f"PullMessage from 4: {bodies}, next {nxt}")
    started = time.time()
    status, bodies, nxt = pull(stub, group, mq, n, 32, poll_s=2)
    expect("PullMessage at the end", status, d.MESSAGE_NOT_FOUND)
    if bodies or nxt != n:
        fail(f"PullMessage at the end: {bodies}, next {nxt}")
    if time.time() - started < 1.5:
        fail("PullMessage at the end did not wait for its long poll")
    status, bodies, nxt = pull(stub, group, mq, n + 100, 32)
    expect("PullMessage outside the queue", status, d.ILLEGAL_OFFSET)
    if nxt != n:
        fail(f"PullMessage outside the queue: next {nxt}, want {n}")
    bad = d.MessageQueue(topic=mq.topic, id=mq.id)
    rs = list(stub.PullMessage(s.PullMessageRequest(group=d.Resource(name=group), message_queue=bad,
                                                    offset=0, batch_size=1), metadata=ID, timeout=10))
    if len(rs) != 1 or rs[0].WhichOneof("content") != "status":
        fail(f"PullMessage of a queue without a broker: {rs}")
    expect("PullMessage of a queue without a broker", rs[0].status, d.BAD_REQUEST)
    print("ok: PullMessage", flush=True)

    expect("GetOffset before a commit", get_offset(stub, group, mq).status, d.OFFSET_NOT_FOUND)
    r = stub.UpdateOffset(s.UpdateOffsetRequest(group=d.Resource(name=group), message_queue=mq, offset=4),
                          metadata=ID, timeout=10)
    expect("UpdateOffset", r.status, d.OK)
    r = stub.UpdateOffset(s.UpdateOffsetRequest(group=d.Resource(name=group), message_queue=mq, offset=-1),
                          metadata=ID, timeout=10)
    expect("UpdateOffset -1", r.status, d.ILLEGAL_OFFSET)
    r = get_offset(stub, group, mq)
    expect("GetOffset", r.status, d.OK)
    if r.offset != 4:
        fail(f"GetOffset answered {r.offset}, want 4")
    print("ok: UpdateOffset, GetOffset", flush=True)


def second(stub, topic, group, n, offset):
    mq = queue(stub, topic)
    r = get_offset(stub, group, mq)
    expect("GetOffset", r.status, d.OK)
    if r.offset != offset:
        fail(f"GetOffset answered {r.offset}, want {offset} (committed by the native client)")
    status, bodies, nxt = pull(stub, group, mq, r.offset, 32)
    expect(f"PullMessage from {offset}", status, d.OK)
    if bodies != [f"off-{i}" for i in range(offset, n)] or nxt != n:
        fail(f"PullMessage from {offset}: {bodies}, next {nxt}")
    print(f"ok: GetOffset {offset} committed by another client; pulled the rest", flush=True)


def main():
    endpoint, topic, group, n, phase = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
    start_watchdog(WATCHDOG_S)
    with grpc.insecure_channel(endpoint) as ch:
        stub = service_pb2_grpc.MessagingServiceStub(ch)
        if phase == "first":
            first(stub, endpoint, topic, group, n)
        else:
            second(stub, topic, group, n, int(sys.argv[6]))
    print("ok: done", flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
