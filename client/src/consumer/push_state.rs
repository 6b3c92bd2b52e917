//! A push consumer's settings ([`PushConfig`]) and the state its tasks share ([`Inner`]: the
//! group, the listener, the offsets, the owned queues), below everything that runs on it:
//! the pull loops (`push_pull.rs`), the consuming paths (`concurrent.rs`, `orderly.rs`), the
//! rebalance (`push_queues.rs`) and the public handle (`push.rs`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{watch, Semaphore};
use tokio::task::JoinHandle;

use super::group::Group;
use super::listener::DynListener;
use super::offsets::OffsetStore;
use super::orderly_queue::OrderlyQueue;
use super::queue_state::QueueState;
use super::{MessageModel, MessageSelector, StartPosition};
use crate::background::Background;
use crate::instance::Instance;
use crate::route::MessageQueue;
use crate::trace::Tracer;

/// Settings of a push consumer.
#[derive(Debug, Clone)]
pub struct PushConfig {
    pub group: String,
    pub model: MessageModel,
    pub start: StartPosition,
    pub subscriptions: Vec<(String, MessageSelector)>,
    /// Listener calls running at once across all queues (default 16).
    pub consume_concurrency: usize,
    /// Most messages per listener call (default 32).
    pub consume_batch_max: usize,
    /// Most messages per pull (default 32).
    pub pull_batch_max: u32,
    /// Most bytes per pull (default 4 MiB).
    pub pull_bytes_max: u32,
    /// How long the broker may hold a pull with nothing to return (default 15 s).
    pub long_poll: Duration,
    /// A queue stops pulling while this many of its messages are unacknowledged (default 1000).
    pub queue_outstanding_max: usize,
    /// Pause before a failed batch is handed over again (default 1 s).
    pub redeliver_backoff: Duration,
    /// Pause after a failed pull (default 1 s).
    pub pull_error_backoff: Duration,
    pub heartbeat_interval: Duration,
    pub rebalance_interval: Duration,
    pub commit_interval: Duration,
    /// While a broker is read from its slave, how often its master is tried again
    /// (default 5 s).
    pub master_probe_interval: Duration,
    /// How long releasing a queue waits for its running listener calls (default 5 s).
    pub release_wait: Duration,
    /// Retries a message gets before it goes to the dead-letter topic; 0 (the default):
    /// the group's limit on the broker (16 unless configured), for an orderly consumer 16.
    pub max_reconsume_times: u32,
    /// One listener call per queue at a time, in queue-offset order, under a broker lock
    /// per queue in clustering mode (default false).
    pub orderly: bool,
    /// How long an orderly queue pauses after a failed call (default 1 s).
    pub suspend_current_queue: Duration,
    /// How often an orderly clustering consumer renews its queue locks (default 20 s; keep
    /// it well below the broker's `rebalanceLockMaxLiveTime`, 60 s by default).
    pub lock_renew_interval: Duration,
    /// Folder of broadcasting offset files.
    pub offset_dir: PathBuf,
}

/// An owned queue: its state, its orderly buffer and lock (orderly consumers), and its
/// tasks (the pull loop, and the orderly consuming task).
pub(crate) struct Running {
    pub state: Arc<QueueState>,
    pub orderly: Option<Arc<OrderlyQueue>>,
    pub tasks: Vec<JoinHandle<()>>,
}

pub(crate) struct Inner {
    pub group: Group,
    pub cfg: PushConfig,
    pub listener: Arc<dyn DynListener>,
    pub offsets: OffsetStore,
    pub(super) queues: Mutex<BTreeMap<MessageQueue, Running>>,
    pub permits: Arc<Semaphore>,
    pub(super) shut: AtomicBool,
    /// Set by [`PushConsumer::abort`](super::PushConsumer::abort): running listener calls are dropped.
    pub aborted: watch::Sender<bool>,
    /// The last rebalance left queues of the assignment untaken: rebalance again soon.
    pub(super) unsettled: AtomicBool,
    pub rebalancing: tokio::sync::Mutex<()>,
    pub(super) background: Background,
    /// Records listener calls when tracing is on.
    pub trace: Option<Arc<Tracer>>,
}

impl Inner {
    pub fn inst(&self) -> &Instance {
        &self.group.inst
    }

    pub fn queues(&self) -> std::sync::MutexGuard<'_, BTreeMap<MessageQueue, Running>> {
        self.queues.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn is_shut(&self) -> bool {
        self.shut.load(Ordering::Acquire)
    }

    /// True for an orderly clustering consumer: it consumes a queue only under its lock.
    pub fn uses_locks(&self) -> bool {
        self.cfg.orderly && self.cfg.model == MessageModel::Clustering
    }

    pub fn set_unsettled(&self, unsettled: bool) {
        self.unsettled.store(unsettled, Ordering::Release);
    }

    pub fn is_unsettled(&self) -> bool {
        self.unsettled.load(Ordering::Acquire)
    }
}

/// Commits a queue's offset if it moved since the last commit.
pub(crate) async fn commit_queue(inner: &Inner, state: &QueueState) {
    let switches = inner.group.reads.switches();
    let Some(offset) = state.commit_due(switches) else {
        return;
    };
    match inner.offsets.write(&state.mq, offset).await {
        Ok(()) => state.mark_committed(offset, switches),
        Err(e) => log::warn!("committing {} at {offset}: {e}", state.mq),
    }
}
