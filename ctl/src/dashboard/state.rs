//! What every dashboard request shares ([`State`]: the admin client, sessions, the
//! sampler's samples) and who one runs as ([`Ctx`]). Below the routes (`api.rs`) and the
//! views (`views.rs`).
//!
//! The locks are held only between awaits (never across one): the answers and the sampler
//! take turns on one thread, so a lock is never waited for.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ringmq_client::{Admin, ClientConfig};

use super::sampler::Samples;
use super::session::Sessions;

/// What every request shares.
pub struct State {
    /// Built with the credentials ringmq-ctl was started with (the sampler's too).
    pub admin: Admin,
    pub cfg: ClientConfig,
    pub sessions: Mutex<Sessions>,
    pub samples: Arc<Mutex<Samples>>,
    pub refresh: Duration,
    pub history: Duration,
}

impl State {
    /// The sampler's last round.
    pub fn samples(&self) -> MutexGuard<'_, Samples> {
        lock(&self.samples)
    }

    pub fn sessions(&self) -> MutexGuard<'_, Sessions> {
        lock(&self.sessions)
    }
}

/// A lock that a panic elsewhere did not make unusable (what it guards is replaced whole or
/// changed in one step).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Who a request runs as.
pub struct Ctx {
    pub admin: Admin,
    pub cfg: ClientConfig,
    /// The session's access key; `None` without ACL.
    pub access_key: Option<String>,
}
