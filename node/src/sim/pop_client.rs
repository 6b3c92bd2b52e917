//! The randomized POP scenario's clients and what they were told ([`PopOracle`]): producers
//! sending to a plain and an orderly topic, POP consumers that pop, ack, batch-ack, change
//! the invisible time or drop what they got (it must come back after its invisible time), and
//! an orderly POP consumer that acks a prefix in order. Every SUCCESS answer to an ack is
//! recorded with the checkpoint it names, so the driver (`sim::pop_crash`) can hold the
//! broker to it after each crash and at the end; every delivery is checked against the acks
//! answered before its pop was sent.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::{Decode, Encode};
use ringmq_wire::command::{
    is_retry_topic, AckHandles, AckRequest, BatchAckRequest, BatchAckResponse,
    ChangeInvisibleTimeRequest, ChangeInvisibleTimeResponse, FilterType, PopInitMode, PopRequest,
    PopResponse, ReceiptHandle, Response,
};
use ringmq_wire::record;

use crate::io::rt;

use super::client::{self, Rpc, Shared, CALL_TIMEOUT_MS};
use super::cluster::MASTER_ADDR;

/// The plain topic (queues 0..[`QUEUES`]) and its POP group.
pub const TOPIC: &str = "SimPopQ";
pub const GROUP: &str = "sim-popc";
pub const QUEUES: u32 = 4;
/// The orderly topic (queues 0..[`FIFO_QUEUES`]), popped with `order=true` by its own group.
pub const FIFO_TOPIC: &str = "SimPopFifo";
pub const FIFO_GROUP: &str = "sim-popc-fifo";
pub const FIFO_QUEUES: u32 = 2;
/// Invisible times are drawn from `INVISIBLE_MS_MIN..INVISIBLE_MS_MAX` (pops and changes).
pub const INVISIBLE_MS_MIN: u64 = 1_000;
pub const INVISIBLE_MS_MAX: u64 = 4_000;

/// A checkpoint's offset an ack named: (group, topic, queue, start offset, pop time, offset),
/// as the broker's ack record keys it.
pub type AckId = (String, String, u32, u64, i64, u64);
/// A stored record: (topic, queue, queue offset).
pub type Instance = (String, u32, u64);

/// What the log said of an acknowledged ack after the crashes since its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckState {
    /// Not looked for yet (no crash since its answer).
    Pending,
    /// Its record was in the log the master recovered.
    InLog,
    /// ASYNC_FLUSH: a power loss (the crash numbered here) took its record.
    Forgotten(u32),
}

/// An ack the broker answered SUCCESS (ACK_MESSAGE, or BATCH_ACK_MESSAGE with no refusal).
#[derive(Debug, Clone)]
pub struct AckRec {
    pub body: Vec<u8>,
    pub id: AckId,
    pub answered_ns: u64,
    /// Master crashes before the answer.
    pub crashes: u32,
    pub state: AckState,
}

/// A delivery of a body whose ack was answered SUCCESS before the pop was sent; judged at the
/// end (`sim::pop_crash`: the at-least-once window).
#[derive(Debug, Clone)]
pub struct Suspect {
    pub ack: usize,
    pub instance: Instance,
    pub pop_sent_ns: u64,
    /// Master crashes before the pop was sent.
    pub crashes: u32,
}

/// Counters for the report.
#[derive(Debug, Clone, Copy, Default)]
pub struct PopCounts {
    pub deliveries: u64,
    pub retry_deliveries: u64,
    pub orderly_deliveries: u64,
    pub acks_ok: u64,
    pub batch_acks_ok: u64,
    pub changes_ok: u64,
    pub dropped: u64,
    pub acks_refused: u64,
    /// Acks with no answer, or an answer that says neither SUCCESS nor INVALID_RECEIPT_HANDLE.
    pub acks_unknown: u64,
    pub excused_power_loss: u64,
    pub excused_duplicate: u64,
    pub dead_lettered: u64,
}

/// What the POP consumers were told and saw.
#[derive(Debug, Default)]
pub struct PopOracle {
    pub acks: Vec<AckRec>,
    pub acks_of: BTreeMap<Vec<u8>, Vec<usize>>,
    /// Bodies an ack was sent for whose outcome is unknown (it may have been applied).
    pub unknown: BTreeSet<Vec<u8>>,
    pub delivered: BTreeMap<Vec<u8>, u32>,
    /// When the send of each acknowledged body was started (virtual ns).
    pub send_started: BTreeMap<Vec<u8>, u64>,
    pub suspects: Vec<Suspect>,
    /// Master crashes so far (set by the driver).
    pub crashes: u32,
    /// The quiet period: producers stop, consumers ack everything they get.
    pub quiet: bool,
    /// [`GROUP`] starts from each queue's end (`PopInitMode::Max`, by the seed), not from
    /// its start: it is owed only what was sent after a pop of it was answered.
    pub init_max: bool,
    /// When [`GROUP`]'s pops were answered (SUCCESS or PULL_NOT_FOUND): after the first the
    /// broker holds a position for the group in every queue of [`TOPIC`].
    pub answers_ns: Vec<u64>,
    /// Queues of [`TOPIC`] whose position for [`GROUP`] a power loss took (ASYNC_FLUSH: no
    /// position or checkpoint record left, none in the offsets file), and when: from then on
    /// the group is owed only what was sent after its next answered pop.
    pub positions_forgotten_ns: BTreeMap<u32, u64>,
    pub counts: PopCounts,
}

pub type OracleRef = Rc<RefCell<PopOracle>>;

impl PopOracle {
    /// Whether [`GROUP`] (starting from the end) is owed a record of `queue` of [`TOPIC`]
    /// whose send started at `started_ns`: a pop was answered after the queue's position was
    /// last forgotten and before the send started.
    pub fn owed_from_end(&self, queue: u32, started_ns: u64) -> bool {
        let since = self
            .positions_forgotten_ns
            .get(&queue)
            .copied()
            .unwrap_or(0);
        self.answers_ns
            .iter()
            .any(|&a| a >= since && a < started_ns)
    }
}

fn master() -> SocketAddr {
    SocketAddr::from(MASTER_ADDR)
}

fn now_ns(shared: &Shared) -> u64 {
    shared.world.now_ns()
}

fn draw(shared: &Shared, n: u64) -> u64 {
    shared.world.with_rng(|r| r.below(n))
}

fn fail(shared: &Shared, what: String) {
    shared.checks.borrow_mut().failures.push(what);
}

/// Sends single records and small batches to both topics until the quiet period.
pub async fn producer(shared: Shared, oracle: OracleRef, id: u32) {
    let mut rpc = Rpc::new(master());
    let mut seq = 0u64;
    while !oracle.borrow().quiet {
        let (topic, queues) = if draw(&shared, 4) == 0 {
            (FIFO_TOPIC, FIFO_QUEUES)
        } else {
            (TOPIC, QUEUES)
        };
        let queue = draw(&shared, u64::from(queues)) as u32;
        let n = if draw(&shared, 4) == 0 {
            1 + draw(&shared, 4)
        } else {
            1
        };
        let bodies: Vec<Vec<u8>> = (0..n)
            .map(|i| format!("pop-p{id}-{}", seq + i).into_bytes())
            .collect();
        seq += n;
        let sent_ns = now_ns(&shared);
        if client::send(&shared, &mut rpc, topic, queue, &bodies, &[], false).await {
            let mut o = oracle.borrow_mut();
            for b in bodies {
                o.send_started.insert(b, sent_ns);
            }
        }
        rt::sleep(Duration::from_millis(20 + draw(&shared, 100))).await;
    }
}

/// One popped message and its receipt handle.
#[derive(Debug, Clone)]
struct Got {
    body: Vec<u8>,
    topic: String,
    queue: u32,
    offset: u64,
    handle: ReceiptHandle,
}

impl Got {
    fn ack_id(&self, group: &str) -> AckId {
        (
            group.to_string(),
            self.topic.clone(),
            self.queue,
            self.handle.start_offset,
            self.handle.pop_time_ms,
            self.offset,
        )
    }
}

/// A plain POP consumer of [`TOPIC`] (and its pop retry topic).
pub async fn consumer(shared: Shared, oracle: OracleRef) {
    let mut rpc = Rpc::new(master());
    // Messages whose invisible time was changed: acked (or dropped) at their time.
    let mut later: Vec<(u64, Got)> = Vec::new();
    loop {
        let quiet = oracle.borrow().quiet;
        let now = now_ns(&shared);
        let (due, wait): (Vec<_>, Vec<_>) =
            later.drain(..).partition(|(at, _)| quiet || *at <= now);
        later = wait;
        for (_, g) in due {
            if quiet || draw(&shared, 10) < 7 {
                ack(&shared, &oracle, &mut rpc, GROUP, &g).await;
            } else {
                oracle.borrow_mut().counts.dropped += 1;
            }
        }
        let got = pop(&shared, &oracle, &mut rpc, GROUP, TOPIC, false).await;
        let mut batches: BTreeMap<(String, u32), Vec<Got>> = BTreeMap::new();
        for g in got {
            let roll = if oracle.borrow().quiet {
                0
            } else {
                draw(&shared, 100)
            };
            match roll {
                0..=44 => {
                    ack(&shared, &oracle, &mut rpc, GROUP, &g).await;
                }
                45..=64 => batches
                    .entry((g.topic.clone(), g.queue))
                    .or_default()
                    .push(g),
                65..=79 => {
                    let ms = INVISIBLE_MS_MIN + draw(&shared, INVISIBLE_MS_MAX - INVISIBLE_MS_MIN);
                    if let Some(moved) = change(&oracle, &mut rpc, &g, ms).await {
                        let at = now_ns(&shared) + draw(&shared, ms * 3 / 2) * 1_000_000;
                        later.push((at, moved));
                    }
                }
                _ => oracle.borrow_mut().counts.dropped += 1,
            }
        }
        for ((topic, queue), gs) in batches {
            batch_ack(&shared, &oracle, &mut rpc, &topic, queue, &gs).await;
        }
    }
}

/// The orderly POP consumer of [`FIFO_TOPIC`]: acks some of each queue's messages in any
/// order (acks of an orderly pop need not follow offset order; all of them in the quiet
/// period) and drops the rest. A queue hands its messages out in offset order, passing over
/// the ones acked before a rewind.
pub async fn orderly_consumer(shared: Shared, oracle: OracleRef) {
    let mut rpc = Rpc::new(master());
    loop {
        let got = pop(&shared, &oracle, &mut rpc, FIFO_GROUP, FIFO_TOPIC, true).await;
        let mut by_queue: BTreeMap<u32, Vec<Got>> = BTreeMap::new();
        for g in got {
            by_queue.entry(g.queue).or_default().push(g);
        }
        for (queue, mut gs) in by_queue {
            if gs.windows(2).any(|w| w[1].offset <= w[0].offset) {
                let offsets: Vec<u64> = gs.iter().map(|g| g.offset).collect();
                fail(
                    &shared,
                    format!("orderly POP of {FIFO_TOPIC}/{queue} handed out offsets {offsets:?}"),
                );
            }
            let quiet = oracle.borrow().quiet;
            if !quiet {
                // A random order, then a random prefix of it: acks out of offset order,
                // with holes.
                for i in (1..gs.len()).rev() {
                    let j = draw(&shared, i as u64 + 1) as usize;
                    gs.swap(i, j);
                }
            }
            let take = if quiet {
                gs.len()
            } else {
                draw(&shared, gs.len() as u64 + 1) as usize
            };
            oracle.borrow_mut().counts.dropped += (gs.len() - take) as u64;
            for g in &gs[..take] {
                if !ack(&shared, &oracle, &mut rpc, FIFO_GROUP, g).await {
                    break;
                }
            }
        }
    }
}

/// One pop (long-polling up to 1 s): the messages it handed out, each checked on arrival.
async fn pop(
    shared: &Shared,
    oracle: &OracleRef,
    rpc: &mut Rpc,
    group: &str,
    topic: &str,
    order: bool,
) -> Vec<Got> {
    let invisible_ms = INVISIBLE_MS_MIN + draw(shared, INVISIBLE_MS_MAX - INVISIBLE_MS_MIN);
    let init_max = group == GROUP && oracle.borrow().init_max;
    let h = PopRequest {
        consumer_group: group.into(),
        topic: topic.into(),
        queue_id: -1,
        max_messages: 1 + draw(shared, 16) as u32,
        invisible_time_ms: invisible_ms,
        poll_time_ms: 1_000,
        filter_type: FilterType::Tag,
        expression: "*".into(),
        init_mode: if init_max {
            PopInitMode::Max
        } else {
            PopInitMode::Min
        },
        order,
    };
    let sent_ns = now_ns(shared);
    let answer = rpc
        .call(RequestCode::PopMessage, &h, &[], CALL_TIMEOUT_MS)
        .await;
    if let Ok(a) = &answer {
        if group == GROUP && matches!(a.status, Status::Success | Status::PullNotFound) {
            let now = now_ns(shared);
            oracle.borrow_mut().answers_ns.push(now);
        }
    }
    let a = match answer {
        Ok(a) if a.status == Status::Success => a,
        Ok(a) if a.status == Status::PullNotFound => return Vec::new(),
        _ => {
            rt::sleep(Duration::from_millis(200)).await;
            return Vec::new();
        }
    };
    let Some(f) = Response::<PopResponse>::decode(&a.header)
        .ok()
        .and_then(|r| r.fields)
    else {
        fail(shared, "a POP answered SUCCESS without its fields".into());
        return Vec::new();
    };
    let mut first: BTreeMap<(String, u32), u64> = BTreeMap::new();
    let mut out = Vec::new();
    for r in record::iter(&a.body) {
        let Ok(r) = r else {
            fail(shared, "a POP answer holds an undecodable record".into());
            return Vec::new();
        };
        let start = *first
            .entry((r.topic.to_string(), r.queue_id))
            .or_insert(r.queue_offset);
        let g = Got {
            body: r.body.to_vec(),
            topic: r.topic.to_string(),
            queue: r.queue_id,
            offset: r.queue_offset,
            handle: ReceiptHandle {
                start_offset: start,
                pop_time_ms: f.pop_time_ms,
                invisible_time_ms: f.invisible_time_ms,
                revive_shard: f.revive_shard,
                retry: is_retry_topic(r.topic),
                broker_name: "broker-a".into(),
                queue_id: r.queue_id,
                queue_offset: r.queue_offset,
            },
        };
        delivered(shared, oracle, &g, sent_ns, order);
        out.push(g);
    }
    out
}

/// Checks a delivery: a body some producer sent, and not one whose ack was answered SUCCESS
/// before this pop was sent (a suspect, judged at the end; at once when no crash came
/// between and it is the very record acked).
fn delivered(shared: &Shared, oracle: &OracleRef, g: &Got, pop_sent_ns: u64, order: bool) {
    if !shared.oracle.borrow().sent.contains(&g.body) {
        fail(
            shared,
            format!(
                "POP delivered {:?} ({}/{} offset {}), which no producer sent",
                String::from_utf8_lossy(&g.body),
                g.topic,
                g.queue,
                g.offset
            ),
        );
        return;
    }
    let mut o = oracle.borrow_mut();
    o.counts.deliveries += 1;
    o.counts.retry_deliveries += u64::from(g.handle.retry);
    o.counts.orderly_deliveries += u64::from(order);
    *o.delivered.entry(g.body.clone()).or_default() += 1;
    let instance = (g.topic.clone(), g.queue, g.offset);
    let crashes = o.crashes;
    let earlier: Vec<usize> = o
        .acks_of
        .get(&g.body)
        .map(|v| {
            v.iter()
                .copied()
                .filter(|&i| o.acks[i].answered_ns < pop_sent_ns)
                .collect()
        })
        .unwrap_or_default();
    for i in earlier {
        let a = &o.acks[i];
        let same = (a.id.1.clone(), a.id.2, a.id.5) == instance;
        if same && a.crashes == crashes {
            let what = format!(
                "(b) {:?} ({}/{} offset {}) delivered again by a pop sent at {} ms; its ack \
                 was answered SUCCESS at {} ms, with no crash between",
                String::from_utf8_lossy(&g.body),
                g.topic,
                g.queue,
                g.offset,
                pop_sent_ns / 1_000_000,
                a.answered_ns / 1_000_000
            );
            drop(o);
            fail(shared, what);
            return;
        }
        o.suspects.push(Suspect {
            ack: i,
            instance: instance.clone(),
            pop_sent_ns,
            crashes,
        });
    }
}

fn record_ack(shared: &Shared, oracle: &OracleRef, group: &str, g: &Got) {
    let mut o = oracle.borrow_mut();
    let rec = AckRec {
        body: g.body.clone(),
        id: g.ack_id(group),
        answered_ns: now_ns(shared),
        crashes: o.crashes,
        state: AckState::Pending,
    };
    let i = o.acks.len();
    o.acks.push(rec);
    o.acks_of.entry(g.body.clone()).or_default().push(i);
}

/// ACK_MESSAGE; an ack whose answer is lost is sent once more half the time (a client
/// retrying). True when answered SUCCESS.
async fn ack(shared: &Shared, oracle: &OracleRef, rpc: &mut Rpc, group: &str, g: &Got) -> bool {
    let h = AckRequest {
        consumer_group: group.into(),
        topic: g.topic.clone(),
        queue_id: g.queue,
        extra_info: g.handle.to_string(),
        offset: g.offset,
    };
    for attempt in 0..2 {
        let answer = rpc
            .call(RequestCode::AckMessage, &h, &[], CALL_TIMEOUT_MS)
            .await;
        match answer {
            Ok(a) if a.status == Status::Success => {
                record_ack(shared, oracle, group, g);
                oracle.borrow_mut().counts.acks_ok += 1;
                return true;
            }
            Ok(a) if a.status == Status::InvalidReceiptHandle => {
                oracle.borrow_mut().counts.acks_refused += 1;
                return false;
            }
            Ok(_) => break,
            Err(_) if attempt == 0 && draw(shared, 2) == 0 => {}
            Err(_) => break,
        }
    }
    let mut o = oracle.borrow_mut();
    o.counts.acks_unknown += 1;
    o.unknown.insert(g.body.clone());
    false
}

/// BATCH_ACK_MESSAGE of one queue's messages: SUCCESS with no refusal acks each.
async fn batch_ack(
    shared: &Shared,
    oracle: &OracleRef,
    rpc: &mut Rpc,
    topic: &str,
    queue: u32,
    gs: &[Got],
) {
    let h = BatchAckRequest {
        consumer_group: GROUP.into(),
        topic: topic.into(),
        queue_id: queue,
    };
    let body = AckHandles {
        handles: gs.iter().map(|g| g.handle.to_string()).collect(),
    };
    let Ok(body) = body.to_vec() else {
        fail(shared, "the simulator could not encode a batch ack".into());
        return;
    };
    let answer = rpc
        .call(RequestCode::BatchAckMessage, &h, &body, CALL_TIMEOUT_MS)
        .await;
    let fields = answer.as_ref().ok().and_then(|a| {
        (a.status == Status::Success)
            .then(|| Response::<BatchAckResponse>::decode(&a.header).ok())
            .flatten()
            .and_then(|r| r.fields)
    });
    match fields {
        Some(f) if f.refused == 0 && f.acked as usize == gs.len() => {
            for g in gs {
                record_ack(shared, oracle, GROUP, g);
            }
            oracle.borrow_mut().counts.batch_acks_ok += gs.len() as u64;
        }
        Some(f) if f.acked == 0 => {
            oracle.borrow_mut().counts.acks_refused += gs.len() as u64;
        }
        // Some acked, some refused: which is unknown.
        _ => {
            let mut o = oracle.borrow_mut();
            o.counts.acks_unknown += gs.len() as u64;
            o.unknown.extend(gs.iter().map(|g| g.body.clone()));
        }
    }
}

/// CHANGE_MESSAGE_INVISIBLETIME: the message with its new receipt handle, if answered
/// SUCCESS (else it is left to expire).
async fn change(oracle: &OracleRef, rpc: &mut Rpc, g: &Got, invisible_ms: u64) -> Option<Got> {
    let h = ChangeInvisibleTimeRequest {
        consumer_group: GROUP.into(),
        topic: g.topic.clone(),
        queue_id: g.queue,
        extra_info: g.handle.to_string(),
        offset: g.offset,
        invisible_time_ms: invisible_ms,
    };
    let a = rpc
        .call(
            RequestCode::ChangeMessageInvisibleTime,
            &h,
            &[],
            CALL_TIMEOUT_MS,
        )
        .await
        .ok()?;
    if a.status != Status::Success {
        return None;
    }
    let f = Response::<ChangeInvisibleTimeResponse>::decode(&a.header)
        .ok()?
        .fields?;
    oracle.borrow_mut().counts.changes_ok += 1;
    let mut moved = g.clone();
    moved.handle = ReceiptHandle {
        start_offset: g.offset,
        pop_time_ms: f.pop_time_ms,
        invisible_time_ms: f.invisible_time_ms,
        revive_shard: f.revive_shard,
        ..g.handle.clone()
    };
    Some(moved)
}
