//! Pulls as a RocketMQ push consumer makes them: PULL_MESSAGE per queue, one outstanding
//! per queue, `maxMsgNums` = `--pull-batch`, sysFlag = subscription given (`*`, TAG) |
//! suspend (long poll, [`SUSPEND_MS`]) | commit offset (the offset consumed so far, once
//! there is one). The answer's `nextBeginOffset` is where the next pull starts; its body is
//! the stored records back to back, read with `record::iter` (CRC checked) and each body's
//! perf head timed. The queues (every read queue of every master in the remoting route) are
//! dealt to `--consumers` consumers in turn, each with its own connection per broker. A
//! queue starts at GET_MIN_OFFSET (`--from first`) or GET_MAX_OFFSET (`--from last`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ringmq_client::wire::record;
use ringmq_client::wire::remoting::code::{request as rc, response};
use ringmq_client::wire::remoting::frame::{Command, SerializeType};
use ringmq_client::StartPosition;

use super::conn::Conn;
use super::route;
use super::send::code_name;
use crate::deliveries::{Deliveries, RecvPlan};
use crate::payload;

/// How long the broker may hold a pull that found nothing (RocketMQ's push consumer asks
/// for 15 s; perf's native consumers long-poll 5 s).
pub const SUSPEND_MS: u32 = 5_000;
/// Pull sysFlag bits (RocketMQ `PullSysFlag`).
const FLAG_COMMIT_OFFSET: i32 = 0x1;
const FLAG_SUSPEND: i32 = 0x2;
const FLAG_SUBSCRIPTION: i32 = 0x4;
/// Beyond the suspension, how long an answer may take.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);
/// After a failed pull, before the next one.
const RETRY_PAUSE: Duration = Duration::from_millis(500);

/// One pull.
#[derive(Debug, Clone, Copy)]
pub struct PullAt<'a> {
    pub group: &'a str,
    pub topic: &'a str,
    pub queue_id: u32,
    pub offset: u64,
    pub max_messages: u32,
    /// The offset consumed so far, to commit.
    pub commit: Option<u64>,
}

/// What a pull's answer says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pulled {
    /// Records in the body; continue at `next`.
    Found {
        next: u64,
    },
    /// Nothing (PULL_NOT_FOUND, PULL_RETRY_IMMEDIATELY, PULL_OFFSET_MOVED): continue at `next`.
    Nothing {
        next: u64,
    },
    Failed {
        kind: String,
        detail: String,
    },
}

/// What a pull's body held.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Delivered {
    pub messages: u64,
    pub bytes: u64,
    /// Receipt minus the send time in each perf head, µs.
    pub latencies_us: Vec<u64>,
    /// Records without a perf head.
    pub foreign: u64,
}

/// The pull loops of a run.
#[derive(Debug)]
pub struct Pullers {
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Pullers {
    /// Looks the topic up, finds each queue's start and starts one pull loop per queue.
    pub async fn start(
        plan: &RecvPlan,
        st: SerializeType,
        sink: Arc<Deliveries>,
    ) -> Result<Pullers, String> {
        let brokers = route::lookup(&plan.target, &plan.topic, st).await?;
        let mut queues = Vec::new();
        for b in &brokers {
            queues.extend((0..b.read_queues).map(|q| (b.addr.clone(), q)));
        }
        // Consumer i's connection to each broker.
        let mut conns: BTreeMap<(usize, String), Arc<Conn>> = BTreeMap::new();
        let mut tasks = Vec::new();
        for (k, (addr, queue_id)) in queues.into_iter().enumerate() {
            let who = k % plan.consumers.max(1) as usize;
            let conn = match conns.get(&(who, addr.clone())) {
                Some(c) => Arc::clone(c),
                None => {
                    let c = Arc::new(Conn::connect(&addr, &plan.target.security).await?);
                    conns.insert((who, addr), Arc::clone(&c));
                    c
                }
            };
            let offset = start_offset(&conn, st, &plan.topic, queue_id, plan.from).await?;
            let lp = Loop {
                conn,
                st,
                group: plan.group.clone(),
                topic: plan.topic.clone(),
                queue_id,
                max_messages: plan.pull_batch,
                sink: Arc::clone(&sink),
            };
            tasks.push(tokio::spawn(lp.run(offset)));
        }
        Ok(Pullers { tasks })
    }

    /// Queues pulled.
    pub fn queues(&self) -> usize {
        self.tasks.len()
    }

    /// Stops every loop (a suspended pull is abandoned).
    pub fn shutdown(&self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// GET_MIN_OFFSET or GET_MAX_OFFSET of one queue.
async fn start_offset(
    conn: &Conn,
    st: SerializeType,
    topic: &str,
    queue_id: u32,
    from: StartPosition,
) -> Result<u64, String> {
    let code = match from {
        StartPosition::Last => rc::GET_MAX_OFFSET,
        _ => rc::GET_MIN_OFFSET,
    };
    let mut ext = ringmq_client::wire::remoting::ext::ExtFields::new();
    ext.insert("topic", topic);
    ext.insert("queueId", queue_id.to_string());
    let r = conn
        .request(Command::request(code, 0, ext), st, &[], ANSWER_TIMEOUT)
        .await?;
    if r.cmd.code != response::SUCCESS {
        return Err(format!(
            "offset of {topic} queue {queue_id}: {} {}",
            code_name(r.cmd.code),
            r.cmd.remark.unwrap_or_default()
        ));
    }
    r.cmd
        .ext("offset")
        .and_then(|o| o.trim().parse().ok())
        .ok_or_else(|| format!("offset of {topic} queue {queue_id}: no offset in the answer"))
}

/// One queue's pull loop.
struct Loop {
    conn: Arc<Conn>,
    st: SerializeType,
    group: String,
    topic: String,
    queue_id: u32,
    max_messages: u32,
    sink: Arc<Deliveries>,
}

impl Loop {
    async fn run(self, mut offset: u64) {
        let mut consumed: Option<u64> = None;
        let timeout = Duration::from_millis(u64::from(SUSPEND_MS)) + ANSWER_TIMEOUT;
        let mut failed_before = false;
        loop {
            let at = PullAt {
                group: &self.group,
                topic: &self.topic,
                queue_id: self.queue_id,
                offset,
                max_messages: self.max_messages,
                commit: consumed,
            };
            let answer = self.conn.request(request(&at), self.st, &[], timeout).await;
            let (pulled, body) = match answer {
                Ok(r) => (read_answer(&r.cmd), r.body),
                Err(detail) => (
                    Pulled::Failed {
                        kind: "Connection".into(),
                        detail,
                    },
                    bytes::Bytes::new(),
                ),
            };
            match pulled {
                Pulled::Found { next } => match deliveries(&body, payload::now_us()) {
                    Ok(d) => {
                        self.sink
                            .record_pulled(d.messages, d.bytes, &d.latencies_us, d.foreign);
                        offset = next;
                        consumed = Some(next);
                    }
                    Err(e) => {
                        self.fail(&mut failed_before, "BadRecords", &e).await;
                    }
                },
                Pulled::Nothing { next } => offset = next,
                Pulled::Failed { kind, detail } => {
                    self.fail(&mut failed_before, &kind, &detail).await;
                }
            }
        }
    }

    async fn fail(&self, failed_before: &mut bool, kind: &str, detail: &str) {
        self.sink.meter.error(1);
        if !*failed_before {
            eprintln!(
                "ringmq-perf: pull of {} queue {} failed ({kind}): {detail}",
                self.topic, self.queue_id
            );
            *failed_before = true;
        }
        tokio::time::sleep(RETRY_PAUSE).await;
    }
}

/// The PULL_MESSAGE request of `at`.
pub fn request(at: &PullAt<'_>) -> Command {
    let mut flag = FLAG_SUBSCRIPTION | FLAG_SUSPEND;
    if at.commit.is_some() {
        flag |= FLAG_COMMIT_OFFSET;
    }
    let mut ext = ringmq_client::wire::remoting::ext::ExtFields::new();
    let mut put = |k: &str, v: String| {
        ext.insert(k, v);
    };
    put("consumerGroup", at.group.into());
    put("topic", at.topic.into());
    put("queueId", at.queue_id.to_string());
    put("queueOffset", at.offset.to_string());
    put("maxMsgNums", at.max_messages.to_string());
    put("sysFlag", flag.to_string());
    put("commitOffset", at.commit.unwrap_or(0).to_string());
    put("suspendTimeoutMillis", SUSPEND_MS.to_string());
    put("subscription", "*".into());
    put("subVersion", "0".into());
    put("expressionType", "TAG".into());
    Command::request(rc::PULL_MESSAGE, 0, ext)
}

/// A pull's answer.
pub fn read_answer(cmd: &Command) -> Pulled {
    let next = cmd
        .ext("nextBeginOffset")
        .and_then(|v| v.trim().parse::<u64>().ok());
    match (cmd.code, next) {
        (response::SUCCESS, Some(next)) => Pulled::Found { next },
        (
            response::PULL_NOT_FOUND
            | response::PULL_RETRY_IMMEDIATELY
            | response::PULL_OFFSET_MOVED,
            Some(next),
        ) => Pulled::Nothing { next },
        (code, None) if code == response::SUCCESS || code == response::PULL_NOT_FOUND => {
            Pulled::Failed {
                kind: "BadAnswer".into(),
                detail: "the pull's answer has no nextBeginOffset".into(),
            }
        }
        (code, _) => Pulled::Failed {
            kind: code_name(code),
            detail: cmd.remark.clone().unwrap_or_default(),
        },
    }
}

/// The records of a pull's body, timed at `now_us`.
pub fn deliveries(body: &[u8], now_us: u64) -> Result<Delivered, String> {
    let mut d = Delivered::default();
    for r in record::iter(body) {
        let r = r.map_err(|e| format!("a pulled record: {e}"))?;
        d.messages += 1;
        d.bytes += r.body.len() as u64;
        match payload::parse(r.body) {
            Some(h) => d.latencies_us.push(now_us.saturating_sub(h.send_us)),
            None => d.foreign += 1,
        }
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::{BodyMaker, Head};

    #[test]
    fn a_pull_asks_with_its_subscription_and_commit() {
        let at = PullAt {
            group: "g",
            topic: "T",
            queue_id: 2,
            offset: 1024,
            max_messages: 256,
            commit: None,
        };
        let c = request(&at);
        assert_eq!(c.code, rc::PULL_MESSAGE);
        assert_eq!(c.ext("sysFlag"), Some("6"));
        assert_eq!(c.ext("queueOffset"), Some("1024"));
        assert_eq!(c.ext("maxMsgNums"), Some("256"));
        assert_eq!(c.ext("subscription"), Some("*"));
        let c = request(&PullAt {
            commit: Some(1000),
            ..at
        });
        assert_eq!(c.ext("sysFlag"), Some("7"));
        assert_eq!(c.ext("commitOffset"), Some("1000"));
    }

    #[test]
    fn answers_say_where_to_continue() {
        let mut found = Command::response(response::SUCCESS, 1, None);
        found.ext_fields.insert("nextBeginOffset", "300");
        assert_eq!(read_answer(&found), Pulled::Found { next: 300 });
        let mut none = found.clone();
        none.code = response::PULL_NOT_FOUND;
        assert_eq!(read_answer(&none), Pulled::Nothing { next: 300 });
        let bare = Command::response(response::SUCCESS, 1, None);
        assert!(matches!(read_answer(&bare), Pulled::Failed { .. }));
        let busy = Command::response(response::SYSTEM_BUSY, 1, None);
        assert!(matches!(read_answer(&busy), Pulled::Failed { kind, .. } if kind == "SYSTEM_BUSY"));
    }

    #[test]
    fn records_are_counted_and_timed() {
        let maker = BodyMaker::new(64);
        let mut buf = Vec::new();
        for seq in 0..3 {
            let body = maker.body(Head {
                producer: 1,
                seq,
                send_us: 1_000 + seq,
            });
            let m = record::Message {
                topic: "T",
                queue_id: 0,
                flag: 0,
                sys_flag: 0,
                born_timestamp_ms: 0,
                born_host: "127.0.0.1:1".parse().expect("address"),
                store_host_v6: false,
                reconsume_times: 0,
                prepared_transaction_offset: 0,
                body: &body,
                properties: &[],
            };
            record::encode(&m, &mut buf).expect("encodes");
        }
        let m = record::Message {
            topic: "T",
            queue_id: 0,
            flag: 0,
            sys_flag: 0,
            born_timestamp_ms: 0,
            born_host: "127.0.0.1:1".parse().expect("address"),
            store_host_v6: false,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: b"someone else's",
            properties: &[],
        };
        record::encode(&m, &mut buf).expect("encodes");
        let d = deliveries(&buf, 5_000).expect("decodes");
        assert_eq!(d.messages, 4);
        assert_eq!(d.bytes, 3 * 64 + 14);
        assert_eq!(d.latencies_us, vec![4_000, 3_999, 3_998]);
        assert_eq!(d.foreign, 1);
        // A truncated last record is an error, not a short count.
        assert!(deliveries(&buf[..buf.len() - 1], 0).is_err());
    }
}
