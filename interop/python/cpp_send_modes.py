"""C++ client: sync, async, oneway, orderly and batch sends with tags, keys and properties,
then a push consumer receives each exactly once with every field intact, and a second
group subscribed to two tags receives only those. Also a send to a topic nobody created
(the client asks for TBW102's route and the broker creates the topic).

Wire: every send is SEND_MESSAGE (10) with a JSON header; the batch is SEND_MESSAGE with
extFields batch="1" and RocketMQ's batch body.
"""

import threading
import time

from cpp_common import (
    Inbox, check, create_topic, fail, finish, new_message, ok, producer, push_consumer,
    start, unique, wait_until,
)
from rocketmq.client import SendStatus

start("cpp_send_modes")
topic = unique("CppSend")
create_topic(topic, 4)
p = producer(unique("CppSendPG"))

expected = {}  # body -> (tags, keys, props)


def remember(body, tags, keys, props):
    expected[body] = (tags, keys, props)


# sync
for i in range(10):
    body = "sync-%d" % i
    tags = "TagA" if i % 2 == 0 else "TagB"
    keys, props = "ks%d" % i, {"mode": "sync", "n": str(i)}
    r = p.send_sync(new_message(topic, body, tags, keys, props))
    if r.status != SendStatus.OK:
        fail("sync send %d: status %s" % (i, r.status))
    if len(r.msg_id) != 32:
        fail("sync send %d: msg id %r is not RocketMQ's 32 hex digits" % (i, r.msg_id))
    remember(body, tags, keys, props)
ok("10 sync sends answered SEND_OK with a 32-hex-digit msg id")

# async
done, errors = [], []
lock = threading.Lock()


def on_ok(res):
    with lock:
        done.append(res)


def on_err(exc):
    with lock:
        errors.append(exc)


for i in range(10):
    body = "async-%d" % i
    tags, keys, props = "TagC", "ka%d" % i, {"mode": "async"}
    p.send_async(new_message(topic, body, tags, keys, props), on_ok, on_err)
    remember(body, tags, keys, props)
wait_until(lambda: len(done) + len(errors) >= 10, 15, "10 async send callbacks")
if errors:
    fail("async sends failed: %r" % errors[:3])
check(all(r.status == SendStatus.OK for r in done), "10 async sends called back with SEND_OK")

# oneway
for i in range(5):
    body = "oneway-%d" % i
    tags, keys, props = "TagA", "ko%d" % i, {"mode": "oneway"}
    p.send_oneway(new_message(topic, body, tags, keys, props))
    remember(body, tags, keys, props)
ok("5 oneway sends written")

# orderly (queue chosen by the selector)
for i in range(6):
    body = "orderly-%d" % i
    tags, keys, props = "TagB", "kr%d" % i, {"mode": "orderly"}
    r = p.send_orderly(new_message(topic, body, tags, keys, props), i % 2)
    if r.status != SendStatus.OK:
        fail("orderly send %d: status %s" % (i, r.status))
    remember(body, tags, keys, props)
ok("6 orderly sends answered SEND_OK")

# batch
batch = []
for i in range(8):
    body = "batch-%d" % i
    tags, keys, props = "TagA", "kb%d" % i, {"mode": "batch", "n": str(i)}
    batch.append(new_message(topic, body, tags, keys, props))
    remember(body, tags, keys, props)
r = p.send_batch(batch)
check(r.status == SendStatus.OK, "a batch of 8 answered SEND_OK")

total = len(expected)
inbox = Inbox()
push_consumer(unique("CppSendCG"), topic, inbox)
wait_until(lambda: len({m["body"] for m in inbox.snapshot()}) >= total, 30,
           "the push consumer to receive all %d messages" % total)
time.sleep(1.0)  # let duplicates, if any, arrive
got = inbox.snapshot()
bodies = [m["body"] for m in got]
dups = sorted({b for b in bodies if bodies.count(b) > 1})
if dups:
    fail("delivered more than once: %s" % dups[:5])
unknown = sorted(set(bodies) - set(expected))
if unknown:
    fail("received bodies nobody sent: %s" % unknown[:5])
ok("all %d messages received exactly once" % total)

for m in got:
    tags, keys, props = expected[m["body"]]
    if m["topic"] != topic:
        fail("%s: topic %r, want %r" % (m["body"], m["topic"], topic))
    if m["tags"] != tags:
        fail("%s: tags %r, want %r" % (m["body"], m["tags"], tags))
    if m["keys"] != keys:
        fail("%s: keys %r, want %r" % (m["body"], m["keys"], keys))
    if len(m["id"] or "") != 32:
        fail("%s: msg id %r" % (m["body"], m["id"]))
ok("topic, tags and keys intact on every message; every message has a 32-hex-digit id")

# properties are read through GetMessageProperty: check a few on a fresh consumer
props_inbox = Inbox()
push_consumer(unique("CppSendPropsCG"), topic, props_inbox, member="props",
              extra_props=("mode", "n"))
wait_until(lambda: len({m["body"] for m in props_inbox.snapshot()}) >= total, 30,
           "a second group to receive all %d messages" % total)
for m in props_inbox.snapshot():
    _, _, props = expected[m["body"]]
    for k, v in props.items():
        if m["props"].get(k) != v:
            fail("%s: property %s=%r, want %r" % (m["body"], k, m["props"].get(k), v))
ok("user properties intact on every message (a second group got all %d too)" % total)

# tag filtering
tag_inbox = Inbox()
push_consumer(unique("CppSendTagCG"), topic, tag_inbox, member="tags",
              expression="TagA || TagC")
want = {b for b, (t, _, _) in expected.items() if t in ("TagA", "TagC")}
wait_until(lambda: len({m["body"] for m in tag_inbox.snapshot()}) >= len(want), 30,
           "the TagA || TagC group to receive its %d messages" % len(want))
time.sleep(1.0)
seen = {m["body"] for m in tag_inbox.snapshot()}
if seen != want:
    fail("TagA || TagC group got %d messages, %d of them not TagA/TagC"
         % (len(seen), len(seen - want)))
ok("a 'TagA || TagC' subscription received exactly the %d TagA/TagC messages" % len(want))

# a topic nobody created: the C++ client falls back to TBW102's route
auto_topic = unique("CppAuto")
r = p.send_sync(new_message(auto_topic, "auto-0", "TagA", "kauto", {"mode": "auto"}))
check(r.status == SendStatus.OK, "a sync send to a topic nobody created answered SEND_OK")
auto_inbox = Inbox()
push_consumer(unique("CppAutoCG"), auto_topic, auto_inbox, member="auto")
wait_until(lambda: auto_inbox.count() >= 1, 30, "the message of the auto-created topic")
ok("the message sent to the auto-created topic was consumed")

finish()
