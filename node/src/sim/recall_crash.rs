//! Recall of scheduled messages under crashes at random points (`ringmq-sim --scenario
//! recall`): one master (ASYNC_FLUSH or SYNC_FLUSH by the seed), two producers sending
//! scheduled messages (delays of 0.3-6 s) to a plain topic and recalling 40 % of them by
//! their recall handle (RECALL_MESSAGE), some before their due time and some after it (too
//! late). Every 100 ms the nemesis may `kill -9` the master or cut its power (unsynced bytes
//! dropped, or the last write torn); it restarts from its crash image at once or up to 2 s
//! later. Then the faults and the producers stop, and the run waits past the last due time.
//! "Delivered" is read from the master's log (a record of the real topic carrying
//! `TIMER_OUT_MS`): what any consumer of the topic would get.
//!
//! The recall invariants (docs/simulation.md, "Recall under crashes"):
//! - (a) every acknowledged scheduled send (not forgotten under ASYNC_FLUSH's power-loss
//!   window) that no recall was sent for, or whose recall was answered RECALL_TOO_LATE, is
//!   delivered by the end, never before its due time by the master's clock;
//! - (b) a message whose recall was answered SUCCESS is never delivered, unless ASYNC_FLUSH
//!   and a power loss after that answer took the recall record out of the log (checked at
//!   the restart: the record is gone); a recall that got no answer or another status may go
//!   either way;
//! - (c) no scheduled message is delivered twice; and after every restart each recall
//!   answered SUCCESS is in the recovered log, unless ASYNC_FLUSH and a power loss.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::Decode;
use ringmq_wire::command::{RecallRequest, Response, SendRequest, SendResponse};
use ringmq_wire::properties::{self, keys};
use ringmq_wire::recall::{Recall, RecallHandle, RECALL_TOPIC};
use ringmq_wire::record;
use ringmq_wire::schedule::TIMER_TOPIC;

use crate::config::FlushDiskType;
use crate::io::clock;
use crate::io::rt;
use crate::io::sim::{NetConfig, World};
use crate::planted::{self, Bug};
use crate::store::fault_disk::Crash;

use super::check;
use super::client::{self, Acked, Rpc, Shared, CALL_TIMEOUT_MS};
use super::cluster::{LoneMaster, CLIENTS, MASTER, MASTER_ADDR};
use super::{Options, Report, SLICE_MS};

/// The topic the scheduled messages are for.
pub const TOPIC: &str = "SimRecall";
/// The lone master's broker name (the recall handle names it).
const BROKER_NAME: &str = "broker-a";
/// Longest delay drawn, ms.
const DELAY_MS_MAX: u64 = 6_000;

/// What the recall scenario's clients did and saw.
#[derive(Debug, Clone, Copy, Default)]
pub struct RecallCounts {
    /// Recalls sent, answered SUCCESS, answered RECALL_TOO_LATE, with no clear answer.
    pub recalls_sent: u64,
    pub recalls_ok: u64,
    pub recalls_too_late: u64,
    pub recalls_unknown: u64,
    /// Recalls answered SUCCESS whose record a power loss took (their message may come).
    pub recalls_forgotten: u64,
    /// Scheduled messages delivered (distinct bodies).
    pub delivered: u64,
}

/// Where a recall stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RecallState {
    /// Sent, not answered yet.
    InFlight,
    /// Answered SUCCESS at this virtual ns.
    Ok(u64),
    /// Answered SUCCESS, then its record was lost to a power loss (ASYNC_FLUSH).
    Forgotten,
    /// RECALL_TOO_LATE: the message was delivered (it is expected again).
    TooLate,
    /// No answer, or another status: either outcome is allowed.
    Unknown,
}

#[derive(Debug)]
struct RecallEntry {
    body: Vec<u8>,
    state: RecallState,
}

#[derive(Default)]
struct RecallOracle {
    /// Timer queue offset of the scheduled record -> its recall.
    recalls: BTreeMap<u64, RecallEntry>,
    counts: RecallCounts,
    crashes: u32,
}

type OracleRef = Rc<RefCell<RecallOracle>>;

/// The flush policy a seed runs; a planted bug forces the one that shows it.
pub fn flush_for(seed: u64, bug: Option<Bug>) -> FlushDiskType {
    if bug == Some(Bug::RecallAckBeforeDurable)
        || crate::io::sim::Rng::new(seed ^ 0x8EC_A11).chance(0.5)
    {
        FlushDiskType::SyncFlush
    } else {
        FlushDiskType::AsyncFlush
    }
}

/// Runs one seed of the recall scenario.
pub fn run_one(opts: &Options) -> Report {
    let world = World::new(opts.seed, NetConfig::default());
    let entered = world.enter();
    planted::plant(opts.bug);
    let flush = flush_for(opts.seed, opts.bug);
    let mut report = Report {
        seed: opts.seed,
        mode: format!("recall/{}", flush.as_str()),
        events: 0,
        digest: 0,
        virtual_ms: 0,
        failure: None,
        crashes: 0,
        sends_ok: 0,
        pulled_records: 0,
        long_polls_woken: 0,
        fuzz_answered: 0,
        scheduled_delivered: 0,
        scheduled_acked: 0,
        route_fetches: 0,
        brokers_expired: 0,
        namesrv_restarts: 0,
        slave_pulls: 0,
        misrouted_sends: 0,
        epochs_acked: 0,
        faults: Vec::new(),
        pop: None,
        recall: None,
    };
    match RecallSim::start(&world, opts, flush) {
        Err(e) => report.failure = Some(format!("at 0 ms: {e}")),
        Ok(mut sim) => {
            let result = sim.run(opts.virtual_secs);
            report.failure = result
                .err()
                .map(|f| format!("at {} ms: {f}", world.now_ns() / 1_000_000));
            let o = sim.oracle.borrow();
            report.crashes = o.crashes;
            report.recall = Some(o.counts);
            report.scheduled_delivered = o.counts.delivered as usize;
            drop(o);
            report.sends_ok = sim.shared.checks.borrow().sends_ok;
            report.scheduled_acked = report.sends_ok as usize;
            report.faults = std::mem::take(&mut sim.faults);
            sim.lone.finish(&world);
        }
    }
    report.events = world.polls();
    report.digest = world.trace_digest();
    report.virtual_ms = world.now_ns() / 1_000_000;
    planted::plant(None);
    drop(entered);
    report
}

struct RecallSim {
    world: World,
    flush: FlushDiskType,
    lone: LoneMaster,
    shared: Shared,
    oracle: OracleRef,
    stop: Rc<Cell<bool>>,
    faults: Vec<String>,
    /// The master is down until this virtual ms, after a crash of this kind.
    down: Option<(u64, Crash)>,
    /// Bodies already delivered when the master lost power (their delivery's progress
    /// record may be lost with the torn write: they may be delivered again).
    at_power_loss: BTreeSet<Vec<u8>>,
}

impl RecallSim {
    fn start(world: &World, opts: &Options, flush: FlushDiskType) -> Result<Self, String> {
        let lone = LoneMaster::start(world, &opts.scratch_dir, "recall", opts.seed, flush, "")?;
        let shared = Shared::own_checks(world);
        let oracle = OracleRef::default();
        let stop = Rc::new(Cell::new(false));
        for id in 0..2 {
            world.spawn_on(
                CLIENTS,
                producer(shared.clone(), oracle.clone(), stop.clone(), id),
            );
        }
        Ok(RecallSim {
            world: world.clone(),
            flush,
            lone,
            shared,
            oracle,
            stop,
            faults: Vec::new(),
            down: None,
            at_power_loss: BTreeSet::new(),
        })
    }

    fn now_ms(&self) -> u64 {
        self.world.now_ns() / 1_000_000
    }

    fn master_now(&self) -> i64 {
        self.world.as_node(MASTER, clock::now_ms)
    }

    fn run(&mut self, virtual_secs: u64) -> Result<(), String> {
        for _ in 0..virtual_secs * 1000 / SLICE_MS {
            self.world.run_for(Duration::from_millis(SLICE_MS));
            self.after_slice()?;
            self.nemesis()?;
        }
        // Quiet: no faults, no new sends; wait past every due time (a send or recall in
        // flight may still be answered within the call timeout).
        if let Some((_, kind)) = self.down {
            self.restart(kind)?;
        }
        self.stop.set(true);
        self.world
            .run_for(Duration::from_millis(CALL_TIMEOUT_MS + 1_000));
        self.after_slice()?;
        let quiet_from = self.now_ms();
        loop {
            let last_due = self
                .shared
                .oracle
                .borrow()
                .scheduled
                .values()
                .map(|(_, d)| *d)
                .max()
                .unwrap_or(0);
            if self.master_now() > last_due + 3_000 || self.now_ms() - quiet_from > 30_000 {
                break;
            }
            self.world.run_for(Duration::from_secs(1));
            self.after_slice()?;
        }
        self.final_checks()
    }

    fn after_slice(&mut self) -> Result<(), String> {
        if let Some((node, msg)) = self.world.take_panics().into_iter().next() {
            return Err(format!("panic on node {node}: {msg}"));
        }
        for (node, why) in self.world.take_fail_stops() {
            self.faults.push(format!("fail-stop of node {node}: {why}"));
        }
        if let Some(f) = self.shared.checks.borrow().failures.first() {
            return Err(f.clone());
        }
        if self.lone.node.running.is_some() && self.world.is_dead(MASTER) {
            let kind = self.draw_crash();
            self.crash(kind, 0)?;
        } else if let Some((at, kind)) = self.down {
            if self.now_ms() >= at {
                self.restart(kind)?;
            }
        }
        Ok(())
    }

    fn draw_crash(&self) -> Crash {
        match self.world.with_rng(|r| r.below(3)) {
            0 => Crash::KeepWritten,
            1 => Crash::DropUnsynced,
            _ => Crash::TearLast,
        }
    }

    fn nemesis(&mut self) -> Result<(), String> {
        if self.down.is_some() {
            return Ok(());
        }
        let roll = self.world.with_rng(|r| r.below(1000));
        if roll < 30 {
            let kind = self.draw_crash();
            let down = self.world.with_rng(|r| {
                if r.chance(0.7) {
                    0
                } else {
                    200 + r.below(1_800)
                }
            });
            return self.crash(kind, down);
        }
        Ok(())
    }

    /// Crashes the master (after checking (b) and (c) on what it delivered so far); restarts
    /// it at once (`down_ms` 0) or when its time is up.
    fn crash(&mut self, kind: Crash, down_ms: u64) -> Result<(), String> {
        let delivered = self.check_deliveries(None)?;
        if kind != Crash::KeepWritten {
            self.at_power_loss.extend(delivered.into_keys());
        }
        let now = self.now_ms();
        self.oracle.borrow_mut().crashes += 1;
        self.faults.push(format!(
            "master crash ({kind:?}) at {now} ms, down for {down_ms} ms"
        ));
        self.lone.node.crash(&self.world, kind);
        if down_ms > 0 {
            self.down = Some((now + down_ms, kind));
            return Ok(());
        }
        self.restart(kind)
    }

    /// Restarts the master and checks its recovered log under the crash's promise.
    fn restart(&mut self, kind: Crash) -> Result<(), String> {
        self.down = None;
        self.lone
            .node
            .start(&self.world)
            .map_err(|e| format!("master restart after a crash: {e}"))?;
        let shard = self
            .lone
            .node
            .shard()
            .ok_or("master not running after restart")?;
        let store = shard.store.borrow();
        let log = check::scan_log(&store)?;
        check::queues_match_log(&store, &log)?;
        let promised = kind == Crash::KeepWritten || self.flush == FlushDiskType::SyncFlush;
        if promised {
            check::acked_present(&store, &self.shared.oracle.borrow(), "master after crash")?;
        } else {
            check::forget_lost(&store, &mut self.shared.oracle.borrow_mut());
        }
        check::schedule_kept(&store, &log, &self.shared.oracle.borrow(), i64::MIN)?;
        // (c): the recalls answered SUCCESS are in the log, or forgotten (power loss).
        let mut in_log = BTreeSet::new();
        for ((topic, _, _), pos) in &log {
            if topic != RECALL_TOPIC {
                continue;
            }
            let bytes = store
                .read_record(*pos)
                .map_err(|e| format!("recall record at {pos}: {e}"))?;
            let rec = record::decode_one(&bytes).map_err(|e| format!("record at {pos}: {e}"))?;
            let r = Recall::decode(rec.body).map_err(|e| format!("record at {pos}: {e}"))?;
            in_log.insert(r.timer_cq_offset);
        }
        let mut o = self.oracle.borrow_mut();
        let mut forgotten = 0;
        for (offset, r) in o.recalls.iter_mut() {
            if let RecallState::Ok(at_ns) = r.state {
                if in_log.contains(offset) {
                    continue;
                }
                if promised {
                    return Err(format!(
                        "(c) the recall of {:?} (timer offset {offset}) answered SUCCESS at {} \
                         ms is not in the log recovered after a {kind:?} crash ({})",
                        String::from_utf8_lossy(&r.body),
                        at_ns / 1_000_000,
                        self.flush.as_str()
                    ));
                }
                r.state = RecallState::Forgotten;
                forgotten += 1;
            }
        }
        o.counts.recalls_forgotten += forgotten;
        Ok(())
    }

    /// The delivered scheduled messages of the real topic (body -> times stored), after
    /// checking: nothing early, every one sent by a producer, (b) nothing whose recall was
    /// answered SUCCESS, (c) nothing twice (outside the power-loss window); and with `due_by_ms`, (a) every acknowledged one
    /// due by then (and not recalled) delivered.
    fn check_deliveries(&self, due_by_ms: Option<i64>) -> Result<BTreeMap<Vec<u8>, u32>, String> {
        let Some(shard) = self.lone.node.shard() else {
            return Ok(BTreeMap::new());
        };
        let store = shard.store.borrow();
        let log = check::scan_log(&store)?;
        check::schedule_kept(
            &store,
            &log,
            &self.shared.oracle.borrow(),
            due_by_ms.unwrap_or(i64::MIN),
        )?;
        let mut delivered: BTreeMap<Vec<u8>, u32> = BTreeMap::new();
        for ((topic, q, off), pos) in &log {
            if topic != TOPIC {
                continue;
            }
            let bytes = store
                .read_record(*pos)
                .map_err(|e| format!("record at {pos}: {e}"))?;
            let rec = record::decode_one(&bytes).map_err(|e| format!("record at {pos}: {e}"))?;
            let n = delivered.entry(rec.body.to_vec()).or_default();
            *n += 1;
            if *n > 1 && !self.at_power_loss.contains(rec.body) {
                return Err(format!(
                    "(c) {:?} delivered twice (the second time at {topic}/{q} offset {off})",
                    String::from_utf8_lossy(rec.body)
                ));
            }
        }
        for (offset, r) in &self.oracle.borrow().recalls {
            if let RecallState::Ok(at_ns) = r.state {
                if delivered.contains_key(&r.body) {
                    return Err(format!(
                        "(b) {:?} (timer offset {offset}) is delivered, its recall was \
                         answered SUCCESS at {} ms ({})",
                        String::from_utf8_lossy(&r.body),
                        at_ns / 1_000_000,
                        self.flush.as_str()
                    ));
                }
            }
        }
        Ok(delivered)
    }

    fn final_checks(&mut self) -> Result<(), String> {
        let due_by = self.master_now() - 1_000;
        let delivered = self.check_deliveries(Some(due_by))?;
        let mut o = self.oracle.borrow_mut();
        o.counts.delivered = delivered.len() as u64;
        if o.recalls.values().any(|r| r.state == RecallState::InFlight) {
            return Err("a recall is still unanswered after the quiet period".to_string());
        }
        Ok(())
    }
}

/// A producer: scheduled sends, 40 % of them recalled after a pause drawn from 0 to 1 s
/// past the delay (some too late).
async fn producer(shared: Shared, oracle: OracleRef, stop: Rc<Cell<bool>>, id: u32) {
    let mut rpc = Rpc::new(SocketAddr::from(MASTER_ADDR));
    let mut n = 0u64;
    while !stop.get() {
        n += 1;
        let body = format!("rc-{id}-{n}").into_bytes();
        let (delay, recall_after) = shared.world.with_rng(|r| {
            let d = 300 + r.below(DELAY_MS_MAX - 300);
            (d, r.chance(0.4).then(|| r.below(d + 1_000)))
        });
        let Some((timer_offset, handle)) = send(&shared, &mut rpc, id % 2, &body, delay).await
        else {
            rt::sleep(Duration::from_millis(50)).await;
            continue;
        };
        if let Some(after) = recall_after {
            rt::sleep(Duration::from_millis(after)).await;
            recall(&shared, &oracle, &mut rpc, timer_offset, body, &handle).await;
        }
        let pause = shared.world.with_rng(|r| 20 + r.below(200));
        rt::sleep(Duration::from_millis(pause)).await;
    }
}

/// One scheduled send; on SUCCESS records it in the oracle and returns its timer queue
/// offset and recall handle.
async fn send(
    shared: &Shared,
    rpc: &mut Rpc,
    queue: u32,
    body: &[u8],
    delay_ms: u64,
) -> Option<(u64, String)> {
    let mut props = Vec::new();
    properties::encode(
        [(keys::TIMER_DELAY_MS, delay_ms.to_string().as_str())],
        &mut props,
    )
    .expect("the simulator's own properties encode");
    let mut batch = Vec::new();
    let msg = client::sim_message(TOPIC, queue, body, &props);
    record::encode(&msg, &mut batch).expect("the simulator's own record encodes");
    shared.oracle.borrow_mut().sent.insert(body.to_vec());
    let h = SendRequest {
        producer_group: "sim-producers".to_string(),
        topic: TOPIC.to_string(),
        queue_id: queue,
        batch: false,
        record_count: 1,
    };
    let ans = rpc
        .call(RequestCode::SendMessage, &h, &batch, CALL_TIMEOUT_MS)
        .await
        .ok()?;
    if ans.status != Status::Success {
        return None;
    }
    let Ok(Response {
        fields: Some(resp), ..
    }) = Response::<SendResponse>::decode(&ans.header)
    else {
        shared
            .checks
            .borrow_mut()
            .failures
            .push("a scheduled send: SUCCESS without send fields".to_string());
        return None;
    };
    if resp.deliver_at_ms == 0 {
        shared
            .checks
            .borrow_mut()
            .failures
            .push("a scheduled send was answered as delivered at once".to_string());
        return None;
    }
    let key = (TIMER_TOPIC.to_string(), 0, resp.first_queue_offset);
    let mut o = shared.oracle.borrow_mut();
    o.scheduled
        .insert(key.clone(), (body.to_vec(), resp.deliver_at_ms));
    o.acked.insert(
        key,
        Acked {
            body: body.to_vec(),
            at_ns: shared.world.now_ns(),
        },
    );
    drop(o);
    shared.checks.borrow_mut().sends_ok += 1;
    let handle = RecallHandle {
        topic: TOPIC.to_string(),
        broker_name: BROKER_NAME.to_string(),
        deliver_at_ms: resp.deliver_at_ms,
        message_id: record::message_id(resp.store_host, resp.first_physical_offset),
    }
    .encode();
    Some((resp.first_queue_offset, handle))
}

/// RECALL_MESSAGE for the message at `timer_offset`: while in flight it is neither expected
/// nor forbidden; SUCCESS forbids it, RECALL_TOO_LATE expects it again.
async fn recall(
    shared: &Shared,
    oracle: &OracleRef,
    rpc: &mut Rpc,
    timer_offset: u64,
    body: Vec<u8>,
    handle: &str,
) {
    let key = (TIMER_TOPIC.to_string(), 0, timer_offset);
    let expected = shared.oracle.borrow_mut().scheduled.remove(&key);
    {
        let mut o = oracle.borrow_mut();
        o.counts.recalls_sent += 1;
        o.recalls.insert(
            timer_offset,
            RecallEntry {
                body,
                state: RecallState::InFlight,
            },
        );
    }
    let req = RecallRequest {
        producer_group: "sim-producers".to_string(),
        topic: TOPIC.to_string(),
        recall_handle: handle.to_string(),
    };
    // As the real client: an attempt with no answer is sent again (a recall is idempotent).
    let mut ans = Err(String::new());
    for _ in 0..3 {
        ans = rpc
            .call(RequestCode::RecallMessage, &req, &[], CALL_TIMEOUT_MS)
            .await;
        if ans.is_ok() {
            break;
        }
        rt::sleep(Duration::from_millis(200)).await;
    }
    let mut o = oracle.borrow_mut();
    let state = match ans.map(|a| a.status) {
        Ok(Status::Success) => {
            o.counts.recalls_ok += 1;
            RecallState::Ok(shared.world.now_ns())
        }
        Ok(Status::RecallTooLate) => {
            o.counts.recalls_too_late += 1;
            // Still expected, unless a power loss took the send meanwhile.
            let mut so = shared.oracle.borrow_mut();
            if let Some(e) = expected {
                if so.acked.contains_key(&key) {
                    so.scheduled.insert(key, e);
                }
            }
            RecallState::TooLate
        }
        _ => {
            o.counts.recalls_unknown += 1;
            RecallState::Unknown
        }
    };
    if let Some(r) = o.recalls.get_mut(&timer_offset) {
        r.state = state;
    }
}
