//! A shard: one OS thread, pinned to a core, running one event loop that owns a set of
//! queues with no locks: their CommitLog and ConsumeQueues (the `Store`), their consumer
//! offsets, their parked long-poll pulls, its connections. Shards talk only through bounded
//! mailboxes ([`crate::shard::mailbox::Mail`]).
//!
//! Timers on the loop replace RocketMQ's service threads: the flusher (group commit for
//! SYNC_FLUSH, checkpoint every `flushIntervalCommitLog` for ASYNC_FLUSH), offset
//! persistence, retention, counters.

pub(crate) mod ack;
pub(crate) mod catch_up;
pub(crate) mod copy;
pub(crate) mod filter;
pub(crate) mod flusher;
pub mod hooks;
pub(crate) mod metrics;
pub(crate) mod ports;
pub(crate) mod reroute;
pub mod route;
pub(crate) mod run;
pub mod start;
pub(crate) mod timers;
pub(crate) mod watch;

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::Arc;

use event_listener::Event;

use crate::broker::offsets::ConsumerOffsets;
use crate::broker::{Broker, ShardCounters};
use crate::ha::master::Replicas;
use crate::io::net::SharedFile;
use crate::io::node_disk::{FileHandle, NodeDisk};
use crate::store::index::KeyIndex;
use crate::store::Store;

pub use flusher::Flusher;

/// Pull responses with fewer record bytes than this are copied. io_uring hands every splice
/// to a worker thread, so a spliced response costs the shard two hand-offs (file -> pipe,
/// pipe -> socket) and their wake-ups; a copy costs two memcpys (log mapping -> response,
/// response -> socket) and no hand-off. Measured on loopback with one consumer catching up
/// (docs/perf.md, "Splice, mapping or copy"), the copy cost the node 22-35 % less CPU per
/// message at responses of 32 to 512 KiB and about the same at 1 MiB; responses of
/// [`SHARED_MIN_BYTES`] and more now leave from the mapping, which saves the first memcpy.
pub const SPLICE_MIN_BYTES: usize = 1024 * 1024;
/// Replication transfers of fewer bytes than this are copied rather than spliced. Not
/// measured against the copy since pulls' threshold moved to [`SPLICE_MIN_BYTES`]; kept
/// where it was.
pub const HA_SPLICE_MIN_BYTES: usize = 16 * 1024;
/// Responses whose runs average fewer bytes than this are copied too: each run costs its own
/// splices, and a filter that keeps scattered records (SQL92, rare tags) makes one run per
/// record.
pub const SPLICE_RUN_MIN_BYTES: usize = 4 * 1024;
/// A copied pull response of at least this many bytes is sent from the log's mapping
/// instead (views of it beside the header in one vectored send: the broker's copy into a
/// buffer is gone, the kernel's into the socket stays), unless `transferMsgByHeap`.
pub const SHARED_MIN_BYTES: usize = 16 * 1024;
/// At most this many runs of the log in a response sent from the mapping (one iovec each);
/// a pull whose records are scattered wider is copied.
pub const SHARED_RUNS_MAX: usize = 64;

/// Records the key index takes per step of its periodic catch-up.
pub const INDEX_STEP_RECORDS: usize = 256;

/// Everything one shard owns. Lives in an `Rc` on the shard's thread; `RefCell` borrows are
/// never held across an `.await`.
pub struct Shard {
    pub id: u16,
    pub broker: Arc<Broker>,
    pub store: RefCell<Store<NodeDisk>>,
    pub offsets: RefCell<ConsumerOffsets>,
    /// Per (topic, queue): the event parked pulls wait on.
    parked: RefCell<HashMap<String, BTreeMap<u32, Rc<Event>>>>,
    pub parked_count: Cell<usize>,
    /// Long polls waiting across shards: this shard's for other shards' queues, and other
    /// shards' for this one's ([`watch`]).
    watches: watch::Watches,
    pub flusher: Flusher,
    /// Descriptors of log segments for zero-copy sends, by segment start.
    files: RefCell<Vec<(u64, FileHandle)>>,
    pub connections: Cell<usize>,
    /// Write queues of this shard's client connections, by connection id (for requests the
    /// broker sends to clients).
    pub conns: RefCell<HashMap<u64, std::rc::Weak<crate::net::connection::OutQueue>>>,
    /// Slaves of this shard (master role).
    pub replicas: RefCell<Replicas>,
    /// Notified after every append (wakes replication pushers).
    pub log_appended: Event,
    /// Notified after every slave acknowledgement (wakes SYNC_MASTER sends).
    pub ha_acked: Event,
    /// Notified when a scheduled message is stored (wakes the delivery loop).
    pub schedule_kick: Event,
    /// The master's log end as last heard (slave role; for lag).
    pub master_end: Cell<u64>,
    /// (msgs in, msgs out, when) at the last rate computation.
    pub rate_sample: Cell<Option<(u64, u64, crate::io::clock::Instant)>>,
    /// The key index (query by key), built behind the log; `None` when
    /// `messageIndexEnable=false`.
    pub index: Option<RefCell<KeyIndex<NodeDisk>>>,
    /// Log bytes may be spliced from segment files to sockets (zero copy). Only on the
    /// io_uring loop: the epoll fallback waits for readiness, which a regular file never
    /// reports, so a splice from the log would never complete there; that loop copies.
    pub splice_ok: bool,
    /// Pulls of released log bytes, read with `O_DIRECT` ([`catch_up`]).
    pub catch_up: catch_up::CatchUp,
    /// What this shard records for the metrics endpoint (`crate::metrics::shard`).
    pub metrics: RefCell<crate::metrics::shard::Recorder>,
    /// What the broker's rooms (features) keep per shard ([`hooks::Room::shard_state`]).
    rooms: hooks::RoomStates,
    /// RocketMQ's confirmOffset: consumers (pulls, POP, queries by key) never see a record
    /// that ends above it. `None`, the default and what a broker outside controller mode
    /// keeps, caps nothing. A master sets it from its SyncStateSet's acknowledgements
    /// (`Replicas::confirm_offset`), a slave from its master's transfers. Change it with
    /// [`Self::set_confirm`], which wakes the pulls waiting for it.
    pub confirm: Cell<Option<u64>>,
    /// Controller mode: the master epoch this shard takes writes in (its store recorded
    /// it), 0 while it takes none.
    pub serving_epoch: Cell<u32>,
    /// Bumped whenever this shard starts or stops being a master's: the master-only loops
    /// (schedule, transaction checks, POP revive) run while it still has the value they
    /// started with ([`Self::master_running`]).
    pub master_gen: Cell<u64>,
    /// Controller mode, master: per slave waiting to join the SyncStateSet, this shard's log
    /// end when it first saw it waiting. From then on its SYNC_MASTER acknowledgements wait
    /// for that slave too, so once the slave has this much it holds every record this shard
    /// acknowledged (see `controller::in_sync`).
    pub join_fence: RefCell<BTreeMap<u64, u64>>,
}

impl std::fmt::Debug for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shard").field("id", &self.id).finish()
    }
}

impl Shard {
    pub fn new(
        id: u16,
        broker: Arc<Broker>,
        store: Store<NodeDisk>,
        offsets: ConsumerOffsets,
        splice_ok: bool,
    ) -> Self {
        let synced = store.synced_offset();
        let metrics = crate::metrics::shard::Recorder::new(
            broker.config.metrics.is_on(),
            broker.config.metrics.series_max,
        );
        let rooms = hooks::RoomStates::new(&broker.hooks);
        Shard {
            id,
            broker,
            store: RefCell::new(store),
            offsets: RefCell::new(offsets),
            parked: RefCell::new(HashMap::new()),
            parked_count: Cell::new(0),
            watches: watch::Watches::default(),
            flusher: Flusher::new(synced),
            files: RefCell::new(Vec::new()),
            connections: Cell::new(0),
            conns: RefCell::new(HashMap::new()),
            replicas: RefCell::new(Replicas::default()),
            log_appended: Event::new(),
            ha_acked: Event::new(),
            schedule_kick: Event::new(),
            master_end: Cell::new(0),
            rate_sample: Cell::new(None),
            index: None,
            splice_ok,
            catch_up: catch_up::CatchUp::new(),
            metrics: RefCell::new(metrics),
            rooms,
            confirm: Cell::new(None),
            serving_epoch: Cell::new(0),
            join_fence: RefCell::default(),
            master_gen: Cell::new(0),
        }
    }

    /// Moves the confirmOffset cap (see [`Self::confirm`]); when it moved, parked pulls and
    /// POPs look again and replication links tell their slaves at once.
    pub fn set_confirm(&self, confirm: Option<u64>) {
        if self.confirm.replace(confirm) != confirm {
            self.wake_all();
            self.log_appended.notify(usize::MAX);
        }
    }

    /// Where consumers' reads end: the confirmOffset, or everything when there is none.
    pub fn visible_end(&self) -> u64 {
        self.confirm.get().unwrap_or(u64::MAX)
    }

    /// Raises the cap to `confirm` if that is above it: a master's cap never moves back
    /// (consumers may have read up to it), whatever [`crate::ha::master::Replicas::
    /// confirm_offset`] computes from acknowledgements of reconnected slaves.
    pub fn advance_confirm(&self, confirm: u64) {
        let next = self.confirm.get().map_or(confirm, |c| c.max(confirm));
        self.set_confirm(Some(next));
    }

    /// Cuts the log, its ConsumeQueues, epochs and key index back to `end` (a replica past
    /// its consistent point with the master, or ahead of it), and forgets segment
    /// descriptors past it.
    pub fn truncate_log(&self, end: u64) -> crate::store::Result<()> {
        self.store.borrow_mut().truncate_to(end)?;
        if let Some(index) = &self.index {
            index.borrow_mut().truncate(end)?;
        }
        // A segment starting at or after `end` may have been removed; its path will name a
        // new file.
        let min = self.store.borrow().min_offset();
        self.files
            .borrow_mut()
            .retain(|(s, _)| *s >= min && *s < end);
        Ok(())
    }

    /// Queues a frame for a client's channel, on this shard or through the owning shard's
    /// mailbox; false when it cannot be (connection gone, queue or mailbox full).
    pub fn push_to_client(&self, ch: crate::broker::groups::Channel, frame: Vec<u8>) -> bool {
        if ch.shard == self.id {
            return self.push_local(ch.conn, frame);
        }
        match self.broker.mailboxes.get(usize::from(ch.shard)) {
            Some(mb) => mb
                .try_send(crate::shard::mailbox::Mail::Push {
                    conn: ch.conn,
                    frame,
                })
                .is_ok(),
            None => false,
        }
    }

    /// Sends a oneway request to a client's channel; false if it could not be queued (encoding
    /// failed, the shard's mailbox is full or the connection is gone).
    pub fn send_oneway(
        &self,
        ch: crate::broker::groups::Channel,
        code: ringmq_wire::code::RequestCode,
        header: &(impl ringmq_wire::codec::Encode + ?Sized),
        body: &[u8],
    ) -> bool {
        let id = self
            .broker
            .push_seq
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut bytes = Vec::new();
        if let Err(e) = ringmq_wire::frame::encode_request(&mut bytes, code, true, id, header, body)
        {
            log::warn!("{}: encoding for a client: {e}", code.name());
            return false;
        }
        self.push_to_client(ch, bytes)
    }

    /// Queues a frame on one of this shard's connections.
    pub fn push_local(&self, conn: u64, frame: Vec<u8>) -> bool {
        let out = self
            .conns
            .borrow()
            .get(&conn)
            .and_then(std::rc::Weak::upgrade);
        out.is_some_and(|o| o.push_frame(frame))
    }

    /// Appends to `out` a record of one of this shard's state topics (transaction ops, POP
    /// state, recalls: queue = this shard's id), born here at `now_ms`.
    pub fn state_record(
        &self,
        topic: &str,
        body: &[u8],
        now_ms: i64,
        out: &mut Vec<u8>,
    ) -> Result<usize, ringmq_wire::WireError> {
        let msg = ringmq_wire::record::Message {
            topic,
            queue_id: u32::from(self.id),
            flag: 0,
            sys_flag: 0,
            born_timestamp_ms: now_ms,
            born_host: self.broker.addr,
            store_host_v6: self.broker.addr.is_ipv6(),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body,
            properties: &[],
        };
        ringmq_wire::record::encode(&msg, out)
    }

    /// Whether a master-only loop started in generation `gen` should go on.
    pub fn master_running(&self, gen: u64) -> bool {
        !self.broker.is_shutting_down() && self.master_gen.get() == gen
    }

    pub fn counters(&self) -> &ShardCounters {
        &self.broker.counters[self.id as usize]
    }

    /// The event a pull parked on `(topic, queue)` waits for.
    pub fn queue_event(&self, topic: &str, queue_id: u32) -> Rc<Event> {
        let mut parked = self.parked.borrow_mut();
        if !parked.contains_key(topic) {
            parked.insert(topic.to_string(), BTreeMap::new());
        }
        let qs = parked.get_mut(topic).expect("inserted above when missing");
        Rc::clone(qs.entry(queue_id).or_insert_with(|| Rc::new(Event::new())))
    }

    /// Wakes pulls parked on `(topic, queue)` (after an append to it, or whatever else may
    /// make a message of it ready), and tells the shards whose long polls wait for `topic`
    /// ([`watch`]).
    pub fn wake_queue(&self, topic: &str, queue_id: u32) {
        self.tell_waiting(topic);
        if self.parked_count.get() == 0 {
            return;
        }
        if let Some(ev) = self
            .parked
            .borrow()
            .get(topic)
            .and_then(|qs| qs.get(&queue_id))
        {
            ev.notify(usize::MAX);
        }
    }

    /// Indexes what the log holds beyond the key index (bounded per call), at once: for a
    /// query that must see everything stored.
    pub fn index_pending(&self) {
        self.index_some(crate::store::index::INDEX_BATCH_RECORDS_MAX);
    }

    /// The key index's periodic catch-up, in steps of [`INDEX_STEP_RECORDS`] with a yield
    /// between them: indexing 10,000 records in one go held the shard for ~20 ms, which
    /// showed as the p99 of everything else it serves (scheduled deliveries, sends, pulls).
    pub async fn index_in_steps(&self) {
        let steps = crate::store::index::INDEX_BATCH_RECORDS_MAX / INDEX_STEP_RECORDS;
        for _ in 0..steps {
            if self.index_some(INDEX_STEP_RECORDS) < INDEX_STEP_RECORDS {
                return;
            }
            crate::io::rt::yield_now().await;
        }
    }

    /// Indexes up to `max` records; how many it indexed.
    fn index_some(&self, max: usize) -> usize {
        let Some(index) = &self.index else {
            return 0;
        };
        let store = self.store.borrow();
        let res = crate::store::index::index_pending(&store, &mut index.borrow_mut(), max);
        res.unwrap_or_else(|e| {
            log::warn!("shard {}: key index: {e}", self.id);
            0
        })
    }

    /// Writes the key index headers and syncs them.
    pub fn flush_index(&self) {
        if let Some(index) = &self.index {
            if let Err(e) = index.borrow_mut().flush() {
                log::warn!("shard {}: key index flush: {e}", self.id);
            }
        }
    }

    /// Wakes every parked pull and pop, those waiting for other shards' queues too
    /// (shutdown: they answer at once; the read cap moved: they look again), and tells every
    /// shard whose long polls wait for a topic here.
    pub fn wake_all(&self) {
        self.tell_all_waiting();
        for qs in self.parked.borrow().values() {
            for ev in qs.values() {
                ev.notify(usize::MAX);
            }
        }
    }

    /// A descriptor for zero-copy sends from the segment holding `physical_offset`.
    pub fn segment_file(&self, physical_offset: u64) -> std::io::Result<(SharedFile, u64)> {
        let (handle, off) = self.segment_handle(physical_offset)?;
        Ok((handle.shared()?, off))
    }

    /// An owned handle of the segment holding `physical_offset` (for syncs on the loop and
    /// zero-copy sends), and the offset inside it.
    pub fn segment_handle(&self, physical_offset: u64) -> std::io::Result<(FileHandle, u64)> {
        let store = self.store.borrow();
        let (file, off) = store
            .locate(physical_offset)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::NotFound, e.to_string()))?;
        let start = physical_offset - off;
        let mut files = self.files.borrow_mut();
        if let Some((_, f)) = files.iter().find(|(s, _)| *s == start) {
            return Ok((f.clone(), off));
        }
        let handle = store.disk().handle(file)?;
        files.retain(|(s, _)| *s >= store.min_offset());
        files.push((start, handle.clone()));
        Ok((handle, off))
    }

    /// The shard's disk (a clone: it is a handle).
    pub fn disk(&self) -> NodeDisk {
        self.store.borrow().disk().clone()
    }

    /// Forgets cached segment descriptors (after retention removed segments).
    pub fn forget_files(&self) {
        let min = self.store.borrow().min_offset();
        self.files.borrow_mut().retain(|(s, _)| *s >= min);
    }
}
