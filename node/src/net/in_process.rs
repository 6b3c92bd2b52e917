//! The door through which an edge running inside the broker process (the gRPC edge) reaches
//! this broker's shards without a socket: [`dialer`] turns a connect to the broker's own
//! address into an in-process connection (`crate::io::local`) that a shard serves as if it
//! had been accepted on the broker port. Everything behind it is the native protocol's one
//! request path: HELLO moves the connection to the shard it asks for, requests are checked,
//! signed frames verified (ACL on), and the broker's own requests to the client (transaction
//! check-backs) travel back on it.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::DuplexStream;

use crate::broker::Broker;
use crate::io::local;
use crate::shard::mailbox::Mail;

/// Connects to `broker` in process: for a connect to `broker.addr` (the address routes name
/// it by), the caller's end of a new in-process connection, served by shard 0 until its
/// HELLO moves it; `None` for any other address (connect over TCP as usual), and while the
/// broker stops or when shard 0's mailbox is full. The shard sees the connection as coming
/// from the broker's own IP address (port 0), where a TCP connect to `broker.addr` from this
/// host would come from, so ACL address rules judge it alike.
pub fn dialer(broker: Arc<Broker>) -> impl Fn(SocketAddr) -> Option<DuplexStream> + Send + Sync {
    move |addr| {
        if addr != broker.addr || broker.is_shutting_down() {
            return None;
        }
        let (shard_end, caller_end) = local::pair(SocketAddr::new(broker.addr.ip(), 0));
        let mailbox = broker.mailboxes.first()?;
        match mailbox.try_send(Mail::Local { stream: shard_end }) {
            Ok(()) => Some(caller_end),
            Err(e) => {
                log::warn!("in-process connection to {addr}: shard 0 did not take it ({e}); connecting over TCP");
                None
            }
        }
    }
}
