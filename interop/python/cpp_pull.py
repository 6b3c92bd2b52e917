"""C++ client: a pull consumer (DefaultMQPullConsumer through the C API's Pull) reads every
queue from offset 0 to the end: all messages once, NO_NEW_MSG at the end of each queue
with nextBeginOffset = maxOffset, a tag expression filters, and pulling on from the
stored offsets returns exactly what was sent later.

Wire: GET_ROUTEINFO_BY_TOPIC for the queues, PULL_MESSAGE with queueOffset/maxMsgNums/
subscription (sysFlag = subscription bit), and the answer's nextBeginOffset, minOffset,
maxOffset, which must be JSON strings for this client to read them.
"""

import ctypes

from cpp_common import (
    create_topic, dll, fail, finish, new_message, ok, producer, start, text, unique,
)
from rocketmq.client import PullConsumer, RecvMessage
from rocketmq.ffi import _CMessageQueue, _CPullStatus

namesrv = start("cpp_pull")
topic = unique("CppPull")
create_topic(topic, 4)
p = producer(unique("CppPullPG"))
sent = {}
for i in range(40):
    tag = "TagA" if i % 4 == 0 else "TagB"
    body = "pull-%d" % i
    p.send_sync(new_message(topic, body, tag, "k%d" % i, {"i": str(i)}))
    sent[body] = tag
ok("sent 40 messages (10 TagA, 30 TagB) over 4 queues")

c = PullConsumer(unique("CppPullCG"))
c.set_namesrv_addr(namesrv)
c.start()

mqs_ptr = ctypes.POINTER(_CMessageQueue)()
size = ctypes.c_int()
if dll.FetchSubscriptionMessageQueues(c._handle, topic.encode(), ctypes.pointer(mqs_ptr),
                                      ctypes.pointer(size)) != 0:
    fail("FetchSubscriptionMessageQueues failed: %s" % text(dll.GetLatestErrorMessage()))
mqs = [mqs_ptr[i] for i in range(size.value)]


def qkey(mq):
    """A queue is a broker name and an id: a broker with several shards is one broker per
    shard to RocketMQ clients (broker-a@0, broker-a@1, ...), each numbering its queues from 0."""
    return (text(mq.brokerName), mq.queueId)


per_broker = {}
for mq in mqs:
    per_broker.setdefault(text(mq.brokerName), []).append(mq.queueId)
if sum(len(ids) for ids in per_broker.values()) != 4 or any(
        sorted(ids) != list(range(len(ids))) for ids in per_broker.values()):
    fail("the route gave queues %s, want 4 numbered from 0 on each broker"
         % sorted(qkey(mq) for mq in mqs))
ok("the route lists the topic's 4 queues")


def pull_all(expr, offsets):
    """Pulls every queue from offsets[q] to NO_NEW_MSG; returns the messages and the
    last answer's (status, next, min, max) per queue."""
    got, ends = [], {}
    for mq in mqs:
        q = qkey(mq)
        off = offsets.get(q, 0)
        for _ in range(200):  # bounded: a broken nextBeginOffset would loop forever
            r = dll.Pull(c._handle, ctypes.pointer(mq), expr.encode(), off, 8)
            status = r.pullStatus
            if status == _CPullStatus.FOUND:
                for i in range(r.size):
                    m = RecvMessage(r.msgFoundList[i])
                    got.append((q, m.queue_offset, text(m.body), text(m.tags), text(m.keys),
                                text(m.get_property("i"))))
            nxt, lo, hi = r.nextBeginOffset, r.minOffset, r.maxOffset
            dll.ReleasePullResult(r)
            if status == _CPullStatus.BROKER_TIMEOUT:
                fail("pull of queue %s at %d: no answer (BROKER_TIMEOUT)" % (q, off))
            if status == _CPullStatus.NO_NEW_MSG:
                ends[q] = (status, nxt, lo, hi)
                break
            if status in (_CPullStatus.FOUND, _CPullStatus.NO_MATCHED_MSG) and nxt <= off:
                fail("queue %s: pull at %d answered status %d with nextBeginOffset %d (not "
                     "advancing: are the offsets JSON strings?)" % (q, off, status, nxt))
            if status == _CPullStatus.OFFSET_ILLEGAL:
                fail("queue %s: pull at %d answered OFFSET_ILLEGAL (next %d min %d max %d)"
                     % (q, off, nxt, lo, hi))
            off = nxt
        else:
            fail("queue %s: 200 pulls without reaching NO_NEW_MSG" % (q,))
        offsets[q] = off
    return got, ends


offsets = {}
got, ends = pull_all("*", offsets)
bodies = [g[2] for g in got]
if sorted(bodies) != sorted(sent):
    fail("pulled %d messages (%d distinct), want the 40 sent" % (len(bodies), len(set(bodies))))
for q, qoff, body, tag, keys, i in got:
    if tag != sent[body] or keys != "k%s" % body.split("-")[1] or i != body.split("-")[1]:
        fail("%s: tag %r keys %r property i %r" % (body, tag, keys, i))
for q, (status, nxt, lo, hi) in ends.items():
    if nxt != hi or lo != 0:
        fail("queue %s at its end: nextBeginOffset %d minOffset %d maxOffset %d (want next = max, min 0)"
             % (q, nxt, lo, hi))
    per_q = sorted(g[1] for g in got if g[0] == q)
    if per_q != list(range(hi)):
        fail("queue %s: offsets %s, want 0..%d" % (q, per_q, hi - 1))
ok("pulled all 40 messages once with tags, keys and properties; every queue ended with "
   "NO_NEW_MSG, nextBeginOffset = maxOffset, minOffset 0")

tag_got, _ = pull_all("TagA", {})
tag_bodies = sorted(g[2] for g in tag_got)
want = sorted(b for b, t in sent.items() if t == "TagA")
if tag_bodies != want:
    fail("a TagA pull got %d messages (%d not TagA), want %d"
         % (len(tag_bodies), len([b for b in tag_bodies if sent.get(b) != "TagA"]), len(want)))
ok("a 'TagA' pull returned exactly the 10 TagA messages")

again, _ = pull_all("*", offsets)
if again:
    fail("pulling on from the end returned %d messages" % len(again))
for i in range(40, 48):
    p.send_sync(new_message(topic, "pull-%d" % i, "TagB", "k%d" % i, {"i": str(i)}))
later, _ = pull_all("*", offsets)
if sorted(g[2] for g in later) != sorted("pull-%d" % i for i in range(40, 48)):
    fail("pulling on after 8 more sends got %s" % sorted(g[2] for g in later))
ok("pulling on from the stored offsets returned nothing, then exactly the 8 messages sent later")
finish()
