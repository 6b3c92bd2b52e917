//! Brokers a client reaches without a socket: a protocol edge that runs inside the broker's
//! own process (ringmq's gRPC edge) gives its clients an [`InProcess`], which turns a
//! connection to the broker's address into an in-memory stream the broker serves as a
//! native connection. Everything above the stream is as on TCP: HELLO, pipelining, signed
//! requests, requests from the broker. Other addresses (another broker, name servers) are
//! reached over TCP as usual.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::DuplexStream;

type Dial = dyn Fn(SocketAddr) -> Option<DuplexStream> + Send + Sync;

/// Opens in-process connections to brokers of this process (see the module docs).
#[derive(Clone)]
pub struct InProcess(Arc<Dial>);

impl InProcess {
    /// `dial(addr)` gives the client's end of a new in-process connection to the broker at
    /// `addr`, or `None` when `addr` is not served in this process (the client then
    /// connects over TCP).
    pub fn new(dial: impl Fn(SocketAddr) -> Option<DuplexStream> + Send + Sync + 'static) -> Self {
        InProcess(Arc::new(dial))
    }

    pub(crate) fn dial(&self, addr: SocketAddr) -> Option<DuplexStream> {
        (self.0)(addr)
    }
}

impl std::fmt::Debug for InProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InProcess")
    }
}
