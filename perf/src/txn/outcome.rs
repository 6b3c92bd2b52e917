//! What a `txn` run came to: the decisions' totals, the check of the deliveries (when the
//! run consumed), errors; as table notes, JSON fields and an exit code.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::decision_log::TxnVerdict;
use super::decisions::Totals;
use crate::modes::{EXIT_FAILED, EXIT_LOST};

/// The end of a run.
#[derive(Debug)]
pub struct Outcome {
    pub totals: Totals,
    /// Check-backs answered.
    pub checked: u64,
    /// Failed halves and END_TRANSACTIONs by kind.
    pub errors: BTreeMap<String, u64>,
    pub end_failed: u64,
    /// Of `end_failed`: found applied once the brokers had no undecided half left.
    pub end_applied: u64,
    pub settled: bool,
    pub settle_s: f64,
    /// `None`: nothing consumed (`--consumers 0`).
    pub verdict: Option<TxnVerdict>,
    pub torn: bool,
    /// Where the decisions of the check came from.
    pub source: String,
    pub log_error: Option<String>,
}

impl Outcome {
    pub fn notes(&self) -> Vec<String> {
        let (t, end_failed, end_applied) = (&self.totals, self.end_failed, self.end_applied);
        let mut notes = vec![
            format!(
                "txn: committed {} rolled_back {} unknown {} checked {} pending {} (END_TRANSACTION not acknowledged: {end_failed}, of them found applied by the broker: {end_applied}; halves not stored: {}); settled {} after {:.1} s",
                t.committed, t.rolled_back, t.unknown, self.checked, t.pending, t.not_stored,
                if self.settled { "yes" } else { "no (settle timeout)" }, self.settle_s
            ),
            "txn latency: half send + executor + END_TRANSACTION round trip; recv latency: receipt minus the send time in the message".to_string(),
        ];
        notes.push(match &self.verdict {
            Some(v) => format!(
                "verify (decisions from {}): acked {} received {} lost {} duplicates {} rolled_back_delivered {} unlisted {}{}",
                self.source, v.acked, v.received, v.lost, v.duplicates, v.rolled_back_delivered, v.unlisted,
                if self.torn { "; the log's torn last line was skipped" } else { "" }
            ),
            None => "verify: nothing consumed (--consumers 0): deliveries not checked".to_string(),
        });
        for (k, n) in &self.errors {
            notes.push(format!("errors {k}: {n} transactions"));
        }
        if let Some(e) = &self.log_error {
            notes.push(format!("verify log: {e}"));
        }
        notes
    }

    /// The `txn` object and the verify fields (null, not 0, when nothing was checked).
    pub fn json(&self) -> serde_json::Map<String, Value> {
        let t = &self.totals;
        let mut m = serde_json::Map::new();
        m.insert(
            "txn".into(),
            json!({
                "committed": t.committed, "rolled_back": t.rolled_back,
                "unknown": t.unknown, "checked": self.checked, "pending": t.pending,
                "not_stored": t.not_stored, "end_failed": self.end_failed,
                "end_applied": self.end_applied, "settled": self.settled,
                "settle_s": (self.settle_s * 1000.0).round() / 1000.0,
            }),
        );
        let v = self.verdict.as_ref();
        let field = |f: fn(&TxnVerdict) -> u64| v.map_or(Value::Null, |v| json!(f(v)));
        m.insert("acked".into(), field(|v| v.acked));
        m.insert("received".into(), field(|v| v.received));
        m.insert("lost".into(), field(|v| v.lost));
        m.insert("duplicates".into(), field(|v| v.duplicates));
        m.insert(
            "rolled_back_delivered".into(),
            field(|v| v.rolled_back_delivered),
        );
        m.insert("unlisted".into(), field(|v| v.unlisted));
        m.insert("verify_torn_tail".into(), json!(self.torn));
        m.insert("error_kinds".into(), json!(self.errors));
        m
    }

    /// 3 when a committed message was lost or a rolled-back one delivered; 1 when the run
    /// did not settle or the log could not be written; else 0.
    pub fn exit_code(&self) -> i32 {
        if self
            .verdict
            .is_some_and(|v| v.lost > 0 || v.rolled_back_delivered > 0)
        {
            EXIT_LOST
        } else if !self.settled || self.log_error.is_some() {
            EXIT_FAILED
        } else {
            0
        }
    }
}
