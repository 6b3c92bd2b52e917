//! [`ExtFields`]: a remoting command's `extFields`, key -> value text, iterated in key order.
//!
//! Every remoting request carries a dozen or more of these, so the map is laid out for the
//! per-request path: all keys and values are appended to one text buffer and the entries are
//! spans into it, in the order they were inserted. Reading a header is then two allocations
//! instead of two per field plus a tree's nodes. A lookup first tests the key's bit in a
//! 64-bit set of the keys present (a key that is not there, as most are while a header is
//! read, costs no scan), then scans the entries comparing each key's length and first 8
//! bytes, kept in the entry, before any text (a header has a few dozen short keys at most:
//! cheaper than a tree's or a binary search's string comparisons); only iteration, which encoding and signatures need
//! in key order, sorts (an index of the entries, per iteration). Replacing a value appends
//! the new text; the old text is dropped once the dead bytes outweigh the live ones.

use std::fmt;

/// One key and its value, as byte ranges of the text buffer.
#[derive(Debug, Clone, Copy)]
struct Entry {
    key: (usize, usize),
    /// The key's first 8 bytes, zero-padded: most keys (RocketMQ's V2 send header's are one
    /// letter) are told apart by length and head alone, with no call to compare text.
    head: u64,
    value: (usize, usize),
}

/// The key's bit in [`ExtFields::seen`].
fn key_bit(head: u64, len: usize) -> u64 {
    1 << ((head ^ len as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58)
}

fn key_head(key: &[u8]) -> u64 {
    let mut head = [0u8; 8];
    let n = key.len().min(8);
    head[..n].copy_from_slice(&key[..n]);
    u64::from_le_bytes(head)
}

/// A remoting command's `extFields`: key -> value text, in key order (so encoding is
/// deterministic and signatures over the fields agree).
#[derive(Clone, Default)]
pub struct ExtFields {
    text: String,
    entries: Vec<Entry>,
    /// Bytes of `text` no entry points at (replaced values, removed entries).
    dead: usize,
    /// A bit per key present (and maybe per key removed): a lookup of a key whose bit is
    /// clear, most inserts while a header is read and lookups of absent optional fields,
    /// needs no scan.
    seen: u64,
}

impl ExtFields {
    pub fn new() -> Self {
        Self::default()
    }

    /// Room for `fields` entries with `text_bytes` bytes of keys and values in all.
    pub fn with_capacity(text_bytes: usize, fields: usize) -> Self {
        ExtFields {
            text: String::with_capacity(text_bytes),
            entries: Vec::with_capacity(fields),
            dead: 0,
            seen: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Bytes of keys and values held (an upper bound: replaced text counts until dropped),
    /// for sizing what the fields are encoded into.
    pub fn text_bytes(&self) -> usize {
        self.text.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn slice(&self, (start, end): (usize, usize)) -> &str {
        &self.text[start..end]
    }

    fn find(&self, key: &str) -> Option<usize> {
        let key = key.as_bytes();
        let head = key_head(key);
        if self.seen & key_bit(head, key.len()) == 0 {
            return None;
        }
        let text = self.text.as_bytes();
        self.entries.iter().position(|e| {
            e.key.1 - e.key.0 == key.len()
                && e.head == head
                && (key.len() <= 8 || text[e.key.0 + 8..e.key.1] == key[8..])
        })
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.find(key).map(|i| self.slice(self.entries[i].value))
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.find(key).is_some()
    }

    /// Sets `key` to `value` (a key already present gets the new value).
    pub fn insert(&mut self, key: impl AsRef<str>, value: impl AsRef<str>) {
        let value = value.as_ref();
        self.insert_with(key.as_ref(), |text| text.push_str(value));
    }

    /// Sets `key` to the text of `value` (`Display`), written straight into the buffer.
    pub fn insert_display(&mut self, key: &str, value: impl fmt::Display) {
        self.insert_with(key, |text| {
            // Writing into a String cannot fail.
            let _ = fmt::Write::write_fmt(text, format_args!("{value}"));
        });
    }

    /// Sets `key` to the decimal text of the integer `value`.
    pub fn insert_int(&mut self, key: &str, value: impl itoa::Integer) {
        self.insert_with(key, |text| text.push_str(itoa::Buffer::new().format(value)));
    }

    /// Sets `key` to the text `write` appends to the buffer.
    pub fn insert_with(&mut self, key: &str, write: impl FnOnce(&mut String)) {
        let start = self.text.len();
        write(&mut self.text);
        let value = (start, self.text.len());
        match self.find(key) {
            Some(i) => {
                let old = self.entries[i].value;
                self.dead += old.1 - old.0;
                self.entries[i].value = value;
                self.compact_if_sparse();
            }
            None => {
                let key_start = self.text.len();
                self.text.push_str(key);
                let head = key_head(key.as_bytes());
                self.seen |= key_bit(head, key.len());
                self.entries.push(Entry {
                    key: (key_start, self.text.len()),
                    head,
                    value,
                });
            }
        }
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        let i = self.find(key)?;
        let e = self.entries.remove(i);
        let value = self.slice(e.value).to_owned();
        self.dead += (e.key.1 - e.key.0) + (e.value.1 - e.value.0);
        self.compact_if_sparse();
        Some(value)
    }

    fn compact_if_sparse(&mut self) {
        if self.dead <= 256 || self.dead <= self.text.len() / 2 {
            return;
        }
        let mut text = String::with_capacity(self.text.len() - self.dead);
        self.seen = 0;
        for e in &mut self.entries {
            self.seen |= key_bit(e.head, e.key.1 - e.key.0);
            let mut copy = |(s, t): (usize, usize)| {
                let start = text.len();
                text.push_str(&self.text[s..t]);
                (start, text.len())
            };
            e.key = copy(e.key);
            e.value = copy(e.value);
        }
        self.text = text;
        self.dead = 0;
    }

    /// The entries in key order.
    pub fn iter(&self) -> Iter<'_> {
        let mut order: Vec<usize> = (0..self.entries.len()).collect();
        order.sort_unstable_by(|&a, &b| {
            self.slice(self.entries[a].key)
                .cmp(self.slice(self.entries[b].key))
        });
        Iter {
            fields: self,
            order,
            at: 0,
        }
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.iter().map(|(k, _)| k)
    }
}

/// The entries of an [`ExtFields`], in key order.
pub struct Iter<'a> {
    fields: &'a ExtFields,
    /// Entry indexes in key order.
    order: Vec<usize>,
    at: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        let e = &self.fields.entries[*self.order.get(self.at)?];
        self.at += 1;
        Some((self.fields.slice(e.key), self.fields.slice(e.value)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.order.len() - self.at;
        (n, Some(n))
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a ExtFields {
    type Item = (&'a str, &'a str);
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl PartialEq for ExtFields {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for ExtFields {}

impl fmt::Debug for ExtFields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for ExtFields {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut out = ExtFields::new();
        out.extend(iter);
        out
    }
}

impl<K: AsRef<str>, V: AsRef<str>> Extend<(K, V)> for ExtFields {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.insert(k, v);
        }
    }
}

impl<K: AsRef<str>, V: AsRef<str>, const N: usize> From<[(K, V); N]> for ExtFields {
    fn from(pairs: [(K, V); N]) -> Self {
        pairs.into_iter().collect()
    }
}

impl From<std::collections::BTreeMap<String, String>> for ExtFields {
    fn from(map: std::collections::BTreeMap<String, String>) -> Self {
        map.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[test]
    fn keeps_key_order_and_the_last_value() {
        let mut f = ExtFields::new();
        f.insert("topic", "a");
        f.insert("b", "1");
        f.insert_display("queueId", 7);
        f.insert("topic", "orders");
        assert_eq!(
            f.iter().collect::<Vec<_>>(),
            [("b", "1"), ("queueId", "7"), ("topic", "orders")]
        );
        assert_eq!(f.get("topic"), Some("orders"));
        assert_eq!(f.get("top"), None);
        assert_eq!(f.remove("b").as_deref(), Some("1"));
        assert_eq!(f.remove("b"), None);
        assert_eq!(f.len(), 2);
        assert_eq!(format!("{f:?}"), r#"{"queueId": "7", "topic": "orders"}"#);
    }

    #[test]
    fn replacing_a_value_many_times_keeps_the_buffer_small() {
        let mut f = ExtFields::new();
        f.insert("k", "v");
        for i in 0..10_000 {
            f.insert_display("n", i);
        }
        assert!(f.text.len() < 1024, "{} bytes", f.text.len());
        assert_eq!(f.get("n"), Some("9999"));
        assert_eq!(f.get("k"), Some("v"));
    }

    proptest! {
        /// Any sequence of inserts and removes reads as the same BTreeMap's would.
        #[test]
        fn reads_as_a_btree_map(ops in proptest::collection::vec(
            (0u8..3, "[a-d]{0,2}", "[a-z0-9]{0,40}"), 0..200)
        ) {
            let mut f = ExtFields::new();
            let mut m = BTreeMap::new();
            for (op, k, v) in ops {
                if op == 0 {
                    prop_assert_eq!(f.remove(&k), m.remove(&k));
                } else {
                    f.insert(&k, &v);
                    m.insert(k, v);
                }
            }
            prop_assert!(f.iter().eq(m.iter().map(|(k, v)| (k.as_str(), v.as_str()))));
            for k in m.keys() {
                prop_assert_eq!(f.get(k), m.get(k).map(String::as_str));
            }
            prop_assert_eq!(f, ExtFields::from(m));
        }
    }
}
