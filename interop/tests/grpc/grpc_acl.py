"""RocketMQ 5's request signature against ringmq's gRPC edge with ACL on: the Python SDK
(PyPI rocketmq-python-client 5.1.2) with right credentials sends and receives; requests signed
by hand through the SDK's generated stubs check each refusal.

Usage: python grpc_acl.py ENDPOINT TOPIC GROUP PUB_AK PUB_SK SUB_AK SUB_SK

Prints `sent ID` for every message the edge accepted and `ok:` per check; exits non-zero with
a `FAIL:` line.
"""

import datetime
import hmac
import os
import sys
import time
from hashlib import sha1

import grpc
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer
from rocketmq.grpc_protocol import definition_pb2 as d
from rocketmq.grpc_protocol import service_pb2 as s
from rocketmq.grpc_protocol import service_pb2_grpc

from common import fail, start_watchdog

WATCHDOG_S = 90
N_SDK = 5




def compact(t):
    """yyyyMMddTHHmmssZ in UTC (what the Java, Python and Node.js clients send)."""
    return t.astimezone(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def meta(ak, sk, date, upper=False, client="grpc-acl-raw"):
    sig = hmac.new(sk.encode(), date.encode(), sha1).hexdigest()
    if upper:
        sig = sig.upper()
    auth = f"MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, Signature={sig}"
    return [("x-mq-client-id", client), ("x-mq-date-time", date), ("authorization", auth)]


def now():
    return datetime.datetime.now(datetime.timezone.utc)


def message(topic, body, mid):
    m = d.Message(topic=d.Resource(name=topic), body=body)
    m.system_properties.message_id = mid
    m.system_properties.message_type = d.NORMAL
    m.system_properties.body_encoding = d.IDENTITY
    return m


def expect(what, status, code):
    if status.code != code:
        fail(f"{what}: answered {d.Code.Name(status.code)} ({status.message}), want {d.Code.Name(code)}")
    print(f"ok: {what}: {d.Code.Name(code)} ({status.message})", flush=True)


def expect_stream_end(what, replies, code):
    try:
        for _ in replies:
            pass
    except grpc.RpcError as e:
        if e.code() != code:
            fail(f"{what}: stream ended with {e.code()} ({e.details()}), want {code}")
        print(f"ok: {what}: {e.code()} ({e.details()})", flush=True)
        return
    fail(f"{what}: the stream ended without an error")


def sdk(endpoint, topic, group, pub, sub, raw_ids):
    producer = Producer(ClientConfiguration(endpoint, Credentials(*pub)), (topic,))
    producer.startup()
    ids = []
    for i in range(N_SDK):
        m = Message()
        m.topic = topic
        m.body = f"signed-{i}".encode()
        m.tag = "TagA"
        ids.append(producer.send(m).message_id)
    producer.shutdown()
    for mid in ids:
        print(f"sent {mid}", flush=True)
    print(f"ok: the SDK's Producer signed as {pub[0]} sent {N_SDK}", flush=True)

    consumer = SimpleConsumer(ClientConfiguration(endpoint, Credentials(*sub)), group,
                              {topic: FilterExpression("*")}, await_duration=5)
    consumer.startup()
    got = set()
    deadline = time.time() + 40
    want = set(ids) | set(raw_ids)
    while len(got) < len(want) and time.time() < deadline:
        for m in consumer.receive(32, 20) or []:
            consumer.ack(m)
            got.add(m.message_id)
    consumer.shutdown()
    if got != want:
        fail(f"the SDK's SimpleConsumer signed as {sub[0]} got {sorted(got)}, want {sorted(want)}")
    print(f"ok: the SDK's SimpleConsumer signed as {sub[0]} received and acked {len(want)}", flush=True)


def raw(endpoint, topic, group, pub, sub):
    with grpc.insecure_channel(endpoint) as ch:
        stub = service_pb2_grpc.MessagingServiceStub(ch)

        def send(md, mid):
            req = s.SendMessageRequest(messages=[message(topic, b"raw", mid)])
            return stub.SendMessage(req, metadata=md, timeout=10)

        t = compact(now())
        expect("unsigned SendMessage", send([("x-mq-client-id", "c")], "RAW-UNSIGNED").status, d.UNAUTHORIZED)
        expect("SendMessage signed with a wrong secret",
               send(meta(pub[0], pub[1] + "x", t), "RAW-WRONG-SECRET").status, d.UNAUTHORIZED)
        expect("SendMessage signed by an unknown access key",
               send(meta("nobody", pub[1], t), "RAW-UNKNOWN").status, d.UNAUTHORIZED)
        stale = compact(now() - datetime.timedelta(minutes=10))
        expect("SendMessage with a 10 minutes old signature",
               send(meta(pub[0], pub[1], stale), "RAW-STALE").status, d.UNAUTHORIZED)
        ahead = compact(now() + datetime.timedelta(minutes=10))
        expect("SendMessage signed 10 minutes ahead",
               send(meta(pub[0], pub[1], ahead), "RAW-AHEAD").status, d.UNAUTHORIZED)
        expect("SendMessage with a date that is not one",
               send(meta(pub[0], pub[1], "yesterday"), "RAW-NODATE").status, d.UNAUTHORIZED)
        expect("SendMessage by an account without PUB",
               send(meta(sub[0], sub[1], t), "RAW-NOPUB").status, d.FORBIDDEN)

        # The Rust client's form: RFC 3339 local time with an offset, and here upper-case hex.
        rfc = now().astimezone(datetime.timezone(datetime.timedelta(hours=2))).isoformat()
        r = send(meta(pub[0], pub[1], rfc, upper=True), "RAW-RFC3339-UPPER")
        expect(f"SendMessage signed over {rfc} in upper-case hex", r.status, d.OK)
        print("sent RAW-RFC3339-UPPER", flush=True)
        r = send(meta(pub[0], pub[1], compact(now())), "RAW-COMPACT-LOWER")
        expect("SendMessage signed over yyyyMMddTHHmmssZ in lower-case hex", r.status, d.OK)
        print("sent RAW-COMPACT-LOWER", flush=True)

        q = d.MessageQueue(topic=d.Resource(name=topic), id=-1, permission=d.READ_WRITE,
                           broker=d.Broker(name="broker-a"))
        rreq = s.ReceiveMessageRequest(group=d.Resource(name=group), message_queue=q,
                                       filter_expression=d.FilterExpression(type=d.TAG, expression="*"),
                                       batch_size=1)
        rreq.invisible_duration.seconds = 30
        rreq.long_polling_timeout.seconds = 5
        first = next(iter(stub.ReceiveMessage(rreq, metadata=meta(pub[0], pub[1], compact(now())), timeout=15)))
        expect("ReceiveMessage by an account without SUB", first.status, d.FORBIDDEN)
        ack = s.AckMessageRequest(group=d.Resource(name=group), topic=d.Resource(name=topic),
                                  entries=[s.AckMessageEntry(message_id="x", receipt_handle="x")])
        expect("AckMessage by an account without SUB",
               stub.AckMessage(ack, metadata=meta(pub[0], pub[1], compact(now())), timeout=10).status, d.FORBIDDEN)
        cid = s.ChangeInvisibleDurationRequest(group=d.Resource(name=group), topic=d.Resource(name=topic),
                                               receipt_handle="x", message_id="x")
        cid.invisible_duration.seconds = 30
        expect("ChangeInvisibleDuration by an account without SUB",
               stub.ChangeInvisibleDuration(cid, metadata=meta(pub[0], pub[1], compact(now())), timeout=10).status,
               d.FORBIDDEN)

        pub_settings = d.Settings(client_type=d.PRODUCER,
                                  publishing=d.Publishing(topics=[d.Resource(name=topic)]))
        expect_stream_end("Telemetry signed with a wrong secret",
                          stub.Telemetry(iter([s.TelemetryCommand(settings=pub_settings)]),
                                         metadata=meta(pub[0], "wrong", compact(now())), timeout=10),
                          grpc.StatusCode.UNAUTHENTICATED)
        expect_stream_end("Telemetry publishing Settings by an account without PUB",
                          stub.Telemetry(iter([s.TelemetryCommand(settings=pub_settings)]),
                                         metadata=meta(sub[0], sub[1], compact(now())), timeout=10),
                          grpc.StatusCode.PERMISSION_DENIED)

        # A stack trace and a verify-message result nobody asked for: logged, the stream goes
        # on and answers the Settings after them.
        cmds = [
            s.TelemetryCommand(thread_stack_trace=s.ThreadStackTrace(nonce="n1", thread_stack_trace="main: idle")),
            s.TelemetryCommand(status=d.Status(code=d.OK), verify_message_result=s.VerifyMessageResult(nonce="n2")),
            s.TelemetryCommand(settings=pub_settings),
        ]
        replies = stub.Telemetry(iter(cmds), metadata=meta(pub[0], pub[1], compact(now())), timeout=10)
        first = next(iter(replies))
        if not first.HasField("settings"):
            fail(f"Telemetry after a stack trace and a verify result answered {first}")
        replies.cancel()
        print("ok: Telemetry took a thread stack trace and a verify-message result, then answered Settings",
              flush=True)
        return ["RAW-RFC3339-UPPER", "RAW-COMPACT-LOWER"]


def main():
    endpoint, topic, group = sys.argv[1], sys.argv[2], sys.argv[3]
    pub, sub = (sys.argv[4], sys.argv[5]), (sys.argv[6], sys.argv[7])
    start_watchdog(WATCHDOG_S)
    raw_ids = raw(endpoint, topic, group, pub, sub)
    sdk(endpoint, topic, group, pub, sub, raw_ids)
    print("done", flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
