"""Bad gRPC streams and oversized repeated fields against ringmq's gRPC edge, through the
generated stubs of RocketMQ 5's Python SDK (PyPI rocketmq-python-client 5.1.2).

Usage: python grpc_bad_stream.py ENDPOINT TOPIC

Prints `ok:` per check and `sent ID` for the one good message; exits non-zero with a `FAIL:`
line.
"""

import os
import sys
import threading
import time

import grpc
from rocketmq.grpc_protocol import definition_pb2 as d
from rocketmq.grpc_protocol import service_pb2 as s
from rocketmq.grpc_protocol import service_pb2_grpc

from common import fail, start_watchdog

WATCHDOG_S = 90
ID = [("x-mq-client-id", "grpc-bad-stream")]




def message(topic, body, mid):
    m = d.Message(topic=d.Resource(name=topic), body=body)
    m.system_properties.message_id = mid
    m.system_properties.message_type = d.NORMAL
    m.system_properties.body_encoding = d.IDENTITY
    return m


def silent():
    """Telemetry requests that never come: the stream stays open from the client's side."""
    threading.Event().wait()
    yield s.TelemetryCommand()


def main():
    endpoint, topic = sys.argv[1], sys.argv[2]
    start_watchdog(WATCHDOG_S)
    opts = [("grpc.max_send_message_length", 64 * 1024 * 1024)]
    with grpc.insecure_channel(endpoint, options=opts) as ch:
        stub = service_pb2_grpc.MessagingServiceStub(ch)

        t0 = time.time()
        try:
            for _ in stub.Telemetry(silent(), metadata=ID, timeout=60):
                fail("Telemetry without Settings answered something")
            fail("Telemetry without Settings ended without a status")
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.INVALID_ARGUMENT:
                fail(f"Telemetry without Settings ended with {e.code()} ({e.details()})")
            print(f"ok: Telemetry without Settings ended after {time.time() - t0:.0f} s: "
                  f"{e.code()} ({e.details()})", flush=True)

        # A million receipt handles (3 bytes each on the wire, ~72 bytes each decoded).
        entries = [s.AckMessageEntry(receipt_handle="x")] * 1_000_000
        ack = s.AckMessageRequest(group=d.Resource(name="g"), topic=d.Resource(name=topic), entries=entries)
        try:
            r = stub.AckMessage(ack, metadata=ID, timeout=30)
            fail(f"AckMessage of a million handles was answered: {r.status}")
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                fail(f"AckMessage of a million handles ended with {e.code()} ({e.details()})")
            print(f"ok: AckMessage of a million receipt handles: {e.code()} ({e.details()})", flush=True)

        empties = [d.Message()] * 100_000
        try:
            r = stub.SendMessage(s.SendMessageRequest(messages=empties), metadata=ID, timeout=30)
            fail(f"SendMessage of 100,000 empty messages was answered: {r.status}")
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                fail(f"SendMessage of 100,000 empty messages ended with {e.code()} ({e.details()})")
            print(f"ok: SendMessage of 100,000 empty messages: {e.code()} ({e.details()})", flush=True)

        r = stub.SendMessage(s.SendMessageRequest(messages=[message(topic, b"good", "ID-GOOD")]), metadata=ID, timeout=10)
        if r.status.code != d.OK:
            fail(f"a good SendMessage afterwards answered {r.status}")
        print("ok: a good SendMessage afterwards: OK", flush=True)
        print("sent ID-GOOD", flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
