//! One TCP connection to a broker shard or a name server, pipelined: any number of requests
//! (up to `requests_in_flight_max`) are in flight at once, each matched to its answer by the
//! frame's request id. A writer task drains a bounded queue of encoded frames (gathering
//! them into one vectored write, no copy); a reader task checks each frame's length before
//! buffering it ([`frame::check`]) and completes the waiting request. Written frames'
//! buffers go back to a small pool that [`Connection::begin_frame`] takes from, so a
//! steady stream of sends allocates no frame buffers.
//!
//! Invariants:
//! - A request is *written* only if it is still waited for when the writer reaches it; a
//!   request that timed out or was cancelled before that is dropped unsent, so
//!   "not written" always means "the peer never saw it" ([`Error::outcome`]).
//! - When the connection fails, every waiting request is completed with
//!   [`Error::ConnectionClosed`] (saying whether it was written), and the connection is
//!   marked closed so the pool replaces it.
//! - A request frame from the peer (broker -> client, ONEWAY) is handed to the pool's
//!   [`Inbox`] by code; the client never answers it.
//!
//! The stream is plain TCP (split into its owned halves, as before TLS existed) or, when
//! the client's [`Security`] has TLS, a rustls stream split with [`tokio::io::split`]; the
//! reader and writer are generic over the halves, so the plaintext path compiles to what it
//! was. rustls buffers what a write encrypts, so the writer flushes after every batch.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::{Decode, Encode};
use ringmq_wire::command::{read_remark, Response as WireResponse};
use ringmq_wire::frame::{self, Flags, PREFIX_BYTES};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio::task::JoinHandle;

use crate::error::{Error, Result};
use crate::net::inbox::Inbox;
use crate::security::Security;
use crate::tls::TlsStream;

/// Frames waiting for the writer, per connection (requests also hold an in-flight permit).
pub const WRITE_QUEUE_FRAMES_MAX: usize = 1024;
/// Frames are gathered into one write up to this many bytes ...
pub const WRITE_COALESCE_BYTES: usize = 256 * 1024;
/// ... and this many frames (well under the kernel's IOV_MAX of 1024).
pub const WRITE_FRAMES_MAX: usize = 64;
/// Written frame buffers kept for reuse, per connection ...
pub const FRAME_POOL_MAX: usize = 64;
/// ... of at most this capacity each (larger ones are freed).
pub const FRAME_POOL_BUFFER_BYTES_MAX: usize = 1 << 20;
/// Bytes asked of the socket per read.
pub const READ_CHUNK_BYTES: usize = 64 * 1024;

/// An answer: its status code, its header (remark first) and its body.
#[derive(Debug, Clone)]
pub struct Answer {
    pub addr: SocketAddr,
    pub code: u16,
    pub header: Bytes,
    pub body: Bytes,
}

impl Answer {
    /// The status, or [`Error::UnknownStatus`].
    pub fn status(&self) -> Result<Status> {
        Status::try_from(self.code).map_err(|_| Error::UnknownStatus {
            code: self.code,
            remark: self.remark().to_string(),
            addr: self.addr,
        })
    }

    /// The remark ("" when the header does not decode).
    pub fn remark(&self) -> &str {
        read_remark(&self.header).map(|(r, _)| r).unwrap_or("")
    }

    /// This answer if its status is one of `ok`, else [`Error::Broker`].
    pub fn expect(self, ok: &[Status]) -> Result<Self> {
        let status = self.status()?;
        if ok.contains(&status) {
            Ok(self)
        } else {
            Err(self.error(status))
        }
    }

    /// The error this answer stands for.
    pub fn error(&self, status: Status) -> Error {
        Error::Broker {
            status,
            remark: self.remark().to_string(),
            addr: self.addr,
        }
    }

    /// The command fields of the header (`None` when the peer sent only a remark).
    pub fn fields<T: Decode>(&self) -> Result<Option<T>> {
        WireResponse::<T>::decode(&self.header)
            .map(|r| r.fields)
            .map_err(|source| Error::Protocol {
                addr: self.addr,
                source,
            })
    }

    /// The command fields, which must be present.
    pub fn required_fields<T: Decode>(&self) -> Result<T> {
        self.fields()?.ok_or(Error::Protocol {
            addr: self.addr,
            source: ringmq_wire::WireError::Invalid {
                what: "response",
                detail: "fields missing",
            },
        })
    }

    /// The body decoded as `T`.
    pub fn decode_body<T: Decode>(&self) -> Result<T> {
        T::decode(&self.body).map_err(|source| Error::Protocol {
            addr: self.addr,
            source,
        })
    }
}

struct Waiter {
    request: &'static str,
    written: bool,
    tx: oneshot::Sender<Result<Answer>>,
}

struct Outgoing {
    frame: Vec<u8>,
    /// `None` for ONEWAY frames: always written.
    request_id: Option<u64>,
    /// Completed once a ONEWAY frame is written (or dropped if it cannot be).
    written: Option<oneshot::Sender<()>>,
}

#[derive(Default)]
struct Waiters {
    map: HashMap<u64, Waiter>,
    closed: bool,
}

struct Shared {
    addr: SocketAddr,
    local_addr: SocketAddr,
    waiters: Mutex<Waiters>,
    closed: AtomicBool,
    /// Where requests the peer sends us go (e.g. NOTIFY_CONSUMER_IDS_CHANGED).
    inbox: Arc<Inbox>,
    /// Written frames' buffers, for the next frames (at most [`FRAME_POOL_MAX`]).
    pool: Mutex<Vec<Vec<u8>>>,
    /// Why the connection ended, when a read or write failed (the first failure wins).
    close_cause: Mutex<Option<String>>,
    /// TLS and credentials of this client; `security.credentials` are what the write loop
    /// signs each request with (`ringmq_wire::auth`).
    security: Arc<Security>,
    /// The connection runs over TLS (not plain TCP, not in process).
    tls: bool,
    /// The broker bound this TLS connection to the account of its signed HELLO: the write
    /// loop stops signing ([`Connection::begin_session`]).
    session: AtomicBool,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Waiters> {
        self.waiters.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An empty buffer with room for `len` bytes: a pooled one when there is one.
    fn buffer(&self, len: usize) -> Vec<u8> {
        let pooled = self.pool.lock().unwrap_or_else(|p| p.into_inner()).pop();
        match pooled {
            Some(mut b) => {
                b.reserve(len);
                b
            }
            None => Vec::with_capacity(len),
        }
    }

    /// Keeps `frames`' buffers for reuse (as many as the pool holds).
    fn recycle(&self, frames: &mut Vec<Vec<u8>>) {
        let mut pool = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        for mut b in frames.drain(..) {
            if pool.len() < FRAME_POOL_MAX && b.capacity() <= FRAME_POOL_BUFFER_BYTES_MAX {
                b.clear();
                pool.push(b);
            }
        }
    }

    /// Records why the connection ends (kept if one is recorded already).
    fn set_close_cause(&self, cause: String) {
        let mut c = self.close_cause.lock().unwrap_or_else(|p| p.into_inner());
        c.get_or_insert(cause);
    }

    fn close_cause(&self) -> Option<String> {
        self.close_cause
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn fail_all(&self) {
        self.closed.store(true, Ordering::Release);
        let cause = self.close_cause();
        let drained: Vec<Waiter> = {
            let mut w = self.lock();
            w.closed = true;
            w.map.drain().map(|(_, v)| v).collect()
        };
        for w in drained {
            let _ = w.tx.send(Err(Error::ConnectionClosed {
                addr: self.addr,
                request: w.request,
                written: w.written,
                cause: cause.clone(),
            }));
        }
    }
}

/// A live connection. Cheap to share (`Arc`); dropped connections stop their tasks.
pub struct Connection {
    shared: Arc<Shared>,
    out: mpsc::Sender<Outgoing>,
    next_id: AtomicU64,
    in_flight: Arc<Semaphore>,
    in_flight_max: usize,
    tasks: [JoinHandle<()>; 2],
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let security = &self.shared.security;
        f.debug_struct("Connection")
            .field("addr", &self.shared.addr)
            .field("closed", &self.is_closed())
            .field("tls", &security.tls.is_some())
            .field(
                "access_key",
                &security.credentials.as_ref().map(|c| c.access_key()),
            )
            .finish()
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        self.shared.fail_all();
    }
}

impl Connection {
    /// Opens a TCP connection (with a TLS handshake when `security` has TLS) and starts its
    /// reader and writer. `connect_timeout` bounds the connect and the handshake together.
    pub async fn open(
        addr: SocketAddr,
        connect_timeout: Duration,
        in_flight_max: usize,
        inbox: Arc<Inbox>,
        security: Arc<Security>,
    ) -> Result<Connection> {
        let deadline = tokio::time::Instant::now() + connect_timeout;
        let timed_out = || {
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no connection within {connect_timeout:?}"),
            )
        };
        let stream = match tokio::time::timeout_at(deadline, TcpStream::connect(addr)).await {
            Ok(Ok(s)) => s,
            Ok(Err(source)) => return Err(Error::Connect { addr, source }),
            Err(_) => {
                return Err(Error::Connect {
                    addr,
                    source: timed_out(),
                })
            }
        };
        let _ = stream.set_nodelay(true);
        let local_addr = stream
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)));
        let stream = match &security.tls {
            None => Stream::Plain(stream),
            Some(connector) => {
                let host = addr.ip().to_string();
                let handshake = connector.handshake(&host, stream);
                match tokio::time::timeout_at(deadline, handshake).await {
                    Ok(Ok(s)) => Stream::Tls(Box::new(s)),
                    Ok(Err(source)) => return Err(Error::Tls { addr, source }),
                    Err(_) => {
                        return Err(Error::Tls {
                            addr,
                            source: timed_out(),
                        })
                    }
                }
            }
        };
        Ok(Self::start(
            addr,
            local_addr,
            stream,
            in_flight_max,
            inbox,
            security,
        ))
    }

    /// A connection over an in-process stream to a broker in this process (see
    /// [`InProcess`](crate::net::InProcess)): no socket and no TLS (nothing leaves the
    /// process); requests are signed as on any connection.
    pub fn in_process(
        addr: SocketAddr,
        stream: tokio::io::DuplexStream,
        in_flight_max: usize,
        inbox: Arc<Inbox>,
        security: Arc<Security>,
    ) -> Connection {
        let local_addr = SocketAddr::from(([127, 0, 0, 1], 0));
        Self::start(
            addr,
            local_addr,
            Stream::Local(stream),
            in_flight_max,
            inbox,
            security,
        )
    }

    fn start(
        addr: SocketAddr,
        local_addr: SocketAddr,
        stream: Stream,
        in_flight_max: usize,
        inbox: Arc<Inbox>,
        security: Arc<Security>,
    ) -> Connection {
        let shared = Arc::new(Shared {
            addr,
            local_addr,
            waiters: Mutex::new(Waiters::default()),
            closed: AtomicBool::new(false),
            inbox,
            pool: Mutex::new(Vec::new()),
            close_cause: Mutex::new(None),
            security,
            tls: matches!(stream, Stream::Tls(_)),
            session: AtomicBool::new(false),
        });
        let (tx, rx) = mpsc::channel(WRITE_QUEUE_FRAMES_MAX);
        let in_flight = Arc::new(Semaphore::new(in_flight_max));
        let limit = (Arc::clone(&in_flight), in_flight_max);
        let tasks = match stream {
            Stream::Plain(s) => {
                let (rd, wr) = s.into_split();
                spawn_loops(rd, wr, rx, &shared, limit)
            }
            Stream::Tls(s) => {
                let (rd, wr) = tokio::io::split(*s);
                spawn_loops(rd, wr, rx, &shared, limit)
            }
            Stream::Local(s) => {
                let (rd, wr) = tokio::io::split(s);
                spawn_loops(rd, wr, rx, &shared, limit)
            }
        };
        Connection {
            shared,
            out: tx,
            next_id: AtomicU64::new(1),
            in_flight,
            in_flight_max,
            tasks,
        }
    }

    /// This side's address (the BORNHOST of records sent on this connection).
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local_addr
    }

    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }

    /// Requests written from now on go unsigned. For a TLS connection whose signed HELLO a
    /// broker answered with `tls_session` (it bound the connection to the account); on any
    /// other connection this does nothing.
    pub fn begin_session(&self) {
        if self.shared.tls && self.shared.security.credentials.is_some() {
            self.shared.session.store(true, Ordering::Release);
        }
    }

    /// Closes the connection: waiting requests fail with [`Error::ConnectionClosed`].
    pub fn close(&self) {
        for t in &self.tasks {
            t.abort();
        }
        self.shared.fail_all();
    }

    /// Sends a request and waits up to `timeout` for its answer (any status).
    pub async fn call(
        &self,
        code: RequestCode,
        header: &(impl Encode + ?Sized),
        body: &[u8],
        timeout: Duration,
    ) -> Result<Answer> {
        let header_len = header.encoded_len()?;
        let mut frame = self.shared.buffer(PREFIX_BYTES + header_len + body.len());
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        frame::encode_request(&mut frame, code, false, id, header, body)?;
        self.call_frame(code, id, frame, timeout).await
    }

    /// Starts a frame whose body the caller appends: returns the request id and a buffer
    /// holding the prefix and header (for [`Connection::call_frame`]).
    pub fn begin_frame(
        &self,
        code: RequestCode,
        oneway: bool,
        header: &(impl Encode + ?Sized),
        body_len: usize,
    ) -> Result<(u64, Vec<u8>)> {
        let header_len = header.encoded_len()?;
        let total = frame::frame_len(header_len, body_len)?;
        let mut buf = self.shared.buffer(total);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let flags = if oneway {
            Flags::ONEWAY
        } else {
            Flags::REQUEST
        };
        frame::encode_prefix(&mut buf, code, flags, id, header_len, body_len)?;
        header.encode(&mut buf)?;
        Ok((id, buf))
    }

    /// Sends a whole request frame built with [`Connection::begin_frame`] and waits for
    /// the answer.
    pub async fn call_frame(
        &self,
        code: RequestCode,
        id: u64,
        frame: Vec<u8>,
        timeout: Duration,
    ) -> Result<Answer> {
        let addr = self.shared.addr;
        let request = code.name();
        let deadline = tokio::time::Instant::now() + timeout;
        let permit = match tokio::time::timeout_at(deadline, self.in_flight.acquire()).await {
            Ok(Ok(p)) => p,
            Ok(Err(_)) => return Err(self.closed_unwritten(request)),
            Err(_) => {
                return Err(Error::Busy {
                    addr,
                    in_flight: self.in_flight_max,
                })
            }
        };
        let (tx, rx) = oneshot::channel();
        {
            let mut w = self.shared.lock();
            if w.closed {
                return Err(self.closed_unwritten(request));
            }
            w.map.insert(
                id,
                Waiter {
                    request,
                    written: false,
                    tx,
                },
            );
        }
        let guard = WaiterGuard {
            shared: &self.shared,
            id,
        };
        let out = Outgoing {
            frame,
            request_id: Some(id),
            written: None,
        };
        self.enqueue(out, deadline, request).await?;
        let result = tokio::time::timeout_at(deadline, rx).await;
        drop(permit);
        match result {
            Ok(Ok(answer)) => {
                std::mem::forget(guard);
                answer
            }
            Ok(Err(_)) => Err(Error::ConnectionClosed {
                addr,
                request,
                written: true,
                cause: self.shared.close_cause(),
            }),
            Err(_) => {
                // Take the waiter out: if the writer never reached it, it never will.
                let written = guard.take().is_none_or(|w| w.written);
                if written {
                    Err(Error::Timeout {
                        addr,
                        request,
                        after: timeout,
                    })
                } else {
                    Err(Error::Busy {
                        addr,
                        in_flight: self.in_flight_max,
                    })
                }
            }
        }
    }

    /// Hands `out` to the writer task, waiting until `deadline` for room in its queue.
    async fn enqueue(
        &self,
        out: Outgoing,
        deadline: tokio::time::Instant,
        request: &'static str,
    ) -> Result<()> {
        match tokio::time::timeout_at(deadline, self.out.send(out)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(self.closed_unwritten(request)),
            Err(_) => Err(Error::Busy {
                addr: self.shared.addr,
                in_flight: WRITE_QUEUE_FRAMES_MAX,
            }),
        }
    }

    /// The connection closed before `request` was written.
    fn closed_unwritten(&self, request: &'static str) -> Error {
        Error::ConnectionClosed {
            addr: self.shared.addr,
            request,
            written: false,
            cause: self.shared.close_cause(),
        }
    }

    /// Sends a ONEWAY request; returns once it is written to the socket.
    pub async fn send_oneway(
        &self,
        code: RequestCode,
        frame: Vec<u8>,
        timeout: Duration,
    ) -> Result<()> {
        let addr = self.shared.addr;
        let request = code.name();
        let (tx, rx) = oneshot::channel();
        let out = Outgoing {
            frame,
            request_id: None,
            written: Some(tx),
        };
        let deadline = tokio::time::Instant::now() + timeout;
        self.enqueue(out, deadline, request).await?;
        match tokio::time::timeout_at(deadline, rx).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(Error::ConnectionClosed {
                addr,
                request,
                written: true,
                cause: self.shared.close_cause(),
            }),
            Err(_) => Err(Error::Timeout {
                addr,
                request,
                after: timeout,
            }),
        }
    }
}

/// Removes a request's waiter when the caller stops waiting (timeout or cancellation).
struct WaiterGuard<'a> {
    shared: &'a Shared,
    id: u64,
}

impl WaiterGuard<'_> {
    fn take(self) -> Option<Waiter> {
        let w = self.shared.lock().map.remove(&self.id);
        std::mem::forget(self);
        w
    }
}

impl Drop for WaiterGuard<'_> {
    fn drop(&mut self) {
        self.shared.lock().map.remove(&self.id);
    }
}

/// A connected stream, before it is split for the reader and the writer.
enum Stream {
    Plain(TcpStream),
    /// Boxed: a rustls connection is large, and this enum lives only until the split.
    Tls(Box<TlsStream>),
    /// In-process, to a broker of this process.
    Local(tokio::io::DuplexStream),
}

/// Starts the reader on `rd` and the writer on `wr`.
fn spawn_loops<R, W>(
    rd: R,
    wr: W,
    rx: mpsc::Receiver<Outgoing>,
    shared: &Arc<Shared>,
    limit: (Arc<Semaphore>, usize),
) -> [JoinHandle<()>; 2]
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let reader = tokio::spawn(read_loop(rd, Arc::clone(shared)));
    let writer = tokio::spawn(write_loop(wr, rx, Arc::clone(shared), limit));
    [reader, writer]
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut wr: W,
    mut rx: mpsc::Receiver<Outgoing>,
    shared: Arc<Shared>,
    (in_flight, in_flight_max): (Arc<Semaphore>, usize),
) {
    let mut frames: Vec<Vec<u8>> = Vec::with_capacity(WRITE_FRAMES_MAX);
    let mut dropped: Vec<Vec<u8>> = Vec::new();
    let mut notify: Vec<oneshot::Sender<()>> = Vec::new();
    // Each request is signed here, in the order it is written, so the sequence numbers the
    // broker checks arrive in order (ringmq_wire::auth).
    let mut signer = shared
        .security
        .credentials
        .as_ref()
        .map(|c| ringmq_wire::auth::Signer::new(c.clone(), connection_nonce()));
    while let Some(first) = rx.recv().await {
        if rx.is_empty() && in_flight_max - in_flight.available_permits() > 1 {
            // Other requests are out: let the tasks that are ready run first (e.g. senders
            // woken by the answers of one read), so their frames go out in this write, not
            // in one write each. (With one request out nobody else will write: a yield
            // would only cost a wake-up of another worker.)
            YieldOnce(false).await;
        }
        let mut bytes = 0;
        let mut next = Some(first);
        while let Some(item) = next.take() {
            if admit(&shared, &item) {
                let mut frame = item.frame;
                let signing = signer
                    .as_mut()
                    .filter(|_| !shared.session.load(Ordering::Acquire));
                if let Some(signer) = signing {
                    if let Err(e) = signer.sign(&mut frame, unix_ms()) {
                        // Only a frame at the size limit cannot take its trailer; the
                        // caller's wait ends in a timeout, as for any unanswered request.
                        log::warn!("signing a request to {}: {e}; not sent", shared.addr);
                        dropped.push(frame);
                        if bytes < WRITE_COALESCE_BYTES && frames.len() < WRITE_FRAMES_MAX {
                            next = rx.try_recv().ok();
                        }
                        continue;
                    }
                }
                bytes += frame.len();
                frames.push(frame);
                notify.extend(item.written);
            } else {
                dropped.push(item.frame);
            }
            if bytes < WRITE_COALESCE_BYTES && frames.len() < WRITE_FRAMES_MAX {
                next = rx.try_recv().ok();
            }
        }
        shared.recycle(&mut dropped);
        if frames.is_empty() {
            continue;
        }
        if let Err(e) = write_all_vectored(&mut wr, &frames).await {
            log::debug!("writing to {}: {e}", shared.addr);
            shared.set_close_cause(format!("writing: {e}"));
            break;
        }
        for n in notify.drain(..) {
            let _ = n.send(());
        }
        shared.recycle(&mut frames);
    }
    shared.fail_all();
}

/// A random nonce for this connection's signatures.
fn connection_nonce() -> [u8; ringmq_wire::auth::NONCE_BYTES] {
    let mut n = [0u8; ringmq_wire::auth::NONCE_BYTES];
    if getrandom::fill(&mut n).is_err() {
        // Unique without OS randomness: the clock and a process-wide counter.
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        n[..8].copy_from_slice(&unix_ms().to_be_bytes());
        n[8..].copy_from_slice(&COUNTER.fetch_add(1, Ordering::Relaxed).to_be_bytes());
    }
    n
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Returns `Pending` once, waking itself at once: the task goes to the back of its
/// worker's run queue (unlike `tokio::task::yield_now`, which defers the wake-up until the
/// worker has polled the I/O driver, one more syscall).
struct YieldOnce(bool);

impl std::future::Future for YieldOnce {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            return std::task::Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

/// Writes every byte of `frames`, in order, with as few (vectored) writes as the socket
/// takes, then flushes (a no-op on TCP; on TLS it sends what rustls still buffers).
async fn write_all_vectored<W: AsyncWrite + Unpin>(
    wr: &mut W,
    frames: &[Vec<u8>],
) -> std::io::Result<()> {
    // The first frame not written in full, and how much of it was.
    let (mut at, mut done) = (0, 0);
    while at < frames.len() {
        let mut iov = [std::io::IoSlice::new(&[]); WRITE_FRAMES_MAX];
        let mut n_iov = 0;
        for (i, f) in frames[at..].iter().take(WRITE_FRAMES_MAX).enumerate() {
            iov[i] = std::io::IoSlice::new(if i == 0 { &f[done..] } else { f });
            n_iov = i + 1;
        }
        let mut n = wr.write_vectored(&iov[..n_iov]).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while n > 0 {
            let left = frames[at].len() - done;
            if n >= left {
                n -= left;
                at += 1;
                done = 0;
            } else {
                done += n;
                n = 0;
            }
        }
        // Frames of length zero do not occur (every frame has a prefix); skip them anyway.
        while at < frames.len() && frames[at].len() == done {
            at += 1;
            done = 0;
        }
    }
    wr.flush().await
}

/// Marks a request written if its caller still waits; false: drop it unsent.
fn admit(shared: &Shared, item: &Outgoing) -> bool {
    let Some(id) = item.request_id else {
        return true;
    };
    match shared.lock().map.get_mut(&id) {
        Some(w) => {
            w.written = true;
            true
        }
        None => false,
    }
}

async fn read_loop<R: AsyncRead + Unpin>(mut rd: R, shared: Arc<Shared>) {
    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    'outer: loop {
        loop {
            match frame::check(&buf, frame::FRAME_BYTES_MAX) {
                Ok(Some(n)) => {
                    let bytes = buf.split_to(n).freeze();
                    if let Err(e) = deliver(&shared, bytes) {
                        log::warn!("{}: {e}; closing the connection", shared.addr);
                        shared.set_close_cause(format!("bad answer: {e}"));
                        break 'outer;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    log::warn!("{}: bad frame: {e}; closing the connection", shared.addr);
                    shared.set_close_cause(format!("bad frame: {e}"));
                    break 'outer;
                }
            }
        }
        // A frame bigger than the room left (a pull answer of many records) gets room for
        // all of it at once: what is in is copied once, not again at every doubling of the
        // buffer. Its length passed `frame::check`, so it is at most FRAME_BYTES_MAX.
        // (`frame::check` said it is not all in, so a known length is above `buf.len()` and
        // there is room to read into either way.)
        let frame_len = frame::peek(&buf).map_or(0, |p| p.frame_len as usize);
        if frame_len > buf.capacity() {
            buf.reserve(frame_len - buf.len());
        } else if frame_len == 0 && buf.capacity() - buf.len() < READ_CHUNK_BYTES / 2 {
            buf.reserve(READ_CHUNK_BYTES);
        }
        match rd.read_buf(&mut buf).await {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                log::debug!("reading from {}: {e}", shared.addr);
                shared.set_close_cause(format!("reading: {e}"));
                break;
            }
        }
    }
    shared.fail_all();
}

fn deliver(shared: &Shared, bytes: Bytes) -> Result<(), ringmq_wire::WireError> {
    let f = frame::parse(&bytes)?;
    if !f.is_response() {
        // A request from the peer (broker -> client): routed by code, never answered.
        shared.inbox.deliver(shared.addr, f.code, f.header, f.body);
        return Ok(());
    }
    let header = bytes.slice_ref(f.header);
    let body = bytes.slice_ref(f.body);
    let answer = Answer {
        addr: shared.addr,
        code: f.code,
        header,
        body,
    };
    let waiter = shared.lock().map.remove(&f.request_id);
    if let Some(w) = waiter {
        let _ = w.tx.send(Ok(answer));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Outcome;
    use ringmq_wire::codec::Empty;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    /// Reads `n` request frames: (request id, body).
    async fn read_frames(s: &mut TcpStream, n: usize) -> Vec<(u64, Vec<u8>)> {
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        while out.len() < n {
            buf.reserve(READ_CHUNK_BYTES);
            if s.read_buf(&mut buf).await.unwrap() == 0 {
                break;
            }
            while let Some(len) = frame::check(&buf, frame::FRAME_BYTES_MAX).unwrap() {
                let bytes = buf.split_to(len);
                let f = frame::parse(&bytes).unwrap();
                out.push((f.request_id, f.body.to_vec()));
            }
        }
        out
    }

    async fn open(addr: SocketAddr) -> Arc<Connection> {
        Arc::new(
            Connection::open(
                addr,
                Duration::from_secs(1),
                16,
                Arc::new(Inbox::new()),
                Arc::default(),
            )
            .await
            .unwrap(),
        )
    }

    /// A SEND_MESSAGE call that must fail: its error.
    async fn failed_send(conn: &Connection, timeout: Duration) -> Error {
        conn.call(RequestCode::SendMessage, &Empty, b"x", timeout)
            .await
            .unwrap_err()
    }

    #[tokio::test]
    async fn pipelined_answers_are_matched_by_request_id() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let reqs = read_frames(&mut s, 8).await;
            // Answer in reverse order, echoing each body.
            for (id, body) in reqs.iter().rev() {
                let mut out = Vec::new();
                let header = WireResponse::<Empty>::remark("echo");
                frame::encode_response(&mut out, Status::Success, *id, &header, body).unwrap();
                s.write_all(&out).await.unwrap();
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        });
        let conn = open(addr).await;
        let calls: Vec<_> = (0..8)
            .map(|i| {
                let c = Arc::clone(&conn);
                tokio::spawn(async move {
                    let body = format!("request {i}");
                    let a = c
                        .call(
                            RequestCode::GetMaxOffset,
                            &Empty,
                            body.as_bytes(),
                            Duration::from_secs(5),
                        )
                        .await
                        .unwrap();
                    (body, a)
                })
            })
            .collect();
        for c in calls {
            let (body, answer) = c.await.unwrap();
            assert_eq!(answer.body, body.as_bytes());
            assert_eq!(answer.remark(), "echo");
            assert_eq!(answer.status().unwrap(), Status::Success);
        }
        server.abort();
    }

    #[tokio::test]
    async fn many_large_frames_arrive_whole() {
        // More frames than one vectored write takes, each larger than a socket buffer
        // holds at once: partial writes resume exactly where they stopped.
        const CALLS: usize = 2 * WRITE_FRAMES_MAX + 3;
        const BODY_BYTES: usize = 200 * 1024;
        let body = |i: usize| -> Vec<u8> {
            let mut b = vec![(i % 251) as u8; BODY_BYTES];
            b[..8].copy_from_slice(&(i as u64).to_be_bytes());
            b
        };
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let reqs = read_frames(&mut s, CALLS).await;
            for (id, body) in &reqs {
                let mut out = Vec::new();
                let header = WireResponse::<Empty>::remark("ok");
                let len = (body.len() as u64).to_be_bytes();
                frame::encode_response(&mut out, Status::Success, *id, &header, &len).unwrap();
                s.write_all(&out).await.unwrap();
            }
            reqs
        });
        let conn = Arc::new(
            Connection::open(
                addr,
                Duration::from_secs(1),
                CALLS,
                Arc::new(Inbox::new()),
                Arc::default(),
            )
            .await
            .unwrap(),
        );
        let calls: Vec<_> = (0..CALLS)
            .map(|i| {
                let c = Arc::clone(&conn);
                let b = body(i);
                tokio::spawn(async move {
                    c.call(
                        RequestCode::SendMessage,
                        &Empty,
                        &b,
                        Duration::from_secs(20),
                    )
                    .await
                    .unwrap()
                })
            })
            .collect();
        for c in calls {
            let answer = c.await.unwrap();
            assert_eq!(answer.body.as_ref(), (BODY_BYTES as u64).to_be_bytes());
        }
        let reqs = server.await.unwrap();
        assert_eq!(reqs.len(), CALLS);
        let mut seen: Vec<usize> = reqs
            .iter()
            .map(|(_, b)| {
                (0..CALLS)
                    .find(|&i| *b == body(i))
                    .expect("a body sent whole")
            })
            .collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..CALLS).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn lost_connection_and_timeout_are_unknown_outcomes() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            // First connection: read one request and hang up.
            let (mut s, _) = listener.accept().await.unwrap();
            read_frames(&mut s, 1).await;
            drop(s);
            // Second: read and never answer.
            let (mut s, _) = listener.accept().await.unwrap();
            read_frames(&mut s, 1).await;
            tokio::time::sleep(Duration::from_secs(5)).await;
        });
        let conn = open(addr).await;
        let e = failed_send(&conn, Duration::from_secs(5)).await;
        assert!(
            matches!(e, Error::ConnectionClosed { written: true, .. }),
            "{e}"
        );
        assert_eq!(e.outcome(), Outcome::Unknown);
        assert!(conn.is_closed());
        let e = failed_send(&conn, Duration::from_secs(1)).await;
        assert_eq!(
            e.outcome(),
            Outcome::NotStored,
            "a closed connection sends nothing: {e}"
        );

        let conn = open(addr).await;
        let e = failed_send(&conn, Duration::from_millis(200)).await;
        assert!(matches!(e, Error::Timeout { .. }), "{e}");
        assert_eq!(e.outcome(), Outcome::Unknown);
        server.abort();
    }

    #[tokio::test]
    async fn a_broker_request_reaches_the_inbox_between_answers() {
        use ringmq_wire::command::NotifyConsumerIdsChanged;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let reqs = read_frames(&mut s, 1).await;
            let mut out = Vec::new();
            // The broker's notice first (its own request id space), then the answer.
            let notice = NotifyConsumerIdsChanged {
                consumer_group: "g".into(),
            };
            frame::encode_request(
                &mut out,
                RequestCode::NotifyConsumerIdsChanged,
                true,
                reqs[0].0,
                &notice,
                &[],
            )
            .unwrap();
            let header = WireResponse::<Empty>::remark("");
            frame::encode_response(&mut out, Status::Success, reqs[0].0, &header, b"ok").unwrap();
            s.write_all(&out).await.unwrap();
            tokio::time::sleep(Duration::from_secs(2)).await;
        });
        let inbox = Arc::new(Inbox::new());
        let woken = inbox.register_group("g");
        let conn = Connection::open(
            addr,
            Duration::from_secs(1),
            16,
            Arc::clone(&inbox),
            Arc::default(),
        )
        .await
        .unwrap();
        let answer = conn
            .call(RequestCode::HeartBeat, &Empty, b"", Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(
            answer.body, "ok",
            "the notice, with the same request id, is not taken for the answer"
        );
        tokio::time::timeout(Duration::from_secs(5), woken.notified())
            .await
            .expect("the group was woken");
        assert!(!conn.is_closed());
        server.abort();
    }
}
