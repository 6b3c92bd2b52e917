//! A shard's helper threads (segment preparation, page-cache release and read-ahead, the
//! periodic ASYNC_FLUSH fdatasync) and where they run.
//!
//! They are started from the shard's thread, so they would inherit its pinning and its
//! priority: their kernel work (zero-filling segments, dropping 128 MiB of pages, writing
//! back half a second of log) would run on the shard's core, as its equal. Measured with the
//! broker pinned to one core and a closed-loop producer, the shard then waited up to 4 ms
//! for the core behind them (`perf sched timehist`: the fdatasync's worker ran 6.4 ms at a
//! time, the release thread 4.8 ms). So each helper, as it starts ([`lower_this_thread`]):
//! - may run on every core the process may use (the main thread's affinity), not only the
//!   shard's;
//! - runs at nice 10 when no request or reader waits for its work (preparation ahead of
//!   need, releases, ASYNC_FLUSH's sync): where it shares a core with a shard (a broker
//!   confined to one core), a shard that wakes mostly takes the core from it, and it gets
//!   the time the shard leaves idle. Not nice 19: with every core busy at normal priority a
//!   nice-19 release thread got ~1.5 % of a core and fell behind (the page cache grew to 7 GB
//!   where it stays under 5 GB at nice 10; docs/perf.md, "Helpers and a saturated machine").
//!   Read-ahead keeps normal priority: a catch-up reader that keeps its shard busy would
//!   starve it, and fault in page by page what it did not read ahead (measured: one catch-up
//!   consumer fell from ~780k to 435k-640k msgs/s).

use std::fs::File;
use std::io;
use std::sync::mpsc;

/// Nice value of the helper threads.
pub const HELPER_NICE: i32 = 10;

/// Lets the calling thread run on every core the process may use (the main thread's
/// affinity) at nice [`HELPER_NICE`]. Best effort: a refusal leaves the thread as it was.
pub fn lower_this_thread() {
    unpin_this_thread();
    // SAFETY: setpriority with PRIO_PROCESS and who = 0 changes the calling thread's nice
    // value (Linux keeps it per thread); it takes no pointers.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, HELPER_NICE);
    }
}

/// Lets the calling thread run on every core the process may use (the main thread's
/// affinity), at the priority it has. Best effort.
pub fn unpin_this_thread() {
    let main = nix::unistd::Pid::from_raw(std::process::id() as i32);
    if let Ok(all) = nix::sched::sched_getaffinity(main) {
        let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &all);
    }
}

/// A helper thread taking jobs from a bounded queue, [`lower_this_thread`] or
/// [`unpin_this_thread`] as it starts. Dropping it stops the thread once the queued jobs are
/// done, and waits for it.
pub struct Helper<T: Send + 'static> {
    tx: Option<mpsc::SyncSender<T>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl<T: Send + 'static> Drop for Helper<T> {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl<T: Send + 'static> Helper<T> {
    /// Starts thread `name` running `job` on each queued item (at most `queue` waiting);
    /// `lowered`: at nice [`HELPER_NICE`], else at the priority it was started with. A thread
    /// that cannot be started leaves a helper that refuses every job.
    pub fn start(
        name: &str,
        lowered: bool,
        queue: usize,
        mut job: impl FnMut(T) + Send + 'static,
    ) -> Self {
        let (tx, rx) = mpsc::sync_channel::<T>(queue);
        let spawned = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                if lowered {
                    lower_this_thread();
                } else {
                    unpin_this_thread();
                }
                for item in rx {
                    job(item);
                }
            });
        match spawned {
            Ok(handle) => Helper {
                tx: Some(tx),
                thread: Some(handle),
            },
            Err(_) => Helper {
                tx: None,
                thread: None,
            },
        }
    }

    /// Queues `item`; false when the queue is full or the thread is not running.
    pub fn offer(&self, item: T) -> bool {
        self.tx.as_ref().is_some_and(|tx| tx.try_send(item).is_ok())
    }
}

/// Syncs waiting for the sync thread, per disk (a shard asks for one per segment of its
/// sync plan, and waits for them before the next).
const SYNC_QUEUE_MAX: usize = 64;

/// A thread that fdatasyncs files for a shard at the helpers' priority: the syncs no request
/// waits for (ASYNC_FLUSH's periodic one), whose writeback would otherwise run on the shard's
/// core (an fdatasync submitted on the loop's io_uring runs in a kernel worker cloned from the
/// shard's thread: pinned as it is, at its priority).
pub struct Syncer(Helper<(File, flume::Sender<io::Result<()>>)>);

impl Syncer {
    pub fn start() -> Self {
        Syncer(Helper::start(
            "ringmq-sync",
            true,
            SYNC_QUEUE_MAX,
            |(file, done): (File, flume::Sender<io::Result<()>>)| {
                let _ = done.send(file.sync_data());
            },
        ))
    }

    /// Queues an fdatasync of `file` (its own descriptor); the answer arrives on the returned
    /// channel. `None` when the thread is not running or its queue is full (sync another way).
    pub fn sync(&self, file: File) -> Option<flume::Receiver<io::Result<()>>> {
        let (done, answer) = flume::bounded(1);
        self.0.offer((file, done)).then_some(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_helper_leaves_the_pinned_core_and_lowers_its_priority() {
        let main = nix::unistd::Pid::from_raw(std::process::id() as i32);
        let all = nix::sched::sched_getaffinity(main).unwrap();
        let cores: Vec<usize> = (0..nix::sched::CpuSet::count())
            .filter(|&c| all.is_set(c).unwrap_or(false))
            .collect();
        let seen = std::thread::spawn(move || {
            let me = nix::unistd::Pid::from_raw(0);
            let mut one = nix::sched::CpuSet::new();
            one.set(cores[0]).unwrap();
            nix::sched::sched_setaffinity(me, &one).unwrap();
            lower_this_thread();
            let mask = nix::sched::sched_getaffinity(me).unwrap();
            // SAFETY: reads the calling thread's nice value; no pointers.
            let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
            let n = (0..nix::sched::CpuSet::count())
                .filter(|&c| mask.is_set(c).unwrap_or(false))
                .count();
            (n, nice, cores.len())
        })
        .join()
        .unwrap();
        assert_eq!(
            seen.0, seen.2,
            "the helper may run on every core the process may"
        );
        assert_eq!(seen.1, HELPER_NICE);
    }

    #[test]
    fn a_queued_sync_answers_and_a_stopped_syncer_finishes_its_queue() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"bytes to make durable").unwrap();
        let syncer = Syncer::start();
        let answers: Vec<_> = (0..3)
            .map(|_| syncer.sync(File::open(&path).unwrap()).expect("thread up"))
            .collect();
        drop(syncer);
        for a in answers {
            a.recv()
                .expect("answered before the thread stopped")
                .unwrap();
        }
    }
}
