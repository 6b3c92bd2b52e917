//! Consumer groups' settings on this broker (RocketMQ's subscription group table), kept in
//! `<store root>/config/subscriptionGroup.json` (written atomically on every change). Only
//! settings that take effect are kept: the retry limit (`retry_max_times`, used when a
//! consumer's send-back does not name its own) and the orderly flag
//! (`consume_message_orderly`, which RocketMQ 5's SDKs are told as `fifo`). A group without
//! an entry uses the broker's `maxReconsumeTimes` and is not orderly. Control path, behind
//! a mutex.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::broker::topics::write_atomically;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct GroupJson {
    group: String,
    retry_max_times: u32,
    /// Absent in files written before the flag existed.
    #[serde(default)]
    consume_message_orderly: bool,
}

/// One group's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupSettings {
    pub retry_max_times: u32,
    pub consume_message_orderly: bool,
}

/// The settings table.
#[derive(Debug)]
pub struct GroupConfigs {
    path: PathBuf,
    groups: BTreeMap<String, GroupSettings>,
}

impl GroupConfigs {
    /// Loads `<root>/config/subscriptionGroup.json` (empty when absent).
    pub fn load(root: &Path) -> std::io::Result<Self> {
        let path = root.join("config").join("subscriptionGroup.json");
        let mut groups = BTreeMap::new();
        match std::fs::read(&path) {
            Ok(bytes) => {
                let list: Vec<GroupJson> = serde_json::from_slice(&bytes).map_err(|e| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("{}: {e}", path.display()),
                    )
                })?;
                for g in list {
                    groups.insert(
                        g.group,
                        GroupSettings {
                            retry_max_times: g.retry_max_times,
                            consume_message_orderly: g.consume_message_orderly,
                        },
                    );
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        Ok(GroupConfigs { path, groups })
    }

    /// A group's retry limit, if it has its own.
    pub fn retry_max_times(&self, group: &str) -> Option<u32> {
        self.groups.get(group).map(|g| g.retry_max_times)
    }

    /// Whether a group consumes orderly (false without settings).
    pub fn orderly(&self, group: &str) -> bool {
        self.groups
            .get(group)
            .is_some_and(|g| g.consume_message_orderly)
    }

    /// Groups with settings.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.groups.keys().map(String::as_str)
    }

    /// Sets a group's settings and saves the table.
    pub fn set(&mut self, group: &str, settings: GroupSettings) -> std::io::Result<()> {
        let before = self.groups.insert(group.to_owned(), settings);
        self.save().inspect_err(|_| {
            match before {
                Some(b) => self.groups.insert(group.to_owned(), b),
                None => self.groups.remove(group),
            };
        })
    }

    /// Returns a group to the defaults; false if it had no settings.
    pub fn delete(&mut self, group: &str) -> std::io::Result<bool> {
        let Some(before) = self.groups.remove(group) else {
            return Ok(false);
        };
        self.save().inspect_err(|_| {
            self.groups.insert(group.to_owned(), before);
        })?;
        Ok(true)
    }

    fn save(&self) -> std::io::Result<()> {
        let list: Vec<GroupJson> = self
            .groups
            .iter()
            .map(|(g, s)| GroupJson {
                group: g.clone(),
                retry_max_times: s.retry_max_times,
                consume_message_orderly: s.consume_message_orderly,
            })
            .collect();
        let bytes = serde_json::to_vec_pretty(&list).map_err(std::io::Error::other)?;
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
        let set = |n, orderly| GroupSettings {
            retry_max_times: n,
            consume_message_orderly: orderly,
        };
        c.set("g", set(3, false)).unwrap();
        c.set("h", set(0, true)).unwrap();
        let mut again = GroupConfigs::load(dir.path()).unwrap();
        assert_eq!(again.retry_max_times("g"), Some(3));
        assert_eq!(again.retry_max_times("h"), Some(0));
        assert!(!again.orderly("g"));
        assert!(again.orderly("h"));
        assert!(again.delete("g").unwrap());
        assert!(!again.delete("g").unwrap());
        assert_eq!(
            GroupConfigs::load(dir.path()).unwrap().retry_max_times("g"),
            None
        );
        // A file written before the orderly flag existed still loads.
        std::fs::write(
            dir.path().join("config/subscriptionGroup.json"),
            br#"[{"group":"old","retry_max_times":5}]"#,
        )
        .unwrap();
        let old = GroupConfigs::load(dir.path()).unwrap();
        assert_eq!(old.retry_max_times("old"), Some(5));
        assert!(!old.orderly("old"));
        std::fs::write(dir.path().join("config/subscriptionGroup.json"), b"{").unwrap();
        assert!(GroupConfigs::load(dir.path()).is_err());
    }
}
