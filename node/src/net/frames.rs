//! Reading whole frames from a connection outside the request/response server loop
//! (replication links, calls to other nodes): the length is checked against the limit before
//! the frame is buffered.

use std::io;

use ringmq_wire::frame;

use crate::io::net::Conn;

/// Bytes requested per read.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// Buffers a connection's bytes and yields whole frames.
#[derive(Debug)]
pub struct FrameReader {
    buf: Vec<u8>,
    start: usize,
    max: usize,
}

impl FrameReader {
    pub fn new(max_frame: usize, pending: Vec<u8>) -> Self {
        FrameReader {
            buf: pending,
            start: 0,
            max: max_frame,
        }
    }

    /// The next whole frame, or `None` when the peer closed cleanly between frames.
    pub async fn next(&mut self, conn: &Conn) -> io::Result<Option<Vec<u8>>> {
        loop {
            let avail = &self.buf[self.start..];
            match frame::check(avail, self.max) {
                Ok(Some(n)) => {
                    let f = avail[..n].to_vec();
                    self.start += n;
                    if self.start == self.buf.len() {
                        self.buf.clear();
                        self.start = 0;
                    }
                    return Ok(Some(f));
                }
                Ok(None) => {}
                Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e.to_string())),
            }
            if self.start > 0 {
                self.buf.drain(..self.start);
                self.start = 0;
            }
            self.buf.reserve(READ_CHUNK_BYTES);
            let (res, b) = conn.read_append(std::mem::take(&mut self.buf)).await;
            self.buf = b;
            match res? {
                0 if self.buf.is_empty() => return Ok(None),
                0 => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "connection closed inside a frame",
                    ))
                }
                _ => {}
            }
        }
    }

    /// Bytes read past the last frame returned.
    pub fn into_pending(mut self) -> Vec<u8> {
        self.buf.drain(..self.start);
        self.buf
    }
}
