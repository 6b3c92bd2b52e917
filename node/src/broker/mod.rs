//! The broker, in floors (docs/architecture.md, "Floors"). This file and the shared tables
//! beside it (topics, groups, offsets, locks, live settings, group settings, the role) are
//! the bottom of the shard core: state shared by all shards (`Broker`: configuration, topic
//! table, consumer groups, per-shard counters, the shards' mailboxes); `shard/` is the rest
//! of the core. Each other child is a feature (a room with one door), and `dispatch.rs` (the
//! router) and `node.rs` (the rooms a broker runs with) are the top. Requests run on the
//! shard that owns the queue they touch; the data path takes no lock (the topic table is an
//! atomically swapped snapshot, counters are atomics).

pub(crate) mod acl_admin;
pub(crate) mod admin;
pub(crate) mod auth_admin;
pub(crate) mod clients;
pub(crate) mod controller;
pub(crate) mod dispatch;
pub(crate) mod group_config;
pub(crate) mod groups;
pub(crate) mod ha;
pub(crate) mod live;
pub(crate) mod locks;
pub mod node;
pub(crate) mod offsets;
pub(crate) mod pop;
pub(crate) mod produce;
pub(crate) mod pull;
pub(crate) mod queries;
pub(crate) mod query;
pub(crate) mod recall;
pub(crate) mod register;
pub(crate) mod request_reply;
pub(crate) mod retry;
pub(crate) mod role;
pub(crate) mod schedule;
pub mod shard;
pub(crate) mod topics;
pub(crate) mod txn;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use ringmq_wire::command::runtime::ShardStats;

use crate::config::{BrokerConfig, FlushDiskType};
use crate::shard::mailbox::Mail;

pub use groups::ConsumerGroups;
pub use topics::{TopicTable, Topics};

/// Counters of one shard, readable from any shard. Only its own shard writes them; aligned
/// to 128 bytes (two cache lines, as x86's adjacent-line prefetch pairs them) so that two
/// shards' counters never share a line.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct ShardCounters {
    pub msgs_in: AtomicU64,
    pub msgs_out: AtomicU64,
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    pub connections: AtomicU32,
    pub parked_pulls: AtomicU32,
    pub queues: AtomicU32,
    pub store_bytes: AtomicU64,
    pub min_offset: AtomicU64,
    pub max_offset: AtomicU64,
    /// Replication: slaves connected (master role).
    pub ha_slaves: AtomicU32,
    /// Replication lag in bytes: behind the master (slave role) or of the best slave (master).
    pub ha_lag_bytes: AtomicU64,
    /// Milliseconds since the best slave last had everything (master role).
    pub ha_lag_ms: AtomicU64,
    /// Messages per second in and out over the last counter tick.
    pub msgs_in_per_s: AtomicU64,
    pub msgs_out_per_s: AtomicU64,
}

impl ShardCounters {
    pub fn snapshot(&self, shard_id: u16) -> ShardStats {
        ShardStats {
            shard_id,
            msgs_in: self.msgs_in.load(Ordering::Relaxed),
            msgs_out: self.msgs_out.load(Ordering::Relaxed),
            bytes_in: self.bytes_in.load(Ordering::Relaxed),
            bytes_out: self.bytes_out.load(Ordering::Relaxed),
            connections: self.connections.load(Ordering::Relaxed),
            parked_pulls: self.parked_pulls.load(Ordering::Relaxed),
            queues: self.queues.load(Ordering::Relaxed),
            store_bytes: self.store_bytes.load(Ordering::Relaxed),
            commitlog_min_offset: self.min_offset.load(Ordering::Relaxed),
            commitlog_max_offset: self.max_offset.load(Ordering::Relaxed),
        }
    }
}

/// Counts a shard's loop publishes for GET_TRANSACTION_STATUS.
#[derive(Debug, Clone, Default)]
pub struct TxnCounts {
    /// Pending halves per producer group: (count, oldest store time ms).
    pub pending: std::collections::BTreeMap<String, (u64, i64)>,
    pub checks_sent: u64,
    pub checks_unanswerable: u64,
    pub discarded: u64,
    pub redone: u64,
    /// Still indexing halves and decisions after a start (pending counts are not complete).
    pub indexing: bool,
}

/// Settings the running broker reads on the data path, fixed at start.
#[derive(Debug, Clone)]
pub struct Runtime {
    pub flush: FlushDiskType,
    pub frame_bytes_max: usize,
    /// Copy record bytes into pull responses instead of splicing them from the log file or
    /// sending them from its mapping (RocketMQ's `transferMsgByHeap`).
    pub transfer_msg_by_heap: bool,
    pub long_polling: bool,
    /// `slaveReadEnable`: a pull whose consumer is more than this many log bytes behind the
    /// end is told to read from the slave (`accessMessageInMemoryMaxRatio` of the machine's
    /// memory); `None` when slave reads are off.
    pub slave_read_behind_bytes: Option<u64>,
}

/// State shared by every shard of the broker.
#[derive(Debug)]
pub struct Broker {
    pub config: BrokerConfig,
    /// The router and the rooms (features) this broker runs with (`shard::hooks`).
    pub hooks: shard::hooks::Hooks,
    /// Accounts and permissions, when `aclEnable=true`.
    pub acl: Option<crate::acl::Acl>,
    /// `innerAccessKey`/`innerSecretKey`: signs the broker's own requests.
    pub inner_credentials: Option<ringmq_wire::auth::Credentials>,
    pub rt: Runtime,
    /// Settings UPDATE_BROKER_CONFIG may change while running.
    pub live: live::Live,
    /// Address clients and name servers see (`brokerIP1:listenPort`); also the store host.
    pub addr: SocketAddr,
    pub shard_count: u16,
    pub topics: Topics,
    pub groups: Mutex<ConsumerGroups>,
    /// Consumer groups' settings (`config/subscriptionGroup.json`).
    pub group_configs: Mutex<group_config::GroupConfigs>,
    /// Queue locks of orderly consumers.
    pub locks: Mutex<locks::QueueLocks>,
    /// Ids of connections (clients' channels), unique in this process.
    pub next_conn: AtomicU64,
    /// Request ids of broker -> client requests.
    pub push_seq: AtomicU64,
    pub counters: Vec<ShardCounters>,
    /// Per shard: its schedule's counts, as its delivery loop last published them.
    pub schedule: Vec<Mutex<crate::store::schedule::ScheduleCounts>>,
    /// Per shard: what it last published for the metrics endpoint (`crate::metrics::shard`).
    pub metric_views: Vec<Mutex<std::sync::Arc<crate::metrics::shard::ShardView>>>,
    /// Per shard: its transaction check loop's counts, as it last published them.
    pub txn: Vec<Mutex<TxnCounts>>,
    pub mailboxes: Vec<flume::Sender<Mail>>,
    pub connections: AtomicUsize,
    pub shutting_down: AtomicBool,
    /// At least one name server accepted a registration (the ready line waits for it).
    pub registered: AtomicBool,
    /// The last refusal of a registration by a name server (status and remark), for the
    /// start to report ([`Broker::registration_refusal`]).
    pub registration_refused: Mutex<Option<String>>,
    /// Woken when the topic table changes, so registration runs at once.
    pub topics_changed: event_listener::Event,
    pub started_ms: i64,
    /// Slave role: the master's broker and HA addresses, from `haMasterAddress` or learned
    /// from the name server's registration answer.
    pub master: Mutex<MasterAddrs>,
    /// This broker's HA address (masters), published to name servers.
    pub ha_addr: Option<SocketAddr>,
    /// Each shard's own listener (`shard::ports`), by shard id; empty with one shard.
    pub shard_addrs: Vec<SocketAddr>,
    /// Controller mode: the role the controllers gave this broker (`controller`).
    pub role: role::RoleState,
    /// The newest master epoch in any shard's store.
    pub store_epoch: AtomicU32,
    /// TLS of the client and HA listeners (`tls.server.*`) and of this broker's own
    /// connections to name servers and its master (`tls.enable`, `tls.client.*`).
    pub tls: crate::io::tls::NodeTls,
}

/// Where a slave's master is.
#[derive(Debug, Clone, Default)]
pub struct MasterAddrs {
    pub broker: Option<SocketAddr>,
    pub ha: Option<SocketAddr>,
}

impl Broker {
    /// The node's wall clock, Unix ms (virtual in the simulator).
    pub fn now_ms() -> i64 {
        crate::io::clock::now_ms()
    }

    /// The shard that owns a queue, if the topic exists and the queue is in range.
    pub fn owner(&self, table: &TopicTable, topic: &str, queue_id: u32) -> Option<u16> {
        table
            .get(topic)
            .and_then(|t| t.queue_shards.get(queue_id as usize).copied())
    }

    /// The master's HA address (slave role).
    pub fn master_ha_addr(&self) -> Option<SocketAddr> {
        self.master.lock().unwrap_or_else(|p| p.into_inner()).ha
    }

    /// The master's broker address (slave role), for topic table sync.
    pub fn master_broker_addr(&self) -> Option<SocketAddr> {
        let m = self.master.lock().unwrap_or_else(|p| p.into_inner());
        m.broker.or_else(|| {
            m.ha.map(|h| SocketAddr::new(h.ip(), h.port().saturating_sub(1)))
        })
    }

    pub fn lock_groups(&self) -> std::sync::MutexGuard<'_, ConsumerGroups> {
        self.groups.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn lock_locks(&self) -> std::sync::MutexGuard<'_, locks::QueueLocks> {
        self.locks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A consumer group's retry limit: its setting, else `maxReconsumeTimes`.
    pub fn retry_max_times(&self, group: &str) -> u32 {
        self.group_configs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retry_max_times(group)
            .unwrap_or(self.config.max_reconsume_times)
    }

    /// Whether a consumer group consumes orderly (its `consume_message_orderly` setting).
    pub fn orderly(&self, group: &str) -> bool {
        self.group_configs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .orderly(group)
    }

    /// How long a queue lock lasts without renewal (`rebalanceLockMaxLiveTime`).
    pub fn lock_max_live_ms(&self) -> i64 {
        i64::try_from(self.config.rebalance_lock_max_live_time_ms).unwrap_or(i64::MAX)
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Relaxed)
    }

    /// Why a name server refused this broker's registration, when one did.
    pub fn registration_refusal(&self) -> Option<String> {
        self.registration_refused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}
