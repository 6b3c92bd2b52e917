//! Consumer groups' settings on this broker (RocketMQ's subscription group table), kept in
//! `<store root>/config/subscriptionGroup.json` (written atomically on every change). Only
//! settings that take effect are kept: the retry limit (`retry_max_times`, used when a
//! consumer's send-back does not name its own). A group without an entry uses the broker's
//! `maxReconsumeTimes`. Control path, behind a mutex.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::broker::topics::write_atomically;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct GroupJson {
    group: String,
    retry_max_times: u32,
}

/// The settings table.
#[derive(Debug)]
pub struct GroupConfigs {
    path: PathBuf,
    retry_max_times: BTreeMap<String, u32>,
}

impl GroupConfigs {
    /// Loads `<root>/config/subscriptionGroup.json` (empty when absent).
    pub fn load(root: &Path) -> std::io::Result<Self> {
        let path = root.join("config").join("subscriptionGroup.json");
        let mut retry_max_times = BTreeMap::new();
        match std::fs::read(&path) {
            Ok(bytes) => {
                let groups: Vec<GroupJson> = serde_json::from_slice(&bytes).map_err(|e| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("{}: {e}", path.display()),
                    )
                })?;
                for g in groups {
                    retry_max_times.insert(g.group, g.retry_max_times);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        Ok(GroupConfigs {
            path,
            retry_max_times,
        })
    }

    /// A group's retry limit, if it has its own.
    pub fn retry_max_times(&self, group: &str) -> Option<u32> {
        self.retry_max_times.get(group).copied()
    }

    /// Groups with settings.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.retry_max_times.keys().map(String::as_str)
    }

    /// Sets a group's retry limit and saves the table.
    pub fn set(&mut self, group: &str, retry_max_times: u32) -> std::io::Result<()> {
        let before = self
            .retry_max_times
            .insert(group.to_owned(), retry_max_times);
        self.save().inspect_err(|_| {
            match before {
                Some(b) => self.retry_max_times.insert(group.to_owned(), b),
                None => self.retry_max_times.remove(group),
            };
        })
    }

    /// Returns a group to the defaults; false if it had no settings.
    pub fn delete(&mut self, group: &str) -> std::io::Result<bool> {
        let Some(before) = self.retry_max_times.remove(group) else {
            return Ok(false);
        };
        self.save().inspect_err(|_| {
            self.retry_max_times.insert(group.to_owned(), before);
        })?;
        Ok(true)
    }

    fn save(&self) -> std::io::Result<()> {
        let groups: Vec<GroupJson> = self
            .retry_max_times
            .iter()
            .map(|(g, &n)| GroupJson {
                group: g.clone(),
                retry_max_times: n,
            })
            .collect();
        let bytes = serde_json::to_vec_pretty(&groups).map_err(std::io::Error::other)?;
        write_atomically(&self.path, &bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_survive_a_reload_and_delete_returns_to_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = GroupConfigs::load(dir.path()).unwrap();
        assert_eq!(c.retry_max_times("g"), None);
        c.set("g", 3).unwrap();
        c.set("h", 0).unwrap();
        let mut again = GroupConfigs::load(dir.path()).unwrap();
        assert_eq!(again.retry_max_times("g"), Some(3));
        assert_eq!(again.retry_max_times("h"), Some(0));
        assert!(again.delete("g").unwrap());
        assert!(!again.delete("g").unwrap());
        assert_eq!(
            GroupConfigs::load(dir.path()).unwrap().retry_max_times("g"),
            None
        );
        std::fs::write(dir.path().join("config/subscriptionGroup.json"), b"{").unwrap();
        assert!(GroupConfigs::load(dir.path()).is_err());
    }
}
