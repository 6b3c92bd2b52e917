//! Making a producer known to a broker the first time it uses it.
//!
//! The broker knows a producer by the connection its latest heartbeat came on, and forgets
//! it when that connection closes. The periodic heartbeat (every `heartbeat_interval`,
//! 30 s by default) would leave a new producer unknown for that long: `connection list`,
//! the dashboard and transaction check-backs would not see it, and replies to its requests
//! would have nowhere to go. So a producer heartbeats a master as soon as it first sends
//! there, and again whenever the connection heartbeats use was made anew.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::Empty;
use ringmq_wire::command::HeartbeatData;

use super::Inner;
use crate::error::{Error, Result};
use crate::instance::encode_heartbeat;
use crate::net::Connection;

/// Per producer: the connection each master last got this producer's heartbeat on.
#[derive(Debug, Default)]
pub(crate) struct Announced {
    conns: Mutex<HashMap<SocketAddr, Weak<Connection>>>,
}

impl Announced {
    fn lock(&self) -> MutexGuard<'_, HashMap<SocketAddr, Weak<Connection>>> {
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `addr` got a heartbeat on a connection that is still open.
    fn is_live(&self, addr: SocketAddr) -> bool {
        self.lock()
            .get(&addr)
            .and_then(Weak::upgrade)
            .is_some_and(|c| !c.is_closed())
    }

    fn is_current(&self, addr: SocketAddr, conn: &Arc<Connection>) -> bool {
        self.lock()
            .get(&addr)
            .and_then(Weak::upgrade)
            .is_some_and(|c| Arc::ptr_eq(&c, conn))
    }

    fn set(&self, addr: SocketAddr, conn: &Arc<Connection>) {
        self.lock().insert(addr, Arc::downgrade(conn));
    }
}

/// Heartbeats `addr` on the connection heartbeats use, unless this producer already did on
/// that very connection.
pub(super) async fn announce(inner: &Inner, addr: SocketAddr) -> Result<()> {
    let (conn, _) = inner.inst.broker_conn(addr, None).await?;
    if inner.announced.is_current(addr, &conn) {
        return Ok(());
    }
    let hb = HeartbeatData {
        client_id: inner.inst.id.clone(),
        producer_groups: vec![inner.cfg.group.clone()],
        consumer_groups: Vec::new(),
    };
    let Some(body) = encode_heartbeat(&hb) else {
        return Err(Error::InvalidMessage(
            "this producer's heartbeat does not encode".into(),
        ));
    };
    let answer = conn
        .call(
            RequestCode::HeartBeat,
            &Empty,
            &body,
            inner.inst.cfg.request_timeout,
        )
        .await?;
    answer.expect(&[Status::Success])?;
    inner.announced.set(addr, &conn);
    Ok(())
}

/// After a message was stored on `addr`: heartbeats it when this producer is not known
/// there yet. A failed heartbeat is logged; the send already succeeded, and the periodic
/// heartbeat tries again.
pub(super) async fn after_send(inner: &Inner, addr: SocketAddr) {
    if inner.announced.is_live(addr) {
        return;
    }
    if let Err(e) = announce(inner, addr).await {
        log::debug!("heartbeat to {addr} after the first send there: {e}");
    }
}
