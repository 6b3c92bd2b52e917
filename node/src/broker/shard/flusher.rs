//! Group commit. Appends that need SYNC_FLUSH register the log offset they need durable and
//! wake the flusher task; the flusher yields once so every append that is ready in this loop
//! turn lands first, then runs one fdatasync for all of them and wakes the waiters whose
//! offset it covered. An fdatasync error is fatal: the broker stops (fail-stop) rather than
//! acknowledging bytes the kernel may have dropped.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use event_listener::Event;

use super::Shard;
use crate::io::rt;

/// The shard's group-commit state.
#[derive(Debug)]
pub struct Flusher {
    synced: Cell<u64>,
    wanted: Cell<u64>,
    kick: Event,
    done: Event,
}

impl Flusher {
    pub fn new(synced: u64) -> Self {
        Flusher {
            synced: Cell::new(synced),
            wanted: Cell::new(synced),
            kick: Event::new(),
            done: Event::new(),
        }
    }

    pub fn synced(&self) -> u64 {
        self.synced.get()
    }

    /// Waits until the log is durable through `offset`; false on timeout.
    pub async fn wait_synced(&self, offset: u64, timeout: Duration) -> bool {
        if self.synced.get() >= offset {
            return true;
        }
        if self.wanted.get() < offset {
            self.wanted.set(offset);
        }
        self.kick.notify(1);
        let wait = async {
            loop {
                let listener = self.done.listen();
                if self.synced.get() >= offset {
                    return;
                }
                listener.await;
            }
        };
        rt::timeout(timeout, wait).await.is_some()
    }

    /// The flusher task of a shard.
    pub async fn run(shard: Rc<Shard>) {
        let f = &shard.flusher;
        loop {
            let listener = f.kick.listen();
            if f.wanted.get() <= f.synced.get() {
                listener.await;
                continue;
            }
            drop(listener);
            // Let every append that is ready in this turn join the same fdatasync.
            rt::yield_now().await;
            let end = sync_log(&shard, false).await;
            f.note_synced(end);
        }
    }

    /// Records a sync (by the flusher or the ASYNC_FLUSH timer). (the ASYNC_FLUSH timer's checkpoint).
    pub fn note_synced(&self, end: u64) {
        if end > self.synced.get() {
            self.synced.set(end);
            self.done.notify(usize::MAX);
        }
    }

    /// True if some waiter is not yet covered (used before stopping).
    pub fn pending(&self) -> bool {
        self.wanted.get() > self.synced.get()
    }
}

/// Makes everything appended so far durable without blocking the loop: the fdatasyncs of
/// the store's sync plan run on the loop's io_uring while other requests are served, or with
/// `background` on the disk's helper thread (for a sync no request waits for: see
/// [`crate::io::background`]). A failed fdatasync stops the broker (fail-stop). Returns the
/// durable log offset.
pub async fn sync_log(shard: &Shard, background: bool) -> u64 {
    let plan = shard.store.borrow().sync_plan();
    for &seg in &plan.segments {
        if seg < shard.store.borrow().min_offset() {
            // Retention removed it while an earlier sync ran: nothing left to make durable.
            continue;
        }
        let file = match shard.segment_handle(seg) {
            Ok((file, _)) => file,
            Err(e) => crate::fail_stop(&format!(
                "shard {}: segment {seg} for fdatasync: {e}",
                shard.id
            )),
        };
        let t0 = crate::io::clock::Instant::now();
        let synced = if background {
            shard.disk().sync_file_background(&file).await
        } else {
            shard.disk().sync_file(&file).await
        };
        shard
            .metrics
            .borrow_mut()
            .synced(crate::broker::shard::ack::micros(t0.elapsed()));
        if let Err(e) = synced {
            crate::fail_stop(&format!(
                "shard {}: fdatasync of segment {seg}: {e}",
                shard.id
            ));
        }
    }
    shard.store.borrow_mut().note_synced(plan.target);
    plan.target
}
