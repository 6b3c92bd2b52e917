//! Transactions end to end on the simulator's clock, with the broker's defaults
//! (`transactionTimeOut` 6 s, `transactionCheckInterval` 30 s, `transactionCheckMax` 15: a
//! half nobody answers is checked for 7.5 minutes), which no real-time test can wait for.
//! One SYNC_FLUSH master; one producer (group `sim-txn`) sends `HALVES` half messages:
//!
//! - `i % 4 == 0`: committed at once; `i % 4 == 1`: rolled back at once;
//! - `i % 4 == 2`: left unknown; the producer answers the check-back with commit;
//! - `i % 4 == 3`: left unknown and never answered: after 15 checks it must be in
//!   `TRANS_CHECK_MAX_TIME_TOPIC`, never delivered.
//!
//! Halfway through the checks the master loses power (unsynced bytes dropped) and restarts.
//! Afterwards: every committed one (0 and 2) is delivered exactly once, no rolled-back one
//! ever, every unanswered one is in the check-max topic exactly once and not delivered.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::{Decode, Empty, Encode};
use ringmq_wire::command::{
    CheckTransactionRequest, EndTransactionRequest, HeartbeatData, Response, SendRequest,
    SendResponse, TransactionResolution,
};
use ringmq_wire::frame;
use ringmq_wire::properties::{self, keys};
use ringmq_wire::record::{self, sys_flag, Message};
use ringmq_wire::transaction::CHECK_MAX_TOPIC;

use crate::config::FlushDiskType;
use crate::io::rt;
use crate::io::sim::{NetConfig, World};
use crate::store::fault_disk::Crash;

use super::client::Rpc;
use super::cluster::{BrokerNode, LoneMaster, CLIENTS, MASTER_ADDR};

const TOPIC: &str = "SimTxn";
const GROUP: &str = "sim-txn";
/// Half messages sent.
pub const HALVES: u32 = 40;

/// What the scenario saw.
#[derive(Debug, Clone, Default)]
pub struct TxnReport {
    pub events: u64,
    pub virtual_s: u64,
    /// Check-backs the producer received (over the restart).
    pub checks_received: u32,
    pub delivered: u32,
    pub check_max: u32,
}

#[derive(Default)]
struct Progress {
    /// Half index -> (half queue offset, half physical offset), as acknowledged.
    sent: BTreeMap<u32, (u64, u64)>,
    checks: u32,
    failure: Option<String>,
    sent_all: bool,
}

/// Runs the scenario (see the module docs); the first broken expectation as text.
pub fn run(seed: u64, scratch: &std::path::Path) -> Result<TxnReport, String> {
    let world = World::new(seed, NetConfig::default());
    let _entered = world.enter();
    let mut lone = LoneMaster::start(&world, scratch, "txn", seed, FlushDiskType::SyncFlush, "")?;
    let progress: Rc<RefCell<Progress>> = Rc::default();
    world.spawn_on(CLIENTS, producer(Rc::clone(&progress)));
    let result = drive(&world, &mut lone.node, &progress);
    lone.finish(&world);
    result.map(|mut r| {
        r.events = world.polls();
        r.virtual_s = world.now_ns() / 1_000_000_000;
        r
    })
}

fn drive(
    world: &World,
    master: &mut BrokerNode,
    progress: &Rc<RefCell<Progress>>,
) -> Result<TxnReport, String> {
    // Sends and the first checks (timeout 6 s, then every 30 s).
    world.run_for(Duration::from_secs(100));
    {
        let p = progress.borrow();
        if let Some(f) = &p.failure {
            return Err(f.clone());
        }
        if !p.sent_all {
            return Err(format!(
                "only {} of {HALVES} halves acknowledged",
                p.sent.len()
            ));
        }
        if p.checks == 0 {
            return Err("no check-back within 100 s".into());
        }
    }
    // Power loss: unsynced bytes are gone (SYNC_FLUSH: nothing acknowledged is).
    master.crash(world, Crash::DropUnsynced);
    master.start(world)?;
    // 15 checks 30 s apart restart from 0 after the restart: 8 minutes and some.
    world.run_for(Duration::from_secs(10 * 60));
    if let Some(f) = &progress.borrow().failure {
        return Err(f.clone());
    }
    let shard = master.shard().ok_or("master down")?;
    let store = shard.store.borrow();
    let bodies = |topic: &str| -> Result<Vec<String>, String> {
        let mut out = Vec::new();
        let Some((min, max)) = store.queue_range(topic, 0) else {
            return Ok(out);
        };
        let r = store
            .get(topic, 0, min, (max - min) as u32, u64::MAX, |_| true)
            .map_err(|e| e.to_string())?;
        for run in r.runs {
            let mut buf = vec![0u8; run.len as usize];
            store
                .read(run.physical_offset, &mut buf)
                .map_err(|e| e.to_string())?;
            for rec in record::iter(&buf) {
                let rec = rec.map_err(|e| e.to_string())?;
                out.push(String::from_utf8_lossy(rec.body).into_owned());
            }
        }
        Ok(out)
    };
    let delivered = bodies(TOPIC)?;
    let check_max = bodies(CHECK_MAX_TOPIC)?;
    let count = |v: &[String], b: &str| v.iter().filter(|x| x.as_str() == b).count();
    for i in 0..HALVES {
        let b = body(i);
        let (want_delivered, want_check_max) = match i % 4 {
            0 | 2 => (1, 0),
            1 => (0, 0),
            _ => (0, 1),
        };
        let (d, c) = (count(&delivered, &b), count(&check_max, &b));
        if (d, c) != (want_delivered, want_check_max) {
            return Err(format!(
                "{b}: delivered {d} times (want {want_delivered}), in the check-max topic {c} \
                 times (want {want_check_max})"
            ));
        }
    }
    let p = progress.borrow();
    Ok(TxnReport {
        checks_received: p.checks,
        delivered: delivered.len() as u32,
        check_max: check_max.len() as u32,
        ..Default::default()
    })
}

fn body(i: u32) -> String {
    format!("txn-{i}")
}

async fn producer(progress: Rc<RefCell<Progress>>) {
    if let Err(e) = producer_inner(&progress).await {
        progress.borrow_mut().failure = Some(e);
    }
}

async fn producer_inner(progress: &Rc<RefCell<Progress>>) -> Result<(), String> {
    let mut rpc = Rpc::new(SocketAddr::from(MASTER_ADDR));
    heartbeat(&mut rpc).await;
    for i in 0..HALVES {
        let (qo, phys) = send_half(&mut rpc, i).await;
        progress.borrow_mut().sent.insert(i, (qo, phys));
        let resolution = match i % 4 {
            0 => TransactionResolution::Commit,
            1 => TransactionResolution::Rollback,
            _ => continue,
        };
        end(&mut rpc, qo, phys, resolution, false).await;
    }
    progress.borrow_mut().sent_all = true;
    // Answer check-backs; heartbeat every 10 s (a restarted broker learns the producer
    // again from the new connection's heartbeat).
    let mut last_hb = crate::io::clock::now_ms();
    loop {
        for f in rpc.wait_pushed(1_000).await {
            let Ok(parsed) = frame::parse(&f) else {
                continue;
            };
            if parsed.code != RequestCode::CheckTransactionState as u16 {
                continue;
            }
            let h = CheckTransactionRequest::decode(parsed.header)
                .map_err(|e| format!("check header: {e}"))?;
            let rec = record::decode_one(parsed.body).map_err(|e| format!("check body: {e}"))?;
            let name = String::from_utf8_lossy(rec.body).into_owned();
            let i: u32 = name
                .strip_prefix("txn-")
                .and_then(|n| n.parse().ok())
                .ok_or(format!("check of an unknown half {name}"))?;
            if i % 4 < 2 {
                // Decided at once: the broker may only ask again if the decision was lost,
                // which SYNC_FLUSH forbids once acknowledged.
                return Err(format!(
                    "check-back of {name}, whose decision was acknowledged"
                ));
            }
            progress.borrow_mut().checks += 1;
            if i % 4 == 2 {
                end(
                    &mut rpc,
                    h.half_queue_offset,
                    h.physical_offset,
                    TransactionResolution::Commit,
                    true,
                )
                .await;
            }
        }
        let now = crate::io::clock::now_ms();
        if now - last_hb >= 10_000 {
            heartbeat(&mut rpc).await;
            last_hb = now;
        }
    }
}

async fn heartbeat(rpc: &mut Rpc) {
    let hb = HeartbeatData {
        client_id: "sim-txn-producer".into(),
        producer_groups: vec![GROUP.into()],
        consumer_groups: vec![],
    };
    let Ok(body) = hb.to_vec() else { return };
    for _ in 0..20 {
        match rpc.call(RequestCode::HeartBeat, &Empty, &body, 8_000).await {
            Ok(a) if a.status == Status::Success => return,
            _ => rt::sleep(Duration::from_millis(500)).await,
        }
    }
}

/// Sends half `i` until acknowledged; (half queue offset, physical offset).
async fn send_half(rpc: &mut Rpc, i: u32) -> (u64, u64) {
    let mut props = Vec::new();
    let id = format!("TXN-{i}");
    properties::encode(
        [(keys::TRAN_MSG, "true"), (keys::UNIQ_KEY, id.as_str())],
        &mut props,
    )
    .expect("valid properties");
    let b = body(i);
    let msg = Message {
        topic: TOPIC,
        queue_id: 0,
        flag: 0,
        sys_flag: sys_flag::TRANSACTION_PREPARED_TYPE,
        born_timestamp_ms: crate::io::clock::now_ms(),
        born_host: SocketAddr::from(([10, 0, 10, 1], 5000)),
        store_host_v6: false,
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: b.as_bytes(),
        properties: &props,
    };
    let mut rec = Vec::new();
    record::encode(&msg, &mut rec).expect("a small record encodes");
    let h = SendRequest {
        producer_group: GROUP.into(),
        topic: TOPIC.into(),
        queue_id: 0,
        batch: false,
        record_count: 1,
    };
    loop {
        if let Ok(a) = rpc.call(RequestCode::SendMessage, &h, &rec, 8_000).await {
            if a.status == Status::Success {
                if let Ok(Response {
                    fields: Some(f), ..
                }) = Response::<SendResponse>::decode(&a.header)
                {
                    return (f.first_queue_offset, f.first_physical_offset);
                }
            }
        }
        rt::sleep(Duration::from_millis(200)).await;
    }
}

/// Sends END_TRANSACTION until the broker answers SUCCESS.
async fn end(rpc: &mut Rpc, qo: u64, phys: u64, resolution: TransactionResolution, check: bool) {
    let h = EndTransactionRequest {
        producer_group: GROUP.into(),
        resolution,
        half_queue_offset: qo,
        physical_offset: phys,
        message_id: String::new(),
        transaction_id: String::new(),
        from_transaction_check: check,
    };
    for _ in 0..50 {
        if let Ok(a) = rpc.call(RequestCode::EndTransaction, &h, &[], 8_000).await {
            if a.status == Status::Success {
                return;
            }
        }
        rt::sleep(Duration::from_millis(200)).await;
    }
}
