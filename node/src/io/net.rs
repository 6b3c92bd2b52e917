//! Sockets of a shard: SO_REUSEPORT listeners (every shard accepts on the broker port), TCP
//! connections with owned-buffer reads and writes, zero-copy sends from a log file
//! (splice file -> pipe -> socket, both io_uring operations), and the hand-off of a
//! connection to another shard's thread. A TLS connection ([`Conn::Tls`], see [`super::tls`])
//! carries its session along when handed off, and its log bytes are read from the file and
//! encrypted instead of spliced ([`Conn::write_file`]). Inside a simulated world, listeners
//! and connections are [`super::sim::net`]'s (no zero copy, no hand-off, no TLS).

use std::fs::File;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use compio::buf::BufResult;
use compio::io::{AsyncReadExt, AsyncWriteExt};
use compio::net::{TcpListener, TcpStream};
use socket2::{Domain, Protocol, Socket, Type};

use super::local::{LocalConn, LocalStream};
use super::sim;
use super::sim::net::{SimConn, SimListener};
use super::tls::{TlsClient, TlsServer, TlsStream};

/// Backlog of each listener.
pub const LISTEN_BACKLOG: i32 = 1024;
/// Pipe size used for splicing log bytes to sockets.
pub const SPLICE_PIPE_BYTES: usize = 1 << 20;

/// `count` std listeners on one port, each bound with SO_REUSEPORT so each shard accepts on
/// its own (port 0: any free port, the same for all). SO_REUSEPORT would also let another
/// process of the same user join the port and take a share of its connections, so a port
/// already served is refused first ([`ensure_port_free`]).
pub fn bind_shared(addr: SocketAddr, count: usize) -> io::Result<Vec<std::net::TcpListener>> {
    while_port_busy(|| ensure_port_free(addr))?;
    let first = bind_reuseport(addr)?;
    let addr = SocketAddr::new(addr.ip(), first.local_addr()?.port());
    let mut out = vec![first];
    for _ in 1..count {
        out.push(bind_reuseport(addr)?);
    }
    Ok(out)
}

/// A std listener of its own on `addr` (no SO_REUSEPORT): refused while anything listens on
/// the port.
pub fn bind_exclusive(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    let socket = while_port_busy(|| {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        socket.set_reuse_address(true)?;
        socket.set_nonblocking(true)?;
        socket.bind(&addr.into()).map_err(in_use)?;
        Ok(socket)
    })?;
    socket.listen(LISTEN_BACKLOG)?;
    Ok(socket.into())
}

/// How long a start waits for a port in use to be let go. A process killed with SIGKILL
/// keeps its listeners for a moment after it exits: the kernel closes sockets that its
/// io_uring still references (a pending accept) when it tears the ring down, after the
/// process is gone, so a restart right after a kill -9 finds the port still taken.
pub const PORT_BUSY_WAIT: Duration = Duration::from_secs(5);

/// Runs `bind` until it does not fail with `AddrInUse`, for at most [`PORT_BUSY_WAIT`].
fn while_port_busy<T>(mut bind: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    let deadline = std::time::Instant::now() + PORT_BUSY_WAIT;
    loop {
        match bind() {
            Err(e)
                if e.kind() == io::ErrorKind::AddrInUse && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

/// Fails with `AddrInUse` when a socket listens on `addr`'s port: a bind without
/// SO_REUSEPORT (SO_REUSEADDR only, so connections of an earlier run in TIME_WAIT do not
/// count) conflicts with every listener there, SO_REUSEPORT ones included. Two processes
/// starting on one port in the same instant can both pass; the data directory's lock
/// (`dir_lock`) still keeps two nodes off one store.
fn ensure_port_free(addr: SocketAddr) -> io::Result<()> {
    if addr.port() == 0 {
        return Ok(());
    }
    let probe = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    probe.set_reuse_address(true)?;
    probe.bind(&addr.into()).map_err(in_use)
}

/// Says what EADDRINUSE means for a node.
fn in_use(e: io::Error) -> io::Error {
    if e.kind() == io::ErrorKind::AddrInUse {
        io::Error::new(
            io::ErrorKind::AddrInUse,
            "the port is in use: another process listens on it",
        )
    } else {
        e
    }
}

fn bind_reuseport(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(LISTEN_BACKLOG)?;
    Ok(socket.into())
}

/// A listener on a shard's loop.
pub enum Listener {
    Tcp(TcpListener),
    Sim(SimListener),
}

impl Listener {
    pub fn from_std(l: std::net::TcpListener) -> io::Result<Self> {
        Ok(Listener::Tcp(TcpListener::from_std(l)?))
    }

    /// Listens on `addr` in the simulated world installed on this thread.
    pub fn bind_sim(addr: SocketAddr) -> io::Result<Self> {
        let world = sim::current().ok_or_else(|| io::Error::other("no simulated world"))?;
        Ok(Listener::Sim(SimListener::bind(&world, addr)?))
    }

    pub async fn accept(&self) -> io::Result<(Conn, SocketAddr)> {
        match self {
            Listener::Tcp(l) => {
                let (s, peer) = l.accept().await?;
                let _ = s.set_nodelay(true);
                Ok((Conn::Tcp(s), peer))
            }
            Listener::Sim(l) => {
                let (c, peer) = l.accept().await?;
                Ok((Conn::Sim(c), peer))
            }
        }
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Listener::Tcp(l) => l.local_addr(),
            Listener::Sim(l) => Ok(l.local_addr()),
        }
    }
}

/// A connection. Clones share the socket (one reader task, one writer task).
#[derive(Clone)]
pub enum Conn {
    Tcp(TcpStream),
    /// TLS over TCP: reads decrypt, writes encrypt (the session is shared by the clones).
    Tls(TlsStream),
    Sim(SimConn),
    /// An in-process connection from an edge of this process ([`super::local`]): no socket.
    Local(LocalConn),
}

/// A connection on its way to another shard's thread: a duplicate of its socket and, for TLS,
/// its session (rustls sessions are `Send`; everything else of the connection stays behind),
/// or an in-process connection's stream.
pub enum Handed {
    Socket {
        stream: std::net::TcpStream,
        tls: Option<Box<rustls::ServerConnection>>,
    },
    Local(LocalStream),
}

impl Handed {
    /// An in-process connection (`super::local`) for a shard to serve.
    pub fn local(stream: LocalStream) -> Self {
        Handed::Local(stream)
    }
}

impl std::fmt::Debug for Handed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Handed::Socket { stream, tls } => f
                .debug_struct("Handed")
                .field("fd", &stream.as_raw_fd())
                .field("tls", &tls.is_some())
                .finish(),
            Handed::Local(_) => f.write_str("Handed::Local"),
        }
    }
}

impl Conn {
    pub async fn connect(addr: SocketAddr) -> io::Result<Self> {
        Self::connect_with(addr, None).await
    }

    /// Connects, over TLS when `tls` is given (the server's certificate must name `addr`'s
    /// IP address when the client verifies servers).
    pub async fn connect_with(addr: SocketAddr, tls: Option<&TlsClient>) -> io::Result<Self> {
        if let Some(world) = sim::current() {
            if tls.is_some() {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "TLS is not simulated",
                ));
            }
            return SimConn::connect(&world, addr).map(Conn::Sim);
        }
        let s = TcpStream::connect(addr).await?;
        let _ = s.set_nodelay(true);
        match tls {
            None => Ok(Conn::Tcp(s)),
            Some(client) => Ok(Conn::Tls(client.connect(s, addr).await?)),
        }
    }

    /// Runs the server side of a TLS handshake on an accepted plaintext connection whose
    /// first bytes (`first`, already read) begin a TLS record.
    pub async fn accept_tls(self, server: &TlsServer, first: Vec<u8>) -> io::Result<Conn> {
        match self {
            Conn::Tcp(s) => Ok(Conn::Tls(server.accept(s, first).await?)),
            _ => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "TLS is accepted on plain TCP connections only",
            )),
        }
    }

    pub fn is_tls(&self) -> bool {
        matches!(self, Conn::Tls(_))
    }

    /// Log bytes can be spliced into it (a plain TCP socket); the others take copies.
    pub fn splices(&self) -> bool {
        matches!(self, Conn::Tcp(_))
    }

    /// Adopts a connection handed over from another shard. The socket keeps the blocking
    /// mode the loop's driver gave it (compio makes it non-blocking for an epoll loop only):
    /// on io_uring a non-blocking socket makes a splice into it fail with EAGAIN whenever its
    /// send buffer is full, instead of waiting.
    pub fn from_std(h: Handed) -> io::Result<Self> {
        let (stream, tls) = match h {
            Handed::Socket { stream, tls } => (stream, tls),
            Handed::Local(s) => return Ok(Conn::Local(LocalConn::new(s))),
        };
        let c = TcpStream::from_std(stream)?;
        let _ = c.set_nodelay(true);
        Ok(match tls {
            None => Conn::Tcp(c),
            Some(session) => Conn::Tls(TlsStream::adopt(c, session)),
        })
    }

    /// A duplicate of the socket (and the TLS session) to hand to another shard; the caller
    /// drops this `Conn` (and its clones) afterwards: a TLS one is dead once its session is
    /// taken. Simulated connections are never handed off.
    pub fn to_std(&self) -> io::Result<Handed> {
        let dup = |s: &TcpStream| -> io::Result<std::net::TcpStream> {
            let owned: OwnedFd = s.as_fd().try_clone_to_owned()?;
            Ok(std::net::TcpStream::from(owned))
        };
        match self {
            Conn::Tcp(s) => Ok(Handed::Socket {
                stream: dup(s)?,
                tls: None,
            }),
            Conn::Tls(t) => {
                let stream = dup(t.socket())?;
                Ok(Handed::Socket {
                    stream,
                    tls: Some(t.take_server()?),
                })
            }
            Conn::Local(l) => Ok(Handed::Local(l.take()?)),
            Conn::Sim(_) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "a simulated connection cannot change threads",
            )),
        }
    }

    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Conn::Tcp(s) => s.peer_addr(),
            Conn::Tls(t) => t.socket().peer_addr(),
            Conn::Sim(c) => Ok(c.peer_addr()),
            Conn::Local(l) => Ok(l.peer_addr()),
        }
    }

    /// Reads what is available into the spare capacity of `buf` (appending). 0 = closed.
    pub async fn read_append(&self, mut buf: Vec<u8>) -> (io::Result<usize>, Vec<u8>) {
        match self {
            Conn::Tcp(s) => {
                let mut s = s;
                let BufResult(res, buf) = s.append(buf).await;
                (res, buf)
            }
            Conn::Tls(t) => t.read_append(buf).await,
            Conn::Sim(c) => {
                let res = c.read_append(&mut buf).await;
                (res, buf)
            }
            Conn::Local(l) => {
                let res = l.read_append(&mut buf).await;
                (res, buf)
            }
        }
    }

    /// Writes all of `buf`.
    pub async fn write_all(&self, buf: Vec<u8>) -> (io::Result<()>, Vec<u8>) {
        match self {
            Conn::Tcp(s) => {
                let mut s = s;
                let BufResult(res, buf) = s.write_all(buf).await;
                (res, buf)
            }
            Conn::Tls(t) => t.write_all(buf).await,
            Conn::Sim(c) => {
                let res = c.write(&buf);
                (res, buf)
            }
            Conn::Local(l) => {
                let res = l.write_all(&buf).await;
                (res, buf)
            }
        }
    }

    /// Writes all of `head`, then all of `body`: on TCP one vectored send for both (the
    /// body is not copied into `head` first), so the reader wakes once for the two. Gives
    /// both buffers back.
    pub async fn write_two(
        &self,
        head: Vec<u8>,
        body: Vec<u8>,
    ) -> (io::Result<()>, Vec<u8>, Vec<u8>) {
        match self {
            Conn::Tcp(s) => {
                let mut s = s;
                let BufResult(res, [head, body]) = s.write_vectored_all([head, body]).await;
                (res, head, body)
            }
            Conn::Tls(t) => {
                let (res, head) = t.write_all(head).await;
                if res.is_err() {
                    return (res, head, body);
                }
                let res = t.write_slice(&body).await;
                (res, head, body)
            }
            Conn::Sim(c) => {
                let res = c.write(&head).and_then(|()| c.write(&body));
                (res, head, body)
            }
            Conn::Local(l) => {
                let res = match l.write_all(&head).await {
                    Ok(()) => l.write_all(&body).await,
                    Err(e) => Err(e),
                };
                (res, head, body)
            }
        }
    }

    /// Writes all of `head`, then every part of `parts` (views of the log's mapping): on TCP
    /// one vectored send for all, the parts not copied by this process (the kernel copies
    /// them from the mapping into the socket). Gives `head` back.
    pub async fn write_shared(
        &self,
        head: Vec<u8>,
        parts: Vec<bytes::Bytes>,
    ) -> (io::Result<()>, Vec<u8>) {
        match self {
            Conn::Tcp(s) => {
                let mut s = s;
                let BufResult(res, (head, _parts)) = s.write_vectored_all((head, parts)).await;
                (res, head)
            }
            Conn::Tls(t) => {
                let (mut res, head) = t.write_all(head).await;
                for p in &parts {
                    if res.is_err() {
                        break;
                    }
                    res = t.write_slice(p).await;
                }
                (res, head)
            }
            Conn::Sim(c) => {
                let mut res = c.write(&head);
                for p in &parts {
                    res = res.and_then(|()| c.write(p));
                }
                (res, head)
            }
            Conn::Local(l) => {
                let mut res = l.write_all(&head).await;
                for p in &parts {
                    if res.is_err() {
                        break;
                    }
                    res = l.write_all(p).await;
                }
                (res, head)
            }
        }
    }

    pub async fn shutdown(&self) {
        match self {
            Conn::Tcp(s) => {
                let mut s = s;
                let _ = compio::io::AsyncWrite::shutdown(&mut s).await;
            }
            Conn::Tls(t) => t.shutdown().await,
            Conn::Sim(c) => c.shutdown(),
            Conn::Local(l) => l.shutdown().await,
        }
    }

    /// Sends `len` bytes of `file` from `offset` through a TLS connection: read in chunks on
    /// the loop (io_uring reads: a cold page does not stall the shard), encrypted, written.
    /// Splicing cannot pass through a user-space TLS session.
    pub async fn write_file(&self, file: &SharedFile, offset: u64, len: usize) -> io::Result<()> {
        let Conn::Tls(t) = self else {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "write_file is the TLS path; plain connections splice",
            ));
        };
        let mut buf = Vec::with_capacity(super::tls::WRITE_CHUNK_BYTES.min(len));
        let mut sent = 0usize;
        while sent < len {
            let want = (len - sent).min(super::tls::WRITE_CHUNK_BYTES);
            buf.clear();
            while buf.len() < want {
                let at = offset + (sent + buf.len()) as u64;
                let rest = want - buf.len();
                let (res, b) = file.read_at(buf, at, rest).await;
                buf = b;
                if res? == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("log file ended at {at} while sending {len} bytes from {offset}"),
                    ));
                }
            }
            t.write_slice(&buf).await?;
            sent += want;
        }
        Ok(())
    }
}

/// A pipe used to splice file bytes into a socket without copying them through user space.
pub struct SplicePipe {
    rx: compio::fs::pipe::Receiver,
    tx: compio::fs::pipe::Sender,
    /// What the pipe holds at most (the kernel may refuse the size asked for).
    capacity: usize,
}

/// One stretch of a log file to send.
pub struct FileRun<'a> {
    pub file: &'a SharedFile,
    pub offset: u64,
    pub len: usize,
}

impl SplicePipe {
    pub async fn new() -> io::Result<Self> {
        let (rx, tx) = compio::fs::pipe::anonymous().await?;
        // A larger pipe means fewer splice pairs per run; failure just keeps the default.
        let _ = nix::fcntl::fcntl(
            tx.as_raw_fd(),
            nix::fcntl::FcntlArg::F_SETPIPE_SZ(SPLICE_PIPE_BYTES as i32),
        );
        let capacity = nix::fcntl::fcntl(tx.as_raw_fd(), nix::fcntl::FcntlArg::F_GETPIPE_SZ)
            .ok()
            .and_then(|n| usize::try_from(n).ok())
            .filter(|&n| n > 0)
            .unwrap_or(64 * 1024);
        Ok(SplicePipe { rx, tx, capacity })
    }

    /// Sends `head` (already encoded bytes, such as a response's header), then `runs`: the
    /// head is written into the pipe and the runs spliced in behind it, and the pipe is
    /// spliced to the socket only when full or at the end. A response of one run that fits
    /// the pipe so goes out in one socket send, which wakes its reader once. A head larger
    /// than half the pipe is written to the socket on its own first. Gives `head`'s buffer
    /// back.
    pub async fn send(
        &self,
        head: Vec<u8>,
        runs: &[FileRun<'_>],
        conn: &Conn,
    ) -> (io::Result<()>, Vec<u8>) {
        let mut in_pipe = 0usize;
        let head = if head.is_empty() {
            head
        } else if head.len() > self.capacity / 2 {
            let (res, head) = conn.write_all(head).await;
            if let Err(e) = res {
                return (Err(e), head);
            }
            head
        } else {
            let len = head.len();
            let mut tx = &self.tx;
            let BufResult(res, head) = tx.write_all(head).await;
            if let Err(e) = res {
                return (Err(e), head);
            }
            in_pipe = len;
            head
        };
        (self.send_runs(in_pipe, runs, conn).await, head)
    }

    /// Splices `runs` into the pipe behind the `in_pipe` bytes it holds, and everything to
    /// the socket.
    async fn send_runs(
        &self,
        mut in_pipe: usize,
        runs: &[FileRun<'_>],
        conn: &Conn,
    ) -> io::Result<()> {
        let Conn::Tcp(sock) = conn else {
            // TLS connections take `Conn::write_file`; simulated ones copy.
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "splice to a simulated connection",
            ));
        };
        for run in runs {
            let mut sent = 0usize;
            while sent < run.len {
                let room = self.capacity - in_pipe;
                if room == 0 {
                    self.drain(in_pipe, sock).await?;
                    in_pipe = 0;
                    continue;
                }
                let want = (run.len - sent).min(room);
                // A pipe holds pages, not bytes (a run that starts mid-page takes one page
                // more than its bytes), so it can be full with fewer bytes than its size.
                // While it holds something the splice does not wait for room: the pipe is
                // drained and the splice tried again, instead of waiting for a reader that
                // is this very task. An empty pipe always has room.
                let mut op = compio::fs::pipe::splice(&run.file.0, &self.tx, want)
                    .offset_in((run.offset + sent as u64) as i64);
                if in_pipe > 0 {
                    op = op.flags(libc::SPLICE_F_NONBLOCK);
                }
                let n = match op.await {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock && in_pipe > 0 => {
                        self.drain(in_pipe, sock).await?;
                        in_pipe = 0;
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                if n == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "log file ended during splice",
                    ));
                }
                in_pipe += n;
                sent += n;
            }
        }
        self.drain(in_pipe, sock).await
    }

    /// Splices `n` bytes from the pipe to the socket.
    async fn drain(&self, n: usize, sock: &TcpStream) -> io::Result<()> {
        let mut out = 0;
        while out < n {
            let m = match compio::fs::pipe::splice(&self.rx, sock, n - out).await {
                Ok(m) => m,
                // A non-blocking socket with a full send buffer: io_uring returns the
                // EAGAIN of the splice instead of waiting, so wait here.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let fd = sock.as_fd().try_clone_to_owned()?;
                    let op = compio::driver::op::PollOnce::new(
                        fd,
                        compio::driver::op::Interest::Writable,
                    );
                    compio::runtime::submit(op).await.0?;
                    continue;
                }
                Err(e) => return Err(e),
            };
            if m == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "peer closed during splice",
                ));
            }
            out += m;
        }
        Ok(())
    }
}

/// A log file opened for zero-copy sends on this loop.
#[derive(Clone)]
pub struct SharedFile(compio::driver::SharedFd<File>);

impl std::fmt::Debug for SharedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedFile")
    }
}

impl SharedFile {
    /// fdatasync on the loop's ring: the shard keeps serving while the disk works.
    pub async fn sync_data(&self) -> io::Result<()> {
        let op = compio::driver::op::Sync::new(self.0.clone(), true);
        compio::runtime::submit(op).await.0?;
        Ok(())
    }

    /// A descriptor of its own for the same file (for a helper thread).
    pub fn try_clone_std(&self) -> io::Result<File> {
        use std::os::fd::AsFd;
        Ok(File::from(self.0.as_fd().try_clone_to_owned()?))
    }

    /// Opens directory `dir` for an fsync on the loop's ring ([`Self::sync_data`]).
    pub fn open_dir(dir: &std::path::Path) -> io::Result<Self> {
        Ok(SharedFile(compio::driver::SharedFd::new(File::open(dir)?)))
    }

    /// Reads up to `max` bytes at `offset` into the spare capacity of `buf` (appending), on
    /// the loop's ring. 0 = end of file.
    pub async fn read_at(
        &self,
        buf: Vec<u8>,
        offset: u64,
        max: usize,
    ) -> (io::Result<usize>, Vec<u8>) {
        use compio::buf::IoBuf;
        let start = buf.len();
        let mut buf = buf;
        buf.reserve(max);
        let end = start + max;
        let op = compio::driver::op::ReadAt::new(self.0.clone(), offset, buf.slice(start..end));
        let BufResult(res, op) = compio::runtime::submit(op).await;
        let slice = compio::buf::IntoInner::into_inner(op);
        let mut buf = compio::buf::IntoInner::into_inner(slice);
        if let Ok(n) = res {
            // SAFETY: the kernel initialized `n` bytes after `start` (n <= max).
            unsafe { buf.set_len(start + n) };
        }
        (res, buf)
    }

    /// Opens a duplicate of `file`'s descriptor for this loop.
    pub fn dup(file: &File) -> io::Result<Self> {
        let fd: OwnedFd = file.as_fd().try_clone_to_owned()?;
        Ok(SharedFile(compio::driver::SharedFd::new(File::from(fd))))
    }
}

/// Builds a std stream from a raw descriptor received from another thread.
///
/// # Safety
/// `fd` must be an open socket descriptor that nothing else owns.
pub unsafe fn stream_from_raw(fd: i32) -> std::net::TcpStream {
    // SAFETY: the caller guarantees exclusive ownership of an open socket fd.
    unsafe { std::net::TcpStream::from_raw_fd(fd) }
}

/// The descriptor number (for logs).
pub fn raw_fd(s: &std::net::TcpStream) -> i32 {
    s.as_raw_fd()
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::time::Duration;

    use super::*;

    /// A connection handed to another shard (`to_std` / `from_std`) takes a zero-copy send
    /// larger than what the socket buffers hold while its peer is not reading yet: the splice
    /// waits for room instead of failing with EAGAIN (a replication link handed to the shard
    /// it subscribes to broke on every catch-up larger than its buffers).
    #[test]
    fn a_handed_off_connection_takes_a_splice_larger_than_its_socket_buffers() {
        const LEN: usize = 16 << 20;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("segment");
        std::fs::write(&path, vec![7u8; LEN]).unwrap();
        let std_listener = bind_reuseport(SocketAddr::from(([127, 0, 0, 1], 0))).unwrap();
        let addr = std_listener.local_addr().unwrap();
        let lp = super::super::rt::EventLoop::new(None, false).unwrap();
        lp.block_on(async move {
            let listener = Listener::from_std(std_listener).unwrap();
            let reader = std::thread::spawn(move || {
                let mut s = std::net::TcpStream::connect(addr).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                // Not reading for a while lets the sender fill both socket buffers.
                std::thread::sleep(Duration::from_millis(300));
                let mut buf = vec![0u8; 1 << 16];
                let mut got = 0usize;
                loop {
                    match s.read(&mut buf).expect("reading the spliced bytes") {
                        0 => return got,
                        n => got += n,
                    }
                }
            });
            let (conn, _) = listener.accept().await.unwrap();
            let handed = conn.to_std().unwrap();
            drop(conn);
            let conn = Conn::from_std(handed).unwrap();
            let file = SharedFile::dup(&File::open(&path).unwrap()).unwrap();
            let pipe = SplicePipe::new().await.unwrap();
            let run = FileRun {
                file: &file,
                offset: 0,
                len: LEN,
            };
            pipe.send(Vec::new(), &[run], &conn)
                .await
                .0
                .expect("the splice waits for the peer instead of failing");
            conn.shutdown().await;
            drop(conn);
            assert_eq!(reader.join().unwrap(), LEN);
        });
    }

    /// A head and several runs go out in order, byte for byte, through a pipe smaller than
    /// the whole (each run crossing a refill), and the head's buffer comes back.
    #[test]
    fn a_head_and_runs_pass_through_a_small_pipe_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("segment");
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let std_listener = bind_reuseport(SocketAddr::from(([127, 0, 0, 1], 0))).unwrap();
        let addr = std_listener.local_addr().unwrap();
        let runs = [(10u64, 30_000usize), (50_000, 70_000), (190_000, 10_000)];
        let head = b"response header".to_vec();
        let mut want = head.clone();
        for (o, l) in runs {
            want.extend_from_slice(&data[o as usize..o as usize + l]);
        }
        let lp = super::super::rt::EventLoop::new(None, false).unwrap();
        let got = lp.block_on(async move {
            let listener = Listener::from_std(std_listener).unwrap();
            let reader = std::thread::spawn(move || {
                let mut s = std::net::TcpStream::connect(addr).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                let mut all = Vec::new();
                s.read_to_end(&mut all).expect("reading the spliced bytes");
                all
            });
            let (conn, _) = listener.accept().await.unwrap();
            let file = SharedFile::dup(&File::open(&path).unwrap()).unwrap();
            let mut pipe = SplicePipe::new().await.unwrap();
            // The smallest pipe the kernel gives: one page.
            nix::fcntl::fcntl(
                pipe.tx.as_raw_fd(),
                nix::fcntl::FcntlArg::F_SETPIPE_SZ(4096),
            )
            .unwrap();
            pipe.capacity = 4096;
            let files: Vec<FileRun<'_>> = runs
                .iter()
                .map(|&(offset, len)| FileRun {
                    file: &file,
                    offset,
                    len,
                })
                .collect();
            let (res, back) = pipe.send(head.clone(), &files, &conn).await;
            res.unwrap();
            assert_eq!(back, head, "the head's buffer comes back");
            conn.shutdown().await;
            drop(conn);
            reader.join().unwrap()
        });
        assert_eq!(got.len(), want.len());
        assert!(got == want, "bytes out of order or changed");
    }
}
