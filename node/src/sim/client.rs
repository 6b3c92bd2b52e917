//! Simulated clients: tasks on the clients' node that speak the native protocol over the
//! simulated network to the name server's and the brokers' real connection handling and
//! request handlers, doing what the real client does (topic routes from the name server,
//! cached and refreshed; sync and batch sends to a master of the route; long-polling pulls
//! from the master, or from a slave while the route lists no master; offset commits and
//! queries, heartbeats, topic create and delete), and recording what was acknowledged in the
//! [`Oracle`]. Every pull answer is checked as it arrives ([`Checks`]).

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::{Decode, Empty, Encode};
use ringmq_wire::command::route::{perm, ClusterInfo, GetRouteRequest, TopicRoute, MASTER_ID};
use ringmq_wire::command::{
    ConsumeFromWhere, ConsumeType, ConsumerGroupData, CreateTopicRequest, DeleteTopicRequest,
    FilterType, HeartbeatData, MessageModel, PullRequest, PullResponse, QueryConsumerOffsetRequest,
    Response, SendRequest, SendResponse, Subscription, UpdateConsumerOffsetRequest,
};
use ringmq_wire::frame;
use ringmq_wire::record::{self, Entry, Message};

use crate::io::net::Conn;
use crate::io::rt;
use crate::io::sim::World;
use crate::sim::cluster::ROUTE_REFRESH_MS;

/// Topics whose acknowledged records are checked (never deleted).
pub const TOPICS: [&str; 2] = ["SimOrders", "SimEvents"];
/// Topic of scheduled messages (delays, levels, delivery times); checked at the end: every
/// acknowledged one due by then is delivered, none early.
pub const DELAYED_TOPIC: &str = "SimDelayed";
/// Queues per topic (auto-created with the broker's default of 8; the workload uses 4).
pub const QUEUES: u32 = 4;
pub const GROUP: &str = "sim-group";
/// Pushed frames a client keeps until it looks at them.
const PUSHED_KEPT_MAX: usize = 256;
/// Longest a client waits for an answer before it gives the connection up.
pub const CALL_TIMEOUT_MS: u64 = 8_000;

/// An acknowledged record: what was sent, and when the acknowledgement arrived.
#[derive(Debug, Clone)]
pub struct Acked {
    pub body: Vec<u8>,
    pub at_ns: u64,
}

/// What the clients were told, to hold the broker to it.
#[derive(Debug, Default)]
pub struct Oracle {
    /// (topic, queue, queue offset) -> the acknowledged record there.
    pub acked: BTreeMap<(String, u32, u64), Acked>,
    /// Every body ever sent (acknowledged or not): a pull may return any of them, never
    /// anything else.
    pub sent: BTreeSet<Vec<u8>>,
    /// Acknowledged scheduled messages: their key in the timer queue -> (body, due ms).
    pub scheduled: BTreeMap<(String, u32, u64), (Vec<u8>, i64)>,
}

/// Failures found by clients as answers arrive, and counters.
#[derive(Debug, Default)]
pub struct Checks {
    pub failures: Vec<String>,
    pub sends_ok: u64,
    pub sends_failed: u64,
    pub pulls_found: u64,
    pub pulled_records: u64,
    pub long_polls_woken: u64,
    /// Fuzzed requests the broker or the name server answered (any status).
    pub fuzz_answered: u64,
    /// Sends not made because the client's route listed no writable queue (or it had none).
    pub sends_no_route: u64,
    /// Sends made on purpose to a replica the route does not list as writable (a slave);
    /// each must be refused.
    pub misrouted_sends: u64,
    /// Pulls served by a slave (the route listed no master).
    pub slave_pulls: u64,
    /// Route answers from the name server (GET_ROUTEINFO_BY_TOPIC, any status).
    pub route_fetches: u64,
}

/// What the clients share with the simulator.
#[derive(Clone)]
pub struct Shared {
    pub world: World,
    pub oracle: Rc<RefCell<Oracle>>,
    pub checks: Rc<RefCell<Checks>>,
    /// Log end of the broker at an address, read when a pull answer from it arrives (no
    /// pull may return bytes past it). `None` while the broker is down or unknown.
    pub log_end: Rc<dyn Fn(SocketAddr) -> Option<u64>>,
}

impl Shared {
    /// For a scenario that keeps its own expectations: an empty oracle and checks, no log
    /// ends to check pulls against.
    pub fn own_checks(world: &World) -> Shared {
        Shared {
            world: world.clone(),
            oracle: Rc::default(),
            checks: Rc::default(),
            log_end: Rc::new(|_| None),
        }
    }

    fn fail(&self, what: String) {
        self.checks.borrow_mut().failures.push(what);
    }
}

/// A request/response connection that reconnects after any failure.
pub(crate) struct Rpc {
    addr: SocketAddr,
    conn: Option<Conn>,
    buf: Vec<u8>,
    next_id: u64,
    /// The connection's opening HELLO was sent.
    opened: bool,
    /// Whole frames the broker sent on its own (oneway requests), oldest first.
    pushed: Vec<Vec<u8>>,
}

/// A decoded answer: status, header, body.
pub(crate) struct Answer {
    pub(crate) status: Status,
    pub(crate) header: Vec<u8>,
    pub(crate) body: Vec<u8>,
}

impl Rpc {
    pub(crate) fn new(addr: SocketAddr) -> Self {
        Rpc {
            addr,
            conn: None,
            buf: Vec::new(),
            next_id: 1,
            opened: false,
            pushed: Vec::new(),
        }
    }

    /// Frames the broker pushed (oneway requests): those kept while waiting for answers,
    /// else the first to arrive within `timeout_ms` (empty if none; with no connection it
    /// sleeps `timeout_ms`, so a caller looping on it lets time pass).
    pub(crate) async fn wait_pushed(&mut self, timeout_ms: u64) -> Vec<Vec<u8>> {
        if self.pushed.is_empty() {
            let Some(conn) = self.conn.clone() else {
                rt::sleep(Duration::from_millis(timeout_ms)).await;
                return Vec::new();
            };
            {
                let read = async {
                    loop {
                        if self.take_frames()? {
                            return Ok::<(), String>(());
                        }
                        let (res, buf) = conn.read_append(std::mem::take(&mut self.buf)).await;
                        self.buf = buf;
                        match res {
                            Ok(0) => return Err("connection closed".to_string()),
                            Ok(_) => {}
                            Err(e) => return Err(e.to_string()),
                        }
                    }
                };
                if let Some(Err(_)) = rt::timeout(Duration::from_millis(timeout_ms), read).await {
                    self.conn = None;
                    self.buf.clear();
                }
            }
        }
        std::mem::take(&mut self.pushed)
    }

    /// Moves whole pushed frames from the buffer; true if any. Stops at a response (an
    /// answer nobody waits for any more is dropped).
    fn take_frames(&mut self) -> Result<bool, String> {
        while let Some(len) = frame::check(&self.buf, crate::limits::FRAME_BYTES_MAX)
            .map_err(|e| format!("bad frame from the broker: {e}"))?
        {
            let whole: Vec<u8> = self.buf.drain(..len).collect();
            let f = frame::parse(&whole).map_err(|e| e.to_string())?;
            if !f.is_response() {
                self.keep_pushed(whole);
            }
        }
        Ok(!self.pushed.is_empty())
    }

    /// Keeps a pushed frame, at most `PUSHED_KEPT_MAX` (the oldest go first): a client that
    /// never looks at them must not grow without bound.
    fn keep_pushed(&mut self, frame: Vec<u8>) {
        if self.pushed.len() >= PUSHED_KEPT_MAX {
            self.pushed.remove(0);
        }
        self.pushed.push(frame);
    }

    pub(crate) async fn call(
        &mut self,
        code: RequestCode,
        header: &(impl Encode + ?Sized),
        body: &[u8],
        timeout_ms: u64,
    ) -> Result<Answer, String> {
        let header = header.to_vec().map_err(|e| e.to_string())?;
        self.call_raw(u16::from(code), &header, body, timeout_ms)
            .await
    }

    /// A request with any code and raw header bytes (the fuzzer's too).
    async fn call_raw(
        &mut self,
        code: u16,
        header: &[u8],
        body: &[u8],
        timeout_ms: u64,
    ) -> Result<Answer, String> {
        let res = rt::timeout(
            Duration::from_millis(timeout_ms),
            self.exchange(code, header, body),
        )
        .await
        .unwrap_or_else(|| Err("timed out".to_string()));
        if res.is_err() {
            // A connection in an unknown state is never reused (its answer may still come).
            self.conn = None;
            self.buf.clear();
        }
        res
    }

    async fn exchange(&mut self, code: u16, header: &[u8], body: &[u8]) -> Result<Answer, String> {
        if self.conn.is_none() {
            self.conn = Some(Conn::connect(self.addr).await.map_err(|e| e.to_string())?);
            self.buf.clear();
            self.opened = false;
        }
        let conn = self.conn.clone().ok_or("no connection")?;
        let id = self.next_id;
        self.next_id += 1;
        // A native connection opens with HELLO; its answer is skipped below (another id).
        let mut out = if self.opened {
            Vec::new()
        } else {
            self.opened = true;
            ringmq_wire::command::opener_frame("sim-client")
        };
        frame::encode_prefix(
            &mut out,
            code,
            frame::Flags::REQUEST,
            id,
            header.len(),
            body.len(),
        )
        .map_err(|e| e.to_string())?;
        out.extend_from_slice(header);
        out.extend_from_slice(body);
        let (res, _) = conn.write_all(out).await;
        res.map_err(|e| e.to_string())?;
        loop {
            if let Some(len) = frame::check(&self.buf, crate::limits::FRAME_BYTES_MAX)
                .map_err(|e| format!("bad frame from the broker: {e}"))?
            {
                let whole: Vec<u8> = self.buf.drain(..len).collect();
                let f = frame::parse(&whole).map_err(|e| e.to_string())?;
                // Requests the broker sends on its own (notifications) are not answers.
                if !f.is_response() {
                    self.keep_pushed(whole);
                    continue;
                }
                if f.request_id != id {
                    continue;
                }
                let status = f.status().map_err(|e| e.to_string())?;
                return Ok(Answer {
                    status,
                    header: f.header.to_vec(),
                    body: f.body.to_vec(),
                });
            }
            let (res, buf) = conn.read_append(std::mem::take(&mut self.buf)).await;
            self.buf = buf;
            match res {
                Ok(0) => return Err("connection closed".to_string()),
                Ok(_) => {}
                Err(e) => return Err(e.to_string()),
            }
        }
    }
}

/// One queue as a client's route digests it: where requests about it go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueTarget {
    pub queue_id: u32,
    pub addr: SocketAddr,
    /// The address is the broker group's master (else a slave).
    pub master: bool,
}

/// A topic route digested as the real client digests it (`ringmq_client::route`): writes go
/// to writable queues of broker groups with a master, reads to readable queues of groups with
/// any replica, from the master, else from the slave with the lowest id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouteView {
    pub write: Vec<QueueTarget>,
    pub read: Vec<QueueTarget>,
    /// Slaves the route lists (a send there must be refused).
    pub slaves: Vec<SocketAddr>,
}

impl RouteView {
    pub fn from_wire(route: &TopicRoute) -> Self {
        let mut view = RouteView::default();
        for q in &route.queues {
            let Some(b) = route
                .brokers
                .iter()
                .find(|b| b.broker_name == q.broker_name)
            else {
                continue;
            };
            let master = b
                .replicas
                .get(&MASTER_ID)
                .and_then(|r| r.address.parse::<SocketAddr>().ok());
            let slaves: Vec<SocketAddr> = b
                .replicas
                .iter()
                .filter(|(&id, _)| id != MASTER_ID)
                .filter_map(|(_, r)| r.address.parse().ok())
                .collect();
            view.slaves.extend(&slaves);
            if let Some(m) = master {
                if perm::is_writeable(q.perm) {
                    view.write
                        .extend((0..q.write_queue_count).map(|queue_id| QueueTarget {
                            queue_id,
                            addr: m,
                            master: true,
                        }));
                }
            }
            let from = master
                .map(|m| (m, true))
                .or(slaves.first().map(|&s| (s, false)));
            if let (Some((addr, is_master)), true) = (from, perm::is_readable(q.perm)) {
                view.read
                    .extend((0..q.read_queue_count).map(|queue_id| QueueTarget {
                        queue_id,
                        addr,
                        master: is_master,
                    }));
            }
        }
        view
    }

    pub fn write_target(&self, queue: u32) -> Option<QueueTarget> {
        self.write.iter().find(|t| t.queue_id == queue).copied()
    }

    pub fn read_target(&self, queue: u32) -> Option<QueueTarget> {
        self.read.iter().find(|t| t.queue_id == queue).copied()
    }
}

/// What a client knows of a topic's route.
#[derive(Debug, Clone)]
pub enum Known {
    /// The name server answered TOPIC_NOT_EXIST.
    NoRoute,
    Route(RouteView),
}

/// A client's route cache: routes from the name server, fetched again every
/// [`ROUTE_REFRESH_MS`] or after a request failed; while the name server cannot be reached
/// the last route is used (as the real client does).
pub struct Routes {
    ns: Rpc,
    cached: BTreeMap<String, (Known, u64)>,
}

impl Routes {
    pub fn new(namesrv: SocketAddr) -> Self {
        Routes {
            ns: Rpc::new(namesrv),
            cached: BTreeMap::new(),
        }
    }

    /// The route of `topic`: cached if fresh, else fetched (the cached one if that fails).
    pub async fn get(&mut self, shared: &Shared, topic: &str) -> Option<Known> {
        let now = shared.world.now_ns();
        if let Some((known, at)) = self.cached.get(topic) {
            if now < at + ROUTE_REFRESH_MS * 1_000_000 {
                return Some(known.clone());
            }
        }
        let h = GetRouteRequest {
            topic: topic.to_string(),
        };
        let fetched = match self
            .ns
            .call(RequestCode::GetRouteInfoByTopic, &h, &[], CALL_TIMEOUT_MS)
            .await
        {
            Ok(a) => {
                shared.checks.borrow_mut().route_fetches += 1;
                match a.status {
                    Status::Success => match TopicRoute::decode(&a.body) {
                        Ok(r) => Some(Known::Route(RouteView::from_wire(&r))),
                        Err(e) => {
                            shared.fail(format!("route of {topic}: undecodable body: {e}"));
                            None
                        }
                    },
                    Status::TopicNotExist => Some(Known::NoRoute),
                    other => {
                        shared.fail(format!("route of {topic}: answered {}", other.name()));
                        None
                    }
                }
            }
            Err(_) => None,
        };
        match fetched {
            Some(k) => {
                self.cached
                    .insert(topic.to_string(), (k.clone(), shared.world.now_ns()));
                Some(k)
            }
            None => self.cached.get(topic).map(|(k, _)| k.clone()),
        }
    }

    /// A request about `topic` failed: fetch its route again before the next one.
    pub fn stale(&mut self, topic: &str) {
        if let Some((_, at)) = self.cached.get_mut(topic) {
            *at = 0;
        }
    }

    /// A master the name server knows (GET_BROKER_CLUSTER_INFO), for a topic no broker has
    /// yet (the real producer's auto-create path).
    pub async fn any_master(&mut self) -> Option<SocketAddr> {
        let a = self
            .ns
            .call(
                RequestCode::GetBrokerClusterInfo,
                &Empty,
                &[],
                CALL_TIMEOUT_MS,
            )
            .await
            .ok()?;
        if a.status != Status::Success {
            return None;
        }
        let info = ClusterInfo::decode(&a.body).ok()?;
        info.brokers
            .iter()
            .find_map(|b| b.replicas.get(&MASTER_ID)?.address.parse().ok())
    }
}

/// One reconnecting connection per broker address.
#[derive(Default)]
pub(crate) struct Conns(BTreeMap<SocketAddr, Rpc>);

impl Conns {
    pub(crate) fn to(&mut self, addr: SocketAddr) -> &mut Rpc {
        self.0.entry(addr).or_insert_with(|| Rpc::new(addr))
    }
}

/// Where a producer's send goes, by its route: (address, a deliberate misroute).
async fn send_target(
    shared: &Shared,
    routes: &mut Routes,
    topic: &str,
    queue: u32,
) -> Option<(SocketAddr, bool)> {
    match routes.get(shared, topic).await? {
        Known::NoRoute => routes.any_master().await.map(|a| (a, false)),
        Known::Route(view) => {
            // Now and then a send to a replica the route lists but not as writable, as a
            // client with a wrong route would: the broker must refuse it.
            if let Some(&slave) = view.slaves.first() {
                if shared.world.with_rng(|r| r.chance(0.02)) {
                    return Some((slave, true));
                }
            }
            view.write_target(queue).map(|t| (t.addr, false))
        }
    }
}

/// A producer: sends single records and batches to the checked topics (to the master its
/// route names), records every acknowledgement.
pub async fn producer(shared: Shared, id: u32, namesrv: SocketAddr) {
    let mut routes = Routes::new(namesrv);
    let mut conns = Conns::default();
    let mut seq = 0u64;
    loop {
        let (topic, queue, count, pause_ms) = shared.world.with_rng(|r| {
            (
                TOPICS[r.below(TOPICS.len() as u64) as usize],
                r.below(u64::from(QUEUES)) as u32,
                if r.chance(0.3) {
                    1 + r.below(8) as usize
                } else {
                    1
                },
                r.below(40),
            )
        });
        let bodies: Vec<Vec<u8>> = (0..count)
            .map(|i| format!("p{id}-{seq}-{i}").into_bytes())
            .collect();
        seq += 1;
        let delayed = shared.world.with_rng(|r| r.chance(0.2));
        let topic = if delayed { DELAYED_TOPIC } else { topic };
        let Some((addr, misrouted)) = send_target(&shared, &mut routes, topic, queue).await else {
            shared.checks.borrow_mut().sends_no_route += 1;
            rt::sleep(Duration::from_millis(50 + pause_ms)).await;
            continue;
        };
        let rpc = conns.to(addr);
        let ok = if misrouted {
            misrouted_send(&shared, rpc, topic, queue).await
        } else if delayed {
            let (props, malformed) = schedule_properties(&shared);
            let body = vec![format!("d{id}-{seq}").into_bytes()];
            send(&shared, rpc, topic, queue, &body, &props, malformed).await
        } else {
            send(&shared, rpc, topic, queue, &bodies, &[], false).await
        };
        if !ok {
            routes.stale(topic);
        }
        rt::sleep(Duration::from_millis(pause_ms)).await;
    }
}

/// The properties of a scheduled message, drawn: mostly short delays and levels (due within
/// a run), some delivery times (past ones included), a few long ones (the 2 h level, the
/// 3-day maximum: pending at the end), rarely a malformed one (must be refused).
fn schedule_properties(shared: &Shared) -> (Vec<u8>, bool) {
    use ringmq_wire::properties::{self, keys};
    let now = crate::io::clock::now_ms();
    let (key, value, malformed) = shared.world.with_rng(|r| match r.below(100) {
        0..=54 => (keys::TIMER_DELAY_MS, r.below(8_000).to_string(), false),
        55..=74 => (keys::DELAY, (1 + r.below(3)).to_string(), false),
        75..=89 => (
            keys::TIMER_DELIVER_MS,
            (now + r.below(6_000) as i64 - 1_000).to_string(),
            false,
        ),
        90..=93 => (keys::DELAY, "18".to_string(), false),
        94..=97 => (keys::TIMER_DELAY_SEC, "259200".to_string(), false),
        _ => (keys::TIMER_DELAY_MS, "soon".to_string(), true),
    });
    let mut out = Vec::new();
    properties::encode([(keys::TAGS, "delayed"), (key, value.as_str())], &mut out)
        .expect("the simulator's own properties encode");
    (out, malformed)
}

/// A send to a replica the route does not list as writable (a slave): never acknowledged.
async fn misrouted_send(shared: &Shared, rpc: &mut Rpc, topic: &str, queue: u32) -> bool {
    let body = b"misrouted".to_vec();
    let mut batch = Vec::new();
    let msg = sim_message(topic, queue, &body, &[]);
    if record::encode(&msg, &mut batch).is_err() {
        return false;
    }
    let h = SendRequest {
        producer_group: "sim-producers".to_string(),
        topic: topic.to_string(),
        queue_id: queue,
        batch: false,
        record_count: 1,
    };
    shared.checks.borrow_mut().misrouted_sends += 1;
    match rpc
        .call(RequestCode::SendMessage, &h, &batch, CALL_TIMEOUT_MS)
        .await
    {
        Ok(a) if a.status == Status::Success => {
            shared.fail(format!(
                "{topic}/{queue}: a send to {}, which the route lists as a slave, was acknowledged",
                rpc.addr
            ));
            false
        }
        _ => true,
    }
}

/// Sends `bodies` (one record each, `properties` on every one) and records what was
/// acknowledged in the oracle. False when no answer came or it was not SUCCESS (the route
/// may be stale).
pub(crate) async fn send(
    shared: &Shared,
    rpc: &mut Rpc,
    topic: &str,
    queue: u32,
    bodies: &[Vec<u8>],
    properties: &[u8],
    malformed: bool,
) -> bool {
    let mut batch = Vec::new();
    for b in bodies {
        let msg = sim_message(topic, queue, b, properties);
        if record::encode(&msg, &mut batch).is_err() {
            shared.fail("the simulator could not encode its own record".to_string());
            return false;
        }
        shared.oracle.borrow_mut().sent.insert(b.clone());
    }
    let h = SendRequest {
        producer_group: "sim-producers".to_string(),
        topic: topic.to_string(),
        queue_id: queue,
        batch: bodies.len() > 1,
        record_count: bodies.len() as u32,
    };
    let code = if h.batch {
        RequestCode::SendBatchMessage
    } else {
        RequestCode::SendMessage
    };
    let ans = match rpc.call(code, &h, &batch, CALL_TIMEOUT_MS).await {
        Ok(a) => a,
        Err(_) => {
            shared.checks.borrow_mut().sends_failed += 1;
            return false;
        }
    };
    if malformed {
        if ans.status == Status::Success {
            shared.fail(format!(
                "{topic}/{queue}: a malformed schedule was acknowledged"
            ));
        }
        return true;
    }
    if ans.status != Status::Success {
        shared.checks.borrow_mut().sends_failed += 1;
        return false;
    }
    let resp = match Response::<SendResponse>::decode(&ans.header) {
        Ok(Response {
            fields: Some(r), ..
        }) => r,
        _ => {
            shared.fail(format!("{topic}/{queue}: SUCCESS without send fields"));
            return false;
        }
    };
    if resp.record_count as usize != bodies.len() || resp.queue_id != queue {
        shared.fail(format!(
            "{topic}/{queue}: SUCCESS for {} records in queue {}, sent {}",
            resp.record_count,
            resp.queue_id,
            bodies.len()
        ));
    }
    let now = shared.world.now_ns();
    let mut oracle = shared.oracle.borrow_mut();
    // A scheduled message is stored in the timer queue (of shard 0, the simulator's only).
    let (stored_topic, stored_queue) = if resp.deliver_at_ms != 0 {
        (ringmq_wire::schedule::TIMER_TOPIC, 0)
    } else {
        (topic, queue)
    };
    for (i, b) in bodies.iter().enumerate() {
        let key = (
            stored_topic.to_string(),
            stored_queue,
            resp.first_queue_offset + i as u64,
        );
        if resp.deliver_at_ms != 0 {
            oracle
                .scheduled
                .insert(key.clone(), (b.clone(), resp.deliver_at_ms));
        }
        let acked = Acked {
            body: b.clone(),
            at_ns: now,
        };
        if let Some(prev) = oracle.acked.insert(key.clone(), acked) {
            if prev.body != *b {
                drop(oracle);
                shared.fail(format!(
                    "{key:?} acknowledged twice: {:?} then {:?}",
                    String::from_utf8_lossy(&prev.body),
                    String::from_utf8_lossy(b)
                ));
                return false;
            }
        }
    }
    shared.checks.borrow_mut().sends_ok += 1;
    true
}

/// A consumer of one queue of each checked topic: long-polling pulls from its cursor (at the
/// master its route names, else at a slave), checking every answer, committing offsets now
/// and then (at the master).
pub async fn consumer(shared: Shared, id: u32, namesrv: SocketAddr) {
    let mut routes = Routes::new(namesrv);
    let mut conns = Conns::default();
    let mut cursors: BTreeMap<(String, u32), u64> = BTreeMap::new();
    loop {
        let (topic, queue, suspend_ms, commit) = shared.world.with_rng(|r| {
            (
                TOPICS[r.below(TOPICS.len() as u64) as usize],
                r.below(u64::from(QUEUES)) as u32,
                if r.chance(0.7) {
                    500 + r.below(5_000)
                } else {
                    0
                },
                r.chance(0.1),
            )
        });
        let key = (topic.to_string(), queue);
        let offset = *cursors.get(&key).unwrap_or(&0);
        let target = match routes.get(&shared, topic).await {
            Some(Known::Route(view)) => view.read_target(queue),
            _ => None,
        };
        let Some(target) = target else {
            rt::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let rpc = conns.to(target.addr);
        match pull(&shared, rpc, target, topic, queue, offset, suspend_ms).await {
            Some(next) => {
                cursors.insert(key, next);
            }
            None => {
                routes.stale(topic);
                rt::sleep(Duration::from_millis(50)).await;
            }
        }
        if commit && target.master {
            let h = UpdateConsumerOffsetRequest {
                consumer_group: format!("{GROUP}-{id}"),
                topic: topic.to_string(),
                queue_id: queue,
                offset,
            };
            let _ = rpc
                .call(RequestCode::UpdateConsumerOffset, &h, &[], CALL_TIMEOUT_MS)
                .await;
            let q = QueryConsumerOffsetRequest {
                consumer_group: format!("{GROUP}-{id}"),
                topic: topic.to_string(),
                queue_id: queue,
            };
            let _ = rpc
                .call(RequestCode::QueryConsumerOffset, &q, &[], CALL_TIMEOUT_MS)
                .await;
        }
    }
}

/// One pull; the next offset to pull from, if the answer says.
async fn pull(
    shared: &Shared,
    rpc: &mut Rpc,
    target: QueueTarget,
    topic: &str,
    queue: u32,
    offset: u64,
    suspend_ms: u64,
) -> Option<u64> {
    let h = PullRequest {
        consumer_group: GROUP.to_string(),
        topic: topic.to_string(),
        queue_id: queue,
        queue_offset: offset,
        max_messages: 32,
        max_bytes: 1 << 20,
        filter_type: FilterType::Tag,
        expression: "*".to_string(),
        suspend_timeout_ms: suspend_ms as u32,
        commit_offset: None,
    };
    let sent_ns = shared.world.now_ns();
    let ans = rpc
        .call(
            RequestCode::PullMessage,
            &h,
            &[],
            CALL_TIMEOUT_MS + suspend_ms,
        )
        .await
        .ok()?;
    let fields = match Response::<PullResponse>::decode(&ans.header) {
        Ok(Response {
            fields: Some(f), ..
        }) => f,
        _ => return None,
    };
    match ans.status {
        Status::Success => {
            if suspend_ms > 0 && shared.world.now_ns() > sent_ns + 1_000_000 {
                shared.checks.borrow_mut().long_polls_woken += 1;
            }
            if !target.master {
                shared.checks.borrow_mut().slave_pulls += 1;
            }
            check_pulled(
                shared,
                target.addr,
                topic,
                queue,
                offset,
                &ans.body,
                &fields,
            );
            Some(fields.next_begin_offset)
        }
        Status::PullNotFound => {
            // A slave's parked pull waits for replication, which faults may hold up.
            if target.master {
                check_not_woken(shared, topic, queue, offset, sent_ns, suspend_ms);
            }
            Some(fields.next_begin_offset)
        }
        Status::PullOffsetMoved => Some(fields.next_begin_offset),
        _ => None,
    }
}

/// A FOUND answer: records decode, are the queue's, in order from the asked offset, were
/// sent by a client, match what was acknowledged there, and lie below the log end.
pub(crate) fn check_pulled(
    shared: &Shared,
    from: SocketAddr,
    topic: &str,
    queue: u32,
    offset: u64,
    body: &[u8],
    fields: &PullResponse,
) {
    let log_end = (shared.log_end)(from);
    let oracle = shared.oracle.borrow();
    let mut expect = offset;
    let mut n = 0u32;
    let mut rest = body;
    let mut failures = Vec::new();
    while !rest.is_empty() {
        let Some((size, _)) = record::peek_header(rest) else {
            failures.push(format!(
                "{topic}/{queue}@{offset}: pull body ends inside a header"
            ));
            break;
        };
        let size = size as usize;
        if size > rest.len() {
            failures.push(format!("{topic}/{queue}@{offset}: pull body cuts a record"));
            break;
        }
        let rec = match record::decode(&rest[..size]) {
            Ok(Entry::Record(r)) => r,
            Ok(Entry::Blank { .. }) => {
                failures.push(format!("{topic}/{queue}@{offset}: a BLANK in a pull"));
                break;
            }
            Err(e) => {
                failures.push(format!(
                    "{topic}/{queue}@{offset}: bad record in a pull: {e}"
                ));
                break;
            }
        };
        if rec.topic != topic || rec.queue_id != queue {
            failures.push(format!(
                "{topic}/{queue}@{offset}: pulled a record of {}/{}",
                rec.topic, rec.queue_id
            ));
        }
        if rec.queue_offset < expect {
            failures.push(format!(
                "{topic}/{queue}@{offset}: queue offset {} after {}",
                rec.queue_offset, expect
            ));
        }
        expect = rec.queue_offset + 1;
        if let Some(end) = log_end {
            if rec.physical_offset + size as u64 > end {
                failures.push(format!(
                    "{topic}/{queue}: pulled bytes {}..{} past the log end {end}",
                    rec.physical_offset,
                    rec.physical_offset + size as u64
                ));
            }
        }
        if !oracle.sent.contains(rec.body) {
            failures.push(format!(
                "{topic}/{queue}@{}: pulled a body no client sent: {:?}",
                rec.queue_offset,
                String::from_utf8_lossy(rec.body)
            ));
        }
        let key = (topic.to_string(), queue, rec.queue_offset);
        if let Some(a) = oracle.acked.get(&key) {
            if a.body != rec.body {
                failures.push(format!(
                    "{key:?}: pulled {:?}, acknowledged {:?}",
                    String::from_utf8_lossy(rec.body),
                    String::from_utf8_lossy(&a.body)
                ));
            }
        }
        n += 1;
        rest = &rest[size..];
    }
    drop(oracle);
    if n != fields.message_count {
        failures.push(format!(
            "{topic}/{queue}@{offset}: message_count {} but {n} records",
            fields.message_count
        ));
    }
    let mut c = shared.checks.borrow_mut();
    c.pulls_found += 1;
    c.pulled_records += u64::from(n);
    c.failures.extend(failures);
}

/// A long poll that came back empty after its whole suspension although a record it asked
/// for was acknowledged well before: the append did not wake it.
fn check_not_woken(
    shared: &Shared,
    topic: &str,
    queue: u32,
    offset: u64,
    sent_ns: u64,
    suspend_ms: u64,
) {
    if suspend_ms < 500 {
        return;
    }
    let now = shared.world.now_ns();
    // Acked at least a second before the answer and after the pull was sent: the append
    // happened while the pull was parked (network latency and sync delays are far shorter).
    let oracle = shared.oracle.borrow();
    let late = oracle
        .acked
        .range((topic.to_string(), queue, offset)..(topic.to_string(), queue, u64::MAX))
        .find(|(_, a)| a.at_ns > sent_ns && a.at_ns + 1_000_000_000 < now);
    if let Some((k, a)) = late {
        let msg = format!(
            "{k:?} acknowledged at {} ms but a pull parked on offset {offset} since {} ms answered PULL_NOT_FOUND at {} ms",
            a.at_ns / 1_000_000,
            sent_ns / 1_000_000,
            now / 1_000_000
        );
        drop(oracle);
        shared.fail(msg);
    }
}

/// Heartbeats, offset queries and create/delete of scratch topics at the master the name
/// server lists (never checked for durability: deleting a topic loses its records on
/// purpose).
pub async fn admin(shared: Shared, namesrv: SocketAddr) {
    let mut routes = Routes::new(namesrv);
    let mut conns = Conns::default();
    let mut n = 0u64;
    loop {
        rt::sleep(Duration::from_millis(
            500 + shared.world.with_rng(|r| r.below(2_000)),
        ))
        .await;
        n += 1;
        // The master the name server knows (GET_BROKER_CLUSTER_INFO).
        let Some(addr) = routes.any_master().await else {
            continue;
        };
        let rpc = conns.to(addr);
        let hb = HeartbeatData {
            client_id: "sim-client".to_string(),
            producer_groups: vec!["sim-producers".to_string()],
            consumer_groups: vec![ConsumerGroupData {
                group: GROUP.to_string(),
                consume_type: ConsumeType::Passively,
                message_model: MessageModel::Clustering,
                consume_from_where: ConsumeFromWhere::FirstOffset,
                subscriptions: TOPICS
                    .iter()
                    .map(|t| Subscription {
                        topic: t.to_string(),
                        filter_type: FilterType::Tag,
                        expression: "*".to_string(),
                        version: 1,
                    })
                    .collect(),
            }],
        };
        if let Ok(body) = hb.to_vec() {
            let _ = rpc
                .call(RequestCode::HeartBeat, &Empty, &body, CALL_TIMEOUT_MS)
                .await;
        }
        let scratch = format!("scratch-{}", n % 3);
        if shared.world.with_rng(|r| r.chance(0.5)) {
            let h = CreateTopicRequest {
                topic: scratch,
                read_queue_count: 2,
                write_queue_count: 2,
                perm: perm::READ_WRITE,
                attributes: BTreeMap::new(),
            };
            let _ = rpc
                .call(RequestCode::UpdateAndCreateTopic, &h, &[], CALL_TIMEOUT_MS)
                .await;
        } else {
            let h = DeleteTopicRequest { topic: scratch };
            let _ = rpc
                .call(RequestCode::DeleteTopicInBroker, &h, &[], CALL_TIMEOUT_MS)
                .await;
        }
    }
}

/// Requests a buggy or hostile client might send, on connections of their own to the master
/// and (a quarter of them) to the name server: every request code (and unknown ones), with
/// headers that are sampled values of the code's header type, the same with a byte flipped,
/// or random bytes, and random bodies. The server must answer each with a status (the frames
/// themselves are well formed) and keep serving everyone else; a panic ends the run. Sampled
/// values use short random names, so they do not touch the checked topics or brokers.
pub async fn fuzzer(shared: Shared, broker: SocketAddr, namesrv: SocketAddr) {
    use ringmq_wire::codec::sample::{Gen, Sample};
    use ringmq_wire::command::Request;
    let mut to_broker = Rpc::new(broker);
    let mut to_namesrv = Rpc::new(namesrv);
    loop {
        rt::sleep(Duration::from_millis(
            20 + shared.world.with_rng(|r| r.below(200)),
        ))
        .await;
        let (seed, kind, flip, body) = shared.world.with_rng(|r| {
            let seed: Vec<u8> = (0..r.below(96)).map(|_| r.below(256) as u8).collect();
            let body: Vec<u8> = (0..r.below(300)).map(|_| r.below(256) as u8).collect();
            (seed, r.below(3), r.below(4096) as usize, body)
        });
        let (code, mut header) = match kind {
            0 | 1 => {
                let req = Request::sample(&mut Gen::new(&seed));
                let Ok(h) = req.to_vec() else { continue };
                (u16::from(req.code()), h)
            }
            _ => {
                let code = shared.world.with_rng(|r| {
                    if r.chance(0.9) {
                        u16::from(RequestCode::ALL[r.below(RequestCode::ALL.len() as u64) as usize])
                    } else {
                        r.below(u64::from(u16::MAX)) as u16
                    }
                });
                (code, seed.clone())
            }
        };
        if kind == 1 && !header.is_empty() {
            let i = flip % header.len();
            header[i] ^= 1 << (flip % 8);
        }
        let rpc = if shared.world.with_rng(|r| r.chance(0.25)) {
            &mut to_namesrv
        } else {
            &mut to_broker
        };
        if rpc
            .call_raw(code, &header, &body, CALL_TIMEOUT_MS)
            .await
            .is_ok()
        {
            shared.checks.borrow_mut().fuzz_answered += 1;
        }
    }
}

/// A record as the simulated clients send it (born now, from one fixed client address).
pub(crate) fn sim_message<'a>(
    topic: &'a str,
    queue: u32,
    body: &'a [u8],
    properties: &'a [u8],
) -> Message<'a> {
    Message {
        topic,
        queue_id: queue,
        flag: 0,
        sys_flag: 0,
        born_timestamp_ms: crate::io::clock::now_ms(),
        born_host: SocketAddr::from(([10, 0, 10, 1], 40000)),
        store_host_v6: false,
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body,
        properties,
    }
}

/// Runs a client of `lone` on the clients' node for up to 60 virtual seconds: `steps` gets a
/// client state with checks of its own and the master's shard, and what its future returns
/// is the result.
pub(crate) fn run_lone_client<R, Fut>(
    world: &World,
    lone: &super::cluster::LoneMaster,
    steps: impl FnOnce(Shared, Rc<crate::broker::shard::Shard>) -> Fut,
) -> Result<R, String>
where
    R: 'static,
    Fut: std::future::Future<Output = Result<R, String>> + 'static,
{
    let shard = Rc::clone(lone.node.shard().ok_or("master down")?);
    let report: Rc<RefCell<Option<Result<R, String>>>> = Rc::default();
    let steps = steps(Shared::own_checks(world), shard);
    world.spawn_on(super::cluster::CLIENTS, {
        let report = Rc::clone(&report);
        async move {
            let r = steps.await;
            *report.borrow_mut() = Some(r);
        }
    });
    world.run_for(std::time::Duration::from_secs(60));
    let r = report.borrow_mut().take();
    r.unwrap_or_else(|| Err("the client did not finish in 60 virtual s".into()))
}
