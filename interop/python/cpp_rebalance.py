"""C++ client: a push consumer group of two members splits a topic's queues; when one
member leaves, the other takes its queues over. No message is lost and none is delivered
to both members.

Wire: HEART_BEAT with two clientIDs in one group, GET_CONSUMER_LIST_BY_GROUP, the broker's
NOTIFY_CONSUMER_IDS_CHANGED, QUERY/UPDATE_CONSUMER_OFFSET, UNREGISTER_CLIENT.
"""

import time

from cpp_common import (
    Inbox, create_topic, dll, fail, finish, new_message, ok, producer, push_consumer, start,
    unique, wait_until,
)

start("cpp_rebalance")
topic = unique("CppRebal")
group = unique("CppRebalCG")
create_topic(topic, 4)
p = producer(unique("CppRebalPG"))
inbox = Inbox()
a = push_consumer(group, topic, inbox, member="A")
b = push_consumer(group, topic, inbox, member="B")

sent = []


def send(n, phase):
    for _ in range(n):
        body = "%s-%d" % (phase, len(sent))
        p.send_sync(new_message(topic, body, "T", "k%d" % len(sent)))
        sent.append(body)


def members_of(phase_prefix):
    return {m["member"] for m in inbox.snapshot() if m["body"].startswith(phase_prefix)}


# Phase 1: both members must end up consuming (the split needs both heartbeats and a
# rebalance on each; the C++ client rebalances every 10 s or when notified).
deadline = time.monotonic() + 25
while True:
    send(8, "p1")
    time.sleep(0.5)
    got = {m["body"] for m in inbox.snapshot()}
    both = {m["member"] for m in inbox.snapshot()
            if m["body"] in set(sent[-16:])} == {"A", "B"}
    if both and set(sent) <= got:
        break
    if time.monotonic() > deadline:
        fail("members A and B never both consumed (receivers of the last 16 sends: %s, "
             "%d of %d received)" % (sorted(members_of("p1")), len(got & set(sent)), len(sent)))
ok("members A and B share the topic (%d messages so far, receivers %s)"
   % (len(sent), sorted(members_of("p1"))))

queues_b = {m["queue"] for m in inbox.snapshot() if m["member"] == "B"}
n_before_leave = len(sent)

# Phase 2: B leaves (shutdown: persists its offsets, unregisters).
t_leave = time.monotonic()
dll.ShutdownPushConsumer(b._handle)
ok("member B shut down (it owned queues %s)" % sorted(queues_b))
send(24, "p2")
wait_until(lambda: set(sent) <= {m["body"] for m in inbox.snapshot()}, 30,
           "member A to receive every message after B left")
time.sleep(1.0)

got = inbox.snapshot()
late_b = [m["body"] for m in got if m["member"] == "B" and m["at"] > t_leave + 1.0]
if late_b:
    fail("member B received %d messages after it shut down: %s" % (len(late_b), late_b[:5]))
by_body = {}
for m in got:
    by_body.setdefault(m["body"], []).append(m["member"])
twice = {b: ms for b, ms in by_body.items() if len(ms) > 1}
if twice:
    fail("%d messages delivered more than once: %s" % (len(twice), list(twice.items())[:5]))
lost = [s for s in sent if s not in by_body]
if lost:
    fail("%d messages never delivered: %s" % (len(lost), lost[:5]))
ok("all %d messages delivered exactly once (%d before B left, %d after)"
   % (len(sent), n_before_leave, len(sent) - n_before_leave))

queues_a_after = {m["queue"] for m in got if m["member"] == "A" and m["body"].startswith("p2")}
if not queues_b <= queues_a_after:
    fail("member A did not take over B's queues %s (A consumed from %s after B left)"
         % (sorted(queues_b), sorted(queues_a_after)))
ok("member A took over B's queues %s" % sorted(queues_b))
finish()
