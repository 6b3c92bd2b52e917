//! The load through the kills: `producers` native clients, each with `inflight` lanes that
//! send one message at a time (closed loop), and what the failover measurement needs from
//! them: every acknowledged message appended to the verify log ([`AckLog`]), acknowledged
//! sends counted per [`BUCKET_MS`] of the run, and, while a kill is watched, the first
//! moment each broker address acknowledged a send after the kill.
//!
//! With a rate cap, a lane takes the next free slot of a shared schedule (slot k at
//! `interval` after slot k-1, never earlier than now: no burst to catch up after a stall)
//! and sends when it comes.
//!
//! "Acknowledged" is SEND_OK only. The broker that acknowledged is the store host of the
//! send's offset message id (the address the broker publishes, as the controllers list it).
//! A lane whose send failed pauses [`ERROR_PAUSE`] before the next, so a dead route does not
//! spin; that pause bounds the resolution of a failover time from below.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringmq_client::wire::record::parse_message_id;
use ringmq_client::{ClientConfig, Message, Producer, SendStatus};

use crate::payload::{now_us, BodyMaker, Head};
use crate::produce::{error_kind, PRODUCER_GROUP};
use crate::verify::AckLog;

/// Width of one bucket of the acknowledgement counts.
pub const BUCKET_MS: u64 = 10;
/// The async timer's resolution.
const TIMER_RESOLUTION: Duration = Duration::from_millis(1);
/// Pause of a lane after a failed send.
pub const ERROR_PAUSE: Duration = Duration::from_millis(5);

/// Shared by the lanes and the run that watches them.
#[derive(Debug)]
pub struct Load {
    pub start: Instant,
    stop: AtomicBool,
    acks: AckLog,
    /// Acknowledged sends per [`BUCKET_MS`] since `start`.
    buckets: Mutex<Vec<u32>>,
    watch: Mutex<Option<Watch>>,
    pub acked: AtomicU64,
    pub failed: AtomicU64,
    /// Stored without SEND_OK (FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE, ...): not in the log.
    pub not_ok: AtomicU64,
    errors: Mutex<BTreeMap<String, u64>>,
    /// With a rate cap: the time between two sends, and when the next free slot is.
    pace: Option<(Duration, Mutex<Instant>)>,
}

/// After a kill: when each broker first acknowledged a send.
#[derive(Debug)]
struct Watch {
    since: Instant,
    first: HashMap<SocketAddr, Instant>,
}

/// What the producers were told.
#[derive(Debug, Clone)]
pub struct LoadPlan {
    pub name_servers: Vec<String>,
    pub topic: String,
    pub producers: u32,
    pub inflight: u32,
    pub size: usize,
    pub send_timeout: Duration,
    pub run_id: u64,
    pub reconnect_backoff_max: Option<Duration>,
}

/// Running lanes and their producers.
pub struct Running {
    pub load: Arc<Load>,
    producers: Vec<Producer>,
    lanes: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    /// Lanes sending at most `rate` sends per second in total (0: no cap).
    pub fn new(acks: AckLog, rate: u32) -> Load {
        let pace = (rate > 0).then(|| {
            (
                Duration::from_secs_f64(1.0 / f64::from(rate)),
                Mutex::new(Instant::now()),
            )
        });
        Load {
            pace,
            start: Instant::now(),
            stop: AtomicBool::new(false),
            acks,
            buckets: Mutex::new(Vec::new()),
            watch: Mutex::new(None),
            acked: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            not_ok: AtomicU64::new(0),
            errors: Mutex::new(BTreeMap::new()),
        }
    }

    /// From now on, note the first acknowledgement of each broker (a kill is about to
    /// happen at `since`).
    pub fn watch_from(&self, since: Instant) {
        *lock(&self.watch) = Some(Watch {
            since,
            first: HashMap::new(),
        });
    }

    /// When `addr` first acknowledged a send since the watch began.
    pub fn first_ack(&self, addr: SocketAddr) -> Option<Instant> {
        lock(&self.watch)
            .as_ref()
            .and_then(|w| w.first.get(&addr).copied())
    }

    pub fn unwatch(&self) {
        *lock(&self.watch) = None;
    }

    /// Acknowledged sends per [`BUCKET_MS`] so far.
    pub fn buckets(&self) -> Vec<u32> {
        lock(&self.buckets).clone()
    }

    pub fn error_kinds(&self) -> BTreeMap<String, u64> {
        lock(&self.errors).clone()
    }

    /// Waits for the next free slot of the schedule (at once without a cap).
    async fn paced(&self) {
        let Some((interval, next)) = &self.pace else {
            return;
        };
        let slot = {
            let mut next = lock(next);
            let slot = (*next).max(Instant::now());
            *next = slot + *interval;
            slot
        };
        // The timer's resolution is 1 ms: a slot less than that away is taken at once
        // (the schedule still holds on average; bursts are at most 1 ms of sends).
        if slot > Instant::now() + TIMER_RESOLUTION {
            tokio::time::sleep_until(slot.into()).await;
        }
    }

    fn on_ack(&self, at: Instant, addr: Option<SocketAddr>) {
        self.acked.fetch_add(1, Ordering::Relaxed);
        let i = (at.saturating_duration_since(self.start).as_millis() as u64 / BUCKET_MS) as usize;
        {
            let mut b = lock(&self.buckets);
            if b.len() <= i {
                b.resize(i + 1, 0);
            }
            b[i] += 1;
        }
        if let Some(addr) = addr {
            if let Some(w) = lock(&self.watch).as_mut() {
                if at >= w.since {
                    w.first.entry(addr).or_insert(at);
                }
            }
        }
    }

    fn on_error(&self, kind: String, detail: &str) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        let mut m = lock(&self.errors);
        let n = m.entry(kind.clone()).or_insert(0);
        if *n == 0 {
            eprintln!("ringmq-perf: send failed ({kind}): {detail}");
        }
        *n += 1;
    }
}

impl Running {
    /// Starts the producers (each fetches the topic's route) and their lanes.
    pub async fn start(plan: &LoadPlan, load: Arc<Load>) -> Result<Running, String> {
        let maker = Arc::new(BodyMaker::new(plan.size));
        let mut producers = Vec::new();
        let mut lanes = Vec::new();
        let mut cfg = ClientConfig {
            name_servers: plan.name_servers.clone(),
            ..ClientConfig::default()
        };
        if let Some(max) = plan.reconnect_backoff_max {
            cfg.reconnect_backoff_max = max;
            cfg.reconnect_backoff_min = cfg.reconnect_backoff_min.min(max);
        }
        for i in 0..plan.producers {
            let id = (plan.run_id << 16) | u64::from(i);
            let p = Producer::builder()
                .group(PRODUCER_GROUP)
                .client_config(cfg.clone())
                .instance_name(format!("perf-{id:016x}"))
                .send_timeout(plan.send_timeout)
                .request_timeout(plan.send_timeout)
                .start()
                .await
                .map_err(|e| format!("starting producer {i}: {e}"))?;
            p.write_queues(&plan.topic)
                .await
                .map_err(|e| format!("route of {}: {e}", plan.topic))?;
            let seq = Arc::new(AtomicU64::new(0));
            for _ in 0..plan.inflight {
                let lane = Lane {
                    load: Arc::clone(&load),
                    producer: p.clone(),
                    id,
                    seq: Arc::clone(&seq),
                    maker: Arc::clone(&maker),
                    topic: plan.topic.clone(),
                };
                lanes.push(tokio::spawn(lane.run()));
            }
            producers.push(p);
        }
        Ok(Running {
            load,
            producers,
            lanes,
        })
    }

    /// Stops the lanes (each finishes its send in flight) and the producers.
    pub async fn stop(self) {
        self.load.stop.store(true, Ordering::Relaxed);
        for l in self.lanes {
            let _ = l.await;
        }
        for p in &self.producers {
            p.shutdown().await;
        }
    }
}

struct Lane {
    load: Arc<Load>,
    producer: Producer,
    id: u64,
    seq: Arc<AtomicU64>,
    maker: Arc<BodyMaker>,
    topic: String,
}

impl Lane {
    async fn run(self) {
        let load = &self.load;
        while !load.stop.load(Ordering::Relaxed) {
            load.paced().await;
            let seq = self.seq.fetch_add(1, Ordering::Relaxed);
            let body = self.maker.body(Head {
                producer: self.id,
                seq,
                send_us: now_us(),
            });
            let result = self
                .producer
                .send(Message::new(self.topic.clone(), body))
                .await;
            let at = Instant::now();
            match result {
                Ok(r) if r.status == SendStatus::Ok => {
                    let q = &r.queue;
                    let logged = load.acks.append(
                        self.id,
                        seq,
                        1,
                        &q.broker_name,
                        q.queue_id,
                        r.queue_offset,
                    );
                    if let Err(e) = logged {
                        eprintln!("ringmq-perf: writing the verify log: {e}; stopping");
                        load.stop.store(true, Ordering::Relaxed);
                        return;
                    }
                    let addr = parse_message_id(&r.msg_id).ok().map(|(host, _)| host);
                    load.on_ack(at, addr);
                }
                Ok(r) => {
                    load.not_ok.fetch_add(1, Ordering::Relaxed);
                    load.on_error(format!("{:?}", r.status), "stored, not acknowledged OK");
                }
                Err(e) => {
                    load.on_error(error_kind(&e), &e.to_string());
                    tokio::time::sleep(ERROR_PAUSE).await;
                }
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
