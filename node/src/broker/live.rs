//! Broker settings that can change while the broker runs (UPDATE_BROKER_CONFIG), read on the
//! data path without a lock. Only an allow-list of keys: never paths, ports, identities or
//! anything that starts a process. A change is validated whole (with the same parser as
//! `broker.properties`) before any of it is applied.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::config::BrokerConfig;

/// Keys UPDATE_BROKER_CONFIG may change.
pub const RUNTIME_KEYS: &[&str] = &[
    "brokerPermission",
    "syncFlushTimeout",
    "maxMessageSize",
    "autoCreateTopicEnable",
    "defaultTopicQueueNums",
    "fileReservedTime",
    "deleteWhen",
    "diskMaxUsedSpaceRatio",
    "diskSpaceCleanForciblyRatio",
    "cleanFileForciblyEnable",
    "flushIntervalCommitLog",
];

/// The live values of [`RUNTIME_KEYS`].
#[derive(Debug)]
pub struct Live {
    permission: AtomicU8,
    sync_flush_timeout_ms: AtomicU64,
    max_message_size_bytes: AtomicUsize,
    auto_create_topic: AtomicBool,
    default_queue_count: AtomicU32,
    file_reserved_time_hours: AtomicU32,
    delete_when_hours: Mutex<Vec<u8>>,
    disk_max_used_space_ratio: AtomicU8,
    disk_space_clean_forcibly_ratio: AtomicU8,
    clean_file_forcibly: AtomicBool,
    flush_interval_commit_log_ms: AtomicU64,
    /// The config as last updated (for GET_BROKER_CONFIG and validation of the next change).
    current: Mutex<BrokerConfig>,
}

impl Live {
    pub fn new(cfg: &BrokerConfig) -> Self {
        let live = Live {
            permission: AtomicU8::new(0),
            sync_flush_timeout_ms: AtomicU64::new(0),
            max_message_size_bytes: AtomicUsize::new(0),
            auto_create_topic: AtomicBool::new(false),
            default_queue_count: AtomicU32::new(0),
            file_reserved_time_hours: AtomicU32::new(0),
            delete_when_hours: Mutex::new(Vec::new()),
            disk_max_used_space_ratio: AtomicU8::new(0),
            disk_space_clean_forcibly_ratio: AtomicU8::new(0),
            clean_file_forcibly: AtomicBool::new(false),
            flush_interval_commit_log_ms: AtomicU64::new(0),
            current: Mutex::new(cfg.clone()),
        };
        live.store(cfg);
        live
    }

    /// Applies `changes` (RocketMQ key spelling) if every key is allowed and every value
    /// valid; otherwise changes nothing and says which key is wrong.
    pub fn update(&self, changes: &BTreeMap<String, String>) -> Result<(), String> {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        let mut next = current.clone();
        for (k, v) in changes {
            if !RUNTIME_KEYS.contains(&k.as_str()) {
                return Err(format!(
                    "{k} cannot be changed at run time (allowed: {})",
                    RUNTIME_KEYS.join(", ")
                ));
            }
            next.set(k, v, "UPDATE_BROKER_CONFIG")
                .map_err(|e| e.to_string())?;
        }
        next.validate().map_err(|e| e.to_string())?;
        self.store(&next);
        *current = next;
        Ok(())
    }

    /// The current config (for GET_BROKER_CONFIG).
    pub fn config(&self) -> BrokerConfig {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn store(&self, c: &BrokerConfig) {
        let r = Ordering::Relaxed;
        self.permission.store(c.broker_permission, r);
        self.sync_flush_timeout_ms.store(c.sync_flush_timeout_ms, r);
        self.max_message_size_bytes
            .store(c.max_message_size_bytes, r);
        self.auto_create_topic.store(c.auto_create_topic_enable, r);
        self.default_queue_count
            .store(c.default_topic_queue_nums, r);
        self.file_reserved_time_hours
            .store(c.file_reserved_time_hours, r);
        *self
            .delete_when_hours
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = c.delete_when_hours.clone();
        self.disk_max_used_space_ratio
            .store(c.disk_max_used_space_ratio, r);
        self.disk_space_clean_forcibly_ratio
            .store(c.disk_space_clean_forcibly_ratio, r);
        self.clean_file_forcibly
            .store(c.clean_file_forcibly_enable, r);
        self.flush_interval_commit_log_ms
            .store(c.flush_interval_commit_log_ms, r);
    }

    pub fn permission(&self) -> u8 {
        self.permission.load(Ordering::Relaxed)
    }
    pub fn sync_flush_timeout_ms(&self) -> u64 {
        self.sync_flush_timeout_ms.load(Ordering::Relaxed)
    }
    pub fn max_message_size_bytes(&self) -> usize {
        self.max_message_size_bytes.load(Ordering::Relaxed)
    }
    pub fn auto_create_topic(&self) -> bool {
        self.auto_create_topic.load(Ordering::Relaxed)
    }
    pub fn default_queue_count(&self) -> u32 {
        self.default_queue_count.load(Ordering::Relaxed)
    }
    pub fn file_reserved_time_hours(&self) -> u32 {
        self.file_reserved_time_hours.load(Ordering::Relaxed)
    }
    pub fn delete_when_hours(&self) -> Vec<u8> {
        self.delete_when_hours
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
    pub fn disk_max_used_space_ratio(&self) -> u8 {
        self.disk_max_used_space_ratio.load(Ordering::Relaxed)
    }
    pub fn disk_space_clean_forcibly_ratio(&self) -> u8 {
        self.disk_space_clean_forcibly_ratio.load(Ordering::Relaxed)
    }
    pub fn clean_file_forcibly(&self) -> bool {
        self.clean_file_forcibly.load(Ordering::Relaxed)
    }
    pub fn flush_interval_commit_log_ms(&self) -> u64 {
        self.flush_interval_commit_log_ms.load(Ordering::Relaxed)
    }
}

/// Every key GET_BROKER_CONFIG shows, RocketMQ spelling, `broker.properties` values.
pub fn entries(c: &BrokerConfig) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    let mut put = |k: &str, v: String| {
        m.insert(k.to_string(), v);
    };
    put("brokerClusterName", c.broker_cluster_name.clone());
    put("brokerName", c.broker_name.clone());
    put("brokerId", c.broker_id.to_string());
    put("brokerRole", c.broker_role.name().to_string());
    put("brokerPermission", c.broker_permission.to_string());
    put("namesrvAddr", c.namesrv_addr.join(";"));
    put("brokerIP1", c.broker_ip1.clone().unwrap_or_default());
    put("listenPort", c.listen_port.to_string());
    put(
        "haListenPort",
        c.ha_listen_port()
            .map(|p| p.to_string())
            .unwrap_or_default(),
    );
    put(
        "haMasterAddress",
        c.ha_master_address.clone().unwrap_or_default(),
    );
    put(
        "registerNameServerPeriod",
        c.register_name_server_period_ms.to_string(),
    );
    put(
        "storePathRootDir",
        c.store_path_root_dir.display().to_string(),
    );
    put(
        "mappedFileSizeCommitLog",
        c.mapped_file_size_commit_log_bytes.to_string(),
    );
    put(
        "mappedFileSizeConsumeQueue",
        c.mapped_file_size_consume_queue_bytes.to_string(),
    );
    put("flushDiskType", c.flush_disk_type.as_str().to_string());
    put("warmMapedFileEnable", c.warm_segments().to_string());
    put("commitLogPrewriteBytes", c.prewrite_bytes().to_string());
    put("commitLogCacheKeepBytes", c.cache_keep_bytes().to_string());
    put(
        "flushIntervalCommitLog",
        c.flush_interval_commit_log_ms.to_string(),
    );
    put("syncFlushTimeout", c.sync_flush_timeout_ms.to_string());
    put("fileReservedTime", c.file_reserved_time_hours.to_string());
    put(
        "deleteWhen",
        c.delete_when_hours
            .iter()
            .map(|h| format!("{h:02}"))
            .collect::<Vec<_>>()
            .join(";"),
    );
    put(
        "diskMaxUsedSpaceRatio",
        c.disk_max_used_space_ratio.to_string(),
    );
    put(
        "diskSpaceWarningLevelRatio",
        c.disk_space_warning_level_ratio.to_string(),
    );
    put(
        "diskSpaceCleanForciblyRatio",
        c.disk_space_clean_forcibly_ratio.to_string(),
    );
    put(
        "cleanFileForciblyEnable",
        c.clean_file_forcibly_enable.to_string(),
    );
    put(
        "autoCreateTopicEnable",
        c.auto_create_topic_enable.to_string(),
    );
    put(
        "defaultTopicQueueNums",
        c.default_topic_queue_nums.to_string(),
    );
    put("maxMessageSize", c.max_message_size_bytes.to_string());
    put("longPollingEnable", c.long_polling_enable.to_string());
    put("transferMsgByHeap", c.transfer_msg_by_heap.to_string());
    put(
        "haMaxGapNotInSync",
        c.ha_max_gap_not_in_sync_bytes.to_string(),
    );
    put(
        "shards",
        c.shards
            .map(|s| s.to_string())
            .unwrap_or("auto".to_string()),
    );
    put("pinCores", c.pin_cores.to_string());
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_list_and_whole_validation() {
        let live = Live::new(&BrokerConfig::default());
        assert_eq!(live.permission(), 6);
        let mut ch = BTreeMap::new();
        ch.insert("brokerPermission".to_string(), "4".to_string());
        live.update(&ch).unwrap();
        assert_eq!(live.permission(), 4);
        ch.insert("storePathRootDir".to_string(), "/etc".to_string());
        let err = live.update(&ch).unwrap_err();
        assert!(err.contains("storePathRootDir"), "{err}");
        let mut bad = BTreeMap::new();
        bad.insert("brokerPermission".to_string(), "6".to_string());
        bad.insert("syncFlushTimeout".to_string(), "x".to_string());
        assert!(live.update(&bad).is_err());
        assert_eq!(
            live.permission(),
            4,
            "nothing applied from a refused change"
        );
        assert_eq!(entries(&live.config())["brokerPermission"], "4");
    }
}
