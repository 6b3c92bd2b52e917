//! Background timers of a producer or consumer (route refresh, heartbeats, rebalancing,
//! offset commits): tokio tasks that hold only a weak reference to their owner and are
//! aborted when it shuts down or is dropped, so nothing outlives the client object.

use std::sync::Mutex;
use std::time::Duration;

use tokio::task::JoinHandle;

/// A timer that ticks every `period`, the first time one period from now (the immediate
/// first tick of [`tokio::time::interval`] is consumed).
pub async fn ticker(period: Duration) -> tokio::time::Interval {
    let mut tick = tokio::time::interval(period);
    tick.tick().await;
    tick
}

/// Tasks aborted together on [`Background::abort_all`] or drop.
#[derive(Debug, Default)]
pub struct Background {
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl Background {
    pub fn push(&self, task: JoinHandle<()>) {
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        tasks.retain(|t| !t.is_finished());
        tasks.push(task);
    }

    pub fn abort_all(&self) {
        let tasks: Vec<_> = self
            .tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
            .collect();
        for t in tasks {
            t.abort();
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.abort_all();
    }
}
