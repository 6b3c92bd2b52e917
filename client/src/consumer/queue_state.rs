//! What a push consumer knows about one assigned queue: the offsets handed to the listener
//! and not yet acknowledged, and how far the queue has been received. The committable
//! offset is the lowest unacknowledged offset, or, with none outstanding, the next offset
//! to pull: every offset below it was consumed successfully (or filtered out by tag).
//! That is the at-least-once invariant: a commit never passes a message whose listener has
//! not returned success.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::{watch, Notify};

use crate::route::MessageQueue;

#[derive(Debug, Default)]
struct Offsets {
    /// Handed to the listener, not yet acknowledged.
    outstanding: Outstanding,
    /// Every offset below this has been received (next offset to pull).
    received_to: u64,
    /// Last offset committed, with the read path's switch count at the time (to skip
    /// commits that change nothing, but commit again on a replica reads moved to).
    committed: Option<(u64, u64)>,
}

/// One assigned queue of a push consumer.
#[derive(Debug)]
pub struct QueueState {
    pub mq: MessageQueue,
    /// Set once when the queue is released.
    dropped: watch::Sender<bool>,
    offsets: Mutex<Offsets>,
    /// Listener calls running now.
    active: AtomicUsize,
    /// Woken when progress is made (acks, listener calls ending).
    pub changed: Notify,
}

impl QueueState {
    pub fn new(mq: MessageQueue, start: u64) -> Self {
        QueueState {
            mq,
            dropped: watch::channel(false).0,
            active: AtomicUsize::new(0),
            offsets: Mutex::new(Offsets {
                outstanding: Outstanding::default(),
                received_to: start,
                committed: None,
            }),
            changed: Notify::new(),
        }
    }

    pub fn is_dropped(&self) -> bool {
        *self.dropped.borrow()
    }

    /// Marks the queue released: its pull loop and redeliveries stop.
    pub fn drop_queue(&self) {
        self.dropped.send_replace(true);
        self.changed.notify_waiters();
    }

    /// Resolves once the queue is released.
    pub async fn until_dropped(&self) {
        let mut rx = self.dropped.subscribe();
        let _ = rx.wait_for(|d| *d).await;
    }

    /// Sleeps `d` unless the queue is released first; true if it was released.
    pub async fn sleep_or_dropped(&self, d: Duration) -> bool {
        tokio::select! {
            _ = tokio::time::sleep(d) => self.is_dropped(),
            _ = self.until_dropped() => true,
        }
    }

    /// A listener call (or the handling of its outcome) starts, unless the queue was
    /// released: false then, and nothing started. Counting first and checking after means
    /// a release that saw no call running has already marked the queue, so none starts.
    pub fn try_begin(&self) -> bool {
        self.active.fetch_add(1, Ordering::SeqCst);
        if self.is_dropped() {
            self.end();
            return false;
        }
        true
    }

    /// A listener call ended.
    pub fn end(&self) {
        self.active.fetch_sub(1, Ordering::SeqCst);
        self.changed.notify_waiters();
    }

    /// Waits until no listener call runs on this queue, at most `limit`; true if none runs.
    pub async fn idle_within(&self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let notified = self.changed.notified();
            if self.active.load(Ordering::SeqCst) == 0 {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.active.load(Ordering::SeqCst) == 0;
            }
        }
    }

    /// Records received messages (their offsets) and where the next pull starts.
    pub fn received(&self, offsets: impl IntoIterator<Item = u64>, next: u64) {
        let mut o = self.lock();
        for off in offsets {
            o.outstanding.insert(off);
        }
        o.received_to = next;
    }

    /// The queue moved (PULL_OFFSET_MOVED): continue from `next`, forgetting nothing that
    /// is still outstanding.
    pub fn moved_to(&self, next: u64) {
        self.lock().received_to = next;
    }

    /// Acknowledges messages whose listener returned success.
    pub fn acked(&self, offsets: impl IntoIterator<Item = u64>) {
        {
            let mut o = self.lock();
            for off in offsets {
                o.outstanding.remove(off);
            }
        }
        self.changed.notify_waiters();
    }

    pub fn outstanding(&self) -> usize {
        self.lock().outstanding.len()
    }

    /// The offset that may be committed now.
    pub fn committable(&self) -> u64 {
        let o = self.lock();
        o.outstanding
            .first()
            .map_or(o.received_to, |first| first.min(o.received_to))
    }

    /// The committable offset if it differs from the last one committed, or if reads moved
    /// to another replica since (`switches`: the read path's count of such moves).
    pub fn commit_due(&self, switches: u64) -> Option<u64> {
        let c = self.committable();
        (self.lock().committed != Some((c, switches))).then_some(c)
    }

    /// Records a commit of `offset` made when the read path's switch count was `switches`.
    pub fn mark_committed(&self, offset: u64, switches: u64) {
        self.lock().committed = Some((offset, switches));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Offsets> {
        self.offsets.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Acknowledged entries kept between open ones before they are compacted away (beyond
/// twice the open ones): bounds the memory a slow message at the front can pin.
const ACKED_SLACK: usize = 1024;

/// Offsets handed to the listener and not acknowledged yet. Pulls come in offset order, so
/// a receive is a push at the back and an acknowledgement a binary search that marks the
/// entry, and acknowledged entries leave from the front (a set of the open offsets cost two
/// tree operations per message). An offset received out of order (the queue moved back) is
/// put in its place.
#[derive(Debug, Default)]
struct Outstanding {
    /// (offset, acknowledged), offsets strictly increasing; the front is not acknowledged.
    entries: VecDeque<(u64, bool)>,
    /// Entries not acknowledged.
    open: usize,
}

impl Outstanding {
    fn insert(&mut self, off: u64) {
        if self.entries.back().is_none_or(|&(last, _)| last < off) {
            self.entries.push_back((off, false));
            self.open += 1;
            return;
        }
        match self.entries.binary_search_by_key(&off, |e| e.0) {
            Ok(i) => {
                if std::mem::replace(&mut self.entries[i].1, false) {
                    self.open += 1;
                }
            }
            Err(i) => {
                self.entries.insert(i, (off, false));
                self.open += 1;
            }
        }
    }

    fn remove(&mut self, off: u64) {
        if let Some(i) = self.position(off) {
            if !std::mem::replace(&mut self.entries[i].1, true) {
                self.open -= 1;
            }
        }
        while self.entries.front().is_some_and(|e| e.1) {
            self.entries.pop_front();
        }
        if self.entries.len() > 2 * self.open + ACKED_SLACK {
            self.entries.retain(|e| !e.1);
        }
    }

    /// Where `off` is: first where it would be if the queue's offsets were dense (they are,
    /// unless a tag filter skipped some), else by a binary search.
    fn position(&self, off: u64) -> Option<usize> {
        let front = self.entries.front()?.0;
        let guess = usize::try_from(off.checked_sub(front)?).ok()?;
        if self.entries.get(guess).is_some_and(|e| e.0 == off) {
            return Some(guess);
        }
        self.entries.binary_search_by_key(&off, |e| e.0).ok()
    }

    /// The lowest open offset.
    fn first(&self) -> Option<u64> {
        self.entries.front().map(|e| e.0)
    }

    fn len(&self) -> usize {
        self.open
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_never_passes_an_unacked_message() {
        let q = QueueState::new(MessageQueue::new("t", "b", 0), 10);
        assert_eq!(q.committable(), 10);
        q.received([10, 11, 12], 13);
        assert_eq!(q.committable(), 10);
        q.acked([11, 12]);
        assert_eq!(q.committable(), 10, "10 is still with the listener");
        q.acked([10]);
        assert_eq!(q.committable(), 13);
        assert_eq!(q.commit_due(0), Some(13));
        q.mark_committed(13, 0);
        assert_eq!(q.commit_due(0), None);
        assert_eq!(
            q.commit_due(1),
            Some(13),
            "reads moved to another replica: commit there too"
        );
        q.received([20], 25);
        assert_eq!(q.committable(), 20, "filtered offsets 13..20 count as done");
        q.moved_to(5);
        assert_eq!(q.committable(), 5);
    }

    #[test]
    fn outstanding_matches_a_set_of_open_offsets() {
        // Against a model: receives mostly in order (sometimes moved back, sometimes
        // repeated), acknowledgements in any order, some of offsets never received.
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut o = Outstanding::default();
        let mut model = std::collections::BTreeSet::new();
        let mut top = 0u64;
        for _ in 0..20_000 {
            let r = next();
            if r % 3 == 0 {
                let off = match r % 7 {
                    0 => top.saturating_sub(r % 50),
                    _ => {
                        top += 1 + r % 3;
                        top
                    }
                };
                o.insert(off);
                model.insert(off);
            } else {
                let off = top.saturating_sub(next() % 3000);
                o.remove(off);
                model.remove(&off);
            }
            assert_eq!(o.len(), model.len());
            assert_eq!(o.first(), model.first().copied());
            assert!(o.entries.len() <= 2 * o.open + ACKED_SLACK + 1);
        }
    }
}
