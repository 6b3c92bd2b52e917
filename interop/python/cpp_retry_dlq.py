"""C++ client: a listener that fails gets the message again from %RETRY%<group> (same id,
body, tags, keys; reconsume times counting up; the listener sees the original topic),
and after the group's retry limit the message is in %DLQ%<group>. A message whose
listener succeeds on its second delivery is not delivered again and not dead-lettered.

The broker runs with maxReconsumeTimes=MAX_RECONSUME (env, default 2) and short delay
levels, so three deliveries take a few seconds. Wire: CONSUMER_SEND_MSG_BACK (group,
delayLevel 0 as a JSON number, offset), sent to the message's store host.
The dead letter is read back with `ringmq-ctl consume %DLQ%<group>`.
"""

import os
import time

from cpp_common import (
    CONSUME_SUCCESS, RECONSUME_LATER, Inbox, create_topic, ctl_json, fail, finish,
    new_message, ok, producer, push_consumer, start, unique, wait_until,
)

MAX_RECONSUME = int(os.environ.get("MAX_RECONSUME", "2"))

start("cpp_retry_dlq")
topic = unique("CppRetry")
group = unique("CppRetryCG")
create_topic(topic, 2)
# The message that fails once has a topic and group of its own: the C API's listener
# answers for a whole pulled batch, so sharing a queue with the always-failing message
# would send it back too.
topic_once = unique("CppRetryOnce")
group_once = unique("CppRetryOnceCG")
create_topic(topic_once, 2)
p = producer(unique("CppRetryPG"))
r_fail = p.send_sync(new_message(topic, "always-fails", "TagF", "kf", {"p": "1"}))
r_once = p.send_sync(new_message(topic_once, "fails-once", "TagO", "ko", {"p": "2"}))
ok("sent one message whose listener always fails and one that fails once")


def answer(f):
    verdict = CONSUME_SUCCESS
    if f["body"] == "always-fails":
        verdict = RECONSUME_LATER
    if f["body"] == "fails-once" and f["reconsume_times"] == 0:
        verdict = RECONSUME_LATER
    print("delivery: %s reconsume_times=%d topic=%s queue=%d offset=%d id=%s -> %s"
          % (f["body"], f["reconsume_times"], f["topic"], f["queue_id"], f["queue_offset"],
             f["id"], "RECONSUME_LATER" if verdict else "CONSUME_SUCCESS"), flush=True)
    return verdict


inbox = Inbox()
push_consumer(group, topic, inbox, answer=answer)
push_consumer(group_once, topic_once, inbox, member="once", answer=answer)
want = MAX_RECONSUME + 1
wait_until(lambda: inbox.count(lambda m: m["body"] == "always-fails") >= want, 40,
           "%d deliveries of the failing message" % want)
wait_until(lambda: inbox.count(lambda m: m["body"] == "fails-once") >= 2, 20,
           "the second delivery of the message that fails once")

deliveries = [m for m in inbox.snapshot() if m["body"] == "always-fails"]
times = [m["reconsume_times"] for m in deliveries]
if times[:want] != list(range(want)):
    fail("reconsume times of the failing message's deliveries: %s, want %s"
         % (times, list(range(want))))
for m in deliveries:
    if m["id"] != r_fail.msg_id:
        fail("a retry came back with id %r, the send answered %r" % (m["id"], r_fail.msg_id))
    if (m["topic"], m["tags"], m["keys"]) != (topic, "TagF", "kf"):
        fail("a retry lost fields: topic %r tags %r keys %r" % (m["topic"], m["tags"], m["keys"]))
ok("the failing message came back %d times (reconsume times %s) with its id, topic, tags and keys"
   % (want - 1, times[:want]))

# Dead letter: %DLQ%<group> holds it after the last failure.
dlq = "%DLQ%" + group


def dead_letters():
    out = ctl_json("consume", dlq, "--wait", "1s", "--count", "10")
    return [m for m in out.get("messages", []) if m.get("body") == "always-fails"]


found = wait_until(dead_letters, 20, "the failing message in %s" % dlq, poll_s=1.0)
d = found[0]
if d.get("unique_key") != r_fail.msg_id:
    fail("the dead letter's unique key %r is not the sent id %r" % (d.get("unique_key"), r_fail.msg_id))
if d.get("tag") != "TagF" or d.get("keys") != ["kf"] or d.get("properties", {}).get("p") != "1":
    fail("the dead letter lost fields: %r" % {k: d.get(k) for k in ("tag", "keys", "properties")})
ok("the failing message is in %s with its id, tag, key and properties (ringmq-ctl consume)" % dlq)

time.sleep(3.0)
n_fail = inbox.count(lambda m: m["body"] == "always-fails")
if n_fail != want:
    fail("the failing message was delivered %d times, want %d (1 + %d retries)" % (n_fail, want, MAX_RECONSUME))
n_once = inbox.count(lambda m: m["body"] == "fails-once")
if n_once != 2:
    fail("the message that fails once was delivered %d times, want 2" % n_once)
once_retry = ctl_json("consume", "%RETRY%" + group_once, "--wait", "1s").get("messages", [])
if len(once_retry) != 1:
    fail("%%RETRY%%%s holds %d copies of the message that failed once, want 1"
         % (group_once, len(once_retry)))
once = [m for m in inbox.snapshot() if m["body"] == "fails-once"]
if once[1]["topic"] != topic_once or once[1]["id"] != r_once.msg_id:
    fail("the retry of the message that failed once: topic %r id %r" % (once[1]["topic"], once[1]["id"]))
ok("no further deliveries; the message that succeeded on its retry was delivered twice and "
   "sent back once")
finish()
