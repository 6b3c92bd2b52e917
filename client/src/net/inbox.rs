//! Requests a broker sends to this client over one of the client's own connections (the
//! broker answers nothing on them and the client answers none of them: they are ONEWAY).
//! The broker uses the connection a client's latest heartbeat came on. Routed by code:
//!
//! - NOTIFY_CONSUMER_IDS_CHANGED: wakes the consumers of that group, which rebalance at
//!   once instead of at their next timer tick;
//! - CHECK_TRANSACTION_STATE: logged and ignored (transaction check-back is issue #14);
//! - any other code, or a header that does not decode: logged and ignored.
//!
//! Bounded: one wake-up per group registered by this client's own consumers (a [`Notify`]
//! keeps at most one pending permit, so a burst of notices costs one rebalance); nothing
//! is queued per notice, and a notice for a group nobody here registered is dropped.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use ringmq_wire::code::RequestCode;
use ringmq_wire::codec::Decode;
use ringmq_wire::command::transaction::CheckTransactionRequest;
use ringmq_wire::command::NotifyConsumerIdsChanged;
use tokio::sync::Notify;

/// Where broker -> client requests go (one per connection pool, shared by its connections).
#[derive(Debug, Default)]
pub struct Inbox {
    groups: Mutex<HashMap<String, Arc<Notify>>>,
}

impl Inbox {
    pub fn new() -> Self {
        Self::default()
    }

    /// The wake-up of `group`'s consumers: notified (one permit) whenever a broker says the
    /// group's members changed. Registering a group twice returns the same wake-up.
    pub fn register_group(&self, group: &str) -> Arc<Notify> {
        let mut groups = self.lock();
        Arc::clone(groups.entry(group.to_string()).or_default())
    }

    /// Handles one request frame from the peer at `addr`.
    pub fn deliver(&self, addr: SocketAddr, code: u16, header: &[u8], _body: &[u8]) {
        match RequestCode::try_from(code) {
            Ok(RequestCode::NotifyConsumerIdsChanged) => {
                match NotifyConsumerIdsChanged::decode(header) {
                    Ok(n) => self.consumer_ids_changed(addr, &n.consumer_group),
                    Err(e) => log::warn!("{addr}: NOTIFY_CONSUMER_IDS_CHANGED header: {e}"),
                }
            }
            Ok(RequestCode::CheckTransactionState) => {
                // Issue #14 answers these with END_TRANSACTION; until then the broker checks
                // back again later.
                match CheckTransactionRequest::decode(header) {
                    Ok(c) => log::info!(
                        "{addr}: CHECK_TRANSACTION_STATE for {} ignored (not supported yet)",
                        c.transaction_id
                    ),
                    Err(e) => log::warn!("{addr}: CHECK_TRANSACTION_STATE header: {e}"),
                }
            }
            Ok(other) => log::debug!("{addr}: request {} from the broker ignored", other.name()),
            Err(_) => log::debug!("{addr}: unknown request code {code} from the broker ignored"),
        }
    }

    fn consumer_ids_changed(&self, addr: SocketAddr, group: &str) {
        let wake = self.lock().get(group).cloned();
        match wake {
            Some(n) => {
                log::debug!("{addr}: members of {group} changed");
                n.notify_one();
            }
            None => log::debug!("{addr}: members of {group} changed; no consumer of it here"),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Notify>>> {
        self.groups.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringmq_wire::codec::Encode;
    use std::time::Duration;

    fn addr() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 1))
    }

    fn notice(group: &str) -> Vec<u8> {
        NotifyConsumerIdsChanged {
            consumer_group: group.into(),
        }
        .to_vec()
        .unwrap()
    }

    #[tokio::test]
    async fn notices_wake_only_their_group_once_per_burst() {
        let inbox = Inbox::new();
        let a = inbox.register_group("a");
        let b = inbox.register_group("b");
        let code = RequestCode::NotifyConsumerIdsChanged as u16;
        for _ in 0..3 {
            inbox.deliver(addr(), code, &notice("a"), &[]);
        }
        inbox.deliver(addr(), code, &notice("unknown"), &[]);
        inbox.deliver(addr(), code, b"\xff", &[]);
        inbox.deliver(addr(), RequestCode::CheckTransactionState as u16, b"", &[]);
        inbox.deliver(addr(), 65_000, b"", &[]);
        let short = Duration::from_millis(50);
        assert!(tokio::time::timeout(short, a.notified()).await.is_ok());
        assert!(
            tokio::time::timeout(short, a.notified()).await.is_err(),
            "three notices in a row leave one wake-up, not three"
        );
        assert!(tokio::time::timeout(short, b.notified()).await.is_err());
        assert!(Arc::ptr_eq(&a, &inbox.register_group("a")));
    }
}
