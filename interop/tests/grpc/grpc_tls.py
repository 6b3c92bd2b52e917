"""TLS on ringmq's gRPC port, with RocketMQ 5's Python SDK (PyPI rocketmq-python-client 5.1.2).

Usage: python grpc_tls.py ENDPOINT TOPIC MODE   (MODE: permissive or enforcing)

The SDK's TLS channel verifies the server with gRPC's default roots: the test points
GRPC_DEFAULT_SSL_ROOTS_FILE_PATH at its CA. Prints `sent ID` per accepted message and `ok:`
per check; exits non-zero with a `FAIL:` line.
"""

import os
import sys

import grpc
from rocketmq import ClientConfiguration, Credentials, Message, Producer
from rocketmq.grpc_protocol import definition_pb2 as d
from rocketmq.grpc_protocol import service_pb2 as s
from rocketmq.grpc_protocol import service_pb2_grpc

from common import fail, start_watchdog

WATCHDOG_S = 60




def send_with_sdk(endpoint, topic, tls, body):
    producer = Producer(ClientConfiguration(endpoint, Credentials()), (topic,), tls_enable=tls)
    producer.startup()
    m = Message()
    m.topic = topic
    m.body = body.encode()
    r = producer.send(m)
    producer.shutdown()
    print(f"sent {r.message_id}", flush=True)


def main():
    endpoint, topic, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    start_watchdog(WATCHDOG_S)

    send_with_sdk(endpoint, topic, True, "over-tls")
    print(f"ok: {mode}: the SDK's Producer sent over TLS", flush=True)

    req = s.QueryRouteRequest(topic=d.Resource(name=topic))
    md = [("x-mq-client-id", "grpc-tls")]
    with grpc.insecure_channel(endpoint) as ch:
        stub = service_pb2_grpc.MessagingServiceStub(ch)
        try:
            r = stub.QueryRoute(req, metadata=md, timeout=5)
            if mode == "enforcing":
                fail(f"enforcing: a plaintext QueryRoute was answered: {r.status}")
            if r.status.code != d.OK:
                fail(f"permissive: plaintext QueryRoute answered {r.status}")
            print("ok: permissive: plaintext QueryRoute answered OK", flush=True)
        except grpc.RpcError as e:
            if mode != "enforcing" or e.code() != grpc.StatusCode.UNAVAILABLE:
                fail(f"{mode}: plaintext QueryRoute failed with {e.code()} ({e.details()})")
            print(f"ok: enforcing: plaintext refused ({e.code()})", flush=True)
    if mode == "permissive":
        send_with_sdk(endpoint, topic, False, "plaintext")
        print("ok: permissive: the SDK's Producer sent in plaintext", flush=True)
    print("done", flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
