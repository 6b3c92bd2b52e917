//! What perf knows of each transaction: one byte per transaction in [`Decisions`] (per
//! producer, indexed by sequence) holding the executor's decision, whether the broker
//! acknowledged its END_TRANSACTION, and the checker's answer; the executor's plan
//! ([`TxnPlan`]) and the checker's rule ([`check_answer`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use ringmq_client::TransactionState;

use super::decision_log::{DecisionLog, DecisionMap};
use crate::payload::Head;

/// The executor's decision (low two bits of a [`Decisions`] byte).
pub const EXEC_MASK: u8 = 0b11;
pub const EXEC_COMMIT: u8 = 1;
pub const EXEC_ROLLBACK: u8 = 2;
pub const EXEC_UNKNOWN: u8 = 3;
/// The broker acknowledged the executor's END_TRANSACTION.
pub const END_ACKED: u8 = 1 << 2;
/// The checker answered commit / rollback.
pub const CHECK_COMMIT: u8 = 1 << 3;
pub const CHECK_ROLLBACK: u8 = 1 << 4;
/// The executor's END_TRANSACTION got no answer, and later the broker had no undecided half
/// of the group left: it was applied (see [`Decisions::resolve_unanswered`]).
pub const END_APPLIED: u8 = 1 << 5;
/// Which outcome the executor chooses.
#[derive(Debug, Clone, Copy)]
pub struct TxnPlan {
    pub rollback: f64,
    pub unknown: f64,
}

impl TxnPlan {
    /// The executor's decision for a message: rollback with `rollback`, unknown with
    /// `unknown`, commit otherwise, from a hash of producer id and sequence (the same in
    /// every process).
    pub fn planned(&self, producer: u64, seq: u64) -> TransactionState {
        let mut x = producer ^ seq.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^= x >> 31;
        let u = (x >> 11) as f64 / (1u64 << 53) as f64;
        if u < self.rollback {
            TransactionState::Rollback
        } else if u < self.rollback + self.unknown {
            TransactionState::Unknown
        } else {
            TransactionState::Commit
        }
    }
}

/// The checker's answer for a transaction in state `b` with sequence `seq`.
fn check_answer(b: u8, seq: u64) -> TransactionState {
    match b & EXEC_MASK {
        EXEC_COMMIT => TransactionState::Commit,
        EXEC_UNKNOWN if seq % 2 == 0 => TransactionState::Commit,
        EXEC_ROLLBACK | EXEC_UNKNOWN => TransactionState::Rollback,
        // The executor never ran: the half's send failed, nothing happened locally.
        _ => TransactionState::Rollback,
    }
}

/// `Some(true)`: decided commit; `Some(false)`: decided rollback; `None`: not decided.
fn decided(b: u8) -> Option<bool> {
    if b & (END_ACKED | END_APPLIED) != 0 {
        return Some(b & EXEC_MASK == EXEC_COMMIT);
    }
    if b & CHECK_COMMIT != 0 {
        return Some(true);
    }
    if b & CHECK_ROLLBACK != 0 {
        return Some(false);
    }
    None
}

/// What perf knows of every transaction of the run.
#[derive(Debug)]
pub struct Decisions {
    run_id: u64,
    /// Per producer index, one byte per sequence.
    per: Vec<Mutex<Vec<u8>>>,
    /// Check-backs answered.
    pub(super) checked: AtomicU64,
    log: Option<DecisionLog>,
    pub(super) log_error: Mutex<Option<String>>,
}

/// Totals over [`Decisions`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub committed: u64,
    pub rolled_back: u64,
    /// The executor answered Unknown.
    pub unknown: u64,
    /// Half stored, not decided.
    pub pending: u64,
    /// Half not acknowledged and never checked (its send failed).
    pub not_stored: u64,
}

impl Decisions {
    pub(super) fn new(run_id: u64, producers: u32, log: Option<DecisionLog>) -> Decisions {
        Decisions {
            run_id,
            per: (0..producers).map(|_| Mutex::new(Vec::new())).collect(),
            checked: AtomicU64::new(0),
            log,
            log_error: Mutex::new(None),
        }
    }

    /// Changes the byte of (producer index, seq); returns it before and after.
    pub(super) fn update(
        &self,
        idx: usize,
        seq: u64,
        f: impl FnOnce(u8) -> u8,
    ) -> Option<(u8, u8)> {
        let mut v = self.per.get(idx)?.lock().unwrap_or_else(|p| p.into_inner());
        let i = usize::try_from(seq).ok()?;
        if v.len() <= i {
            v.resize(i + 1, 0);
        }
        let before = v[i];
        v[i] = f(before);
        Some((before, v[i]))
    }

    /// Records a decision that just became known (and logs it).
    pub(super) fn note(&self, idx: usize, seq: u64, f: impl FnOnce(u8) -> u8, by: &str) {
        let Some((before, after)) = self.update(idx, seq, f) else {
            return;
        };
        if decided(before).is_some() {
            return;
        }
        let (Some(commit), Some(log)) = (decided(after), &self.log) else {
            return;
        };
        let producer = (self.run_id << 16) | idx as u64;
        if let Err(e) = log.append(producer, seq, commit, by) {
            let mut slot = self.log_error.lock().unwrap_or_else(|p| p.into_inner());
            slot.get_or_insert_with(|| e.to_string());
        }
    }

    /// Marks every transaction whose executor decided commit or rollback but whose
    /// END_TRANSACTION got no answer (and no check-back came) as decided that way; returns
    /// how many. Call only once the broker has no undecided half of the group left: then
    /// each such END_TRANSACTION reached it (otherwise the half would still be pending, or
    /// checked back and answered with that same decision).
    pub(super) fn resolve_unanswered(&self) -> u64 {
        let mut found = Vec::new();
        for (idx, v) in self.per.iter().enumerate() {
            let v = v.lock().unwrap_or_else(|p| p.into_inner());
            for (seq, &b) in v.iter().enumerate() {
                let exec = b & EXEC_MASK;
                if (exec == EXEC_COMMIT || exec == EXEC_ROLLBACK) && decided(b).is_none() {
                    found.push((idx, seq as u64));
                }
            }
        }
        for &(idx, seq) in &found {
            self.note(idx, seq, |b| b | END_APPLIED, "executor");
        }
        found.len() as u64
    }

    /// The producer index of a producer id of this run.
    pub(super) fn index(&self, producer: u64) -> Option<usize> {
        (producer >> 16 == self.run_id)
            .then_some((producer & 0xFFFF) as usize)
            .filter(|&i| i < self.per.len())
    }

    /// Answers a check-back of `head`'s transaction.
    pub(super) fn check(&self, head: Option<Head>) -> TransactionState {
        self.checked.fetch_add(1, Ordering::Relaxed);
        let Some((idx, seq)) = head.and_then(|h| Some((self.index(h.producer)?, h.seq))) else {
            // Not a message of this run: nothing was decided for it here.
            return TransactionState::Rollback;
        };
        let b = self.update(idx, seq, |b| b).map_or(0, |(b, _)| b);
        let answer = check_answer(b, seq);
        let bit = if answer == TransactionState::Commit {
            CHECK_COMMIT
        } else {
            CHECK_ROLLBACK
        };
        self.note(idx, seq, |b| b | bit, "check");
        answer
    }

    pub(super) fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for v in &self.per {
            for &b in v.lock().unwrap_or_else(|p| p.into_inner()).iter() {
                if b & EXEC_MASK == EXEC_UNKNOWN {
                    t.unknown += 1;
                }
                match decided(b) {
                    Some(true) => t.committed += 1,
                    Some(false) => t.rolled_back += 1,
                    None if b & EXEC_MASK != 0 => t.pending += 1,
                    None => t.not_stored += 1,
                }
            }
        }
        t
    }

    /// Every decision: (producer, seq) -> commit.
    pub(super) fn decisions(&self) -> DecisionMap {
        let mut out = HashMap::new();
        for (idx, v) in self.per.iter().enumerate() {
            let producer = (self.run_id << 16) | idx as u64;
            for (seq, &b) in v
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .enumerate()
            {
                if let Some(c) = decided(b) {
                    out.insert((producer, seq as u64), c);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_ratios_hold_roughly() {
        let plan = TxnPlan {
            rollback: 0.2,
            unknown: 0.3,
        };
        let mut n = [0u32; 3];
        for seq in 0..10_000 {
            match plan.planned(0x1234_5678_0000, seq) {
                TransactionState::Rollback => n[0] += 1,
                TransactionState::Unknown => n[1] += 1,
                TransactionState::Commit => n[2] += 1,
            }
        }
        assert!((1800..2200).contains(&n[0]), "{n:?}");
        assert!((2700..3300).contains(&n[1]), "{n:?}");
        assert!((4600..5400).contains(&n[2]), "{n:?}");
    }

    #[test]
    fn unanswered_ends_resolve_to_the_executors_decision_only() {
        let d = Decisions::new(7, 1, None);
        d.update(0, 0, |_| EXEC_COMMIT);
        d.update(0, 1, |_| EXEC_ROLLBACK);
        d.update(0, 2, |_| EXEC_UNKNOWN);
        d.update(0, 3, |_| EXEC_COMMIT | END_ACKED);
        assert_eq!(d.totals().pending, 3);
        assert_eq!(d.resolve_unanswered(), 2);
        let t = d.totals();
        assert_eq!((t.pending, t.committed, t.rolled_back), (1, 2, 1));
    }

    #[test]
    fn checker_answers_the_executor_then_parity_then_rollback() {
        assert_eq!(check_answer(EXEC_COMMIT, 1), TransactionState::Commit);
        assert_eq!(check_answer(EXEC_ROLLBACK, 2), TransactionState::Rollback);
        assert_eq!(check_answer(EXEC_UNKNOWN, 2), TransactionState::Commit);
        assert_eq!(check_answer(EXEC_UNKNOWN, 3), TransactionState::Rollback);
        assert_eq!(check_answer(0, 4), TransactionState::Rollback);
        assert_eq!(decided(EXEC_COMMIT), None);
        assert_eq!(decided(EXEC_COMMIT | END_ACKED), Some(true));
        assert_eq!(decided(EXEC_ROLLBACK | END_ACKED), Some(false));
        assert_eq!(decided(EXEC_UNKNOWN | CHECK_COMMIT), Some(true));
        assert_eq!(decided(CHECK_ROLLBACK), Some(false));
        assert_eq!(decided(EXEC_ROLLBACK | END_APPLIED), Some(false));
    }
}
