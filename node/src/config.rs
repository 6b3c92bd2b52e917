//! Broker and name server configuration: RocketMQ `broker.properties` files (or flat TOML
//! with the same keys, chosen by the `.toml` extension) into typed `BrokerConfig` and
//! `NamesrvConfig`.
//!
//! Owns: the key names (RocketMQ's, spelled as RocketMQ spells them), their defaults (RocketMQ's
//! unless a field says otherwise), value checks, and the report of what was not applied.
//!
//! Invariants:
//! - every key in a file or a command-line override (`--set`, [`BrokerConfig::apply_overrides`])
//!   is either applied, or reported in `LoadedConfig::ignored` (a key RocketMQ knows that
//!   ringmq does not implement yet), or an error naming the key (a typo; a near match is
//!   suggested). Nothing is dropped silently, and a key is judged the same on both paths.
//! - a config returned by `load*` has passed `validate()`; fields are `pub` so command-line
//!   overrides can be applied afterwards, and then `validate()` must be called again.
//!
//! Reading the file is the only I/O here (plus the host name, RocketMQ's default
//! `brokerName`). The readers live in `config/source.rs`, the key tables in `config/keys.rs` and
//! `config/ignored.rs`.

mod acl;
mod controller;
mod ignored;
mod keys;
mod metrics;
mod source;
mod tls;

use std::fmt;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::limits;

pub use acl::{AclConfig, ACL_FILE_NAME};
pub use controller::{parse_self_id, ControllerConfig};
pub use metrics::{MetricsConfig, MetricsExporter, PROM_PORT_DEFAULT, SERIES_MAX_DEFAULT};
pub use ringmq_wire::command::route::{perm, BrokerRole};
pub use tls::{ClientAuth, TlsConfig, TlsMode};

/// `commitLogPrewriteBytes` when not set.
pub const COMMIT_LOG_PREWRITE_BYTES_DEFAULT: u64 = 256 << 10;
/// `commitLogCacheKeepBytes` when it is not set, on a machine with free page reporting.
pub const COMMIT_LOG_CACHE_KEEP_BYTES_REPORTING: u64 = 1 << 30;

/// When a write is acknowledged relative to fdatasync (`flushDiskType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushDiskType {
    /// Ack from the page cache; a timer flushes every `flushIntervalCommitLog` ms.
    AsyncFlush,
    /// Ack after a (group-committed) fdatasync covering the record.
    SyncFlush,
}

impl FlushDiskType {
    /// RocketMQ's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            FlushDiskType::AsyncFlush => "ASYNC_FLUSH",
            FlushDiskType::SyncFlush => "SYNC_FLUSH",
        }
    }
}

/// Broker configuration, RocketMQ key names in the field docs. Durations and sizes carry
/// their unit in the field name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerConfig {
    // --- identity ---
    /// `brokerClusterName`, default `DefaultCluster`.
    pub broker_cluster_name: String,
    /// `brokerName`, default: the host name (as RocketMQ).
    pub broker_name: String,
    /// `brokerId`: 0 for a master, > 0 for a slave.
    pub broker_id: u64,
    /// `brokerRole`, default `ASYNC_MASTER`.
    pub broker_role: BrokerRole,
    /// `brokerPermission` (`perm` bits), default read|write (6).
    pub broker_permission: u8,

    // --- network ---
    /// `namesrvAddr`, `h1:9876;h2:9876`; empty = none configured.
    pub namesrv_addr: Vec<String>,
    /// `brokerIP1`: the address published to name servers; `None` = detect at start.
    pub broker_ip1: Option<String>,
    /// `listenPort`, default 10911.
    pub listen_port: u16,
    /// `haListenPort`; `None` = `listenPort + 1` (see `ha_listen_port()`).
    pub ha_listen_port: Option<u16>,
    /// `haMasterAddress` (`host:port` of the master's HA port); `None` = learn from the
    /// name server.
    pub ha_master_address: Option<String>,
    /// `registerNameServerPeriod`, default 30,000 ms.
    pub register_name_server_period_ms: u64,

    // --- store ---
    /// `storePathRootDir`, default `$HOME/store` (RocketMQ); `ringmq standalone` uses
    /// `./ringmq-data`.
    pub store_path_root_dir: PathBuf,
    /// `storePathCommitLog`; `None` = `<root>/commitlog` (see `store_path_commit_log()`).
    pub store_path_commit_log: Option<PathBuf>,
    /// `mappedFileSizeCommitLog`, default 1 GiB.
    pub mapped_file_size_commit_log_bytes: u64,
    /// `warmMapedFileEnable`: pre-write each new CommitLog segment with zeros before use.
    /// Off by default under both flush policies, as in RocketMQ: the zeros double what the
    /// disk writes, and under SYNC_FLUSH their write-back stalled acks for seconds at each
    /// segment (docs/perf.md, "SYNC_FLUSH on cold segments"); see
    /// [`BrokerConfig::warm_segments`].
    pub warm_maped_file_enable: Option<bool>,
    /// `mappedFileSizeConsumeQueue`, default 300,000 × 20 bytes; rounded up to whole
    /// 20-byte units as RocketMQ does (see `consume_queue_file_bytes()`).
    pub mapped_file_size_consume_queue_bytes: u64,
    /// `flushDiskType`, default `ASYNC_FLUSH`.
    pub flush_disk_type: FlushDiskType,
    /// `flushIntervalCommitLog`, default 500 ms.
    pub flush_interval_commit_log_ms: u64,
    /// `flushCommitLogLeastPages`, default 4.
    pub flush_commit_log_least_pages: u32,
    /// `syncFlushTimeout`, default 5,000 ms (SYNC_FLUSH and SYNC_MASTER waits).
    pub sync_flush_timeout_ms: u64,

    // --- retention ---
    /// `fileReservedTime`, default 72 hours.
    pub file_reserved_time_hours: u32,
    /// `deleteWhen`, default `04`: hours of the day (`04;16`) when expired files go.
    pub delete_when_hours: Vec<u8>,
    /// `diskMaxUsedSpaceRatio`, default 75 (%); clamped to 10..=95 as RocketMQ does.
    pub disk_max_used_space_ratio: u8,
    /// `diskSpaceWarningLevelRatio`, default 90 (%): writes are refused above it.
    pub disk_space_warning_level_ratio: u8,
    /// `diskSpaceCleanForciblyRatio`, default 85 (%): unexpired files are deleted above it.
    pub disk_space_clean_forcibly_ratio: u8,
    /// `cleanFileForciblyEnable`, default true.
    pub clean_file_forcibly_enable: bool,

    // --- topics and messages ---
    /// `autoCreateTopicEnable`, default true.
    pub auto_create_topic_enable: bool,
    /// `defaultTopicQueueNums`, default 8.
    pub default_topic_queue_nums: u32,
    /// `maxMessageSize` (body bytes), default 4 MiB, at most `limits::MESSAGE_BODY_BYTES_MAX`.
    pub max_message_size_bytes: usize,
    /// `waitTimeMillsInSendQueue`, default 200: longest a send waits while its connection has
    /// `limits::CONNECTION_REQUESTS_IN_FLIGHT_MAX` requests in flight; then SYSTEM_BUSY.
    pub wait_time_mills_in_send_queue: u64,
    /// `messageDelayLevel`, default `1s 5s 10s 30s 1m … 2h` (18 levels), in ms.
    pub message_delay_level_ms: Vec<u64>,
    /// `messageIndexEnable`, default true.
    pub message_index_enable: bool,
    /// `maxHashSlotNum`, default 5,000,000.
    pub max_hash_slot_num: u32,
    /// `maxIndexNum`, default 20,000,000.
    pub max_index_num: u32,
    /// `enablePropertyFilter` (SQL92 filters), default false.
    pub enable_property_filter: bool,
    /// `longPollingEnable`, default true.
    pub long_polling_enable: bool,
    /// `transferMsgByHeap`: pull responses carry copies of the record bytes instead of
    /// splicing them from the log file; default false (RocketMQ's default is true: its
    /// alternative is a zero-copy send from a memory map, ours a splice).
    pub transfer_msg_by_heap: bool,

    /// `slaveReadEnable`: a consumer far behind is told to read from the slave, default
    /// false.
    pub slave_read_enable: bool,
    /// `accessMessageInMemoryMaxRatio`: "far behind" is more log bytes behind the end than
    /// this percentage of the machine's memory, default 40 (%).
    pub access_message_in_memory_max_ratio: u8,

    // --- replication ---
    /// `haSendHeartbeatInterval`, default 5,000 ms.
    pub ha_send_heartbeat_interval_ms: u64,
    /// `haHousekeepingInterval`, default 20,000 ms.
    pub ha_housekeeping_interval_ms: u64,
    /// `haTransferBatchSize`: most log bytes per replication transfer, default 1 MiB
    /// (RocketMQ: 32 KiB; a record larger than it is sent alone).
    pub ha_transfer_batch_size_bytes: usize,
    /// `haMaxGapNotInSync`, default 256 MiB.
    pub ha_max_gap_not_in_sync_bytes: u64,

    // --- consumers ---
    /// `notifyConsumerIdsChangedEnable`: tell a group's members when it changes, default true.
    pub notify_consumer_ids_changed_enable: bool,
    /// `storeReplyMessageEnable`: store request-reply replies in the cluster's reply topic
    /// besides pushing them to their requester, default true.
    pub store_reply_message_enable: bool,
    /// `rebalanceLockMaxLiveTime`: a queue lock not renewed for this long is free, default
    /// 60,000 ms.
    pub rebalance_lock_max_live_time_ms: u64,
    /// `maxReconsumeTimes`: a consumer group's retry limit when its client does not set one
    /// (RocketMQ's subscription group `retryMaxTimes`), default 16.
    pub max_reconsume_times: u32,

    // --- transactions and timers ---
    /// `transactionTimeOut`, default 6,000 ms.
    pub transaction_timeout_ms: u64,
    /// `transactionCheckMax`, default 15.
    pub transaction_check_max: u32,
    /// `transactionCheckInterval`, default 30,000 ms.
    pub transaction_check_interval_ms: u64,
    /// `timerWheelEnable`, default true.
    pub timer_wheel_enable: bool,
    /// `timerMaxDelaySec`, default 3 days.
    pub timer_max_delay_sec: u64,
    /// `timerPrecisionMs`: due times are rounded up to a multiple of it. Default 1 ms (RocketMQ: 1,000 ms).
    pub timer_precision_ms: u64,

    // --- ringmq's own ---
    /// `shards`: event-loop threads; `None` = one per core.
    pub shards: Option<usize>,
    /// Controller mode (`enableControllerMode` and friends): the role comes from the
    /// controllers, not from `brokerRole`.
    pub controller: BrokerControllerConfig,
    /// `pinCores`: pin each shard to a core, default true.
    pub pin_cores: bool,
    /// `commitLogCacheKeepBytes`: durable CommitLog bytes a shard keeps in the page cache
    /// behind its durable end; older bytes are released from memory (reads of them read the
    /// disk). 0 = release nothing (the kernel alone decides). `None` (not set): decided by
    /// the machine, [`Self::cache_keep_bytes`].
    pub commit_log_cache_keep_bytes: Option<u64>,
    /// `commitLogDirectCatchUp`: pulls of bytes released from memory (behind
    /// `commitLogCacheKeepBytes`) are read with `O_DIRECT` in 1 MiB chunks on the shard's
    /// io_uring, not through the page cache. Default true; it turns itself off where the
    /// file system has no direct I/O.
    pub commit_log_direct_catch_up: bool,
    /// `commitLogPrewriteBytes`: under ASYNC_FLUSH with fallocated segments, each shard
    /// writes zeros up to this far past its log's end when its loop has nothing else to do,
    /// so the next appends land in page-cache pages already allocated and in the CPU's cache
    /// (`CommitLog::prewrite_step`). Default 256 KiB; 0 = off. Not used under SYNC_FLUSH or
    /// with pre-written segments ([`Self::prewrite_bytes`]). `None`: not set.
    pub commit_log_prewrite_bytes: Option<u64>,

    // --- TLS ---
    /// `tls.server.*` (client, HA listeners), `tls.enable` / `tls.client.*` (registration,
    /// replication and calls to the master).
    pub tls: TlsConfig,
    /// `aclEnable`, `aclFilePath`, `aclReplayWindowMs`, `innerAccessKey`, `innerSecretKey`.
    pub acl: AclConfig,
    /// `metricsExporterType`, `metricsPromExporterPort`, `metricsPromExporterHost`.
    pub metrics: MetricsConfig,
    /// `grpcServerPort`: the port of RocketMQ 5's gRPC edge (ringmq-grpc); `None` = no gRPC
    /// listener on a broker (`ringmq standalone` uses 8081 then).
    pub grpc_server_port: Option<u16>,
    /// `shardListenPorts`: each shard's own port (brokers with more than one shard), in shard
    /// order; empty = picked by the system at the first start and kept.
    pub shard_listen_ports: Vec<u16>,
}

/// RocketMQ's 18 delay levels.
pub const DEFAULT_MESSAGE_DELAY_LEVEL: &str =
    "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h";

/// Bytes of one ConsumeQueue unit (offset 8, size 4, tag hash 8), the store's constant.
const CONSUME_QUEUE_UNIT_BYTES: u64 = crate::store::consume_queue::CQ_UNIT_BYTES as u64;

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            broker_cluster_name: "DefaultCluster".to_owned(),
            broker_name: local_host_name(),
            broker_id: 0,
            broker_role: BrokerRole::AsyncMaster,
            broker_permission: perm::READ_WRITE,
            namesrv_addr: Vec::new(),
            broker_ip1: None,
            listen_port: 10911,
            ha_listen_port: None,
            ha_master_address: None,
            register_name_server_period_ms: 30_000,
            store_path_root_dir: home_dir().join("store"),
            store_path_commit_log: None,
            mapped_file_size_commit_log_bytes: 1 << 30,
            warm_maped_file_enable: None,
            mapped_file_size_consume_queue_bytes: 300_000 * CONSUME_QUEUE_UNIT_BYTES,
            flush_disk_type: FlushDiskType::AsyncFlush,
            flush_interval_commit_log_ms: 500,
            flush_commit_log_least_pages: 4,
            sync_flush_timeout_ms: 5_000,
            file_reserved_time_hours: 72,
            delete_when_hours: vec![4],
            disk_max_used_space_ratio: 75,
            disk_space_warning_level_ratio: 90,
            disk_space_clean_forcibly_ratio: 85,
            clean_file_forcibly_enable: true,
            auto_create_topic_enable: true,
            default_topic_queue_nums: 8,
            max_message_size_bytes: 4 * 1024 * 1024,
            wait_time_mills_in_send_queue: limits::SEND_WAIT_MAX.as_millis() as u64,
            message_delay_level_ms: keys::parse_delay_levels(DEFAULT_MESSAGE_DELAY_LEVEL)
                .expect("the built-in delay levels parse"),
            message_index_enable: true,
            max_hash_slot_num: 5_000_000,
            max_index_num: 20_000_000,
            enable_property_filter: false,
            long_polling_enable: true,
            transfer_msg_by_heap: false,
            ha_send_heartbeat_interval_ms: 5_000,
            ha_housekeeping_interval_ms: 20_000,
            ha_transfer_batch_size_bytes: limits::HA_TRANSFER_BATCH_BYTES_DEFAULT,
            ha_max_gap_not_in_sync_bytes: 256 * 1024 * 1024,
            slave_read_enable: false,
            access_message_in_memory_max_ratio: 40,
            notify_consumer_ids_changed_enable: true,
            store_reply_message_enable: true,
            rebalance_lock_max_live_time_ms: 60_000,
            max_reconsume_times: 16,
            transaction_timeout_ms: 6_000,
            transaction_check_max: 15,
            transaction_check_interval_ms: 30_000,
            timer_wheel_enable: true,
            timer_max_delay_sec: 3 * 24 * 3600,
            timer_precision_ms: 1,
            shards: None,
            controller: BrokerControllerConfig::default(),
            pin_cores: true,
            commit_log_cache_keep_bytes: None,
            commit_log_direct_catch_up: true,
            commit_log_prewrite_bytes: None,
            tls: TlsConfig::default(),
            acl: AclConfig::default(),
            metrics: MetricsConfig::default(),
            grpc_server_port: None,
            shard_listen_ports: Vec::new(),
        }
    }
}

impl BrokerConfig {
    /// Reads a broker config file: TOML if the name ends in `.toml`, else RocketMQ
    /// properties. Starts from `BrokerConfig::default()`.
    pub fn load(path: &Path) -> Result<LoadedConfig<BrokerConfig>, ConfigError> {
        let (text, format) = read_config_file(path)?;
        Self::parse(&text, format, &path.display().to_string())
    }

    /// Parses properties text; `origin` names the text in errors (a path, `<args>`).
    pub fn from_properties_str(
        text: &str,
        origin: &str,
    ) -> Result<LoadedConfig<BrokerConfig>, ConfigError> {
        Self::parse(text, Format::Properties, origin)
    }

    /// Parses flat TOML text with the same keys as the properties format.
    pub fn from_toml_str(
        text: &str,
        origin: &str,
    ) -> Result<LoadedConfig<BrokerConfig>, ConfigError> {
        Self::parse(text, Format::Toml, origin)
    }

    /// Sets one key as a file line would (`origin` names the flag in errors, e.g.
    /// `--namesrv`). Returns `Ok(false)` when the key is a RocketMQ key ringmq ignores: the
    /// caller reports it. Command-line `--set` lists go through [`Self::apply_overrides`],
    /// which reports for them. Call `validate()` after the last override.
    pub fn set(&mut self, key: &str, value: &str, origin: &str) -> Result<bool, ConfigError> {
        keys::apply_one(self, &keys::BROKER, key, value, origin, 0)
    }

    /// Applies command-line overrides (`KEY=VALUE` each, `origin` names the flag: `--set`)
    /// onto this config exactly as the same lines at the end of a file are applied: a
    /// RocketMQ key ringmq ignores is reported in `ignored`, an unknown key or a bad value is
    /// an error naming it, a key given twice keeps the last value with a warning, and the
    /// adjustments RocketMQ makes (clamped ratios, a master's brokerId) are made and reported.
    /// Call `validate()` afterwards (after any other change).
    pub fn apply_overrides(
        self,
        sets: &[String],
        origin: &str,
    ) -> Result<LoadedConfig<BrokerConfig>, ConfigError> {
        let entries = source::overrides(sets, origin)?;
        let mut loaded = keys::apply_all(self, &keys::BROKER, entries, origin)?;
        keys::clamp_broker(&mut loaded);
        Ok(loaded)
    }

    /// Cross-field checks; called by `load*`, and again by whoever changes fields after.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key: &'static str, detail: String| Err(ConfigError::Invalid { key, detail });
        if self.controller.enable {
            if self.broker_id == 0 {
                return invalid(
                    "brokerId",
                    "in controller mode brokerId names the broker within its set and must be >= 1 (the name server sees the master as 0)".to_owned(),
                );
            }
            if self.controller.addrs.is_empty() {
                return invalid(
                    "controllerAddr",
                    "enableControllerMode=true needs the controllers' addresses".to_owned(),
                );
            }
            if self.controller.min_in_sync_replicas == 0 {
                return invalid("minInSyncReplicas", "must be >= 1".to_owned());
            }
        } else if self.broker_role.is_master() && self.broker_id != 0 {
            return invalid(
                "brokerId",
                format!(
                    "a {} must have brokerId 0, got {}",
                    self.broker_role.name(),
                    self.broker_id
                ),
            );
        }
        if !self.broker_role.is_master() && self.broker_id == 0 {
            return invalid(
                "brokerId",
                "a SLAVE must have brokerId > 0, got 0".to_owned(),
            );
        }
        if self.ha_listen_port.is_none() && self.listen_port == u16::MAX {
            return invalid(
                "haListenPort",
                "listenPort is 65535, so the default listenPort + 1 does not exist; set it"
                    .to_owned(),
            );
        }
        if self.listen_port != 0 && self.ha_listen_port() == Some(self.listen_port) {
            return invalid(
                "haListenPort",
                format!("equals listenPort ({})", self.listen_port),
            );
        }
        if self.namesrv_addr.len() > limits::NAMESRV_ADDRS_MAX {
            return invalid(
                "namesrvAddr",
                format!(
                    "{} addresses, over the maximum of {}",
                    self.namesrv_addr.len(),
                    limits::NAMESRV_ADDRS_MAX
                ),
            );
        }
        if let Some(shards) = self.shards {
            if !(1..=limits::SHARDS_MAX).contains(&shards) {
                return invalid(
                    "shards",
                    format!("expected 1..={}, got {shards}", limits::SHARDS_MAX),
                );
            }
        }
        keys::check_name(&self.broker_cluster_name)
            .or_else(|detail| invalid("brokerClusterName", detail))?;
        keys::check_name(&self.broker_name).or_else(|detail| invalid("brokerName", detail))?;
        self.tls.validate_server()?;
        self.tls.validate_client()?;
        self.acl.validate()?;
        Ok(())
    }

    /// The HA (replication) port: `haListenPort`, or `listenPort + 1`. `None` only when
    /// `listenPort` is 65535 and no `haListenPort` is set, which `validate()` refuses.
    /// With `listenPort=0` (any free port) the default HA port is any free port too.
    pub fn ha_listen_port(&self) -> Option<u16> {
        if self.ha_listen_port.is_none() && self.listen_port == 0 {
            return Some(0);
        }
        self.ha_listen_port
            .or_else(|| self.listen_port.checked_add(1))
    }

    /// The CommitLog directory: `storePathCommitLog`, or `<storePathRootDir>/commitlog`.
    pub fn store_path_commit_log(&self) -> PathBuf {
        self.store_path_commit_log
            .clone()
            .unwrap_or_else(|| self.store_path_root_dir.join("commitlog"))
    }

    /// Whether new CommitLog segments are pre-written (`warmMapedFileEnable`; off unless
    /// set).
    pub fn warm_segments(&self) -> bool {
        self.warm_maped_file_enable.unwrap_or(false)
    }

    /// How far ahead of the appends zeros are written (`commitLogPrewriteBytes`): 0 under
    /// SYNC_FLUSH (every group commit's fdatasync would write back the zeros ahead too) and
    /// with pre-written segments (their pages were written before use).
    pub fn prewrite_bytes(&self) -> u64 {
        if self.flush_disk_type == FlushDiskType::AsyncFlush && !self.warm_segments() {
            self.commit_log_prewrite_bytes
                .unwrap_or(COMMIT_LOG_PREWRITE_BYTES_DEFAULT)
        } else {
            0
        }
    }

    /// The page-cache window kept behind each shard's durable log end
    /// (`commitLogCacheKeepBytes`). Not set: [`COMMIT_LOG_CACHE_KEEP_BYTES_REPORTING`] on a
    /// machine that hands freed memory back to its host (free page reporting), where fresh
    /// pages cost a fault in the host each; else 0, the page cache left to the kernel as
    /// RocketMQ leaves it (faster where memory stays backed: docs/perf.md, "Memory the
    /// host backs").
    pub fn cache_keep_bytes(&self) -> u64 {
        self.commit_log_cache_keep_bytes.unwrap_or_else(|| {
            if crate::io::memory::freed_memory_goes_to_host() {
                COMMIT_LOG_CACHE_KEEP_BYTES_REPORTING
            } else {
                0
            }
        })
    }

    /// ConsumeQueue file size rounded up to whole units, as RocketMQ's getter does.
    pub fn consume_queue_file_bytes(&self) -> u64 {
        self.mapped_file_size_consume_queue_bytes
            .div_ceil(CONSUME_QUEUE_UNIT_BYTES)
            * CONSUME_QUEUE_UNIT_BYTES
    }

    fn parse(
        text: &str,
        format: Format,
        origin: &str,
    ) -> Result<LoadedConfig<BrokerConfig>, ConfigError> {
        let entries = source::read(text, format, origin)?;
        let mut loaded = keys::apply_all(BrokerConfig::default(), &keys::BROKER, entries, origin)?;
        keys::clamp_broker(&mut loaded);
        loaded.config.validate()?;
        Ok(loaded)
    }
}

/// Name server configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamesrvConfig {
    /// `bindAddress`, default `0.0.0.0`.
    pub listen_host: String,
    /// `listenPort`, default 9876.
    pub listen_port: u16,
    /// `scanNotActiveBrokerInterval`, default 10,000 ms (RocketMQ 4.x; 5.x scans every 5 s).
    pub scan_not_active_broker_interval_ms: u64,
    /// `brokerChannelExpiredTime` (RocketMQ's constant, made a key for tests), default
    /// 120,000 ms: a broker silent this long is dropped.
    pub broker_channel_expired_time_ms: u64,
    /// `tls.server.*` (the name server's listener).
    pub tls: TlsConfig,
    /// `aclEnable`, `aclFilePath`, `aclReplayWindowMs`.
    pub acl: AclConfig,
    /// `metricsExporterType`, `metricsPromExporterPort`, `metricsPromExporterHost`.
    pub metrics: MetricsConfig,
    /// `enableControllerInNamesrv`, `controllerDLegerPeers`, `controllerDLegerSelfId`,
    /// `controllerStorePath`, `enableElectUncleanMaster`.
    pub controller: ControllerConfig,
}

/// A broker's controller-mode settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerControllerConfig {
    /// `enableControllerMode`.
    pub enable: bool,
    /// `controllerAddr`: the controllers (name servers with the embedded controller).
    pub addrs: Vec<String>,
    /// `allAckInSyncStateSet`: a SYNC_MASTER send waits for every member of the
    /// SyncStateSet; otherwise for `minInSyncReplicas` replicas (the master included).
    pub all_ack_in_sync_state_set: bool,
    /// `minInSyncReplicas`: sends are refused while the SyncStateSet is smaller.
    pub min_in_sync_replicas: u32,
    /// `brokerElectionPriority`: lower is preferred when candidates are otherwise equal.
    pub election_priority: u32,
    /// `haMaxTimeSlaveNotCatchup`: a slave not caught up this long leaves the SyncStateSet.
    pub ha_max_time_slave_not_catchup_ms: u64,
    /// `controllerHeartBeatTimeoutMills`: silence after which the controllers may take this
    /// broker for dead (RocketMQ's default is 10 s; ringmq's is 2 s, for failover in seconds).
    pub heartbeat_timeout_ms: u64,
    /// `brokerHeartbeatInterval`: how often the broker heartbeats the leader controller.
    pub heartbeat_interval_ms: u64,
}

impl Default for BrokerControllerConfig {
    fn default() -> Self {
        BrokerControllerConfig {
            enable: false,
            addrs: Vec::new(),
            all_ack_in_sync_state_set: false,
            min_in_sync_replicas: 1,
            election_priority: 0,
            ha_max_time_slave_not_catchup_ms: 15_000,
            heartbeat_timeout_ms: 2_000,
            heartbeat_interval_ms: 300,
        }
    }
}

impl Default for NamesrvConfig {
    fn default() -> Self {
        NamesrvConfig {
            listen_host: "0.0.0.0".to_owned(),
            listen_port: 9876,
            scan_not_active_broker_interval_ms: 10_000,
            broker_channel_expired_time_ms: 120_000,
            tls: TlsConfig::default(),
            acl: AclConfig::default(),
            metrics: MetricsConfig::default(),
            controller: Default::default(),
        }
    }
}

impl NamesrvConfig {
    /// Reads a name server config file (`.toml` or properties).
    pub fn load(path: &Path) -> Result<LoadedConfig<NamesrvConfig>, ConfigError> {
        let (text, format) = read_config_file(path)?;
        Self::parse(&text, format, &path.display().to_string())
    }

    /// Parses properties text.
    pub fn from_properties_str(
        text: &str,
        origin: &str,
    ) -> Result<LoadedConfig<NamesrvConfig>, ConfigError> {
        Self::parse(text, Format::Properties, origin)
    }

    /// Parses flat TOML text.
    pub fn from_toml_str(
        text: &str,
        origin: &str,
    ) -> Result<LoadedConfig<NamesrvConfig>, ConfigError> {
        Self::parse(text, Format::Toml, origin)
    }

    /// Sets one key as a file line would; see [`BrokerConfig::set`]. Call `validate()` after
    /// the last override.
    pub fn set(&mut self, key: &str, value: &str, origin: &str) -> Result<bool, ConfigError> {
        keys::apply_one(self, &keys::NAMESRV, key, value, origin, 0)
    }

    /// Applies command-line overrides (`--set KEY=VALUE`) as the same lines at the end of a
    /// file; see [`BrokerConfig::apply_overrides`]. Call `validate()` afterwards.
    pub fn apply_overrides(
        self,
        sets: &[String],
        origin: &str,
    ) -> Result<LoadedConfig<NamesrvConfig>, ConfigError> {
        let entries = source::overrides(sets, origin)?;
        keys::apply_all(self, &keys::NAMESRV, entries, origin)
    }

    /// Cross-field checks.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.tls.validate_server()?;
        self.acl.validate()?;
        if self.scan_not_active_broker_interval_ms > self.broker_channel_expired_time_ms {
            return Err(ConfigError::Invalid {
                key: "scanNotActiveBrokerInterval",
                detail: format!(
                    "{} ms is longer than brokerChannelExpiredTime ({} ms)",
                    self.scan_not_active_broker_interval_ms, self.broker_channel_expired_time_ms
                ),
            });
        }
        if self.controller.enable {
            let invalid = |detail: String| ConfigError::Invalid {
                key: "enableControllerInNamesrv",
                detail,
            };
            self.controller.validate().map_err(invalid)?;
            if self.acl.enable {
                return Err(invalid(
                    "the embedded controller does not work with aclEnable=true yet (controllers' Raft messages are not signed)".into(),
                ));
            }
            if self.tls.server_mode() == TlsMode::Enforcing {
                return Err(invalid(
                    "the embedded controller does not work with tls.server.mode=enforcing yet (controllers talk plaintext)".into(),
                ));
            }
        }
        Ok(())
    }

    fn parse(
        text: &str,
        format: Format,
        origin: &str,
    ) -> Result<LoadedConfig<NamesrvConfig>, ConfigError> {
        let entries = source::read(text, format, origin)?;
        let loaded = keys::apply_all(NamesrvConfig::default(), &keys::NAMESRV, entries, origin)?;
        loaded.config.validate()?;
        Ok(loaded)
    }
}

/// A parsed config and what the caller should log about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedConfig<C> {
    /// The typed config, validated.
    pub config: C,
    /// RocketMQ keys that were present but are not implemented by ringmq yet.
    pub ignored: Vec<IgnoredKey>,
    /// Values that were adjusted or overridden (duplicate keys, clamped ratios).
    pub warnings: Vec<String>,
}

/// A RocketMQ key present in the file that ringmq does not implement yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoredKey {
    /// Where: the file, or the flag (`--set`).
    pub origin: String,
    /// Line of the key (1-based); 0 for a command-line override.
    pub line: usize,
    /// The key as written.
    pub key: String,
}

impl fmt::Display for IgnoredKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} ignored (not implemented)",
            at(&self.origin, &self.line),
            self.key
        )
    }
}

/// Why a config could not be loaded.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The text is not valid properties or (supported) TOML.
    #[error("{}: {detail}", at(.origin, .line))]
    Syntax {
        origin: String,
        line: usize,
        detail: String,
    },
    /// A key that neither ringmq nor RocketMQ knows: most likely a typo.
    #[error("{}: unknown key {key:?}{}", at(.origin, .line), did_you_mean(.suggestion))]
    UnknownKey {
        origin: String,
        line: usize,
        key: String,
        suggestion: Option<&'static str>,
    },
    /// A known key with a value that does not parse or is out of range.
    #[error("{}: {key}: {detail}", at(.origin, .line))]
    BadValue {
        origin: String,
        line: usize,
        key: String,
        detail: String,
    },
    /// Values that are each fine but do not fit together.
    #[error("{key}: {detail}")]
    Invalid { key: &'static str, detail: String },
}

/// `file:line`, or just the origin for overrides that have no line (line 0).
fn at(origin: &str, line: &usize) -> String {
    match line {
        0 => origin.to_owned(),
        n => format!("{origin}:{n}"),
    }
}

fn did_you_mean(suggestion: &Option<&'static str>) -> String {
    match suggestion {
        Some(s) => format!(" (did you mean {s:?}?)"),
        None => String::new(),
    }
}

/// Which reader a text goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Properties,
    Toml,
}

fn read_config_file(path: &Path) -> Result<(String, Format), ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
        path: path.to_owned(),
        source,
    })?;
    let is_toml = path
        .extension()
        .is_some_and(|ext| ext.eq_ignore_ascii_case("toml"));
    Ok((
        text,
        if is_toml {
            Format::Toml
        } else {
            Format::Properties
        },
    ))
}

/// RocketMQ's default `brokerName` is the host name.
fn local_host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| keys::check_name(s).is_ok())
        .unwrap_or_else(|| "localhost".to_owned())
}

fn home_dir() -> PathBuf {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."))
}

#[cfg(test)]
mod tests;
