//! Long delays on the simulator's clock: the 2 h delay level and a 3-day delivery time,
//! which no real-time test can wait for. One master (ASYNC_FLUSH, no slave), retention
//! forced on every hour with a 1 h reservation, so the only thing keeping the scheduled
//! messages' log segment is that they are pending:
//!
//! 1. send a level-18 (2 h), a 3-day (`TIMER_DELAY_SEC=259200`) and a level-2 (5 s)
//!    message, then ~10 MiB of other messages so the scheduled ones sit in an old segment;
//! 2. 2 h of virtual time: the 5 s one delivered, the 2 h one not until its due time, then
//!    delivered;
//! 3. kill -9 and restart (the schedule is rebuilt from the log);
//! 4. the master's clock stepped to 20 s before the 3-day message is due: retention runs
//!    and must keep its segment; it is delivered when due, never before; then retention
//!    removes the segment.
//!
//! Every check of `check::schedule_kept` (nothing early, everything due delivered) runs at
//! each step.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use ringmq_wire::properties::{self, keys};

use crate::config::FlushDiskType;
use crate::io::clock;
use crate::io::sim::{NetConfig, World};
use crate::store::fault_disk::Crash;

use super::check;
use super::client::{self, Checks, Oracle, Rpc, Shared};
use super::cluster::{BrokerNode, LoneMaster, CLIENTS, MASTER, MASTER_ADDR};

const TOPIC: &str = "SimDelayed";
const FILLER_TOPIC: &str = "SimFiller";

/// What the scenario saw (for the test's message).
#[derive(Debug, Clone, Default)]
pub struct LongDelayReport {
    pub events: u64,
    pub virtual_s: u64,
    /// Log start before and after the 3-day message was delivered.
    pub min_offset_pending: u64,
    pub min_offset_after: u64,
}

/// Runs the scenario (see the module docs); the first broken expectation as text.
pub fn run(seed: u64, scratch: &std::path::Path) -> Result<LongDelayReport, String> {
    let world = World::new(seed, NetConfig::default());
    let _entered = world.enter();
    let every_hour: Vec<String> = (0..24).map(|h| format!("{h:02}")).collect();
    let settings = format!("fileReservedTime=1\ndeleteWhen={}\n", every_hour.join(";"));
    let mut lone = LoneMaster::start(
        &world,
        scratch,
        "long",
        seed,
        FlushDiskType::AsyncFlush,
        &settings,
    )?;
    let oracle: Rc<RefCell<Oracle>> = Rc::default();
    let checks: Rc<RefCell<Checks>> = Rc::default();
    let shared = Shared {
        world: world.clone(),
        oracle: Rc::clone(&oracle),
        checks: Rc::clone(&checks),
        log_end: Rc::new(|_| None),
    };
    world.spawn_on(CLIENTS, send_all(shared));
    let result = scenario(&world, &mut lone.node, &oracle, &checks);
    lone.finish(&world);
    result.map(|mut r| {
        r.events = world.polls();
        r.virtual_s = world.now_ns() / 1_000_000_000;
        r
    })
}

fn scenario(
    world: &World,
    master: &mut BrokerNode,
    oracle: &Rc<RefCell<Oracle>>,
    checks: &Rc<RefCell<Checks>>,
) -> Result<LongDelayReport, String> {
    world.run_for(Duration::from_secs(30));
    if let Some(f) = checks.borrow().failures.first() {
        return Err(f.clone());
    }
    let due: Vec<(Vec<u8>, i64)> = oracle.borrow().scheduled.values().cloned().collect();
    let due_of = |b: &str| {
        due.iter()
            .find(|(body, _)| body == b.as_bytes())
            .map(|(_, d)| *d)
            .ok_or(format!("{b} was not acknowledged"))
    };
    let (two_h, three_d) = (due_of("level-18")?, due_of("three-days")?);
    let mut report = LongDelayReport::default();

    // Just before the 2 h level is due: the 5 s one is delivered, the 2 h one is not.
    let now = master_now(world);
    world.run_for(Duration::from_millis((two_h - now - 1_000).max(0) as u64));
    let got = delivered(world, master, oracle)?;
    expect(
        got.contains(b"level-2".as_slice()),
        "level 2 (5 s) delivered within 2 h",
    )?;
    expect(
        !got.contains(b"level-18".as_slice()),
        "level 18 not delivered before 2 h",
    )?;
    world.run_for(Duration::from_secs(3));
    let got = delivered(world, master, oracle)?;
    expect(
        got.contains(b"level-18".as_slice()),
        "level 18 delivered at 2 h",
    )?;
    expect(
        !got.contains(b"three-days".as_slice()),
        "the 3-day message waits",
    )?;

    // kill -9: the schedule is rebuilt from the log at the restart.
    master.crash(world, Crash::KeepWritten);
    master.start(world)?;
    world.run_for(Duration::from_secs(5));
    let got = delivered(world, master, oracle)?;
    expect(
        !got.contains(b"three-days".as_slice()),
        "the 3-day message still waits",
    )?;

    // The master's clock stepped to 20 s before the 3-day message is due; retention (every
    // hour, 1 h reserved) runs meanwhile and must keep the segment it is in.
    world.jump_clock(MASTER, three_d - master_now(world) - 20_000);
    world.run_for(Duration::from_secs(15));
    let got = delivered(world, master, oracle)?;
    expect(
        !got.contains(b"three-days".as_slice()),
        "not delivered 5 s early",
    )?;
    report.min_offset_pending = min_offset(master)?;
    expect(
        report.min_offset_pending == 0,
        "retention kept the segment of a pending message",
    )?;
    world.run_for(Duration::from_secs(30));
    let got = delivered(world, master, oracle)?;
    expect(
        got.contains(b"three-days".as_slice()),
        "delivered at 3 days",
    )?;
    report.min_offset_after = min_offset(master)?;
    expect(
        report.min_offset_after > 0,
        "retention removed the segment once nothing in it was pending",
    )?;
    Ok(report)
}

fn expect(ok: bool, what: &str) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(format!("expected: {what}"))
    }
}

fn master_now(world: &World) -> i64 {
    world.as_node(MASTER, clock::now_ms)
}

fn min_offset(master: &BrokerNode) -> Result<u64, String> {
    let shard = master.shard().ok_or("master down")?;
    let min = shard.store.borrow().min_offset();
    Ok(min)
}

/// The delivered scheduled bodies, after checking the log: nothing early, everything due
/// (by the master's clock, one second of slack) delivered, queues matching the log.
fn delivered(
    world: &World,
    master: &BrokerNode,
    oracle: &Rc<RefCell<Oracle>>,
) -> Result<BTreeSet<Vec<u8>>, String> {
    let shard = master.shard().ok_or("master down")?;
    let store = shard.store.borrow();
    let log = check::scan_log(&store)?;
    check::queues_match_log(&store, &log)?;
    // Not `acked_present`: retention removes old filler on purpose here.
    check::schedule_kept(&store, &log, &oracle.borrow(), master_now(world) - 1_000)
}

/// The client: the three scheduled messages, then ~10 MiB of filler.
async fn send_all(shared: Shared) {
    let addr = SocketAddr::from(MASTER_ADDR);
    let mut rpc = Rpc::new(addr);
    let scheduled = [
        ("level-18", keys::DELAY, "18"),
        ("three-days", keys::TIMER_DELAY_SEC, "259200"),
        ("level-2", keys::DELAY, "2"),
    ];
    for (body, key, value) in scheduled {
        let mut props = Vec::new();
        properties::encode([(key, value)], &mut props).expect("valid properties");
        client::send(
            &shared,
            &mut rpc,
            TOPIC,
            0,
            &[body.as_bytes().to_vec()],
            &props,
            false,
        )
        .await;
    }
    for i in 0..40u32 {
        let body = vec![b'f'; 256 << 10];
        let mut tagged = format!("filler-{i}-").into_bytes();
        tagged.extend_from_slice(&body);
        client::send(
            &shared,
            &mut rpc,
            FILLER_TOPIC,
            i % 4,
            &[tagged],
            &[],
            false,
        )
        .await;
    }
}
