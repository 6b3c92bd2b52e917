"""Bad gRPC input against ringmq's gRPC edge, through the generated stubs of RocketMQ 5's
Python SDK (PyPI rocketmq-python-client 5.1.2): each gets RocketMQ's status (or a gRPC
status), and the edge keeps serving; nothing of it is stored.

Usage: python grpc_bad_input.py ENDPOINT TOPIC

Prints one `ok:` line per check and `sent ID` for the one good message; exits non-zero with
a `FAIL:` line.
"""

import sys

import grpc
from rocketmq.grpc_protocol import definition_pb2 as d
from rocketmq.grpc_protocol import service_pb2 as s
from rocketmq.grpc_protocol import service_pb2_grpc

from common import fail, start_watchdog

WATCHDOG_S = 60
ID = [("x-mq-client-id", "grpc-bad-input")]




def expect(what, status, code):
    if status.code != code:
        fail(f"{what}: answered {d.Code.Name(status.code)} ({status.message}), want {d.Code.Name(code)}")
    print(f"ok: {what}: {d.Code.Name(code)}", flush=True)


def message(topic, body, mid, props=None):
    m = d.Message(topic=d.Resource(name=topic), body=body)
    m.system_properties.message_id = mid
    m.system_properties.message_type = d.NORMAL
    m.system_properties.body_encoding = d.IDENTITY
    for k, v in (props or {}).items():
        m.user_properties[k] = v
    return m


def main():
    endpoint, topic = sys.argv[1], sys.argv[2]
    start_watchdog(WATCHDOG_S)
    opts = [("grpc.max_send_message_length", 64 * 1024 * 1024)]
    with grpc.insecure_channel(endpoint, options=opts) as ch:
        stub = service_pb2_grpc.MessagingServiceStub(ch)

        r = stub.QueryRoute(s.QueryRouteRequest(topic=d.Resource(name="NoSuchTopic")), metadata=ID, timeout=10)
        expect("QueryRoute of a missing topic", r.status, d.TOPIC_NOT_FOUND)

        r = stub.Heartbeat(s.HeartbeatRequest(client_type=d.PRODUCER), metadata=ID, timeout=10)
        expect("Heartbeat before any Settings", r.status, d.UNRECOGNIZED_CLIENT_TYPE)

        r = stub.Heartbeat(s.HeartbeatRequest(client_type=d.PRODUCER), timeout=10)
        expect("Heartbeat without x-mq-client-id", r.status, d.CLIENT_ID_REQUIRED)

        try:
            replies = stub.Telemetry(iter([s.TelemetryCommand(settings=d.Settings())]), metadata=ID, timeout=10)
            for _ in replies:
                pass
            fail("Telemetry with Settings of neither publishing nor subscription was accepted")
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.INVALID_ARGUMENT:
                fail(f"Telemetry with empty Settings ended with {e.code()}, want INVALID_ARGUMENT")
        print("ok: Telemetry with empty Settings: INVALID_ARGUMENT", flush=True)

        r = stub.SendMessage(s.SendMessageRequest(messages=[message(topic, b"", "ID-EMPTY")]), metadata=ID, timeout=10)
        expect("SendMessage with an empty body", r.status, d.MESSAGE_BODY_EMPTY)
        r = stub.SendMessage(s.SendMessageRequest(messages=[message(topic, b"x", "ID-RESERVED", {"UNIQ_KEY": "x"})]), metadata=ID, timeout=10)
        expect("SendMessage with a reserved property", r.status, d.ILLEGAL_MESSAGE_PROPERTY_KEY)
        r = stub.SendMessage(s.SendMessageRequest(messages=[message(topic, b"x", "ID-A"), message("Other", b"x", "ID-B")]), metadata=ID, timeout=10)
        expect("SendMessage with two topics", r.status, d.MESSAGE_CORRUPTED)
        r = stub.SendMessage(s.SendMessageRequest(messages=[message(topic, b"x", "")]), metadata=ID, timeout=10)
        expect("SendMessage without a message id", r.status, d.ILLEGAL_MESSAGE_ID)
        r = stub.SendMessage(s.SendMessageRequest(messages=[message(topic, b"x" * (4 * 1024 * 1024 + 1), "ID-BIG")]), metadata=ID, timeout=10)
        expect("SendMessage with a body over 4 MiB", r.status, d.MESSAGE_BODY_TOO_LARGE)

        try:
            stub.SendMessage(s.SendMessageRequest(messages=[message(topic, b"x" * (20 * 1024 * 1024), "ID-HUGE")]), metadata=ID, timeout=10)
            fail("a 20 MiB request was accepted")
        except grpc.RpcError as e:
            # tonic answers OUT_OF_RANGE for a message over its decoding limit, grpc-java
            # RESOURCE_EXHAUSTED: either refuses it before decoding.
            if e.code() not in (grpc.StatusCode.OUT_OF_RANGE, grpc.StatusCode.RESOURCE_EXHAUSTED):
                fail(f"a 20 MiB request ended with {e.code()}, want OUT_OF_RANGE or RESOURCE_EXHAUSTED")
            print(f"ok: a 20 MiB request: {e.code().name}", flush=True)

        entries = [s.AckMessageEntry(message_id=str(i), receipt_handle="x") for i in range(2000)]
        r = stub.AckMessage(s.AckMessageRequest(group=d.Resource(name="g"), topic=d.Resource(name=topic), entries=entries), metadata=ID, timeout=10)
        expect("AckMessage with 2000 entries", r.status, d.BAD_REQUEST)
        r = stub.AckMessage(s.AckMessageRequest(group=d.Resource(name="g"), topic=d.Resource(name=topic), entries=[s.AckMessageEntry(message_id="1", receipt_handle="garbage")]), metadata=ID, timeout=10)
        expect("AckMessage with a garbage handle", r.entries[0].status, d.INVALID_RECEIPT_HANDLE)

        req = s.ReceiveMessageRequest(group=d.Resource(name="g"), message_queue=d.MessageQueue(topic=d.Resource(name=topic), id=-1), batch_size=1)
        req.invisible_duration.seconds = 1
        responses = list(stub.ReceiveMessage(req, metadata=ID, timeout=10))
        if len(responses) != 1:
            fail(f"ReceiveMessage with a 1 s invisible time answered {len(responses)} responses")
        expect("ReceiveMessage with a 1 s invisible time", responses[0].status, d.ILLEGAL_INVISIBLE_TIME)

        unknown = ch.unary_unary("/apache.rocketmq.v2.MessagingService/NoSuchRpc",
                                 request_serializer=lambda b: b, response_deserializer=lambda b: b)
        try:
            unknown(b"\x0a\x00", metadata=ID, timeout=10)
            fail("an unknown RPC was answered")
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.UNIMPLEMENTED:
                fail(f"an unknown RPC ended with {e.code()}, want UNIMPLEMENTED")
        print("ok: an unknown RPC: UNIMPLEMENTED", flush=True)

        garbage = ch.unary_unary("/apache.rocketmq.v2.MessagingService/SendMessage",
                                 request_serializer=lambda b: b, response_deserializer=lambda b: b)
        try:
            garbage(b"\xff\xff\xff\xff\x0f", metadata=ID, timeout=10)
            fail("malformed protobuf was answered")
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.INTERNAL:
                fail(f"malformed protobuf ended with {e.code()}, want INTERNAL")
        print("ok: malformed protobuf: INTERNAL", flush=True)

        r = stub.SendMessage(s.SendMessageRequest(messages=[message(topic, b"good", "ID-GOOD")]), metadata=ID, timeout=10)
        expect("a good SendMessage afterwards", r.status, d.OK)
        print("sent ID-GOOD", flush=True)


if __name__ == "__main__":
    main()
