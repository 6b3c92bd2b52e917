"""C++ client: orderly consumption under broker queue locks. Messages of one order go to
one queue (send_orderly with the order id as the selector argument); two orderly members
of one group consume them; every order's steps arrive in order, each exactly once, and a
queue is never consumed by both members at once.

Wire: LOCK_BATCH_MQ (JSON body, lockOKMQSet answer with numeric queueId), pulls only on
locked queues, UNLOCK_BATCH_MQ at shutdown.
"""

import threading
import time

from cpp_common import (
    CONSUME_SUCCESS, Inbox, create_topic, fail, finish, new_message, ok, producer,
    push_consumer, start, unique, wait_until,
)

start("cpp_orderly")
topic = unique("CppOrder")
group = unique("CppOrderCG")
create_topic(topic, 4)
p = producer(unique("CppOrderPG"))

busy = {}  # queue -> member consuming it right now
overlap = []
busy_lock = threading.Lock()


def slow(f):
    q = f["queue"]
    with busy_lock:
        if busy.get(q) not in (None, f["member"]):
            overlap.append((q, busy[q], f["member"]))
        busy[q] = f["member"]
    time.sleep(0.01)
    with busy_lock:
        busy.pop(q, None)
    return CONSUME_SUCCESS


inbox = Inbox()
push_consumer(group, topic, inbox, member="A", orderly=True, answer=slow)
push_consumer(group, topic, inbox, member="B", orderly=True, answer=slow)
# The messages are sent once both members have rebalanced and locked their queues. The
# broker hands a queue's lock over only after its holder unlocks it (checked by the
# broker's own tests), but this client (rocketmq-client-cpp 1.2.3) unlocks a queue it drops
# in a rebalance without waiting for the message it is consuming from it, so a message
# in flight during a hand-over could overlap the next holder's first one: that is the
# client's, not the broker's.
time.sleep(3.0)
ORDERS, STEPS = 8, 10
for step in range(STEPS):
    for order in range(ORDERS):
        r = p.send_orderly(new_message(topic, "o%d-s%d" % (order, step), "step", "o%d" % order), order)
        if r.status != 0:
            fail("orderly send o%d-s%d: status %s" % (order, step, r.status))
ok("%d orders x %d steps sent with send_orderly (order id selects the queue)" % (ORDERS, STEPS))

total = ORDERS * STEPS
wait_until(lambda: len({m["body"] for m in inbox.snapshot()}) >= total, 40,
           "the orderly group to consume all %d messages" % total)
time.sleep(1.0)
got = inbox.snapshot()
if overlap:
    fail("a queue was consumed by two members at once: %s" % overlap[:5])
bodies = [m["body"] for m in got]
if len(bodies) != len(set(bodies)):
    fail("%d messages delivered more than once" % (len(bodies) - len(set(bodies))))
for order in range(ORDERS):
    steps = [int(m["body"].split("-s")[1]) for m in got if m["body"].startswith("o%d-" % order)]
    if steps != list(range(STEPS)):
        fail("order o%d consumed out of order: %s" % (order, steps))
    queues = {m["queue"] for m in got if m["body"].startswith("o%d-" % order)}
    if len(queues) != 1:
        fail("order o%d spread over queues %s" % (order, sorted(queues)))
ok("every order's %d steps consumed once, in order, from one queue; no queue consumed by "
   "two members at once (members used: %s)" % (STEPS, sorted({m["member"] for m in got})))
finish()
