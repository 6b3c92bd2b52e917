//! The decision log of `--verify` (one line per decision, appended as it becomes known,
//! read back for the check) and the check of deliveries against decisions.
//!
//! ```text
//! # ringmq-perf txn verify v1: producer sequence commit|rollback executor|check
//! 5f3a9c0100000000 17 commit executor
//! ```

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::path::Path;
use std::sync::Mutex;

/// Decisions by (producer, seq): true for commit.
pub type DecisionMap = HashMap<(u64, u64), bool>;

const LOG_HEADER: &str =
    "# ringmq-perf txn verify v1: producer sequence commit|rollback executor|check\n";

/// The decision log of `--verify`: one line per decision, appended as it becomes known.
#[derive(Debug)]
pub struct DecisionLog {
    file: Mutex<File>,
}

impl DecisionLog {
    pub fn create(path: &Path) -> io::Result<DecisionLog> {
        let mut file = File::create(path)?;
        file.write_all(LOG_HEADER.as_bytes())?;
        Ok(DecisionLog {
            file: Mutex::new(file),
        })
    }

    pub(super) fn append(&self, producer: u64, seq: u64, commit: bool, by: &str) -> io::Result<()> {
        let what = if commit { "commit" } else { "rollback" };
        let line = format!("{producer:016x} {seq} {what} {by}\n");
        self.file
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .write_all(line.as_bytes())
    }

    /// Reads a log back: (producer, seq) -> commit. A malformed last line (torn) is
    /// skipped; a malformed line before it is an error.
    pub fn load(path: &Path) -> Result<(DecisionMap, bool), String> {
        let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let lines: Vec<String> = BufReader::new(file)
            .lines()
            .collect::<Result<_, _>>()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let mut out = HashMap::new();
        let mut torn = false;
        for (n, line) in lines.iter().enumerate() {
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            match parse_line(line) {
                Some((p, s, c)) => {
                    out.insert((p, s), c);
                }
                None if n + 1 == lines.len() => torn = true,
                None => return Err(format!("{}:{}: bad line {line:?}", path.display(), n + 1)),
            }
        }
        Ok((out, torn))
    }
}

fn parse_line(line: &str) -> Option<(u64, u64, bool)> {
    let mut w = line.split_whitespace();
    let p = u64::from_str_radix(w.next()?, 16).ok()?;
    let s = w.next()?.parse().ok()?;
    let c = match w.next()? {
        "commit" => true,
        "rollback" => false,
        _ => return None,
    };
    matches!(w.next()?, "executor" | "check").then_some((p, s, c))
}

/// The decisions the check reads, and where from.
#[derive(Debug)]
pub struct Checks {
    pub decisions: DecisionMap,
    /// The log's last line was torn and skipped.
    pub torn: bool,
    /// "memory" or "the log PATH".
    pub source: String,
}

impl Checks {
    pub fn of(decisions: DecisionMap, torn: bool, source: String) -> Checks {
        Checks {
            decisions,
            torn,
            source,
        }
    }

    /// [`verdict`] of these decisions.
    pub fn verdict(&self, delivered: &HashMap<(u64, u64), u64>) -> TxnVerdict {
        verdict(&self.decisions, delivered)
    }
}

/// The check of deliveries against decisions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxnVerdict {
    /// Decided commit.
    pub acked: u64,
    /// Decided commit, delivered.
    pub received: u64,
    /// Decided commit, never delivered.
    pub lost: u64,
    /// Deliveries beyond a message's first.
    pub duplicates: u64,
    /// Decided rollback, delivered.
    pub rolled_back_delivered: u64,
    /// Delivered messages of this run with no decision (their half's send failed).
    pub unlisted: u64,
}

/// `delivered`: successful deliveries per (producer, seq).
pub fn verdict(
    decisions: &HashMap<(u64, u64), bool>,
    delivered: &HashMap<(u64, u64), u64>,
) -> TxnVerdict {
    let mut v = TxnVerdict::default();
    for (key, &commit) in decisions {
        let n = delivered.get(key).copied().unwrap_or(0);
        if commit {
            v.acked += 1;
            if n > 0 {
                v.received += 1;
            } else {
                v.lost += 1;
            }
        } else if n > 0 {
            v.rolled_back_delivered += 1;
        }
    }
    for (key, &n) in delivered {
        v.duplicates += n.saturating_sub(1);
        if !decisions.contains_key(key) {
            v.unlisted += 1;
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_counts_lost_duplicates_and_rolled_back_deliveries() {
        let decisions = HashMap::from([
            ((1, 0), true),
            ((1, 1), true),
            ((1, 2), false),
            ((1, 3), false),
        ]);
        let delivered = HashMap::from([((1, 0), 2), ((1, 2), 1), ((9, 9), 1)]);
        let v = verdict(&decisions, &delivered);
        assert_eq!(
            v,
            TxnVerdict {
                acked: 2,
                received: 1,
                lost: 1,
                duplicates: 1,
                rolled_back_delivered: 1,
                unlisted: 1,
            }
        );
    }

    #[test]
    fn decision_log_round_trip_and_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("txn.log");
        let log = DecisionLog::create(&path).unwrap();
        log.append(0xabc, 1, true, "executor").unwrap();
        log.append(0xabc, 2, false, "check").unwrap();
        drop(log);
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"0000000000000abc 3 comm")
            .unwrap();
        let (m, torn) = DecisionLog::load(&path).unwrap();
        assert!(torn);
        assert_eq!(m, HashMap::from([((0xabc, 1), true), ((0xabc, 2), false)]));
    }
}
