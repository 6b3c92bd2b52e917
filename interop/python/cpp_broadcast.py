"""C++ client: two members of one group in BROADCASTING mode each receive every message.

A broadcasting consumer keeps its offsets locally and starts at the queue's end, so probe
messages are sent until both members see them; then the real messages go out.
Wire: HEART_BEAT with messageModel 0 (BROADCASTING as an integer), pulls without a broker
offset commit.
"""

import time

from cpp_common import (
    Inbox, MessageModel, create_topic, fail, finish, new_message, ok, producer,
    push_consumer, start, unique,
)

start("cpp_broadcast")
topic = unique("CppBcast")
group = unique("CppBcastCG")
create_topic(topic, 4)
p = producer(unique("CppBcastPG"))
inbox = Inbox()
for member in ("A", "B"):
    push_consumer(group, topic, inbox, member=member, model=MessageModel.BROADCASTING)

deadline = time.monotonic() + 25
probes = 0
while True:
    p.send_sync(new_message(topic, "probe-%d" % probes, "probe"))
    probes += 1
    time.sleep(0.5)
    members = {m["member"] for m in inbox.snapshot() if m["body"].startswith("probe")}
    if members == {"A", "B"}:
        break
    if time.monotonic() > deadline:
        fail("broadcasting members never both received a probe (receivers: %s)" % sorted(members))
ok("both broadcasting members are consuming (after %d probes)" % probes)

t_real = time.monotonic()
bodies = ["real-%d" % i for i in range(20)]
for i, b in enumerate(bodies):
    p.send_sync(new_message(topic, b, "real", "k%d" % i))

deadline = time.monotonic() + 25
while True:
    got = [m for m in inbox.snapshot() if m["body"].startswith("real")]
    per = {mem: sorted(m["body"] for m in got if m["member"] == mem) for mem in ("A", "B")}
    if all(set(v) >= set(bodies) for v in per.values()):
        break
    if time.monotonic() > deadline:
        fail("not every member got all 20: A has %d, B has %d"
             % (len(set(per["A"])), len(set(per["B"]))))
    time.sleep(0.2)
time.sleep(1.0)
for mem in ("A", "B"):
    mine = [m["body"] for m in inbox.snapshot() if m["member"] == mem and m["body"].startswith("real")]
    if len(mine) != len(set(mine)):
        fail("member %s received some messages twice" % mem)
ok("each broadcasting member received all 20 messages once (%.1f s)" % (time.monotonic() - t_real))
finish()
