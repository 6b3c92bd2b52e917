"""RocketMQ 5's ACL 2.0 through ringmq's gRPC edge: a user's policy entries name source
addresses, and the edge passes the caller's address, so an entry for 127.0.0.1/32 allows and
one for 10.0.0.0/8 does not. SendMessage signed by hand through the Python SDK's generated
stubs (PyPI rocketmq-python-client 5.1.2).

Usage: python grpc_acl2.py ENDPOINT TOPIC NEAR_AK NEAR_SK FAR_AK FAR_SK

Prints `sent ID` for every message the edge accepted and `ok:` per check; exits non-zero with
a `FAIL:` line.
"""

import sys

import grpc
from rocketmq.grpc_protocol import definition_pb2 as d
from rocketmq.grpc_protocol import service_pb2 as s
from rocketmq.grpc_protocol import service_pb2_grpc

from grpc_acl import compact, expect, message, meta, now


def main():
    endpoint, topic = sys.argv[1], sys.argv[2]
    near, far = (sys.argv[3], sys.argv[4]), (sys.argv[5], sys.argv[6])
    with grpc.insecure_channel(endpoint) as ch:
        stub = service_pb2_grpc.MessagingServiceStub(ch)

        def send(who, mid):
            req = s.SendMessageRequest(messages=[message(topic, b"acl2", mid)])
            md = meta(who[0], who[1], compact(now()), client="grpc-acl2")
            return stub.SendMessage(req, metadata=md, timeout=10)

        expect("SendMessage by a user allowed Pub from 127.0.0.1/32", send(near, "ACL2-NEAR").status, d.OK)
        print("sent ACL2-NEAR", flush=True)
        expect("SendMessage by a user allowed Pub only from 10.0.0.0/8", send(far, "ACL2-FAR").status,
               d.FORBIDDEN)
        expect("SendMessage with a wrong password", send((near[0], near[1] + "x"), "ACL2-BAD").status,
               d.UNAUTHORIZED)


if __name__ == "__main__":
    main()
