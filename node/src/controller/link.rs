//! A persistent native connection for request/response calls, one call at a time: between
//! controllers (Raft messages) and from a broker to its leader controller (heartbeats), so
//! the far end sees the link close when this process dies.

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::time::Duration;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::Encode;
use ringmq_wire::command::OPENER_REQUEST_ID;
use ringmq_wire::frame;

use crate::io::net::Conn;
use crate::io::rt;
use crate::limits;
use crate::net::frames::FrameReader;

/// A call's answer: status, response header, body.
pub type Answer = (Status, Vec<u8>, Vec<u8>);

/// A lazily (re)connected link to one peer.
pub struct Link {
    pub addr: SocketAddr,
    client_id: &'static str,
    conn: RefCell<Option<(Conn, FrameReader)>>,
    next_id: Cell<u64>,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link").field("addr", &self.addr).finish()
    }
}

impl Link {
    pub fn new(addr: SocketAddr, client_id: &'static str) -> Self {
        Link {
            addr,
            client_id,
            conn: RefCell::new(None),
            next_id: Cell::new(1),
        }
    }

    /// Closes the connection (the next call connects again).
    pub fn close(&self) {
        self.conn.borrow_mut().take();
    }

    /// One request and its answer within `timeout` (connecting first if needed). Any error
    /// closes the connection.
    pub async fn call(
        &self,
        code: RequestCode,
        header: &impl Encode,
        body: &[u8],
        timeout: Duration,
    ) -> Result<Answer, String> {
        let id = self.next_id.get();
        self.next_id.set(id.wrapping_add(1).max(1));
        let mut request = Vec::new();
        frame::encode_request(&mut request, code, false, id, header, body)
            .map_err(|e| e.to_string())?;
        let taken = self.conn.borrow_mut().take();
        let exchange = async move {
            let (conn, mut rd) = match taken {
                Some(c) => c,
                None => {
                    let conn = Conn::connect_with(self.addr, None)
                        .await
                        .map_err(|e| format!("connecting to {}: {e}", self.addr))?;
                    let mut opener = ringmq_wire::command::opener_frame(self.client_id);
                    opener.extend_from_slice(&request);
                    request = opener;
                    (conn, FrameReader::new(limits::FRAME_BYTES_MAX, Vec::new()))
                }
            };
            let (res, _) = conn.write_all(request).await;
            res.map_err(|e| format!("writing to {}: {e}", self.addr))?;
            loop {
                let Some(bytes) = rd
                    .next(&conn)
                    .await
                    .map_err(|e| format!("reading from {}: {e}", self.addr))?
                else {
                    return Err(format!("{} closed the connection", self.addr));
                };
                let f = frame::parse(&bytes).map_err(|e| e.to_string())?;
                if f.request_id == OPENER_REQUEST_ID || f.request_id != id {
                    continue;
                }
                let status = f.status().map_err(|e| e.to_string())?;
                let answer = (status, f.header.to_vec(), f.body.to_vec());
                return Ok::<_, String>((answer, conn, rd));
            }
        };
        match rt::timeout(timeout, exchange).await {
            Some(Ok((answer, conn, rd))) => {
                *self.conn.borrow_mut() = Some((conn, rd));
                Ok(answer)
            }
            Some(Err(e)) => Err(e),
            None => Err(format!(
                "no answer from {} within {} ms",
                self.addr,
                timeout.as_millis()
            )),
        }
    }
}
