//! One TCP connection speaking RocketMQ's remoting frames, pipelined by opaque: any number
//! of tasks send requests on it (each frame written whole under the writer's lock), and one
//! reader task hands each response to the request with the same opaque.
//!
//! Bounds: at most [`PENDING_MAX`] requests wait for an answer on a connection (perf's lanes
//! and pull loops keep far fewer outstanding; one more is refused, not queued); a frame
//! from the server is checked against [`rframe::FRAME_BYTES_MAX`] before it is buffered.
//! Frames the server sends on its own (NOTIFY_CONSUMER_IDS_CHANGED, ...) are dropped: perf's
//! driver has nothing to do with them. When the connection ends, every waiting request fails.
//!
//! With TLS (the run's [`Security`]), the handshake follows the TCP connect (server name:
//! the host of `addr` unless `--tls-server-name`), the stream is split with
//! [`tokio::io::split`], and each frame is flushed after it is written (rustls buffers).

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ringmq_client::security::Security;
use ringmq_client::tls::TlsStream;
use ringmq_client::wire::remoting::frame::{self as rframe, Command, SerializeType};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::oneshot;

/// Requests waiting for an answer on one connection.
pub const PENDING_MAX: usize = 4096;
/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Bytes the reader asks the socket for at least, per read.
const READ_CHUNK_BYTES: usize = 256 * 1024;

/// A response: its command, and its body (a slice of the frame it came in).
#[derive(Debug, Clone)]
pub struct Response {
    pub cmd: Command,
    pub body: Bytes,
}

type Waiters = Arc<Mutex<Option<HashMap<i32, oneshot::Sender<Response>>>>>;

/// A pipelined remoting connection. Dropping it stops its reader.
#[derive(Debug)]
pub struct Conn {
    addr: String,
    writer: tokio::sync::Mutex<Writer>,
    /// `None` once the connection ended (no new request is accepted).
    waiters: Waiters,
    next_opaque: AtomicI32,
    reader: tokio::task::JoinHandle<()>,
    /// TLS and the credentials requests are signed with (signing: see issue #24).
    security: Arc<Security>,
    /// The credentials' HMAC-SHA1 key, keyed once.
    remoting_key: std::sync::OnceLock<ringmq_client::wire::auth::RemotingKey>,
}

/// The writing half of the connection.
enum Writer {
    Plain(OwnedWriteHalf),
    Tls(tokio::io::WriteHalf<TlsStream>),
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Writer::Plain(_) => "Writer::Plain",
            Writer::Tls(_) => "Writer::Tls",
        })
    }
}

impl Writer {
    /// Writes the whole frame (and, on TLS, flushes what rustls buffered).
    async fn write_frame(&mut self, frame: &[u8]) -> std::io::Result<()> {
        match self {
            Writer::Plain(w) => w.write_all(frame).await,
            Writer::Tls(w) => {
                w.write_all(frame).await?;
                w.flush().await
            }
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Conn {
    /// Connects to `addr` (`host:port`), with a TLS handshake when `security` has TLS.
    pub async fn connect(addr: &str, security: &Arc<Security>) -> Result<Conn, String> {
        let deadline = tokio::time::Instant::now() + CONNECT_TIMEOUT;
        let stream = tokio::time::timeout_at(deadline, TcpStream::connect(addr))
            .await
            .map_err(|_| format!("connecting to {addr}: timed out"))?
            .map_err(|e| format!("connecting to {addr}: {e}"))?;
        stream
            .set_nodelay(true)
            .map_err(|e| format!("{addr}: TCP_NODELAY: {e}"))?;
        let waiters: Waiters = Arc::new(Mutex::new(Some(HashMap::new())));
        let (reader, writer) = match &security.tls {
            None => {
                let (read, write) = stream.into_split();
                let reader = tokio::spawn(read_loop(read, Arc::clone(&waiters)));
                (reader, Writer::Plain(write))
            }
            Some(connector) => {
                let host = host_of(addr);
                let tls = tokio::time::timeout_at(deadline, connector.handshake(host, stream))
                    .await
                    .map_err(|_| format!("TLS handshake with {addr}: timed out"))?
                    .map_err(|e| format!("TLS handshake with {addr} failed: {e}"))?;
                let (read, write) = tokio::io::split(tls);
                let reader = tokio::spawn(read_loop(read, Arc::clone(&waiters)));
                (reader, Writer::Tls(write))
            }
        };
        Ok(Conn {
            addr: addr.to_string(),
            writer: tokio::sync::Mutex::new(writer),
            waiters,
            next_opaque: AtomicI32::new(1),
            reader,
            security: Arc::clone(security),
            remoting_key: std::sync::OnceLock::new(),
        })
    }

    /// Sends `cmd` (its opaque is set here) with `body` in serialization `st`, and waits at
    /// most `timeout` for the answer.
    pub async fn request(
        &self,
        mut cmd: Command,
        st: SerializeType,
        body: &[u8],
        timeout: Duration,
    ) -> Result<Response, String> {
        let opaque = self.next_opaque.fetch_add(1, Ordering::Relaxed);
        cmd.opaque = opaque;
        // Signed as RocketMQ's AclClientRPCHook signs: AccessKey, then Signature over the
        // sorted extFields values and the body.
        if let Some(creds) = &self.security.credentials {
            let key = self.remoting_key.get_or_init(|| creds.remoting_key());
            ringmq_client::wire::auth::sign_remoting(&mut cmd.ext_fields, creds, key, body);
        }
        let frame = rframe::encode(&cmd, st, body).map_err(|e| format!("encoding: {e}"))?;
        let (tx, rx) = oneshot::channel();
        {
            let mut w = lock(&self.waiters);
            let Some(map) = w.as_mut() else {
                return Err(format!("connection to {} closed", self.addr));
            };
            if map.len() >= PENDING_MAX {
                return Err(format!(
                    "over {PENDING_MAX} requests waiting on the connection to {}",
                    self.addr
                ));
            }
            map.insert(opaque, tx);
        }
        let written = self.writer.lock().await.write_frame(&frame).await;
        if let Err(e) = written {
            self.forget(opaque);
            return Err(format!("writing to {}: {e}", self.addr));
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(_)) => Err(format!("connection to {} closed", self.addr)),
            Err(_) => {
                self.forget(opaque);
                Err(format!("no answer from {} within {timeout:?}", self.addr))
            }
        }
    }

    fn forget(&self, opaque: i32) {
        if let Some(map) = lock(&self.waiters).as_mut() {
            map.remove(&opaque);
        }
    }
}

/// The host of `host:port` (`[v6]:port` too): the TLS server name by default.
fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Reads frames until the connection ends, answering waiters; then fails the rest.
async fn read_loop<R: AsyncRead + Unpin>(mut read: R, waiters: Waiters) {
    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    'conn: loop {
        loop {
            match rframe::check(&buf, rframe::FRAME_BYTES_MAX) {
                Ok(Some(n)) => {
                    let frame = buf.split_to(n).freeze();
                    match split(&frame) {
                        Ok(Some(r)) => {
                            let tx = lock(&waiters)
                                .as_mut()
                                .and_then(|m| m.remove(&r.cmd.opaque));
                            if let Some(tx) = tx {
                                let _ = tx.send(r);
                            }
                        }
                        Ok(None) => {}
                        Err(e) => {
                            log::warn!("remoting: {e}; closing the connection");
                            break 'conn;
                        }
                    }
                }
                Ok(None) => {
                    let need = rframe::peek(&buf).map_or(0, |p| p.frame_len as usize);
                    buf.reserve(need.saturating_sub(buf.len()).max(READ_CHUNK_BYTES));
                    break;
                }
                Err(e) => {
                    log::warn!("remoting: bad frame from the server: {e}; closing the connection");
                    break 'conn;
                }
            }
        }
        match read.read_buf(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    // Dropping the senders fails every waiting request.
    lock(&waiters).take();
}

/// A whole frame as a response (`None`: a request from the server, ignored).
pub fn split(frame: &Bytes) -> Result<Option<Response>, String> {
    let p = rframe::parse(frame).map_err(|e| format!("unreadable frame: {e}"))?;
    if !p.command.is_response() {
        return Ok(None);
    }
    let body_at = frame.len() - p.body.len();
    Ok(Some(Response {
        cmd: p.command,
        body: frame.slice(body_at..),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_frame_splits_into_command_and_body() {
        let mut cmd = Command::response(0, 7, None);
        cmd.ext_fields.insert("queueOffset", "12");
        for st in [SerializeType::Json, SerializeType::RocketMq] {
            let frame = Bytes::from(rframe::encode(&cmd, st, b"records").expect("encodes"));
            let r = split(&frame).expect("parses").expect("a response");
            assert_eq!(r.cmd.opaque, 7);
            assert_eq!(r.cmd.ext("queueOffset"), Some("12"));
            assert_eq!(&r.body[..], b"records");
        }
        let req = Command::request(40, 3, ringmq_client::wire::remoting::ext::ExtFields::new());
        let frame = Bytes::from(rframe::encode(&req, SerializeType::Json, b"").expect("encodes"));
        assert!(split(&frame).expect("parses").is_none());
    }

    #[tokio::test]
    async fn pipelined_answers_find_their_requests() {
        // A server that answers requests in reverse order, each with its opaque as body.
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binds");
        let addr = l.local_addr().expect("bound").to_string();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.expect("accepts");
            let mut buf = BytesMut::new();
            let mut got = Vec::new();
            while got.len() < 3 {
                s.read_buf(&mut buf).await.expect("reads");
                while let Ok(Some(n)) = rframe::check(&buf, rframe::FRAME_BYTES_MAX) {
                    let f = buf.split_to(n);
                    got.push(rframe::parse(&f).expect("parses").command.opaque);
                }
            }
            for o in got.into_iter().rev() {
                let c = Command::response(0, o, None);
                let f = rframe::encode(&c, SerializeType::Json, o.to_string().as_bytes())
                    .expect("encodes");
                s.write_all(&f).await.expect("writes");
            }
            // Keep the socket open until the client is done.
            let _ = s.read_buf(&mut buf).await;
        });
        let conn = Arc::new(
            Conn::connect(&addr, &Arc::default())
                .await
                .expect("connects"),
        );
        let mut tasks = Vec::new();
        for _ in 0..3 {
            let c = Arc::clone(&conn);
            tasks.push(tokio::spawn(async move {
                let req =
                    Command::request(11, 0, ringmq_client::wire::remoting::ext::ExtFields::new());
                let r = c
                    .request(req, SerializeType::Json, b"", Duration::from_secs(5))
                    .await
                    .expect("answered");
                (r.cmd.opaque, r.body)
            }));
        }
        for t in tasks {
            let (opaque, body) = t.await.expect("task");
            assert_eq!(&body[..], opaque.to_string().as_bytes());
        }
    }
}
