//! Sockets of a shard: SO_REUSEPORT listeners (every shard accepts on the broker port), TCP
//! connections with owned-buffer reads and writes, zero-copy sends from a log file
//! (splice file -> pipe -> socket, both io_uring operations), and the hand-off of a
//! connection to another shard's thread. Inside a simulated world, listeners and connections
//! are [`super::sim_net`]'s (no zero copy, no hand-off).

use std::fs::File;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

use compio::buf::BufResult;
use compio::io::{AsyncReadExt, AsyncWriteExt};
use compio::net::{TcpListener, TcpStream};
use socket2::{Domain, Protocol, Socket, Type};

use super::sim;
use super::sim_net::{SimConn, SimListener};

/// Backlog of each listener.
pub const LISTEN_BACKLOG: i32 = 1024;
/// Pipe size used for splicing log bytes to sockets.
pub const SPLICE_PIPE_BYTES: usize = 1 << 20;

/// A std listener bound with SO_REUSEPORT so each shard can have its own on one port.
pub fn bind_reuseport(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
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
    Sim(SimConn),
}

impl Conn {
    pub async fn connect(addr: SocketAddr) -> io::Result<Self> {
        if let Some(world) = sim::current() {
            return SimConn::connect(&world, addr).map(Conn::Sim);
        }
        let s = TcpStream::connect(addr).await?;
        let _ = s.set_nodelay(true);
        Ok(Conn::Tcp(s))
    }

    /// Adopts a connection handed over from another shard.
    pub fn from_std(s: std::net::TcpStream) -> io::Result<Self> {
        s.set_nonblocking(true)?;
        let c = TcpStream::from_std(s)?;
        let _ = c.set_nodelay(true);
        Ok(Conn::Tcp(c))
    }

    /// A duplicate of the socket as a std stream, to hand to another shard; the caller drops
    /// this `Conn` (and its clones) afterwards. Simulated connections are never handed off.
    pub fn to_std(&self) -> io::Result<std::net::TcpStream> {
        match self {
            Conn::Tcp(s) => {
                let owned: OwnedFd = s.as_fd().try_clone_to_owned()?;
                Ok(std::net::TcpStream::from(owned))
            }
            Conn::Sim(_) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "a simulated connection cannot change threads",
            )),
        }
    }

    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Conn::Tcp(s) => s.peer_addr(),
            Conn::Sim(c) => Ok(c.peer_addr()),
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
            Conn::Sim(c) => {
                let res = c.read_append(&mut buf).await;
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
            Conn::Sim(c) => {
                let res = c.write(&buf);
                (res, buf)
            }
        }
    }

    pub async fn shutdown(&self) {
        match self {
            Conn::Tcp(s) => {
                let mut s = s;
                let _ = compio::io::AsyncWrite::shutdown(&mut s).await;
            }
            Conn::Sim(c) => c.shutdown(),
        }
    }
}

/// A pipe used to splice file bytes into a socket without copying them through user space.
pub struct SplicePipe {
    rx: compio::fs::pipe::Receiver,
    tx: compio::fs::pipe::Sender,
}

impl SplicePipe {
    pub async fn new() -> io::Result<Self> {
        let (rx, tx) = compio::fs::pipe::anonymous().await?;
        // A larger pipe means fewer splice pairs per run; failure just keeps the default.
        let _ = nix::fcntl::fcntl(
            tx.as_raw_fd(),
            nix::fcntl::FcntlArg::F_SETPIPE_SZ(SPLICE_PIPE_BYTES as i32),
        );
        Ok(SplicePipe { rx, tx })
    }

    /// Sends `len` bytes of `file` from `offset` to `conn`: splice file -> pipe, then
    /// pipe -> socket, until done.
    pub async fn send_file(
        &self,
        file: &SharedFile,
        offset: u64,
        len: usize,
        conn: &Conn,
    ) -> io::Result<()> {
        let mut sent = 0usize;
        while sent < len {
            let want = (len - sent).min(SPLICE_PIPE_BYTES);
            let n = compio::fs::pipe::splice(&file.0, &self.tx, want)
                .offset_in((offset + sent as u64) as i64)
                .await?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "log file ended during splice",
                ));
            }
            let mut out = 0;
            while out < n {
                let Conn::Tcp(sock) = conn else {
                    return Err(io::Error::new(
                        io::ErrorKind::Unsupported,
                        "splice to a simulated connection",
                    ));
                };
                let m = compio::fs::pipe::splice(&self.rx, sock, n - out).await?;
                if m == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        "peer closed during splice",
                    ));
                }
                out += m;
            }
            sent += n;
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

    /// Opens directory `dir` for an fsync on the loop's ring ([`Self::sync_data`]).
    pub fn open_dir(dir: &std::path::Path) -> io::Result<Self> {
        Ok(SharedFile(compio::driver::SharedFd::new(File::open(dir)?)))
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
