//! The gRPC clients this edge knows: client id (`x-mq-client-id`) -> the Settings the client
//! last sent on its Telemetry stream. Heartbeat, ReceiveMessage and
//! NotifyClientTermination read them; a client whose Settings are unknown is answered
//! `UNRECOGNIZED_CLIENT_TYPE`, as RocketMQ's proxy answers. With the Settings, the sender of
//! the client's Telemetry stream: a transaction check-back reaches a producer of the topic
//! through it. With them, the consumer groups' settings ([`Groups`]) that a consumer's
//! Settings answer carries.
//!
//! Bounded: at most [`CLIENTS_MAX`] clients; a client silent (no Telemetry settings, no
//! heartbeat) for [`CLIENT_IDLE_MAX`] is forgotten when room is needed. Full of live
//! clients: a new one is refused (TOO_MANY_REQUESTS).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::groups::Groups;
use crate::pb::{self, settings::PubSub};

/// The outbound half of a client's Telemetry stream.
pub(crate) type TelemetrySender = mpsc::Sender<Result<pb::TelemetryCommand, tonic::Status>>;

/// Most clients known at once.
pub(crate) const CLIENTS_MAX: usize = 10_000;
/// A client silent this long may be forgotten (clients heartbeat every 10 s).
pub(crate) const CLIENT_IDLE_MAX: Duration = Duration::from_secs(120);

struct Entry {
    settings: pb::Settings,
    seen: Instant,
    telemetry: Option<TelemetrySender>,
}

/// The registry (see the module docs).
#[derive(Default)]
pub(crate) struct Clients {
    map: Mutex<HashMap<String, Entry>>,
    /// `None`: every group has the defaults (tests).
    groups: Option<Arc<Groups>>,
}

/// The registry is full of live clients.
#[derive(Debug)]
pub(crate) struct Full;

impl Clients {
    /// An empty registry whose consumers are told their groups' settings from `groups`.
    pub(crate) fn with_groups(groups: Arc<Groups>) -> Self {
        Clients {
            map: Mutex::default(),
            groups: Some(groups),
        }
    }

    /// The consumer groups' settings, when known.
    pub(crate) fn groups(&self) -> Option<&Groups> {
        self.groups.as_deref()
    }

    /// Records `settings` (and the client's Telemetry stream) as `client_id`'s.
    pub(crate) fn put(
        &self,
        client_id: &str,
        settings: pb::Settings,
        telemetry: Option<TelemetrySender>,
    ) -> Result<(), Full> {
        let now = Instant::now();
        let mut map = self.lock();
        if !map.contains_key(client_id) && map.len() >= CLIENTS_MAX {
            map.retain(|_, e| now.duration_since(e.seen) < CLIENT_IDLE_MAX);
            if map.len() >= CLIENTS_MAX {
                return Err(Full);
            }
        }
        map.insert(
            client_id.to_string(),
            Entry {
                settings,
                seen: now,
                telemetry,
            },
        );
        Ok(())
    }

    /// The Telemetry stream of a live producer that publishes `topic` (the most recently
    /// seen one), if any.
    pub(crate) fn publisher_of(&self, topic: &str) -> Option<TelemetrySender> {
        let map = self.lock();
        map.values()
            .filter(|e| match &e.settings.pub_sub {
                Some(PubSub::Publishing(p)) => p.topics.iter().any(|t| t.name == topic),
                _ => false,
            })
            .filter_map(|e| {
                let tx = e.telemetry.as_ref()?;
                (!tx.is_closed()).then(|| (e.seen, tx.clone()))
            })
            .max_by_key(|(seen, _)| *seen)
            .map(|(_, tx)| tx)
    }

    /// `client_id`'s settings, and marks it seen.
    pub(crate) fn touch(&self, client_id: &str) -> Option<pb::Settings> {
        let mut map = self.lock();
        let e = map.get_mut(client_id)?;
        e.seen = Instant::now();
        Some(e.settings.clone())
    }

    /// Whether `client_id` is known and its Telemetry stream still open: what `auto_renew`
    /// renewal takes for a client still there.
    pub(crate) fn connected(&self, client_id: &str) -> bool {
        self.lock()
            .get(client_id)
            .and_then(|e| e.telemetry.as_ref())
            .is_some_and(|tx| !tx.is_closed())
    }

    /// Forgets `client_id`; its settings, if it was known.
    pub(crate) fn remove(&self, client_id: &str) -> Option<pb::Settings> {
        self.lock().remove(client_id).map(|e| e.settings)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        // A panic while holding the lock leaves a map that is still whole (every update is
        // one insert or remove), so a poisoned lock is used as it is.
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_touch_remove() {
        let c = Clients::default();
        assert!(c.touch("a").is_none());
        c.put("a", pb::Settings::default(), None).expect("room");
        assert!(c.touch("a").is_some());
        assert!(c.remove("a").is_some());
        assert!(c.touch("a").is_none());
    }

    #[test]
    fn a_publisher_of_a_topic_is_found_by_its_settings() {
        let c = Clients::default();
        let (tx, _rx) = mpsc::channel(1);
        let settings = pb::Settings {
            pub_sub: Some(PubSub::Publishing(pb::Publishing {
                topics: vec![pb::Resource {
                    resource_namespace: String::new(),
                    name: "T".into(),
                }],
                ..Default::default()
            })),
            ..Default::default()
        };
        c.put("p", settings, Some(tx)).expect("room");
        assert!(c.publisher_of("T").is_some());
        assert!(c.publisher_of("U").is_none());
    }
}
