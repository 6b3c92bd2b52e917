//! The name server's KV config (PUT/GET/DELETE_KV_CONFIG): string values by namespace and
//! key, in memory like the rest of the name server.
//!
//! Invariants: at most `limits::NAMESRV_KV_ENTRIES_MAX` entries in all namespaces together;
//! namespaces and keys are 1..=`NAMESRV_KV_KEY_BYTES_MAX` bytes, values at most
//! `NAMESRV_KV_VALUE_BYTES_MAX`; an empty namespace is removed with its last key.

use std::collections::BTreeMap;

use super::NamesrvError;
use crate::limits;

/// Namespace -> key -> value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KvStore {
    namespaces: BTreeMap<String, BTreeMap<String, String>>,
    entries: usize,
}

impl KvStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `namespace/key` to `value`; returns the value it replaces.
    pub fn put(
        &mut self,
        namespace: &str,
        key: &str,
        value: &str,
    ) -> Result<Option<String>, NamesrvError> {
        check_len(
            "KV namespace",
            namespace,
            1,
            limits::NAMESRV_KV_KEY_BYTES_MAX,
        )?;
        check_len("KV key", key, 1, limits::NAMESRV_KV_KEY_BYTES_MAX)?;
        check_len("KV value", value, 0, limits::NAMESRV_KV_VALUE_BYTES_MAX)?;
        let exists = self.get(namespace, key).is_some();
        if !exists && self.entries >= limits::NAMESRV_KV_ENTRIES_MAX {
            return Err(NamesrvError::Full {
                what: "KV entries",
                count: self.entries + 1,
                max: limits::NAMESRV_KV_ENTRIES_MAX,
            });
        }
        let old = self
            .namespaces
            .entry(namespace.to_owned())
            .or_default()
            .insert(key.to_owned(), value.to_owned());
        if old.is_none() {
            self.entries += 1;
        }
        Ok(old)
    }

    /// The value of `namespace/key`.
    pub fn get(&self, namespace: &str, key: &str) -> Option<&str> {
        self.namespaces.get(namespace)?.get(key).map(String::as_str)
    }

    /// Removes `namespace/key`; returns its value.
    pub fn delete(&mut self, namespace: &str, key: &str) -> Option<String> {
        let keys = self.namespaces.get_mut(namespace)?;
        let old = keys.remove(key)?;
        if keys.is_empty() {
            self.namespaces.remove(namespace);
        }
        self.entries -= 1;
        Some(old)
    }

    /// Entries in all namespaces.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries
    }

    /// Whether the store holds no entry.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Every key and value of one namespace, in key order.
    #[cfg(test)]
    pub fn namespace(&self, namespace: &str) -> Option<&BTreeMap<String, String>> {
        self.namespaces.get(namespace)
    }
}

fn check_len(what: &'static str, s: &str, min: usize, max: usize) -> Result<(), NamesrvError> {
    if s.len() < min || s.len() > max {
        return Err(NamesrvError::InvalidName {
            what,
            detail: format!("{} bytes, expected {min}..={max}", s.len()),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_get_overwrite_delete() {
        let mut kv = KvStore::new();
        assert!(kv.is_empty());
        assert_eq!(
            kv.put("ORDER_TOPIC_CONFIG", "orders", "broker-a:4"),
            Ok(None)
        );
        assert_eq!(kv.put("ns2", "orders", "x"), Ok(None));
        assert_eq!(kv.get("ORDER_TOPIC_CONFIG", "orders"), Some("broker-a:4"));
        assert_eq!(kv.get("ORDER_TOPIC_CONFIG", "missing"), None);
        assert_eq!(kv.get("missing", "orders"), None);
        assert_eq!(
            kv.put("ORDER_TOPIC_CONFIG", "orders", "broker-a:8"),
            Ok(Some("broker-a:4".to_owned()))
        );
        assert_eq!(kv.len(), 2);
        assert_eq!(kv.namespace("ORDER_TOPIC_CONFIG").map(|m| m.len()), Some(1));
        assert_eq!(
            kv.delete("ORDER_TOPIC_CONFIG", "orders"),
            Some("broker-a:8".to_owned())
        );
        assert_eq!(kv.delete("ORDER_TOPIC_CONFIG", "orders"), None);
        assert_eq!(kv.namespace("ORDER_TOPIC_CONFIG"), None);
        assert_eq!(kv.len(), 1);
        assert_eq!(kv.put("ns", "k", ""), Ok(None), "empty values are allowed");
    }

    #[test]
    fn bounds() {
        let mut kv = KvStore::new();
        assert!(kv.put("", "k", "v").is_err());
        assert!(kv.put("ns", "", "v").is_err());
        let long = "k".repeat(limits::NAMESRV_KV_KEY_BYTES_MAX + 1);
        assert!(kv.put("ns", &long, "v").is_err());
        let big = "v".repeat(limits::NAMESRV_KV_VALUE_BYTES_MAX + 1);
        assert_eq!(
            kv.put("ns", "k", &big).unwrap_err().to_string(),
            format!(
                "KV value: {} bytes, expected 0..={}",
                big.len(),
                limits::NAMESRV_KV_VALUE_BYTES_MAX
            )
        );
        assert!(kv.is_empty());
    }

    #[test]
    fn entry_cap_refuses_new_keys_but_allows_overwrites() {
        let mut kv = KvStore::new();
        for i in 0..limits::NAMESRV_KV_ENTRIES_MAX {
            kv.put("ns", &i.to_string(), "v").unwrap();
        }
        assert!(matches!(
            kv.put("ns", "one-more", "v"),
            Err(NamesrvError::Full { .. })
        ));
        assert_eq!(kv.put("ns", "0", "w"), Ok(Some("v".to_owned())));
        kv.delete("ns", "0");
        assert_eq!(kv.put("ns", "one-more", "v"), Ok(None));
    }
}
