"""C++ client, transactions as far as this client can go.

rocketmq-client-cpp 1.2.3 (the 0.4.4 wheel) has no transaction producer in its C API, and
the C++ TransactionMQProducer in the library cannot be constructed through ctypes (its
constructor is inline and builds boost::asio members). What can be tested is the wire
half of it: a half (prepared) message sent by a plain producer — sysFlag
TransactionPreparedType set with ctypes on the MQMessage, properties TRAN_MSG=true and
PGROUP=<producer group> — is stored but never delivered while undecided, and the broker's
CHECK_TRANSACTION_STATE reaches the producer's connection with a header this client can
decode (msgId/transactionId = the message's unique id, offsetMsgId, commitLogOffset as
JSON strings) and the half message's record as body. The client logs what it decoded
(`checkTransactionState request: CheckTransactionStateRequestHeader: ...`); a plain
producer then declines to answer, so the half stays undecided.

The broker runs with short transactionTimeOut / transactionCheckInterval (1 s).
"""

import ctypes
import glob
import os
import re
import time

from cpp_common import (
    Inbox, create_topic, dll, fail, finish, new_message, ok, producer, push_consumer,
    start, unique, wait_until,
)

TRANSACTION_PREPARED_TYPE = 0x1 << 2

start("cpp_txn_checkback")
topic = unique("CppTxn")
pgroup = unique("CppTxnPG")
create_topic(topic, 2)
p = producer(pgroup)

set_sys_flag = dll._ZN8rocketmq9MQMessage10setSysFlagEi  # MQMessage::setSysFlag(int)
set_sys_flag.argtypes = [ctypes.c_void_p, ctypes.c_int]
set_sys_flag.restype = None

half = new_message(topic, "half", "TagH", "kh", {"TRAN_MSG": "true", "PGROUP": pgroup})
set_sys_flag(half._handle, TRANSACTION_PREPARED_TYPE)
r = p.send_sync(half)
if r.status != 0 or len(r.msg_id) != 32:
    fail("half message send: status %s msg id %r" % (r.status, r.msg_id))
ok("half message sent (sysFlag prepared, TRAN_MSG, PGROUP), msg id %s" % r.msg_id)
p.send_sync(new_message(topic, "plain", "TagP", "kp"))

inbox = Inbox()
# A producer's group reaches a broker only in a heartbeat. This client's producer sends its
# first one 10 ms after start (before its first send has learned any broker, when the
# machine is slow) and the next 30 s later. A consumer started in the producer's client
# instance (instance name DEFAULT, the producer's) sends a heartbeat for the whole instance
# as it starts, producer group included, to the brokers the half message's send learned.
push_consumer(unique("CppTxnCG"), topic, inbox, member="DEFAULT")
wait_until(lambda: inbox.count(lambda m: m["body"] == "plain") >= 1, 25, "the plain message")

log_glob = os.path.join(os.path.expanduser("~"), "logs", "rocketmq-cpp",
                        "%d_rocketmq-cpp.log*" % os.getpid())
pattern = re.compile(
    r"CheckTransactionStateRequestHeader: msgId:(\S*) transactionId:(\S*) "
    r"offsetMsgId:(\S*) commitLogOffset:(-?\d+) tranStateTableOffset:(-?\d+)")


def check_backs():
    found = []
    for path in glob.glob(log_glob):
        with open(path, errors="replace") as f:
            found += pattern.findall(f.read())
    return found


found = wait_until(check_backs, 30, "a CHECK_TRANSACTION_STATE decoded by the C++ client "
                   "(lines in %s)" % log_glob, poll_s=0.5)
msg_id, txn_id, offset_id, clo, _tsto = found[0]
if r.msg_id not in (msg_id, txn_id):
    fail("the check-back names msgId %r transactionId %r, the half was sent as %r"
         % (msg_id, txn_id, r.msg_id))
if not re.fullmatch(r"[0-9A-F]{32}", offset_id):
    fail("the check-back's offsetMsgId %r is not 32 hex digits (a JSON number is dropped by this client)"
         % offset_id)
if int(clo) <= 0 and offset_id[16:] != "0" * 16:
    fail("the check-back's commitLogOffset %s was not read (send it as a JSON string)" % clo)
ok("CHECK_TRANSACTION_STATE reached the producer: msgId %s transactionId %s offsetMsgId %s "
   "commitLogOffset %s" % (msg_id, txn_id, offset_id, clo))

time.sleep(2.0)
if inbox.count(lambda m: m["body"] == "half"):
    fail("the undecided half message was delivered to a consumer")
ok("the undecided half message was not delivered")
finish()
