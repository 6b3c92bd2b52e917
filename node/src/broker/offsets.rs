//! Consumer offsets of the queues a shard owns: (group, topic, queue) -> next offset to
//! consume. Kept in memory, persisted to `config/consumerOffset.<shard>.json` by a timer
//! (every `OFFSET_PERSIST_INTERVAL_MS` when changed) and at shutdown, written atomically.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::topics::write_atomically;

/// How often changed offsets are written (RocketMQ: `flushConsumerOffsetInterval`, 5 s).
pub const OFFSET_PERSIST_INTERVAL_MS: u64 = 5_000;

#[derive(Serialize, Deserialize)]
struct Entry {
    group: String,
    topic: String,
    queue_id: u32,
    offset: u64,
}

/// One shard's consumer offsets.
#[derive(Debug)]
pub struct ConsumerOffsets {
    path: PathBuf,
    map: BTreeMap<(String, String, u32), u64>,
    dirty: bool,
}

impl ConsumerOffsets {
    pub fn load(root: &Path, shard: u16) -> std::io::Result<Self> {
        let path = root
            .join("config")
            .join(format!("consumerOffset.{shard}.json"));
        let mut map = BTreeMap::new();
        match std::fs::read(&path) {
            Ok(bytes) => {
                let entries: Vec<Entry> = serde_json::from_slice(&bytes).map_err(|e| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("{}: {e}", path.display()),
                    )
                })?;
                for e in entries {
                    map.insert((e.group, e.topic, e.queue_id), e.offset);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        Ok(ConsumerOffsets {
            path,
            map,
            dirty: false,
        })
    }

    pub fn get(&self, group: &str, topic: &str, queue_id: u32) -> Option<u64> {
        self.map
            .get(&(group.to_string(), topic.to_string(), queue_id))
            .copied()
    }

    pub fn set(&mut self, group: &str, topic: &str, queue_id: u32, offset: u64) {
        let key = (group.to_string(), topic.to_string(), queue_id);
        if self.map.get(&key) != Some(&offset) {
            self.map.insert(key, offset);
            self.dirty = true;
        }
    }

    /// Offsets of a group: (topic, queue) -> offset.
    pub fn of_group(&self, group: &str) -> Vec<(String, u32, u64)> {
        self.map
            .iter()
            .filter(|((g, _, _), _)| g == group)
            .map(|((_, t, q), o)| (t.clone(), *q, *o))
            .collect()
    }

    /// Every offset, sorted by (group, topic, queue), without copying.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str, u32, u64)> {
        self.map
            .iter()
            .map(|((g, t, q), o)| (g.as_str(), t.as_str(), *q, *o))
    }

    /// Every offset: (group, topic, queue, offset).
    pub fn all(&self) -> Vec<(String, String, u32, u64)> {
        self.map
            .iter()
            .map(|((g, t, q), o)| (g.clone(), t.clone(), *q, *o))
            .collect()
    }

    /// Forgets every offset of a deleted topic.
    pub fn remove_topic(&mut self, topic: &str) {
        let before = self.map.len();
        self.map.retain(|(_, t, _), _| t != topic);
        self.dirty |= self.map.len() != before;
    }

    /// Writes the offsets if they changed since the last write.
    pub fn persist(&mut self) -> std::io::Result<()> {
        match self.snapshot()? {
            Some((path, bytes)) => write_atomically(&path, &bytes),
            None => Ok(()),
        }
    }

    /// What [`Self::persist`] would write (file and bytes), for a caller that writes it off
    /// its own thread; `None` when nothing changed since the last snapshot. A failed write
    /// must be followed by [`Self::mark_dirty`] so the next one retries.
    pub fn snapshot(&mut self) -> std::io::Result<Option<(PathBuf, Vec<u8>)>> {
        if !self.dirty {
            return Ok(None);
        }
        let entries: Vec<Entry> = self
            .map
            .iter()
            .map(|((g, t, q), o)| Entry {
                group: g.clone(),
                topic: t.clone(),
                queue_id: *q,
                offset: *o,
            })
            .collect();
        let bytes = serde_json::to_vec(&entries).map_err(std::io::Error::other)?;
        self.dirty = false;
        Ok(Some((self.path.clone(), bytes)))
    }

    /// Something changed that is not on disk yet (a failed write of a snapshot).
    pub fn mark_dirty(&mut self) {
        self.dirty = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_persist_reload() {
        let dir = tempfile::tempdir().unwrap();
        let mut o = ConsumerOffsets::load(dir.path(), 1).unwrap();
        o.set("g", "t", 3, 42);
        o.persist().unwrap();
        let o2 = ConsumerOffsets::load(dir.path(), 1).unwrap();
        assert_eq!(o2.get("g", "t", 3), Some(42));
        assert_eq!(o2.get("g", "t", 4), None);
        assert_eq!(o2.of_group("g"), vec![("t".to_string(), 3, 42)]);
    }
}
