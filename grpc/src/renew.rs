//! Server-side renewal of `auto_renew` receipts.
//!
//! A ReceiveMessage with `auto_renew` (the SDKs' push consumers) hands its messages out
//! invisible for [`AUTO_RENEW_INVISIBLE`] and expects
//! the server to keep them invisible while the client works on them. The edge records each
//! such message under the receipt handle the client holds, with the native handle that is
//! current now; [`run`] renews every record [`RENEW_AHEAD`] before its invisible time ends
//! (a native invisible-time change, which answers a new native handle) until:
//! - the client acks it, changes its invisible time or forwards it to the dead-letter queue:
//!   [`Renewals::take`] removes the record and answers the current native handle, which is
//!   the one the broker accepts (the client's own handle names an older pop);
//! - the client is gone: its Settings forgotten or its Telemetry stream closed;
//! - [`RENEW_TOTAL_MAX`] has passed since the message was handed out: the record is no
//!   longer renewed, and kept (for its ack) until its current invisible time ends;
//! - a renewal fails (the broker no longer holds the message invisible for that handle).
//!
//! Invariant: a record's native handle is changed only while its lock is held, and a record
//! taken is marked so: an ack never uses a native handle that a renewal in flight is about
//! to replace. Bounded: at most [`RENEWALS_MAX`] records; when full, a message is handed out
//! without renewal (it comes again after its invisible time, as without `auto_renew`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringmq_client::consumer::EdgeConsumer;

use crate::clients::Clients;

/// The invisible time of a message popped for an `auto_renew` request (RocketMQ's proxy
/// `defaultInvisibleTimeMills`), and of each renewal.
pub(crate) const AUTO_RENEW_INVISIBLE: Duration = Duration::from_secs(60);
/// How long before its invisible time ends a message is renewed.
pub(crate) const RENEW_AHEAD: Duration = Duration::from_secs(10);
/// How long after it was handed out a message stops being renewed.
pub(crate) const RENEW_TOTAL_MAX: Duration = Duration::from_secs(3 * 3600);
/// Most messages renewed at once.
pub(crate) const RENEWALS_MAX: usize = 65_536;
/// How often [`run`] looks for records due.
const TICK: Duration = Duration::from_secs(1);

const _: () = assert!(RENEW_AHEAD.as_secs() < AUTO_RENEW_INVISIBLE.as_secs());

/// One renewed message.
struct Record {
    client_id: String,
    group: String,
    topic: String,
    /// The native handle the broker accepts now.
    native: String,
    /// When the invisible time of `native` ends.
    expires: Instant,
    /// When renewal stops.
    deadline: Instant,
    /// Taken by an ack or an invisible-time change: no renewal any more.
    taken: bool,
}

type Shared = Arc<tokio::sync::Mutex<Record>>;

/// The records, by the receipt handle the client holds (see the module docs).
#[derive(Default)]
pub(crate) struct Renewals {
    map: Mutex<HashMap<String, Shared>>,
}

impl Renewals {
    /// Records a message handed out to `client_id` under `client_handle` (the handle the
    /// client holds; `native`: the native handle inside it). False when full.
    pub(crate) fn add(
        &self,
        client_id: &str,
        group: &str,
        topic: &str,
        client_handle: &str,
        native: &str,
        invisible: Duration,
    ) -> bool {
        let mut map = self.lock();
        if map.len() >= RENEWALS_MAX {
            return false;
        }
        let now = Instant::now();
        let record = Record {
            client_id: client_id.to_string(),
            group: group.to_string(),
            topic: topic.to_string(),
            native: native.to_string(),
            expires: now + invisible,
            deadline: now + RENEW_TOTAL_MAX,
            taken: false,
        };
        map.insert(
            client_handle.to_string(),
            Arc::new(tokio::sync::Mutex::new(record)),
        );
        true
    }

    /// Ends the renewal of the message the client holds as `client_handle`; the native handle
    /// the broker accepts for it now, when the edge was renewing it.
    pub(crate) async fn take(&self, client_handle: &str) -> Option<String> {
        let shared = self.lock().remove(client_handle)?;
        let mut r = shared.lock().await;
        r.taken = true;
        Some(r.native.clone())
    }

    /// Records renewed at most this many.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Shared>> {
        // Every update is one insert or remove: a poisoned map is still whole.
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Renews what is due, every [`TICK`], for as long as the edge runs.
pub(crate) async fn run(renewals: Arc<Renewals>, clients: Arc<Clients>, consumer: EdgeConsumer) {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        renew_due(&renewals, &clients, &consumer).await;
    }
}

/// One pass over the records: renews those due, drops those done.
async fn renew_due(renewals: &Renewals, clients: &Clients, consumer: &EdgeConsumer) {
    let all: Vec<(String, Shared)> = renewals
        .lock()
        .iter()
        .map(|(h, r)| (h.clone(), Arc::clone(r)))
        .collect();
    for (client_handle, shared) in all {
        let mut r = shared.lock().await;
        if r.taken {
            continue;
        }
        let now = Instant::now();
        let keep = if !clients.connected(&r.client_id) {
            log::debug!(
                "auto_renew: client {} is gone, {client_handle} not renewed",
                r.client_id
            );
            false
        } else if now >= r.deadline {
            // Kept for its ack until its invisible time ends.
            now < r.expires
        } else if r.expires.saturating_duration_since(now) > RENEW_AHEAD {
            true
        } else {
            let invisible = AUTO_RENEW_INVISIBLE;
            match consumer
                .change_invisible(&r.group, &r.topic, &r.native, invisible)
                .await
            {
                Ok(native) => {
                    r.native = native;
                    r.expires = Instant::now() + invisible;
                    true
                }
                Err(e) => {
                    log::info!("auto_renew of {client_handle}: {e}");
                    false
                }
            }
        };
        if !keep {
            r.taken = true;
            drop(r);
            let mut map = renewals.lock();
            if map
                .get(&client_handle)
                .is_some_and(|cur| Arc::ptr_eq(cur, &shared))
            {
                map.remove(&client_handle);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_taken_record_answers_its_current_native_handle_once() {
        let r = Renewals::default();
        assert!(r.add(
            "c",
            "G",
            "T",
            "client 1",
            "native 1",
            Duration::from_secs(60)
        ));
        assert_eq!(r.len(), 1);
        {
            let shared = Arc::clone(r.lock().get("client 1").expect("recorded"));
            shared.lock().await.native = "native 2".into();
        }
        assert_eq!(r.take("client 1").await.as_deref(), Some("native 2"));
        assert_eq!(r.take("client 1").await, None);
        assert_eq!(r.len(), 0);
    }
}
