"""ForwardMessageToDeadLetterQueue through ringmq's gRPC edge, with RocketMQ 5's Python SDK
(PyPI rocketmq-python-client 5.1.2, unchanged): its Producer sends, its SimpleConsumer
receives, and the forward goes through the SDK's own generated gRPC stub (the SDK calls it
only from its PushConsumer, after a message's last attempt).

Usage: python grpc_dlq.py ENDPOINT TOPIC GROUP

Prints `ok:` lines and `dead-lettered ID BODY`; exits non-zero with a `FAIL:` line.
"""

import sys
import time

import grpc
from rocketmq import (ClientConfiguration, Credentials, FilterExpression, Message,
                      Producer, SimpleConsumer)
from rocketmq.grpc_protocol import definition_pb2, service_pb2, service_pb2_grpc

from common import fail, start_watchdog

WATCHDOG_S = 60
OK = 20000




def main():
    endpoint, topic, group = sys.argv[1], sys.argv[2], sys.argv[3]
    start_watchdog(WATCHDOG_S)
    config = ClientConfiguration(endpoint, Credentials())
    producer = Producer(config, (topic,))
    producer.startup()
    m = Message()
    m.topic = topic
    m.body = b"dlq-me"
    sent = producer.send(m)
    producer.shutdown()

    consumer = SimpleConsumer(config, group, {topic: FilterExpression("*")}, await_duration=5)
    consumer.startup()
    got = []
    deadline = time.time() + 20
    while not got and time.time() < deadline:
        got = consumer.receive(1, 20) or []
    if len(got) != 1 or got[0].message_id != sent.message_id:
        fail(f"received {[(x.message_id, x.body) for x in got]}, sent {sent.message_id}")
    print("ok: the message came once", flush=True)

    with grpc.insecure_channel(endpoint) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        req = service_pb2.ForwardMessageToDeadLetterQueueRequest(
            group=definition_pb2.Resource(name=group),
            topic=definition_pb2.Resource(name=topic),
            receipt_handle=got[0].receipt_handle,
            message_id=got[0].message_id,
            delivery_attempt=1,
            max_delivery_attempts=1,
        )
        resp = stub.ForwardMessageToDeadLetterQueue(
            req, metadata=[("x-mq-client-id", "grpc-dlq-test")], timeout=10)
        if resp.status.code != OK:
            fail(f"ForwardMessageToDeadLetterQueue answered {resp.status}")
        bad = service_pb2.ForwardMessageToDeadLetterQueueRequest(
            group=definition_pb2.Resource(name=group),
            topic=definition_pb2.Resource(name=topic),
            receipt_handle="not a handle",
            message_id=got[0].message_id,
        )
        resp = stub.ForwardMessageToDeadLetterQueue(
            bad, metadata=[("x-mq-client-id", "grpc-dlq-test")], timeout=10)
        if resp.status.code != definition_pb2.INVALID_RECEIPT_HANDLE:
            fail(f"a forward with a bad handle answered {resp.status}")
    print("ok: forwarded to the dead-letter queue; a bad handle is INVALID_RECEIPT_HANDLE", flush=True)

    again = consumer.receive(1, 20) or []
    consumer.shutdown()
    if again:
        fail(f"the dead-lettered message came again: {[x.body for x in again]}")
    print("ok: it does not come again", flush=True)
    print(f"dead-lettered {sent.message_id} dlq-me", flush=True)


if __name__ == "__main__":
    main()
