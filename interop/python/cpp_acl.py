"""C++ client with credentials against a node with aclEnable=true: the client signs every
request with its own ClientRPCHook (`set_session_credentials(ak, sk, "ALIYUN")`: AccessKey,
OnsChannel and Signature = base64 HMAC-SHA1 over the header's field values sorted by name,
then the body), which ringmq checks as RocketMQ's AclClientRPCHook.

The node's ACL file is the test's (`ACL` in interop/tests/cpp_client.rs); the accounts below
must match it. ringmq-ctl signs as the admin account from RINGMQ_ACCESS_KEY and
RINGMQ_SECRET_KEY, which the test sets.

1. the producer account (orders=PUB) sends to orders: SEND_OK, and ringmq-ctl reads exactly
   that message back from orders;
2. its send to payments (no PUB there) raises. The exception's text is the client's own
   "No route info of this topic" (rocketmq-client-cpp 1.2.3 retries, then throws that,
   dropping the broker's answer); the broker's code 16 and remark are in the client's log,
   which is checked. Nothing is stored in payments;
3. a producer with a wrong secret is refused: the name server answers its route lookups
   with code 16 (the signature does not match), so the send raises and nothing is stored;
4. a push consumer with the consumer account (orders=SUB, group g1=SUB) receives the
   message of step 1 (HEART_BEAT, QUERY_CONSUMER_OFFSET, PULL_MESSAGE signed).

Each client gets an instance name of its own: clients of one process with the same
instance name share one client factory, and with it the first client's credentials.
"""

import glob
import os

from cpp_common import (
    LOG_LEVEL, Producer, PushConsumer, check, create_topic, ctl_json, dll, fail, finish,
    new_message, ok, start, text, wait_until,
)
from rocketmq.client import SendStatus

PRODUCER = ("producer", "producersecret1")
CONSUMER = ("consumer", "consumersecret1")
TOPIC, DENIED_TOPIC, GROUP = "orders", "payments", "g1"

namesrv = start("cpp_acl")


def signed_producer(group, instance, access_key, secret_key):
    p = Producer(group, timeout=5000)
    p.set_namesrv_addr(namesrv)
    dll.SetProducerInstanceName(p._handle, instance.encode())
    dll.SetProducerLogLevel(p._handle, LOG_LEVEL)
    p.set_session_credentials(access_key, secret_key, "ALIYUN")
    p.start()
    return p


def client_log():
    """This process's C++ client log ($HOME/logs/rocketmq-cpp/<pid>_rocketmq-cpp.log.N)."""
    d = os.path.join(os.environ.get("HOME", "."), "logs", "rocketmq-cpp")
    parts = []
    for path in sorted(glob.glob(os.path.join(d, "%d_rocketmq-cpp.log*" % os.getpid()))):
        with open(path, errors="replace") as f:
            parts.append(f.read())
    return "".join(parts)


def in_client_log(needle, what):
    wait_until(lambda: needle in client_log(), 5,
               "%s in the C++ client's log (%r)" % (what, needle))
    ok("the C++ client's log has %s: %r" % (what, needle))


def stored(topic):
    return ctl_json("consume", topic)["messages"]


create_topic(TOPIC, 2)
create_topic(DENIED_TOPIC, 2)

# 1. PUB on orders: sent and stored.
p = signed_producer("acl_pg", "acl_producer", *PRODUCER)
body = "signed by the C++ client"
try:
    r = p.send_sync(new_message(TOPIC, body, "TagA", "k1"))
except Exception as e:  # noqa: BLE001 - the test's evidence is the text
    fail("the producer account's send to %s raised %s: %s" % (TOPIC, type(e).__name__, e))
check(r.status == SendStatus.OK, "the producer account's signed send to %s: %s, msg id %s"
      % (TOPIC, r.status, r.msg_id))
msgs = stored(TOPIC)
check([(m["body"], m["unique_key"]) for m in msgs] == [(body, r.msg_id)],
      "ringmq-ctl reads back exactly that message from %s (%d stored)" % (TOPIC, len(msgs)))

# 2. No PUB on payments: refused with NO_PERMISSION.
try:
    r = p.send_sync(new_message(DENIED_TOPIC, "not allowed"))
    fail("the send to %s was accepted (%s, msg id %s)" % (DENIED_TOPIC, r.status, r.msg_id))
except Exception as e:  # noqa: BLE001 - any refusal the binding raises
    err = str(e)
    ok("the send to %s raised %s: %r" % (DENIED_TOPIC, type(e).__name__, err))
if "NO_PERMISSION" in err or "no permission" in err or "code:16" in err or "error:16" in err:
    ok("the exception's text names the refusal")
else:
    ok("the exception's text does not carry the broker's code (client 1.2.3 drops it)")
in_client_log("no permission: SEND_MESSAGE needs PUB on topic %s; access key %s holds DENY, "
              "error code:16" % (DENIED_TOPIC, PRODUCER[0]),
              "the broker's answer: code 16 (NO_PERMISSION) with its remark")
check(stored(DENIED_TOPIC) == [], "nothing was stored in %s" % DENIED_TOPIC)

# 3. A wrong secret: refused.
bad = signed_producer("acl_pg_bad", "acl_bad", PRODUCER[0], "wrong-secret")
try:
    r = bad.send_sync(new_message(TOPIC, "bad signature"))
    fail("a send signed with a wrong secret was accepted (%s, msg id %s)" % (r.status, r.msg_id))
except Exception as e:  # noqa: BLE001
    ok("the send signed with a wrong secret raised %s: %r" % (type(e).__name__, str(e)))
in_client_log("no permission: the signature does not match access key %s's secret key,16"
              % PRODUCER[0], "the name server's refusal of the route lookup (code 16)")
msgs = stored(TOPIC)
check([m["body"] for m in msgs] == [body],
      "%s still holds only the message of step 1 (%d stored)" % (TOPIC, len(msgs)))

# 4. The consumer account (orders=SUB, g1=SUB) receives the message.
got = []


def on_message(m):
    got.append((text(m.topic), text(m.body), text(m.id)))


c = PushConsumer(GROUP)
c.set_namesrv_addr(namesrv)
c.set_instance_name("acl_consumer")
dll.SetPushConsumerLogLevel(c._handle, LOG_LEVEL)
c.set_session_credentials(CONSUMER[0], CONSUMER[1], "ALIYUN")
c.subscribe(TOPIC, on_message)
c.start()
wait_until(lambda: got, 25, "the consumer account's push consumer to receive the message")
check(got[0][:2] == (TOPIC, body), "the consumer account's push consumer (group %s) received %r"
      % (GROUP, got[0]))
finish()
