//! In-process connections: a byte stream between a thread of this process that is not a
//! shard (the gRPC edge's tokio runtime) and a shard, with no socket under it. The shard
//! serves it as it serves a TCP connection (the same frames, HELLO hand-off, ACL, pushes from
//! the broker), so an edge inside the broker process reaches the shards by the one request
//! path without two loopback TCP hops per request.
//!
//! The stream is tokio's [`DuplexStream`]: a bounded in-memory pipe each way whose ends wake
//! each other through `Waker`s, so it works between the shard's compio loop and a tokio
//! runtime on another thread (a wake from the other thread reaches the loop as any
//! cross-thread wake does, like a mailbox message). Bytes are copied into and out of the
//! pipe; log bytes are read from the segment files instead of spliced, as for TLS.

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;

use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf};

/// Bytes buffered each way between the two ends before a writer waits.
pub const LOCAL_PIPE_BYTES: usize = 4 << 20;
/// Spare room a read asks for when the caller's buffer has none.
const READ_RESERVE_BYTES: usize = 64 << 10;

/// The shard's end of an in-process connection while it moves between threads, with the
/// address the shard sees as its peer.
pub struct LocalStream(DuplexStream, SocketAddr);

impl std::fmt::Debug for LocalStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LocalStream")
    }
}

/// A new in-process connection: the shard's end and the other end (for the caller). `peer`
/// is what the shard sees as the peer's address (ACL address rules, connection lists): the
/// address the caller would have connected from over TCP.
pub fn pair(peer: SocketAddr) -> (LocalStream, DuplexStream) {
    let (shard_end, other_end) = tokio::io::duplex(LOCAL_PIPE_BYTES);
    (LocalStream(shard_end, peer), other_end)
}

/// The shard's end of an in-process connection on the shard's thread. Clones share it (one
/// reader task, one writer task): each read or write borrows the stream only inside one
/// poll, never across an `.await`, and the pipe keeps the reader's and the writer's wakers
/// apart.
#[derive(Clone)]
pub struct LocalConn(Rc<std::cell::RefCell<Option<DuplexStream>>>, SocketAddr);

impl LocalConn {
    pub fn new(s: LocalStream) -> Self {
        LocalConn(Rc::new(std::cell::RefCell::new(Some(s.0))), s.1)
    }

    /// What the shard sees as the peer (given to [`pair`]).
    pub fn peer_addr(&self) -> SocketAddr {
        self.1
    }

    /// Takes the stream to hand it to another shard; this connection (and its clones) is
    /// closed from then on.
    pub fn take(&self) -> io::Result<LocalStream> {
        let peer = self.1;
        self.0
            .borrow_mut()
            .take()
            .map(|s| LocalStream(s, peer))
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotConnected, "handed off already"))
    }

    fn closed() -> io::Error {
        io::Error::new(
            io::ErrorKind::NotConnected,
            "in-process connection handed off",
        )
    }

    /// Reads what is available into the spare capacity of `buf` (appending). 0 = closed.
    pub async fn read_append(&self, buf: &mut Vec<u8>) -> io::Result<usize> {
        if buf.capacity() == buf.len() {
            buf.reserve(READ_RESERVE_BYTES);
        }
        poll_fn(|cx| {
            let mut cell = self.0.borrow_mut();
            let Some(s) = cell.as_mut() else {
                return std::task::Poll::Ready(Err(Self::closed()));
            };
            let len = buf.len();
            let mut rb = ReadBuf::uninit(buf.spare_capacity_mut());
            match Pin::new(s).poll_read(cx, &mut rb) {
                std::task::Poll::Ready(Ok(())) => {
                    let n = rb.filled().len();
                    // SAFETY: `poll_read` initialized the first `n` bytes of the spare
                    // capacity (`ReadBuf::filled`).
                    unsafe { buf.set_len(len + n) };
                    std::task::Poll::Ready(Ok(n))
                }
                std::task::Poll::Ready(Err(e)) => std::task::Poll::Ready(Err(e)),
                std::task::Poll::Pending => std::task::Poll::Pending,
            }
        })
        .await
    }

    /// Writes all of `buf`.
    pub async fn write_all(&self, buf: &[u8]) -> io::Result<()> {
        let mut done = 0;
        while done < buf.len() {
            let n = poll_fn(|cx| {
                let mut cell = self.0.borrow_mut();
                let Some(s) = cell.as_mut() else {
                    return std::task::Poll::Ready(Err(Self::closed()));
                };
                Pin::new(s).poll_write(cx, &buf[done..])
            })
            .await?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "in-process peer closed",
                ));
            }
            done += n;
        }
        Ok(())
    }

    /// Ends this side's writing: the other end reads EOF.
    pub async fn shutdown(&self) {
        let _ = poll_fn(|cx| {
            let mut cell = self.0.borrow_mut();
            match cell.as_mut() {
                Some(s) => Pin::new(s).poll_shutdown(cx),
                None => std::task::Poll::Ready(Ok(())),
            }
        })
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Bytes cross both ways between a compio loop and a tokio runtime on another thread,
    /// larger than the pipe (the writer waits for the reader), and a shutdown reads as EOF.
    #[test]
    fn bytes_cross_threads_both_ways() {
        let (shard_end, mut other) = pair(SocketAddr::from(([127, 0, 0, 1], 0)));
        let big: Vec<u8> = (0..(LOCAL_PIPE_BYTES * 2 + 7))
            .map(|i| (i % 251) as u8)
            .collect();
        let expect = big.clone();
        let other_side = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            rt.block_on(async move {
                other.write_all(&big).await.unwrap();
                let mut back = Vec::new();
                other.read_to_end(&mut back).await.unwrap();
                back
            })
        });
        let lp = crate::io::rt::EventLoop::new(None, false).unwrap();
        let got = lp.block_on(async move {
            let c = LocalConn::new(shard_end);
            let mut got = Vec::new();
            while got.len() < expect.len() {
                let n = c.read_append(&mut got).await.unwrap();
                assert!(n > 0, "closed early at {}", got.len());
            }
            assert_eq!(got, expect);
            c.write_all(b"answer").await.unwrap();
            c.shutdown().await;
            got.len()
        });
        assert_eq!(got, LOCAL_PIPE_BYTES * 2 + 7);
        assert_eq!(other_side.join().unwrap(), b"answer");
    }
}
