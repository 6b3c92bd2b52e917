//! The key tables: which keys ringmq applies (and how each value is checked), which
//! RocketMQ keys it accepts but ignores for now, and the near-match for anything else.
//!
//! Invariant: a key name appears at most once across a config's applied and ignored lists
//! (a test checks), so every key has exactly one fate.

use std::collections::HashMap;
use std::path::PathBuf;

use super::ignored::{BROKER_IGNORED_KEYS, NAMESRV_IGNORED_KEYS, NETTY_KEYS};
use super::metrics;
use super::source::{Entry, Value};
use super::tls;
use super::{
    perm, BrokerConfig, BrokerRole, ConfigError, FlushDiskType, IgnoredKey, LoadedConfig,
    NamesrvConfig,
};
use crate::limits;

/// Sets one field from its text; the error is the detail after `key: `.
pub(super) type Setter<C> = fn(&mut C, &str) -> Result<(), String>;

/// One applied key.
pub(super) struct Key<C> {
    pub name: &'static str,
    /// How a TOML array for this key is joined into the properties form (`;` for
    /// `namesrvAddr`); `None` = arrays are refused.
    pub list_separator: Option<&'static str>,
    pub set: Setter<C>,
}

macro_rules! key {
    ($name:literal, $sep:expr, |$c:ident, $v:ident| $body:expr) => {
        Key {
            name: $name,
            list_separator: $sep,
            set: |$c, $v| {
                $body;
                Ok(())
            },
        }
    };
    ($name:literal, |$c:ident, $v:ident| $body:expr) => {
        key!($name, None, |$c, $v| $body)
    };
}

/// Longest interval any `*Interval`/timeout key accepts: one hour.
const INTERVAL_MS_MAX: u64 = 3_600_000;
const I32_MAX: u64 = i32::MAX as u64;

const BROKER_KEYS: &[Key<BrokerConfig>] = &[
    key!("brokerClusterName", |c, v| c.broker_cluster_name = name(v)?),
    key!("brokerName", |c, v| c.broker_name = name(v)?),
    key!("brokerId", |c, v| c.broker_id = num(v, 0, i64::MAX as u64)?),
    key!("brokerRole", |c, v| c.broker_role = broker_role(v)?),
    key!("brokerPermission", |c, v| c.broker_permission =
        num(v, 0, perm::ALL.into())?),
    key!("namesrvAddr", Some(";"), |c, v| c.namesrv_addr =
        namesrv_addrs(v)?),
    key!("brokerIP1", |c, v| c.broker_ip1 = host(v)?),
    // 0 = any free port (printed at start), for tests and local clusters.
    key!("listenPort", |c, v| c.listen_port =
        num(v, 0, u16::MAX.into())?),
    key!("haListenPort", |c, v| c.ha_listen_port =
        Some(num(v, 0, u16::MAX.into())?)),
    key!("haMasterAddress", |c, v| c.ha_master_address = opt_addr(v)?),
    key!("registerNameServerPeriod", |c, v| {
        c.register_name_server_period_ms = num(v, 100, 600_000)?
    }),
    key!("storePathRootDir", |c, v| c.store_path_root_dir = path(v)?),
    key!("storePathCommitLog", |c, v| c.store_path_commit_log =
        Some(path(v)?)),
    key!("mappedFileSizeCommitLog", |c, v| {
        c.mapped_file_size_commit_log_bytes =
            num(v, limits::SEGMENT_BYTES_MIN, limits::SEGMENT_BYTES_MAX)?
    }),
    key!("warmMapedFileEnable", |c, v| c.warm_maped_file_enable =
        Some(boolean(v)?)),
    key!("mappedFileSizeConsumeQueue", |c, v| {
        c.mapped_file_size_consume_queue_bytes = num(v, 20, limits::CONSUME_QUEUE_FILE_BYTES_MAX)?
    }),
    key!("flushDiskType", |c, v| c.flush_disk_type =
        flush_disk_type(v)?),
    key!("flushIntervalCommitLog", |c, v| {
        c.flush_interval_commit_log_ms = num(v, 1, INTERVAL_MS_MAX)?
    }),
    key!("flushCommitLogLeastPages", |c, v| c
        .flush_commit_log_least_pages =
        num(v, 0, I32_MAX)?),
    key!("syncFlushTimeout", |c, v| c.sync_flush_timeout_ms =
        num(v, 1, INTERVAL_MS_MAX)?),
    key!("fileReservedTime", |c, v| c.file_reserved_time_hours =
        num(v, 0, I32_MAX)?),
    key!("deleteWhen", Some(";"), |c, v| c.delete_when_hours =
        hours(v)?),
    key!("diskMaxUsedSpaceRatio", |c, v| c
        .disk_max_used_space_ratio =
        num(v, 0, 100)?),
    key!("diskSpaceWarningLevelRatio", |c, v| {
        c.disk_space_warning_level_ratio = num(v, 0, 100)?
    }),
    key!("diskSpaceCleanForciblyRatio", |c, v| {
        c.disk_space_clean_forcibly_ratio = num(v, 0, 100)?
    }),
    key!("cleanFileForciblyEnable", |c, v| c
        .clean_file_forcibly_enable =
        boolean(v)?),
    key!("autoCreateTopicEnable", |c, v| c.auto_create_topic_enable =
        boolean(v)?),
    key!("defaultTopicQueueNums", |c, v| {
        c.default_topic_queue_nums = num(v, 1, limits::QUEUES_PER_TOPIC_MAX as u64)?
    }),
    key!("maxMessageSize", |c, v| {
        c.max_message_size_bytes = num(v, 1, limits::MESSAGE_BODY_BYTES_MAX as u64)?
    }),
    key!("waitTimeMillsInSendQueue", |c, v| {
        c.wait_time_mills_in_send_queue = num(v, 0, INTERVAL_MS_MAX)?
    }),
    key!("messageDelayLevel", Some(" "), |c, v| c
        .message_delay_level_ms =
        parse_delay_levels(v)?),
    key!("messageIndexEnable", |c, v| c.message_index_enable =
        boolean(v)?),
    key!("maxHashSlotNum", |c, v| c.max_hash_slot_num =
        num(v, 1, I32_MAX)?),
    key!("maxIndexNum", |c, v| c.max_index_num = num(v, 1, I32_MAX)?),
    key!("enablePropertyFilter", |c, v| c.enable_property_filter =
        boolean(v)?),
    key!("transferMsgByHeap", |c, v| c.transfer_msg_by_heap =
        boolean(v)?),
    key!("longPollingEnable", |c, v| c.long_polling_enable =
        boolean(v)?),
    key!("haSendHeartbeatInterval", |c, v| {
        c.ha_send_heartbeat_interval_ms = num(v, 1, INTERVAL_MS_MAX)?
    }),
    key!("haHousekeepingInterval", |c, v| {
        c.ha_housekeeping_interval_ms = num(v, 1, INTERVAL_MS_MAX)?
    }),
    key!("slaveReadEnable", |c, v| c.slave_read_enable = boolean(v)?),
    key!("accessMessageInMemoryMaxRatio", |c, v| {
        c.access_message_in_memory_max_ratio = num(v, 0, 100)?
    }),
    key!("haTransferBatchSize", |c, v| {
        c.ha_transfer_batch_size_bytes = num(v, 1, limits::HA_TRANSFER_BATCH_BYTES_MAX as u64)?
    }),
    key!("haMaxGapNotInSync", |c, v| c.ha_max_gap_not_in_sync_bytes =
        num(v, 1, i64::MAX as u64)?),
    // Controller mode (crate::broker::controller).
    key!("enableControllerMode", |c, v| c.controller.enable =
        boolean(v)?),
    key!("controllerAddr", Some(";"), |c, v| c.controller.addrs =
        namesrv_addrs(v)?),
    key!("allAckInSyncStateSet", |c, v| {
        c.controller.all_ack_in_sync_state_set = boolean(v)?
    }),
    key!("minInSyncReplicas", |c, v| c
        .controller
        .min_in_sync_replicas =
        num(v, 1, 16)?),
    key!("brokerElectionPriority", |c, v| c
        .controller
        .election_priority =
        num(v, 0, u32::MAX.into())?),
    key!("haMaxTimeSlaveNotCatchup", |c, v| {
        c.controller.ha_max_time_slave_not_catchup_ms = num(v, 100, INTERVAL_MS_MAX)?
    }),
    key!("controllerHeartBeatTimeoutMills", |c, v| {
        c.controller.heartbeat_timeout_ms = num(v, 100, INTERVAL_MS_MAX)?
    }),
    key!("brokerHeartbeatInterval", |c, v| {
        c.controller.heartbeat_interval_ms = num(v, 10, INTERVAL_MS_MAX)?
    }),
    key!("notifyConsumerIdsChangedEnable", |c, v| {
        c.notify_consumer_ids_changed_enable = boolean(v)?
    }),
    key!("storeReplyMessageEnable", |c, v| c
        .store_reply_message_enable =
        boolean(v)?),
    key!("rebalanceLockMaxLiveTime", |c, v| {
        c.rebalance_lock_max_live_time_ms = num(v, 1, INTERVAL_MS_MAX)?
    }),
    key!("maxReconsumeTimes", |c, v| c.max_reconsume_times =
        num(v, 0, I32_MAX)?),
    key!("transactionTimeOut", |c, v| c.transaction_timeout_ms =
        num(v, 1, INTERVAL_MS_MAX)?),
    key!("transactionCheckMax", |c, v| c.transaction_check_max =
        num(v, 0, I32_MAX)?),
    key!("transactionCheckInterval", |c, v| {
        c.transaction_check_interval_ms = num(v, 1, INTERVAL_MS_MAX)?
    }),
    key!("timerWheelEnable", |c, v| c.timer_wheel_enable =
        boolean(v)?),
    key!("timerMaxDelaySec", |c, v| c.timer_max_delay_sec =
        num(v, 1, I32_MAX)?),
    key!("timerPrecisionMs", |c, v| c.timer_precision_ms =
        num(v, 1, 60_000)?),
    key!("shards", |c, v| c.shards = shards(v)?),
    key!("pinCores", |c, v| c.pin_cores = boolean(v)?),
    key!("commitLogCacheKeepBytes", |c, v| c
        .commit_log_cache_keep_bytes =
        Some(num(v, 0, limits::COMMIT_LOG_CACHE_KEEP_BYTES_MAX)?)),
    key!("commitLogDirectCatchUp", |c, v| c
        .commit_log_direct_catch_up =
        boolean(v)?),
    key!("commitLogPrewriteBytes", |c, v| c
        .commit_log_prewrite_bytes =
        Some(num(v, 0, limits::COMMIT_LOG_PREWRITE_BYTES_MAX)?)),
    // TLS (config/tls.rs): listeners, then the broker's own outgoing connections.
    key!("tls.server.mode", |c, v| {
        c.tls.server_mode = Some(tls::mode(v)?)
    }),
    key!("tls.server.certPath", |c, v| {
        c.tls.server_cert_path = Some(path(v)?)
    }),
    key!("tls.server.keyPath", |c, v| {
        c.tls.server_key_path = Some(path(v)?)
    }),
    key!("tls.server.trustCertPath", |c, v| {
        c.tls.server_trust_cert_path = Some(path(v)?)
    }),
    key!("tls.server.need.client.auth", |c, v| {
        c.tls.server_need_client_auth = tls::client_auth(v)?
    }),
    key!("tls.enable", |c, v| { c.tls.client_enable = boolean(v)? }),
    // RocketMQ's NettyClientConfig name for the same switch.
    key!("useTLS", |c, v| { c.tls.client_enable = boolean(v)? }),
    key!("tls.client.trustCertPath", |c, v| {
        c.tls.client_trust_cert_path = Some(path(v)?)
    }),
    key!("tls.client.certPath", |c, v| {
        c.tls.client_cert_path = Some(path(v)?)
    }),
    key!("tls.client.keyPath", |c, v| {
        c.tls.client_key_path = Some(path(v)?)
    }),
    key!("tls.client.authServer", |c, v| {
        c.tls.client_auth_server = boolean(v)?
    }),
    // ACL (config/acl.rs, crate::acl).
    key!("aclEnable", |c, v| c.acl.enable = boolean(v)?),
    key!("aclFilePath", |c, v| c.acl.file_path = Some(path(v)?)),
    key!("aclReplayWindowMs", |c, v| c.acl.replay_window_ms =
        num(v, 1_000, INTERVAL_MS_MAX)?),
    key!("innerAccessKey", |c, v| c.acl.inner_access_key =
        Some(v.to_owned())),
    key!("innerSecretKey", |c, v| c.acl.inner_secret_key =
        Some(ringmq_wire::auth::Secret::new(v))),
    // ACL 2.0 (config/acl.rs, crate::acl::v2).
    key!("authenticationEnabled", |c, v| c
        .acl
        .authentication_enabled =
        boolean(v)?),
    key!("authorizationEnabled", |c, v| c.acl.authorization_enabled =
        boolean(v)?),
    key!("authenticationWhitelist", Some(","), |c, v| c
        .acl
        .authentication_whitelist =
        super::acl::whitelist(v)?),
    key!("initAuthenticationUser", |c, v| c.acl.init_user =
        Some(super::acl::init_user(v)?)),
    key!("innerClientAuthenticationCredentials", |c, v| c
        .acl
        .inner_client =
        Some(super::acl::inner_client(v)?)),
    key!("migrateAuthFromV1Enabled", |c, v| c.acl.migrate_from_v1 =
        boolean(v)?),
    // Metrics (config/metrics.rs, crate::metrics).
    key!("metricsExporterType", |c, v| c.metrics.exporter =
        metrics::exporter(v)?),
    key!("metricsPromExporterPort", |c, v| c.metrics.prom_port =
        num(v, 0, u16::MAX.into())?),
    key!("metricsPromExporterHost", |c, v| c.metrics.prom_host =
        metrics::host(v)?),
    key!("metricsSeriesMax", |c, v| c.metrics.series_max =
        num(v, 1, 1_000_000)?),
    // RocketMQ 5's gRPC edge (ringmq-grpc); 0 = any free port.
    key!("grpcServerPort", |c, v| c.grpc_server_port =
        Some(num(v, 0, u16::MAX.into())?)),
    // Each shard's own port, in shard order (RocketMQ clients connect to it): `P0,P1,...`.
    key!("shardListenPorts", |c, v| c.shard_listen_ports = ports(v)?),
];

/// A comma-separated list of ports, each 1..=65535 and none twice; empty: none.
fn ports(v: &str) -> Result<Vec<u16>, String> {
    let mut out: Vec<u16> = Vec::new();
    for p in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let port: u16 = num(p, 1, u16::MAX.into())?;
        if out.contains(&port) {
            return Err(format!("port {port} is named twice"));
        }
        out.push(port);
    }
    Ok(out)
}

const NAMESRV_KEYS: &[Key<NamesrvConfig>] = &[
    key!("bindAddress", |c, v| c.listen_host =
        host(v)?.unwrap_or_else(|| "0.0.0.0".to_owned())),
    key!("listenPort", |c, v| c.listen_port =
        num(v, 1, u16::MAX.into())?),
    key!("scanNotActiveBrokerInterval", |c, v| {
        c.scan_not_active_broker_interval_ms = num(v, 1, INTERVAL_MS_MAX)?
    }),
    key!("brokerChannelExpiredTime", |c, v| {
        c.broker_channel_expired_time_ms = num(v, 1, INTERVAL_MS_MAX)?
    }),
    // The embedded controller (crate::controller).
    key!("enableControllerInNamesrv", |c, v| c.controller.enable =
        boolean(v)?),
    key!("controllerDLegerPeers", |c, v| c.controller.peers =
        super::ControllerConfig::parse_peers(v)?),
    key!("controllerDLegerSelfId", |c, v| c.controller.self_id =
        Some(super::parse_self_id(v)?)),
    key!("controllerStorePath", |c, v| c.controller.store_path =
        Some(path(v)?)),
    key!("enableElectUncleanMaster", |c, v| c
        .controller
        .elect_unclean =
        boolean(v)?),
    // TLS (config/tls.rs): the listener; the outgoing-connection keys are refused.
    key!("tls.server.mode", |c, v| {
        c.tls.server_mode = Some(tls::mode(v)?)
    }),
    key!("tls.server.certPath", |c, v| {
        c.tls.server_cert_path = Some(path(v)?)
    }),
    key!("tls.server.keyPath", |c, v| {
        c.tls.server_key_path = Some(path(v)?)
    }),
    key!("tls.server.trustCertPath", |c, v| {
        c.tls.server_trust_cert_path = Some(path(v)?)
    }),
    key!("tls.server.need.client.auth", |c, v| {
        c.tls.server_need_client_auth = tls::client_auth(v)?
    }),
    refused_on_namesrv("tls.enable"),
    refused_on_namesrv("useTLS"),
    refused_on_namesrv("tls.client.trustCertPath"),
    refused_on_namesrv("tls.client.certPath"),
    refused_on_namesrv("tls.client.keyPath"),
    refused_on_namesrv("tls.client.authServer"),
    key!("aclEnable", |c, v| c.acl.enable = boolean(v)?),
    key!("aclFilePath", |c, v| c.acl.file_path = Some(path(v)?)),
    key!("aclReplayWindowMs", |c, v| c.acl.replay_window_ms =
        num(v, 1_000, INTERVAL_MS_MAX)?),
    refused_on_namesrv("innerAccessKey"),
    refused_on_namesrv("innerSecretKey"),
    // Metrics (config/metrics.rs, crate::metrics).
    key!("metricsExporterType", |c, v| c.metrics.exporter =
        metrics::exporter(v)?),
    key!("metricsPromExporterPort", |c, v| c.metrics.prom_port =
        num(v, 0, u16::MAX.into())?),
    key!("metricsPromExporterHost", |c, v| c.metrics.prom_host =
        metrics::host(v)?),
];

/// A key that exists for brokers only, refused on a name server with the reason.
const fn refused_on_namesrv(name: &'static str) -> Key<NamesrvConfig> {
    Key {
        name,
        list_separator: None,
        set: tls::refuse_on_namesrv,
    }
}

/// The applied keys and the ignored RocketMQ keys of one kind of config.
pub(super) struct Table<C: 'static> {
    pub keys: &'static [Key<C>],
    pub ignored: &'static [&'static [&'static str]],
}

impl<C> Table<C> {
    fn find(&self, key: &str) -> Option<&Key<C>> {
        self.keys.iter().find(|k| k.name == key)
    }

    fn is_ignored(&self, key: &str) -> bool {
        self.ignored.iter().any(|list| list.contains(&key))
    }

    fn names(&self) -> impl Iterator<Item = &'static str> + Clone + '_ {
        let ignored = self.ignored.iter().flat_map(|list| list.iter().copied());
        self.keys.iter().map(|k| k.name).chain(ignored)
    }
}

pub(super) const BROKER: Table<BrokerConfig> = Table {
    keys: BROKER_KEYS,
    ignored: &[BROKER_IGNORED_KEYS, NETTY_KEYS, &["bindAddress"]],
};

pub(super) const NAMESRV: Table<NamesrvConfig> = Table {
    keys: NAMESRV_KEYS,
    ignored: &[NAMESRV_IGNORED_KEYS, NETTY_KEYS],
};

/// Applies entries in file order onto `config`. A key given twice keeps the last value
/// (Java `Properties`) and leaves a warning.
pub(super) fn apply_all<C>(
    config: C,
    table: &Table<C>,
    entries: Vec<Entry>,
    origin: &str,
) -> Result<LoadedConfig<C>, ConfigError> {
    let mut loaded = LoadedConfig {
        config,
        ignored: Vec::new(),
        warnings: Vec::new(),
    };
    let mut first_line: HashMap<String, usize> = HashMap::new();
    for entry in entries {
        if let Some(first) = first_line.get(&entry.key) {
            loaded.warnings.push(if entry.line == 0 {
                format!(
                    "{origin}: {} set again; the earlier value is overridden",
                    entry.key
                )
            } else {
                format!(
                    "{origin}:{}: {} set again; the value from line {first} is overridden",
                    entry.line, entry.key
                )
            });
        } else {
            first_line.insert(entry.key.clone(), entry.line);
        }
        let text = match &entry.value {
            Value::Text(text) => text.clone(),
            Value::List(items) => join_list(table, &entry, items, origin)?,
        };
        let applied = apply_one(
            &mut loaded.config,
            table,
            &entry.key,
            &text,
            origin,
            entry.line,
        )?;
        if !applied {
            loaded.ignored.push(IgnoredKey {
                origin: origin.to_owned(),
                line: entry.line,
                key: entry.key,
            });
        }
    }
    Ok(loaded)
}

/// Applies one key. `Ok(true)` = applied, `Ok(false)` = a RocketMQ key ringmq ignores.
pub(super) fn apply_one<C>(
    config: &mut C,
    table: &Table<C>,
    key: &str,
    value: &str,
    origin: &str,
    line: usize,
) -> Result<bool, ConfigError> {
    if let Some(k) = table.find(key) {
        (k.set)(config, value).map_err(|detail| ConfigError::BadValue {
            origin: origin.to_owned(),
            line,
            key: key.to_owned(),
            detail,
        })?;
        return Ok(true);
    }
    if table.is_ignored(key) {
        return Ok(false);
    }
    Err(ConfigError::UnknownKey {
        origin: origin.to_owned(),
        line,
        key: key.to_owned(),
        suggestion: suggest(key, table.names()),
    })
}

/// Post-parse adjustments RocketMQ makes silently; ringmq makes them and says so.
pub(super) fn clamp_broker(loaded: &mut LoadedConfig<BrokerConfig>) {
    let c = &mut loaded.config;
    let ratio = c.disk_max_used_space_ratio;
    if !(10..=95).contains(&ratio) {
        c.disk_max_used_space_ratio = ratio.clamp(10, 95);
        loaded.warnings.push(format!(
            "diskMaxUsedSpaceRatio {ratio} clamped to {} (RocketMQ's range is 10..=95)",
            c.disk_max_used_space_ratio
        ));
    }
    if c.broker_role.is_master() && c.broker_id != 0 && !c.controller.enable {
        loaded.warnings.push(format!(
            "brokerId {} set to 0: a {} always has brokerId 0",
            c.broker_id,
            c.broker_role.name()
        ));
        c.broker_id = 0;
    }
}

fn join_list<C>(
    table: &Table<C>,
    entry: &Entry,
    items: &[String],
    origin: &str,
) -> Result<String, ConfigError> {
    match table.find(&entry.key).and_then(|k| k.list_separator) {
        Some(sep) => Ok(items.join(sep)),
        None => Err(ConfigError::BadValue {
            origin: origin.to_owned(),
            line: entry.line,
            key: entry.key.clone(),
            detail: "expected a single value, not an array".to_owned(),
        }),
    }
}

/// The closest known key: same letters ignoring case, else the smallest edit distance
/// within a bound that grows with the key's length.
fn suggest<'k>(key: &str, known: impl Iterator<Item = &'k str> + Clone) -> Option<&'k str> {
    if let Some(k) = known.clone().find(|k| k.eq_ignore_ascii_case(key)) {
        return Some(k);
    }
    let bound = (1 + key.len() / 6).min(3);
    let lower = key.to_ascii_lowercase();
    known
        .map(|k| (edit_distance(&lower, &k.to_ascii_lowercase()), k))
        .filter(|&(d, _)| d <= bound)
        .min_by_key(|&(d, _)| d)
        .map(|(_, k)| k)
}

/// Levenshtein distance with adjacent transpositions counted as one edit.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut prev2: Vec<usize> = vec![0; b.len() + 1];
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                cur[j] = cur[j].min(prev2[j - 2] + 1);
            }
        }
        prev2 = std::mem::replace(&mut prev, cur);
    }
    prev[b.len()]
}

// ----------------------------------------------------------------------------------------
// Value parsers: each returns the detail that follows `key: ` in the error.
// ----------------------------------------------------------------------------------------

fn num<T: TryFrom<u64>>(v: &str, min: u64, max: u64) -> Result<T, String> {
    let digits = v.strip_prefix('+').unwrap_or(v);
    digits
        .parse::<u64>()
        .ok()
        .filter(|n| (min..=max).contains(n) && digits.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|n| T::try_from(n).ok())
        .ok_or_else(|| format!("expected an integer in {min}..={max}, got {v:?}"))
}

fn boolean(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("expected true or false, got {v:?}")),
    }
}

fn broker_role(v: &str) -> Result<BrokerRole, String> {
    match v {
        "ASYNC_MASTER" => Ok(BrokerRole::AsyncMaster),
        "SYNC_MASTER" => Ok(BrokerRole::SyncMaster),
        "SLAVE" => Ok(BrokerRole::Slave),
        _ => Err(format!(
            "expected ASYNC_MASTER, SYNC_MASTER or SLAVE, got {v:?}"
        )),
    }
}

fn flush_disk_type(v: &str) -> Result<FlushDiskType, String> {
    match v {
        "ASYNC_FLUSH" => Ok(FlushDiskType::AsyncFlush),
        "SYNC_FLUSH" => Ok(FlushDiskType::SyncFlush),
        _ => Err(format!("expected ASYNC_FLUSH or SYNC_FLUSH, got {v:?}")),
    }
}

/// A cluster, broker or host name: 1..=`NAME_BYTES_MAX` bytes, no whitespace, control
/// characters or `;` (the address-list separator).
pub(super) fn check_name(v: &str) -> Result<(), String> {
    if v.is_empty() {
        return Err("expected a name, got an empty value".to_owned());
    }
    if v.len() > limits::NAME_BYTES_MAX {
        return Err(format!(
            "{} bytes, over the maximum of {}",
            v.len(),
            limits::NAME_BYTES_MAX
        ));
    }
    match v
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || *c == ';')
    {
        Some(c) => Err(format!("{c:?} is not allowed in a name, got {v:?}")),
        None => Ok(()),
    }
}

fn name(v: &str) -> Result<String, String> {
    check_name(v).map(|()| v.to_owned())
}

/// An optional host (empty = unset, detect at start).
fn host(v: &str) -> Result<Option<String>, String> {
    if v.is_empty() {
        return Ok(None);
    }
    name(v).map(Some)
}

fn path(v: &str) -> Result<PathBuf, String> {
    if v.is_empty() {
        return Err("expected a path, got an empty value".to_owned());
    }
    Ok(PathBuf::from(v))
}

/// `host:port`, port 1..=65535 (`[v6]:port` works, the last `:` splits).
fn addr(v: &str) -> Result<String, String> {
    let bad = || format!("expected host:port, got {v:?}");
    let (host, port) = v.rsplit_once(':').ok_or_else(bad)?;
    check_name(host).map_err(|_| bad())?;
    num::<u16>(port, 1, u16::MAX.into()).map_err(|_| bad())?;
    Ok(v.to_owned())
}

fn opt_addr(v: &str) -> Result<Option<String>, String> {
    if v.is_empty() {
        return Ok(None);
    }
    addr(v).map(Some)
}

/// `h1:9876;h2:9876`: separators may carry spaces; empty = no name server.
pub(super) fn namesrv_addrs(v: &str) -> Result<Vec<String>, String> {
    let addrs: Vec<String> = v
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(addr)
        .collect::<Result<_, _>>()?;
    if addrs.len() > limits::NAMESRV_ADDRS_MAX {
        return Err(format!(
            "{} addresses, over the maximum of {}",
            addrs.len(),
            limits::NAMESRV_ADDRS_MAX
        ));
    }
    Ok(addrs)
}

/// `04` or `04;16`: hours of the day.
fn hours(v: &str) -> Result<Vec<u8>, String> {
    let bad = || format!("expected hours 00..23 separated by ';', got {v:?}");
    let hours: Vec<u8> = v
        .split(';')
        .map(|h| num::<u8>(h.trim(), 0, 23).map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    if hours.is_empty() {
        return Err(bad());
    }
    Ok(hours)
}

/// `1s 5s 10s 30s 1m … 2h` (units s, m, h, d, and ringmq's `ms`) into milliseconds.
pub(super) fn parse_delay_levels(v: &str) -> Result<Vec<u64>, String> {
    let levels: Vec<u64> = v
        .split_whitespace()
        .map(|level| {
            let bad =
                || format!("expected levels like \"1s 5m 2h\" (units ms s m h d), got {level:?}");
            let (n, unit_ms) = if let Some(n) = level.strip_suffix("ms") {
                (n, 1)
            } else {
                let split = level.len().checked_sub(1).ok_or_else(bad)?;
                let (n, unit) = level.split_at(split);
                let unit_ms: u64 = match unit {
                    "s" => 1_000,
                    "m" => 60_000,
                    "h" => 3_600_000,
                    "d" => 86_400_000,
                    _ => return Err(bad()),
                };
                (n, unit_ms)
            };
            let n: u64 = num(n, 1, I32_MAX).map_err(|_| bad())?;
            Ok(n * unit_ms)
        })
        .collect::<Result<_, _>>()?;
    if levels.is_empty() || levels.len() > limits::DELAY_LEVELS_MAX {
        return Err(format!(
            "expected 1..={} levels, got {}",
            limits::DELAY_LEVELS_MAX,
            levels.len()
        ));
    }
    Ok(levels)
}

/// `auto` (one per core) or 1..=`SHARDS_MAX`.
fn shards(v: &str) -> Result<Option<usize>, String> {
    if v.eq_ignore_ascii_case("auto") {
        return Ok(None);
    }
    num(v, 1, limits::SHARDS_MAX as u64)
        .map(Some)
        .map_err(|e| format!("{e} (or \"auto\")"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_one_fate<C>(table: &Table<C>) {
        let names: Vec<_> = table.names().collect();
        let dups: Vec<_> = names
            .iter()
            .filter(|n| names.iter().filter(|m| m == n).count() > 1)
            .collect();
        assert!(dups.is_empty(), "keys listed twice: {dups:?}");
    }

    #[test]
    fn every_key_has_one_fate() {
        assert_one_fate(&BROKER);
        assert_one_fate(&NAMESRV);
    }

    #[test]
    fn edit_distance_counts_transpositions_once() {
        assert_eq!(edit_distance("brokername", "brokername"), 0);
        assert_eq!(edit_distance("brokernmae", "brokername"), 1);
        assert_eq!(edit_distance("flushdisktyp", "flushdisktype"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
    }

    #[test]
    fn suggestions() {
        let known = ["brokerName", "brokerId", "flushDiskType"];
        assert_eq!(
            suggest("brokername", known.iter().copied()),
            Some("brokerName")
        );
        assert_eq!(
            suggest("brokerNmae", known.iter().copied()),
            Some("brokerName")
        );
        assert_eq!(
            suggest("flushDiskTyp", known.iter().copied()),
            Some("flushDiskType")
        );
        assert_eq!(suggest("zzz", known.iter().copied()), None);
    }

    #[test]
    fn value_parsers() {
        assert_eq!(num::<u16>("10911", 1, 65535), Ok(10911));
        assert_eq!(num::<u16>("+5", 1, 65535), Ok(5));
        assert!(num::<u16>("-5", 0, 65535).is_err());
        assert!(num::<u16>("70000", 1, 65535).is_err());
        assert!(num::<u16>(" 5", 1, 65535).is_err());
        assert_eq!(boolean("TRUE"), Ok(true));
        assert!(boolean("yes").is_err());
        assert_eq!(hours("04;16"), Ok(vec![4, 16]));
        assert!(hours("24").is_err());
        assert!(hours("").is_err());
        assert_eq!(
            namesrv_addrs(" h1:9876 ; [::1]:9877;"),
            Ok(vec!["h1:9876".to_owned(), "[::1]:9877".to_owned()])
        );
        assert_eq!(namesrv_addrs(""), Ok(vec![]));
        assert!(namesrv_addrs("h1").is_err());
        assert!(namesrv_addrs("h1:0").is_err());
        assert!(namesrv_addrs(":9876").is_err());
        assert_eq!(
            parse_delay_levels("1s 2m 1h 1d"),
            Ok(vec![1_000, 120_000, 3_600_000, 86_400_000])
        );
        assert!(parse_delay_levels("1x").is_err());
        assert!(parse_delay_levels("s").is_err());
        assert!(parse_delay_levels("").is_err());
        assert_eq!(shards("auto"), Ok(None));
        assert_eq!(shards("4"), Ok(Some(4)));
        assert!(shards("0").is_err());
        assert!(check_name("broker a").is_err());
        assert!(check_name(&"x".repeat(256)).is_err());
    }
}
