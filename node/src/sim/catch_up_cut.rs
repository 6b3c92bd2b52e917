//! Catch-up reads across a cut of the log, through the real broker on virtual time: one
//! master keeping 4 KiB in memory (the simulator's `commitLogCacheKeepBytes`), so pulls of
//! anything older are read in 4 KiB direct-read chunks (`broker::shard::catch_up`).
//!
//! 1. 160 records of 1 KB sent to one queue, made durable (and so, but for the last 4 KiB,
//!    released);
//! 2. a consumer reads them all from the start: every pull is served from chunks, which the
//!    shard keeps;
//! 3. the log is cut back after record 79, as a replica's is when it rejoins a master that
//!    never had its tail (`Shard::truncate_log`), and 80 other records are sent, taking the
//!    offsets of the ones cut;
//! 4. the consumer reads from record 80 again.
//!
//! Invariant: every pull returns the records the log holds at those offsets now: before the
//! cut the first 160 bodies, after it the new ones. A chunk read before the cut that is still
//! used after it (`planted::Bug::CatchUpKeepsCutChunks`) returns bytes that were cut.

use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::Decode;
use ringmq_wire::command::{FilterType, PullRequest, PullResponse, Response};
use ringmq_wire::record;

use crate::broker::shard::Shard;
use crate::config::FlushDiskType;
use crate::io::rt;
use crate::io::sim::{NetConfig, World};
use crate::planted::{self, Bug};

use super::client::{self, Rpc, Shared};
use super::cluster::{record_end, LoneMaster, MASTER_ADDR};
use super::{Options, Report};

const TOPIC: &str = "SimCatchUp";
const RECORDS: u64 = 160;
const CUT_AFTER: u64 = 79;
const BODY_BYTES: usize = 1000;

/// What the scenario saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CatchUpReport {
    /// Records read back before the cut, and after it.
    pub read_before: u64,
    pub read_after: u64,
    /// Chunks the shard read with direct reads over the run.
    pub chunks_read: u64,
}

/// Runs the scenario, with `bug` planted if given; the first broken expectation as text.
pub fn run(
    seed: u64,
    bug: Option<Bug>,
    scratch: &std::path::Path,
) -> Result<CatchUpReport, String> {
    run_in(&World::new(seed, NetConfig::default()), seed, bug, scratch)
}

/// One seed as `ringmq-sim --scenario catch-up-cut` runs it.
pub fn run_one(opts: &Options) -> Report {
    let world = World::new(opts.seed, NetConfig::default());
    let r = run_in(&world, opts.seed, opts.bug, &opts.scratch_dir);
    Report {
        seed: opts.seed,
        mode: "catch-up-cut/ASYNC_FLUSH".into(),
        events: world.polls(),
        digest: world.trace_digest(),
        virtual_ms: world.now_ns() / 1_000_000,
        pulled_records: r.as_ref().map_or(0, |r| r.read_before + r.read_after),
        failure: r.err(),
        ..Report::default()
    }
}

fn run_in(
    world: &World,
    seed: u64,
    bug: Option<Bug>,
    scratch: &std::path::Path,
) -> Result<CatchUpReport, String> {
    let _entered = world.enter();
    planted::plant(bug);
    let result = LoneMaster::start(
        world,
        scratch,
        "catch-up-cut",
        seed,
        FlushDiskType::AsyncFlush,
        "",
    )
    .and_then(|lone| {
        let r = scenario(world, &lone);
        lone.finish(world);
        r
    });
    planted::plant(None);
    result
}

fn scenario(world: &World, lone: &LoneMaster) -> Result<CatchUpReport, String> {
    client::run_lone_client(world, lone, |shared, shard| async move {
        client_steps(&shared, &shard).await
    })
}

/// The body of record `i` of generation `generation` (0 before the cut, 1 after).
fn body(generation: u8, i: u64) -> Vec<u8> {
    let mut b = format!("gen{generation}-{i:05}-").into_bytes();
    b.resize(BODY_BYTES, b'a' + generation);
    b
}

async fn client_steps(shared: &Shared, shard: &Rc<Shard>) -> Result<CatchUpReport, String> {
    let mut rpc = Rpc::new(SocketAddr::from(MASTER_ADDR));
    let mut report = CatchUpReport::default();
    send(shared, &mut rpc, 0, 0..RECORDS).await?;
    released_past(shard, RECORDS - 6).await?;
    report.read_before = read(&mut rpc, 0, 0, RECORDS).await?;

    let cut = record_end(shard, TOPIC, CUT_AFTER)?;
    shard
        .truncate_log(cut)
        .map_err(|e| format!("cutting the log at {cut}: {e}"))?;
    // The client's oracle holds the cut records as acknowledged; the new ones at their
    // offsets are another client's.
    let after = Shared::own_checks(&shared.world);
    send(&after, &mut rpc, 1, CUT_AFTER + 1..RECORDS).await?;
    released_past(shard, RECORDS - 6).await?;
    report.read_after = read(&mut rpc, 1, CUT_AFTER + 1, RECORDS).await?;
    report.chunks_read = shard.catch_up.chunks_read();
    Ok(report)
}

/// Sends the records `range` of `generation`, 8 to a batch.
async fn send(
    shared: &Shared,
    rpc: &mut Rpc,
    generation: u8,
    range: std::ops::Range<u64>,
) -> Result<(), String> {
    let bodies: Vec<Vec<u8>> = range.map(|i| body(generation, i)).collect();
    for batch in bodies.chunks(8) {
        if !client::send(shared, rpc, TOPIC, 0, batch, &[], false).await {
            return Err(format!(
                "a send of generation {generation} was not acknowledged"
            ));
        }
    }
    Ok(())
}

/// Waits (virtual time) until the record at `queue_offset` lies below the released line.
async fn released_past(shard: &Shard, queue_offset: u64) -> Result<(), String> {
    let end = record_end(shard, TOPIC, queue_offset)?;
    for _ in 0..100 {
        if shard.store.borrow().cache_released() >= end {
            return Ok(());
        }
        rt::sleep(Duration::from_millis(100)).await;
    }
    Err(format!(
        "the log was not released up to {end} in 10 virtual s"
    ))
}

/// Reads queue offsets `from..to` in pulls of up to 16 records and checks each body against
/// `generation` (records below the cut are generation 0 whatever is asked); the records read.
async fn read(rpc: &mut Rpc, generation: u8, from: u64, to: u64) -> Result<u64, String> {
    let mut at = from;
    while at < to {
        let h = PullRequest {
            consumer_group: "SimCatchUpGroup".into(),
            topic: TOPIC.into(),
            queue_id: 0,
            queue_offset: at,
            max_messages: 16,
            max_bytes: 1 << 20,
            filter_type: FilterType::Tag,
            expression: "*".into(),
            suspend_timeout_ms: 0,
            commit_offset: None,
        };
        let a = rpc.call(RequestCode::PullMessage, &h, &[], 5_000).await?;
        Response::<PullResponse>::decode(&a.header).map_err(|e| e.to_string())?;
        if a.status != Status::Success {
            return Err(format!("pull from {at}: {}", a.status.name()));
        }
        for r in record::iter(&a.body) {
            let r = r.map_err(|e| format!("pull from {at}: a record does not decode: {e}"))?;
            let want = body(if at <= CUT_AFTER { 0 } else { generation }, at);
            if r.queue_offset != at || r.body != want.as_slice() {
                return Err(format!(
                    "pull: queue offset {} holds {:?}..., the log has {:?}... there",
                    r.queue_offset,
                    String::from_utf8_lossy(&r.body[..r.body.len().min(14)]),
                    String::from_utf8_lossy(&want[..14]),
                ));
            }
            at += 1;
        }
    }
    Ok(to - from)
}
