//! The broker's topic table: every topic's queue counts, permission and queue-to-shard
//! placement. Shared by all shards as an immutable snapshot (`arc_swap`): the data path reads
//! it with one atomic load; a change (create, update, delete: the control path) builds a new
//! snapshot under a mutex, persists it to `config/topics.json` (write to a temp file, fsync,
//! rename), then publishes it.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use ringmq_wire::command::route::{perm, DataVersion, TopicConfig, TopicConfigTable};
use serde::{Deserialize, Serialize};

use crate::limits;
use crate::shard::placement;

/// A topic table snapshot.
#[derive(Debug, Clone, Default)]
pub struct TopicTable {
    pub version: DataVersion,
    pub topics: BTreeMap<String, TopicConfig>,
}

impl TopicTable {
    pub fn get(&self, topic: &str) -> Option<&TopicConfig> {
        self.topics.get(topic)
    }

    /// The wire form.
    pub fn to_wire(&self) -> TopicConfigTable {
        TopicConfigTable {
            data_version: self.version,
            topics: self.topics.values().cloned().collect(),
        }
    }
}

/// Why a topic change was refused.
#[derive(Debug, thiserror::Error)]
pub enum TopicError {
    #[error("{0}")]
    BadName(String),
    #[error("queue count {count} is outside 1..={max}")]
    BadQueueCount { count: u32, max: usize },
    #[error("permission {0:#x} has bits other than PRIORITY|READ|WRITE|INHERIT")]
    BadPerm(u8),
    #[error("too many topics (at most {0})")]
    TooMany(usize),
    #[error("saving the topic table: {0}")]
    Persist(std::io::Error),
}

/// The shared, persisted topic table.
#[derive(Debug)]
pub struct Topics {
    current: ArcSwap<TopicTable>,
    write_lock: Mutex<()>,
    path: PathBuf,
    shard_count: u16,
}

#[derive(Serialize, Deserialize)]
struct TopicJson {
    topic: String,
    read_queue_nums: u32,
    write_queue_nums: u32,
    perm: u8,
    #[serde(default)]
    attributes: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize)]
struct TableJson {
    version_counter: u64,
    topics: Vec<TopicJson>,
}

impl Topics {
    /// Loads `<root>/config/topics.json` (empty table when absent). Placements are recomputed
    /// for `shard_count`.
    pub fn load(root: &Path, shard_count: u16) -> std::io::Result<Self> {
        let path = root.join("config").join("topics.json");
        let mut table = TopicTable::default();
        match std::fs::read(&path) {
            Ok(bytes) => {
                let parsed: TableJson = serde_json::from_slice(&bytes).map_err(|e| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("{}: {e}", path.display()),
                    )
                })?;
                table.version.counter = parsed.version_counter;
                for t in parsed.topics {
                    let cfg = make_config(
                        &t.topic,
                        t.read_queue_nums,
                        t.write_queue_nums,
                        t.perm,
                        t.attributes,
                        shard_count,
                    );
                    table.topics.insert(t.topic, cfg);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        Ok(Topics {
            current: ArcSwap::from_pointee(table),
            write_lock: Mutex::new(()),
            path,
            shard_count,
        })
    }

    /// The current snapshot (one atomic load).
    pub fn snapshot(&self) -> Arc<TopicTable> {
        self.current.load_full()
    }

    /// Creates or updates a topic; returns its config.
    pub fn upsert(
        &self,
        topic: &str,
        read_queues: u32,
        write_queues: u32,
        perm_bits: u8,
        attributes: BTreeMap<String, String>,
        now_ms: i64,
    ) -> Result<TopicConfig, TopicError> {
        limits::validate_topic_name(topic).map_err(|e| TopicError::BadName(e.to_string()))?;
        self.put(
            topic,
            read_queues,
            write_queues,
            perm_bits,
            attributes,
            now_ms,
        )
    }

    /// Creates a topic the broker itself owns, reserved names allowed (the transaction
    /// check-max topic).
    pub fn upsert_system(
        &self,
        topic: &str,
        queues: u32,
        perm_bits: u8,
        now_ms: i64,
    ) -> Result<TopicConfig, TopicError> {
        limits::validate_topic_format(topic).map_err(|e| TopicError::BadName(e.to_string()))?;
        self.put(topic, queues, queues, perm_bits, BTreeMap::new(), now_ms)
    }

    fn put(
        &self,
        topic: &str,
        read_queues: u32,
        write_queues: u32,
        perm_bits: u8,
        attributes: BTreeMap<String, String>,
        now_ms: i64,
    ) -> Result<TopicConfig, TopicError> {
        for count in [read_queues, write_queues] {
            if count == 0 || count as usize > limits::QUEUES_PER_TOPIC_MAX {
                return Err(TopicError::BadQueueCount {
                    count,
                    max: limits::QUEUES_PER_TOPIC_MAX,
                });
            }
        }
        if perm_bits & !perm::ALL != 0 {
            return Err(TopicError::BadPerm(perm_bits));
        }
        let _guard = self.write_lock.lock().unwrap_or_else(|p| p.into_inner());
        let cur = self.current.load_full();
        if !cur.topics.contains_key(topic) && cur.topics.len() >= limits::TOPICS_PER_BROKER_MAX {
            return Err(TopicError::TooMany(limits::TOPICS_PER_BROKER_MAX));
        }
        let cfg = make_config(
            topic,
            read_queues,
            write_queues,
            perm_bits,
            attributes,
            self.shard_count,
        );
        let mut next = (*cur).clone();
        next.topics.insert(topic.to_string(), cfg.clone());
        bump(&mut next.version, now_ms);
        self.persist(&next).map_err(TopicError::Persist)?;
        self.current.store(Arc::new(next));
        Ok(cfg)
    }

    /// Deletes a topic; false if it did not exist.
    pub fn delete(&self, topic: &str, now_ms: i64) -> Result<bool, TopicError> {
        let _guard = self.write_lock.lock().unwrap_or_else(|p| p.into_inner());
        let cur = self.current.load_full();
        if !cur.topics.contains_key(topic) {
            return Ok(false);
        }
        let mut next = (*cur).clone();
        next.topics.remove(topic);
        bump(&mut next.version, now_ms);
        self.persist(&next).map_err(TopicError::Persist)?;
        self.current.store(Arc::new(next));
        Ok(true)
    }

    /// Replaces the whole table with a master's (slave role). Placements are recomputed for
    /// this broker's shard count (which equals the master's).
    pub fn replace_all(
        &self,
        topics: Vec<TopicConfig>,
        version: DataVersion,
    ) -> std::io::Result<bool> {
        let _guard = self.write_lock.lock().unwrap_or_else(|p| p.into_inner());
        let cur = self.current.load_full();
        if cur.version == version && cur.topics.len() == topics.len() {
            return Ok(false);
        }
        let mut next = TopicTable {
            version,
            topics: BTreeMap::new(),
        };
        for t in topics {
            let cfg = make_config(
                &t.topic,
                t.read_queue_count,
                t.write_queue_count,
                t.perm,
                t.attributes,
                self.shard_count,
            );
            next.topics.insert(t.topic, cfg);
        }
        self.persist(&next)?;
        self.current.store(Arc::new(next));
        Ok(true)
    }

    fn persist(&self, table: &TopicTable) -> std::io::Result<()> {
        let json = TableJson {
            version_counter: table.version.counter,
            topics: table
                .topics
                .values()
                .map(|t| TopicJson {
                    topic: t.topic.clone(),
                    read_queue_nums: t.read_queue_count,
                    write_queue_nums: t.write_queue_count,
                    perm: t.perm,
                    attributes: t.attributes.clone(),
                })
                .collect(),
        };
        let bytes = serde_json::to_vec_pretty(&json).map_err(std::io::Error::other)?;
        write_atomically(&self.path, &bytes)
    }
}

/// Writes `bytes` to `path` so that a crash leaves either the old or the new content:
/// temp file, fsync, rename, fsync of the directory.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    // One writer at a time: two writers of one file (a helper thread's periodic save and
    // the shutdown's) would share its ".tmp" and could rename each other's half-written one.
    static WRITING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = WRITING.lock().unwrap_or_else(|p| p.into_inner());
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = path.with_extension("tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    std::fs::File::open(dir)?.sync_all()
}

fn bump(v: &mut DataVersion, now_ms: i64) {
    v.counter += 1;
    v.timestamp_ms = now_ms;
}

pub(crate) fn make_config(
    topic: &str,
    read_queues: u32,
    write_queues: u32,
    perm_bits: u8,
    attributes: BTreeMap<String, String>,
    shard_count: u16,
) -> TopicConfig {
    TopicConfig {
        topic: topic.to_string(),
        read_queue_count: read_queues,
        write_queue_count: write_queues,
        perm: perm_bits,
        queue_shards: placement::queue_shards(topic, read_queues.max(write_queues), shard_count),
        attributes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upsert_persist_reload_delete() {
        let dir = tempfile::tempdir().unwrap();
        let t = Topics::load(dir.path(), 2).unwrap();
        let cfg = t
            .upsert("orders", 8, 8, perm::READ_WRITE, BTreeMap::new(), 5)
            .unwrap();
        assert_eq!(cfg.queue_shards.len(), 8);
        assert!(t.upsert("bad/name", 8, 8, 6, BTreeMap::new(), 5).is_err());
        assert!(t.upsert("x", 0, 8, 6, BTreeMap::new(), 5).is_err());
        let again = Topics::load(dir.path(), 2).unwrap();
        assert_eq!(again.snapshot().get("orders"), Some(&cfg));
        assert!(again.delete("orders", 6).unwrap());
        assert!(!again.delete("orders", 6).unwrap());
        assert!(Topics::load(dir.path(), 2)
            .unwrap()
            .snapshot()
            .topics
            .is_empty());
    }
}
