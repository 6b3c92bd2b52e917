"""C++ client: a message sent with a delay level is delivered no earlier than that level's
delay; one sent at the same time without a level arrives at once.

The broker is started with a short messageDelayLevel (level 2 = DELAY_LEVEL_2_S seconds,
env, default 3) so the test stays short; the check is "not before the delay, and within
the delay plus a margin". Wire: property DELAY=<level> in SEND_MESSAGE's properties.
"""

import os
import time

from cpp_common import (
    Inbox, create_topic, fail, finish, new_message, ok, producer, push_consumer, start,
    unique, wait_until,
)

LEVEL = 2
DELAY_S = float(os.environ.get("DELAY_LEVEL_2_S", "3"))

start("cpp_delay")
topic = unique("CppDelay")
create_topic(topic, 4)
p = producer(unique("CppDelayPG"))
inbox = Inbox()
push_consumer(unique("CppDelayCG"), topic, inbox)

# Wait until the consumer is running (fresh group: it starts at offset 0, so this probe
# is seen whenever it was sent).
p.send_sync(new_message(topic, "probe", "probe"))
wait_until(lambda: inbox.count(lambda m: m["body"] == "probe") >= 1, 25, "the probe message")
ok("consumer running")

t_send = time.monotonic()
r = p.send_sync(new_message(topic, "delayed", "d", "kd", {"p": "v"}, delay_level=LEVEL))
if r.status != 0:
    fail("delayed send: status %s" % r.status)
p.send_sync(new_message(topic, "now", "n", "kn"))
ok("sent one message with delay level %d (%.0f s on this broker) and one without" % (LEVEL, DELAY_S))

wait_until(lambda: inbox.count(lambda m: m["body"] == "now") >= 1, 10, "the undelayed message")
now_at = [m["at"] for m in inbox.snapshot() if m["body"] == "now"][0] - t_send
if inbox.count(lambda m: m["body"] == "delayed") and now_at < DELAY_S * 0.8:
    fail("the delayed message arrived together with the undelayed one")
ok("the undelayed message arrived after %.2f s" % now_at)

wait_until(lambda: inbox.count(lambda m: m["body"] == "delayed") >= 1, DELAY_S + 15,
           "the delayed message")
d = [m for m in inbox.snapshot() if m["body"] == "delayed"][0]
after = d["at"] - t_send
if after < DELAY_S - 0.5:
    fail("the delayed message arrived after %.2f s, before its %.0f s delay" % (after, DELAY_S))
if d["topic"] != topic or d["tags"] != "d" or d["keys"] != "kd":
    fail("the delayed message lost fields: topic %r tags %r keys %r" % (d["topic"], d["tags"], d["keys"]))
ok("the delay-level-%d message arrived after %.2f s (delay %.0f s) with topic, tags and keys intact"
   % (LEVEL, after, DELAY_S))
finish()
