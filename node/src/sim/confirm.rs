//! The confirmOffset read cap (`Shard::confirm`) through the real broker on virtual time:
//! one master, a client that sends and reads while the scenario moves the cap.
//!
//! 1. cap at the log's start, five messages sent (sends are not capped): a pull and a POP
//!    find nothing;
//! 2. cap after the third record: a pull returns exactly the first three;
//! 3. a long-polling pull from the fourth parks, and is answered with the last two as soon
//!    as the cap is lifted (well before its suspend timeout);
//! 4. a POP (long polling) is answered once the cap moves, with records below it only.

use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::Decode;
use ringmq_wire::command::{
    FilterType, PopInitMode, PopRequest, PullRequest, PullResponse, Response,
};
use ringmq_wire::record;

use crate::broker::shard::Shard;
use crate::config::FlushDiskType;
use crate::io::rt;
use crate::io::sim::{NetConfig, World};

use super::client::{self, Rpc, Shared};
use super::cluster::{record_end, LoneMaster, MASTER_ADDR};

const TOPIC: &str = "SimConfirm";
const SUSPEND_MS: u64 = 20_000;

/// What the client saw: per step, the queue offsets it got (or the status it got instead).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfirmReport {
    pub capped_pull: Vec<u64>,
    pub capped_pop: Vec<u64>,
    pub partial_pull: Vec<u64>,
    pub woken_pull: Vec<u64>,
    /// Virtual ms the parked pull waited.
    pub woken_after_ms: u64,
    pub woken_pop: Vec<u64>,
}

/// Runs the scenario; the first broken expectation as text.
pub fn run(seed: u64, scratch: &std::path::Path) -> Result<ConfirmReport, String> {
    let world = World::new(seed, NetConfig::default());
    let _entered = world.enter();
    let lone = LoneMaster::start(
        &world,
        scratch,
        "confirm",
        seed,
        FlushDiskType::AsyncFlush,
        "",
    )?;
    let result = scenario(&world, &lone);
    lone.finish(&world);
    result
}

fn scenario(world: &World, lone: &LoneMaster) -> Result<ConfirmReport, String> {
    client::run_lone_client(world, lone, |shared, shard| {
        shard.set_confirm(Some(shard.store.borrow().write_offset()));
        async move { client_steps(&shared, &shard).await }
    })
}

async fn client_steps(shared: &Shared, shard: &Rc<Shard>) -> Result<ConfirmReport, String> {
    let mut rpc = Rpc::new(SocketAddr::from(MASTER_ADDR));
    let mut report = ConfirmReport::default();
    for i in 0..5u8 {
        let body = vec![b'0' + i; 100];
        if !client::send(shared, &mut rpc, TOPIC, 0, &[body], &[], false).await {
            return Err(format!("send {i} was not acknowledged"));
        }
    }
    report.capped_pull = pull(&mut rpc, 0, 0).await?;
    report.capped_pop = pop(&mut rpc, 0).await?;

    // The cap after the third record.
    let third_end = record_end(shard, TOPIC, 2)?;
    shard.set_confirm(Some(third_end));
    report.partial_pull = pull(&mut rpc, 0, 0).await?;

    // A parked pull, woken by the cap moving.
    let lift = {
        let shard = Rc::clone(shard);
        async move {
            rt::sleep(Duration::from_millis(1_000)).await;
            shard.set_confirm(None);
        }
    };
    let timed = async {
        let started = shared.world.now_ns();
        let got = pull(&mut rpc, 3, SUSPEND_MS).await;
        (got, (shared.world.now_ns() - started) / 1_000_000)
    };
    let ((woken, waited_ms), ()) = futures_join(timed, lift).await;
    report.woken_pull = woken?;
    report.woken_after_ms = waited_ms;

    // A POP parked while everything is capped, woken when the cap moves past the first
    // record only.
    shard.set_confirm(Some(shard.store.borrow().min_offset()));
    let first_end = record_end(shard, TOPIC, 0)?;
    let lift = {
        let shard = Rc::clone(shard);
        async move {
            rt::sleep(Duration::from_millis(1_000)).await;
            shard.set_confirm(Some(first_end));
        }
    };
    let (popped, ()) = futures_join(pop(&mut rpc, SUSPEND_MS), lift).await;
    report.woken_pop = popped?;
    Ok(report)
}

/// Both futures to completion (the simulator's runtime has no join of its own).
async fn futures_join<A, B>(a: A, b: B) -> (A::Output, ())
where
    A: std::future::Future,
    B: std::future::Future<Output = ()> + 'static,
{
    let b = rt::spawn_joinable(b);
    let a = a.await;
    b.join().await;
    (a, ())
}

/// A pull of queue 0 from `offset`: the queue offsets it returned (empty for
/// PULL_NOT_FOUND).
async fn pull(rpc: &mut Rpc, offset: u64, suspend_ms: u64) -> Result<Vec<u64>, String> {
    let h = PullRequest {
        consumer_group: "SimConfirmGroup".into(),
        topic: TOPIC.into(),
        queue_id: 0,
        queue_offset: offset,
        max_messages: 32,
        max_bytes: 1 << 20,
        filter_type: FilterType::Tag,
        expression: "*".into(),
        suspend_timeout_ms: suspend_ms as u32,
        commit_offset: None,
    };
    let a = rpc
        .call(RequestCode::PullMessage, &h, &[], suspend_ms + 5_000)
        .await?;
    Response::<PullResponse>::decode(&a.header).map_err(|e| e.to_string())?;
    match a.status {
        Status::Success => offsets(&a.body),
        Status::PullNotFound => Ok(Vec::new()),
        s => Err(format!("pull from {offset}: {}", s.name())),
    }
}

/// A POP of the topic (waiting up to `poll_ms`): the queue offsets it returned.
async fn pop(rpc: &mut Rpc, poll_ms: u64) -> Result<Vec<u64>, String> {
    let h = PopRequest {
        consumer_group: "SimConfirmPop".into(),
        topic: TOPIC.into(),
        queue_id: -1,
        max_messages: 8,
        invisible_time_ms: 60_000,
        poll_time_ms: poll_ms as u32,
        filter_type: FilterType::Tag,
        expression: "*".into(),
        init_mode: PopInitMode::Min,
        order: false,
    };
    let a = rpc
        .call(RequestCode::PopMessage, &h, &[], poll_ms + 5_000)
        .await?;
    match a.status {
        Status::Success => offsets(&a.body),
        Status::PullNotFound => Ok(Vec::new()),
        s => Err(format!("pop: {}", s.name())),
    }
}

fn offsets(body: &[u8]) -> Result<Vec<u64>, String> {
    record::iter(body)
        .map(|r| r.map(|r| r.queue_offset).map_err(|e| e.to_string()))
        .collect()
}
