//! The connections of one client: one per (address, shard), opened on first use, reused by
//! every request to that shard, replaced when it closes. A failed connection attempt puts
//! the endpoint in backoff (doubling from `reconnect_backoff_min` to `reconnect_backoff_max`)
//! during which requests fail at once with [`Error::Backoff`] (certainly not sent), instead
//! of every caller waiting on a dead address.
//!
//! A broker connection starts with HELLO asking for its shard, so the broker hands the
//! connection to the shard that owns the queue and nothing is forwarded between shards.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringmq_wire::code::{RequestCode, Status, PROTOCOL_VERSION};
use ringmq_wire::command::{HelloRequest, HelloResponse};

use crate::error::{Error, Result};
use crate::net::connection::Connection;
use crate::net::in_process::InProcess;
use crate::net::inbox::Inbox;
use crate::security::Security;

/// What listens at an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Peer {
    /// A broker; `Some(shard)` asks HELLO for that shard.
    Broker(Option<u16>),
    /// A name server (HELLO asks for no shard).
    Namesrv,
}

/// One endpoint of the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Endpoint {
    pub addr: SocketAddr,
    pub peer: Peer,
}

/// Settings of the pool.
#[derive(Debug, Clone)]
pub struct PoolConfig {
    pub client_id: String,
    pub connect_timeout: Duration,
    pub requests_in_flight_max: usize,
    pub reconnect_backoff_min: Duration,
    pub reconnect_backoff_max: Duration,
    /// TLS and credentials of every connection.
    pub security: Arc<Security>,
    /// Brokers of this process, reached without a socket.
    pub in_process: Option<InProcess>,
}

#[derive(Default)]
struct Slot {
    /// A connection to this endpoint was open before (the next one is a reconnection).
    opened_before: bool,
    conn: Option<Arc<Connection>>,
    hello: Option<HelloResponse>,
    failures: u32,
    next_attempt: Option<Instant>,
    /// Why the last attempt failed.
    last_error: String,
}

/// A broker's identity as its HELLO answered.
#[derive(Debug, Clone)]
pub struct BrokerHello {
    pub frame_bytes_max: usize,
}

/// The connections of one client.
pub struct Pool {
    cfg: PoolConfig,
    slots: Mutex<HashMap<Endpoint, Arc<tokio::sync::Mutex<Slot>>>>,
    inbox: Arc<Inbox>,
    /// Set by [`Pool::shutdown`]: no connection is opened again.
    shut: AtomicBool,
    /// Counts connections to brokers opened again after one was lost ([`Pool::reconnects`]).
    reconnects: tokio::sync::watch::Sender<u64>,
    /// When the latest of them was opened.
    last_reconnect: Mutex<Option<Instant>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("client_id", &self.cfg.client_id)
            .finish_non_exhaustive()
    }
}

impl Pool {
    pub fn new(cfg: PoolConfig) -> Self {
        Pool {
            cfg,
            slots: Mutex::new(HashMap::new()),
            inbox: Arc::new(Inbox::new()),
            shut: AtomicBool::new(false),
            reconnects: tokio::sync::watch::channel(0).0,
            last_reconnect: Mutex::new(None),
        }
    }

    /// How long ago a connection to a broker was last opened again after one was lost.
    pub fn since_reconnect(&self) -> Option<Duration> {
        self.last_reconnect
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .map(|at| at.elapsed())
    }

    /// Changes each time a connection to a broker is opened again after the last one to it
    /// was lost (the broker restarted, or the network came back). A broker that restarted
    /// knows no client until their next heartbeat: the producers and consumers of this
    /// client heartbeat at once when it changes, so a rebalance in the meantime does not
    /// hand their queues to the members that happened to heartbeat first.
    pub fn reconnects(&self) -> tokio::sync::watch::Receiver<u64> {
        self.reconnects.subscribe()
    }

    /// Where requests the brokers send this client go (e.g. consumer-ids-changed notices).
    pub fn inbox(&self) -> &Inbox {
        &self.inbox
    }

    /// The live connection to `ep`, connecting (and saying HELLO) if needed.
    pub async fn get(&self, ep: Endpoint) -> Result<(Arc<Connection>, Option<BrokerHello>)> {
        if self.shut.load(Ordering::Acquire) {
            return Err(Error::Shutdown);
        }
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            Arc::clone(slots.entry(ep).or_default())
        };
        let mut s = slot.lock().await;
        if let Some(c) = &s.conn {
            if !c.is_closed() {
                return Ok((Arc::clone(c), hello_of(s.hello.as_ref())));
            }
            s.conn = None;
        }
        if let Some(at) = s.next_attempt {
            let now = Instant::now();
            if now < at {
                return Err(Error::Backoff {
                    addr: ep.addr,
                    retry_in: at - now,
                    cause: s.last_error.clone(),
                });
            }
        }
        match self.connect(ep).await {
            Ok((conn, hello)) => {
                let conn = Arc::new(conn);
                if s.opened_before && matches!(ep.peer, Peer::Broker(_)) {
                    *self
                        .last_reconnect
                        .lock()
                        .unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
                    self.reconnects.send_modify(|n| *n += 1);
                }
                s.opened_before = true;
                s.failures = 0;
                s.next_attempt = None;
                s.conn = Some(Arc::clone(&conn));
                s.hello = hello;
                Ok((conn, hello_of(s.hello.as_ref())))
            }
            Err(e) => {
                s.failures = s.failures.saturating_add(1);
                let backoff = backoff(
                    self.cfg.reconnect_backoff_min,
                    self.cfg.reconnect_backoff_max,
                    s.failures,
                );
                s.next_attempt = Some(Instant::now() + backoff);
                s.last_error = e.to_string();
                log::debug!("{}: {e}; next attempt in {backoff:?}", ep.addr);
                Err(e)
            }
        }
    }

    /// Closes every connection for good: requests fail with [`Error::Shutdown`] from now on.
    pub fn shutdown(&self) {
        self.shut.store(true, Ordering::Release);
        self.close_all();
    }

    /// Closes every connection (waiting requests fail).
    pub fn close_all(&self) {
        let slots: Vec<_> = {
            let mut map = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            map.drain().map(|(_, v)| v).collect()
        };
        for slot in slots {
            if let Ok(s) = slot.try_lock() {
                if let Some(c) = &s.conn {
                    c.close();
                }
            }
        }
    }

    async fn connect(&self, ep: Endpoint) -> Result<(Connection, Option<HelloResponse>)> {
        let local = match (&self.cfg.in_process, ep.peer) {
            (Some(p), Peer::Broker(_)) => p.dial(ep.addr),
            _ => None,
        };
        let conn = match local {
            Some(stream) => Connection::in_process(
                ep.addr,
                stream,
                self.cfg.requests_in_flight_max,
                Arc::clone(&self.inbox),
                Arc::clone(&self.cfg.security),
            ),
            None => {
                Connection::open(
                    ep.addr,
                    self.cfg.connect_timeout,
                    self.cfg.requests_in_flight_max,
                    Arc::clone(&self.inbox),
                    Arc::clone(&self.cfg.security),
                )
                .await?
            }
        };
        // Every native connection opens with HELLO: a listener tells the native protocol from
        // RocketMQ's remoting by the first frame's code (docs/wire.md).
        let shard = match ep.peer {
            Peer::Broker(shard) => shard,
            _ => None,
        };
        let hello = HelloRequest {
            client_id: self.cfg.client_id.clone(),
            protocol_version: PROTOCOL_VERSION,
            client_version: concat!("ringmq-client ", env!("CARGO_PKG_VERSION")).to_string(),
            preferred_shard: shard,
        };
        let answer = conn
            .call(RequestCode::Hello, &hello, &[], self.cfg.connect_timeout)
            .await?
            .expect(&[Status::Success])?;
        let fields: HelloResponse = answer.required_fields()?;
        if fields.tls_session.0 {
            // The HELLO was signed (when there are credentials) and answered SUCCESS: the
            // server bound a TLS connection to the account (docs/security.md).
            conn.begin_session();
        }
        if !matches!(ep.peer, Peer::Broker(_)) {
            return Ok((conn, None));
        }
        if shard.is_some_and(|s| s != fields.shard_id) {
            log::debug!(
                "{}: asked for shard {shard:?}, served by shard {} of {}",
                ep.addr,
                fields.shard_id,
                fields.shard_count
            );
        }
        Ok((conn, Some(fields)))
    }
}

fn hello_of(h: Option<&HelloResponse>) -> Option<BrokerHello> {
    h.map(|h| BrokerHello {
        frame_bytes_max: h.frame_bytes_max as usize,
    })
}

/// `min * 2^(failures-1)`, capped at `max`.
pub fn backoff(min: Duration, max: Duration, failures: u32) -> Duration {
    let shift = failures.saturating_sub(1).min(20);
    min.saturating_mul(1u32 << shift).min(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        let min = Duration::from_millis(100);
        let max = Duration::from_secs(2);
        assert_eq!(backoff(min, max, 1), min);
        assert_eq!(backoff(min, max, 2), Duration::from_millis(200));
        assert_eq!(backoff(min, max, 5), Duration::from_millis(1600));
        assert_eq!(backoff(min, max, 6), max);
        assert_eq!(backoff(min, max, 1000), max);
    }
}
