"""Mixed traffic between the C++ client and ringmq's native protocol (ringmq-ctl):

1. C++ producer -> native consumer (`ringmq-ctl consume`): same unique id, tag, keys,
   properties and body; the send's offset msg id is the stored record's msg id.
2. native producer (`ringmq-ctl send`) -> C++ push consumer: same id, tag, keys,
   properties, body.
3. One group shared by both: the native consumer commits part of a topic for group G
   (`ringmq-ctl consume -g G`), then a C++ push consumer of G receives exactly the rest.
4. A delayed native send (`ringmq-ctl send --delay-level 2`) reaches the C++ consumer
   after the delay.
"""

import os
import time

from cpp_common import (
    Inbox, create_topic, ctl_json, fail, finish, new_message, ok, producer, push_consumer,
    start, unique, wait_until,
)

DELAY_S = float(os.environ.get("DELAY_LEVEL_2_S", "3"))

start("cpp_mixed")
p = producer(unique("CppMixPG"))

# 1. C++ -> native
t1 = unique("CppToNative")
create_topic(t1, 4)
results = {}
for i in range(6):
    body = "c2n-%d" % i
    r = p.send_sync(new_message(t1, body, "TagX", "key%d other%d" % (i, i), {"p": "v%d" % i}))
    results[body] = r
msgs = ctl_json("consume", t1, "--wait", "2s", "--count", "50")["messages"]
by_body = {m["body"]: m for m in msgs}
if sorted(by_body) != sorted(results) or len(msgs) != len(results):
    fail("ringmq-ctl consume saw %s, want the 6 sent" % sorted(m["body"] for m in msgs))
for body, r in results.items():
    m = by_body[body]
    i = body.split("-")[1]
    if m.get("unique_key") != r.msg_id:
        fail("%s: native unique_key %r, the C++ send answered msg id %r" % (body, m.get("unique_key"), r.msg_id))
    if m.get("tag") != "TagX":
        fail("%s: native tag %r" % (body, m.get("tag")))
    if m.get("keys") != ["key%s" % i, "other%s" % i]:
        fail("%s: native keys %r" % (body, m.get("keys")))
    if m.get("properties", {}).get("p") != "v%s" % i:
        fail("%s: native properties %r" % (body, m.get("properties")))
    if r.offset != m.get("queue_offset"):
        fail("%s: the C++ send answered queue offset %r, stored at %r" % (body, r.offset, m.get("queue_offset")))
ok("6 C++ sends read by the native consumer with the same unique id, queue offset, tag, two keys, property")

# 2. native -> C++
t2 = unique("NativeToCpp")
create_topic(t2, 4)
native_ids = {}
for i in range(6):
    out = ctl_json("send", t2, "n2c-%d" % i, "--tag", "TagN", "-k", "nk%d" % i,
                   "--property", "q=w%d" % i)
    native_ids["n2c-%d" % i] = out["sent"]["unique_key"]
inbox = Inbox()
push_consumer(unique("CppMixCG"), t2, inbox, extra_props=("q",))
wait_until(lambda: len({m["body"] for m in inbox.snapshot()}) >= 6, 25,
           "the C++ consumer to receive the 6 native sends")
for m in inbox.snapshot():
    i = m["body"].split("-")[1]
    if m["id"] != native_ids[m["body"]]:
        fail("%s: C++ sees id %r, the native send answered %r" % (m["body"], m["id"], native_ids[m["body"]]))
    if (m["tags"], m["keys"], m["props"].get("q")) != ("TagN", "nk%s" % i, "w%s" % i):
        fail("%s: C++ sees tags %r keys %r q %r" % (m["body"], m["tags"], m["keys"], m["props"].get("q")))
ok("6 native sends received by the C++ consumer with the same id, tag, key, property")

# 3. one group, both protocols
t3 = unique("SharedGroup")
g3 = unique("SharedCG")
create_topic(t3, 2)
for i in range(10):
    p.send_sync(new_message(t3, "sg-%d" % i, "S"))
first = ctl_json("consume", t3, "-g", g3, "--count", "4", "--wait", "2s")["messages"]
native_bodies = {m["body"] for m in first}
if len(native_bodies) != 4:
    fail("the native consumer of group %s read %d messages, want 4" % (g3, len(native_bodies)))
ok("the native consumer read and committed 4 of 10 for group %s" % g3)
shared = Inbox()
push_consumer(g3, t3, shared, member="cpp-shared")
wait_until(lambda: len({m["body"] for m in shared.snapshot()}) >= 6, 25,
           "the C++ member of the same group to receive the other 6")
time.sleep(1.5)
cpp_bodies = [m["body"] for m in shared.snapshot()]
if set(cpp_bodies) & native_bodies:
    fail("the C++ member re-received what the native member committed: %s"
         % sorted(set(cpp_bodies) & native_bodies))
if sorted(set(cpp_bodies) | native_bodies) != sorted("sg-%d" % i for i in range(10)) or len(cpp_bodies) != 6:
    fail("the two members together got %s" % sorted(cpp_bodies + list(native_bodies)))
ok("the C++ member of the same group got exactly the 6 the native member had not committed")

# 4. delayed native send -> C++
t4 = unique("NativeDelay")
create_topic(t4, 2)
dinbox = Inbox()
push_consumer(unique("CppMixDelayCG"), t4, dinbox, member="delay")
ctl_json("send", t4, "probe", "--tag", "P")
wait_until(lambda: dinbox.count() >= 1, 25, "the probe on the delay topic")
t_send = time.monotonic()
ctl_json("send", t4, "native-delayed", "--tag", "D", "--delay-level", "2")
wait_until(lambda: dinbox.count(lambda m: m["body"] == "native-delayed") >= 1, DELAY_S + 15,
           "the delayed native message at the C++ consumer")
after = [m["at"] for m in dinbox.snapshot() if m["body"] == "native-delayed"][0] - t_send
if after < DELAY_S - 0.5:
    fail("the native delay-level-2 message reached the C++ consumer after %.2f s, before its %.0f s" % (after, DELAY_S))
ok("a native delay-level-2 send reached the C++ consumer after %.2f s (delay %.0f s)" % (after, DELAY_S))
finish()
