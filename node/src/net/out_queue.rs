//! A connection's outgoing side: the bounded queue of replies and frames the server sends
//! on its own ([`OutQueue`]), the write loop that drains it (coalescing small items into one
//! write, sending a large body or views of the log's mapping beside them in one vectored
//! send, splicing log runs, reading them into the TLS stream instead), and the in-flight
//! count of replies that come later ([`answer_later`]). Shared by the native read loop
//! (`connection.rs`) and the remoting one (`remoting/`).
//!
//! Limit: bytes queued for writing, `limits::CONNECTION_QUEUED_BYTES_MAX` (past it frames
//! the server sends on its own are refused and the read loops stop reading until drained).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use event_listener::Event;
use ringmq_wire::code::Status;
use ringmq_wire::frame::{self, Flags, PREFIX_BYTES};

use crate::io::net::{Conn, FileRun, SplicePipe};
use crate::io::rt;
use crate::limits;
use crate::net::remoting::push::PushCodec;
use crate::net::reply::{Body, Reply};

/// Small replies are coalesced into one write up to this size.
pub const WRITE_COALESCE_BYTES: usize = 256 * 1024;
/// A reply body of at least this many bytes is written from its own buffer (a vectored send
/// with the bytes ahead of it), not copied into the coalescing buffer.
pub const WRITE_BESIDE_BYTES: usize = 16 * 1024;

/// Something to write: a reply to a request, or a whole frame the server sends on its own.
pub(crate) enum Item {
    Reply(u64, Reply),
    Frame(Vec<u8>),
    /// A frame of another codec (remoting): its encoded prefix and header, then the body.
    Head(Vec<u8>, Body),
}

impl Item {
    fn bytes(&self) -> usize {
        match self {
            Item::Reply(_, r) => PREFIX_BYTES + r.header.len() + r.body.len(),
            Item::Frame(f) => f.len(),
            Item::Head(h, b) => h.len() + b.len(),
        }
    }

    fn is_log(&self) -> bool {
        match self {
            Item::Reply(_, r) => matches!(r.body, Body::Log { .. }),
            Item::Head(_, b) => matches!(b, Body::Log { .. }),
            Item::Frame(_) => false,
        }
    }
}

/// Replies waiting to be written, bounded by bytes.
#[derive(Default)]
pub struct OutQueue {
    items: RefCell<VecDeque<Item>>,
    bytes: Cell<usize>,
    pub(super) closed: Cell<bool>,
    ready: Event,
    pub(super) drained: Event,
    /// Set on a remoting connection: frames the server sends on its own are translated.
    remoting: RefCell<Option<PushCodec>>,
    /// When each queued item was queued, front first (kept only when timing: metrics on).
    stamps: RefCell<VecDeque<crate::io::clock::Instant>>,
    pub(super) timing: Cell<bool>,
}

impl OutQueue {
    pub(super) fn push(&self, request_id: u64, reply: Reply) {
        self.push_item(Item::Reply(request_id, reply));
    }

    pub(crate) fn push_item(&self, item: Item) {
        if self.closed.get() {
            return;
        }
        self.bytes.set(self.bytes.get() + item.bytes());
        self.items.borrow_mut().push_back(item);
        if self.timing.get() {
            self.stamps
                .borrow_mut()
                .push_back(crate::io::clock::Instant::now());
        }
        self.ready.notify(1);
    }

    /// Queues a whole frame the server sends on its own (a oneway request to the client).
    /// Refused (false) when the connection is closed or its queue is over
    /// `CONNECTION_QUEUED_BYTES_MAX`: a notification is not worth unbounded memory for a
    /// client that does not read.
    pub fn push_frame(&self, frame: Vec<u8>) -> bool {
        if self.closed.get() || self.bytes.get() > limits::CONNECTION_QUEUED_BYTES_MAX {
            return false;
        }
        let translated = match &mut *self.remoting.borrow_mut() {
            None => Some(frame),
            Some(codec) => codec.translate(&frame),
        };
        match translated {
            Some(f) => {
                self.push_item(Item::Frame(f));
                true
            }
            None => false,
        }
    }

    pub fn is_closed(&self) -> bool {
        self.closed.get()
    }

    /// Marks the connection as a remoting one (set before any frame is read).
    pub(crate) fn set_remoting(&self, codec: PushCodec) {
        *self.remoting.borrow_mut() = Some(codec);
    }

    /// Waits while more than the queued-bytes limit waits to be written.
    pub(crate) async fn wait_below_limit(&self) {
        while self.bytes.get() > limits::CONNECTION_QUEUED_BYTES_MAX && !self.closed.get() {
            let l = self.drained.listen();
            if self.bytes.get() <= limits::CONNECTION_QUEUED_BYTES_MAX {
                break;
            }
            l.await;
        }
    }

    /// Waits while `inflight` requests of this connection are at the per-connection limit
    /// (a send past it waits here, the connection unread, instead of being refused).
    pub(crate) async fn wait_inflight_below(&self, inflight: &Cell<usize>) {
        while inflight.get() >= limits::CONNECTION_REQUESTS_IN_FLIGHT_MAX && !self.closed.get() {
            let l = self.drained.listen();
            if inflight.get() < limits::CONNECTION_REQUESTS_IN_FLIGHT_MAX {
                break;
            }
            l.await;
        }
    }

    fn pop(&self) -> Option<Item> {
        self.items.borrow_mut().pop_front()
    }

    /// When the item [`OutQueue::pop`] just took was queued (timing only).
    fn pop_stamp(&self) -> Option<crate::io::clock::Instant> {
        self.stamps.borrow_mut().pop_front()
    }

    pub(crate) fn close(&self) {
        self.closed.set(true);
        self.ready.notify(usize::MAX);
        self.drained.notify(usize::MAX);
    }

    pub(super) fn is_idle(&self) -> bool {
        self.items.borrow().is_empty() && self.bytes.get() == 0
    }
}

/// Runs a reply that comes later as a task of the connection, counted in flight until
/// `deliver` has queued it (whatever the codec).
pub(crate) fn answer_later<T: 'static>(
    out: &Rc<OutQueue>,
    inflight: &Rc<Cell<usize>>,
    fut: impl std::future::Future<Output = T> + 'static,
    deliver: impl FnOnce(&OutQueue, T) + 'static,
) {
    inflight.set(inflight.get() + 1);
    let out = Rc::clone(out);
    let inflight = Rc::clone(inflight);
    rt::spawn(async move {
        let reply = fut.await;
        inflight.set(inflight.get() - 1);
        deliver(&out, reply);
        out.drained.notify(usize::MAX);
    });
}

/// Writes queued items until the queue closes. `written_note` (timing on) hears, per item, how
/// long it waited from being queued to its bytes being written.
pub(super) async fn write_loop(
    conn: Conn,
    out: Rc<OutQueue>,
    written_note: Option<Box<dyn Fn(u64)>>,
) {
    let mut buf: Vec<u8> = Vec::with_capacity(WRITE_COALESCE_BYTES);
    let mut pipe: Option<SplicePipe> = None;
    let mut stamps: Vec<crate::io::clock::Instant> = Vec::new();
    loop {
        let Some(first) = next_item(&out).await else {
            return;
        };
        stamps.extend(out.pop_stamp());
        let mut batch = vec![first];
        while buf_len(&batch) < WRITE_COALESCE_BYTES && !batch.last().is_some_and(Item::is_log) {
            match out.pop() {
                Some(item) => {
                    stamps.extend(out.pop_stamp());
                    batch.push(item)
                }
                None => break,
            }
        }
        let mut written = 0usize;
        for item in batch {
            written += item.bytes();
            let body = match item {
                Item::Frame(f) => {
                    buf.extend_from_slice(&f);
                    continue;
                }
                Item::Head(h, body) => {
                    buf.extend_from_slice(&h);
                    body
                }
                Item::Reply(request_id, reply) => {
                    if encode_head(&mut buf, request_id, &reply).is_err() {
                        buf.clear();
                        let fallback =
                            Reply::error(Status::SystemError, "reply too large to encode");
                        if encode_head(&mut buf, request_id, &fallback).is_err() {
                            out.close();
                            return;
                        }
                        continue;
                    }
                    reply.body
                }
            };
            match body {
                Body::Empty => {}
                // A large body (a copied pull response) goes out beside what is ahead of
                // it in one vectored send instead of being copied into the write buffer.
                Body::Bytes(b) if b.len() >= WRITE_BESIDE_BYTES => {
                    let (res, b, _) = conn.write_two(std::mem::take(&mut buf), b).await;
                    buf = b;
                    buf.clear();
                    if res.is_err() {
                        out.close();
                        return;
                    }
                }
                Body::Bytes(b) => buf.extend_from_slice(&b),
                // Views of the log's mapping go out beside what is ahead of them in one
                // vectored send: the kernel copies them from the mapping.
                Body::Shared { parts, .. } => {
                    let (res, b) = conn.write_shared(std::mem::take(&mut buf), parts).await;
                    buf = b;
                    buf.clear();
                    if res.is_err() {
                        out.close();
                        return;
                    }
                }
                Body::Log { runs, .. } if !conn.splices() => {
                    // Splice cannot pass through a user-space TLS session or into an
                    // in-process pipe: the runs are read from the log file (io_uring reads,
                    // so a cold page does not stall the shard) into the write buffer.
                    for run in runs {
                        let mut done = 0usize;
                        while done < run.len {
                            let want = (run.len - done).min(WRITE_COALESCE_BYTES);
                            let at = run.offset + done as u64;
                            let (res, b) =
                                run.file.read_at(std::mem::take(&mut buf), at, want).await;
                            buf = b;
                            match res {
                                Ok(n) if n > 0 => done += n,
                                Ok(_) => {
                                    log::warn!("a log run ended early at {at} (of {} bytes from {}); closing the connection", run.len, run.offset);
                                    out.close();
                                    return;
                                }
                                Err(e) => {
                                    log::warn!("reading a log run at {at} for a connection that copies: {e}; closing it");
                                    out.close();
                                    return;
                                }
                            }
                            if buf.len() >= WRITE_COALESCE_BYTES {
                                let (res, b) = conn.write_all(std::mem::take(&mut buf)).await;
                                buf = b;
                                buf.clear();
                                if res.is_err() {
                                    out.close();
                                    return;
                                }
                            }
                        }
                    }
                }
                Body::Log { runs, .. } => {
                    if pipe.is_none() {
                        pipe = SplicePipe::new().await.ok();
                    }
                    let Some(p) = &pipe else {
                        out.close();
                        return;
                    };
                    // The bytes before the runs (this response's header, and what was
                    // coalesced ahead of it) go into the pipe first: one socket send for
                    // the whole response when it fits the pipe.
                    let files: Vec<FileRun<'_>> = runs
                        .iter()
                        .map(|r| FileRun {
                            file: &r.file,
                            offset: r.offset,
                            len: r.len,
                        })
                        .collect();
                    let (res, b) = p.send(std::mem::take(&mut buf), &files, &conn).await;
                    buf = b;
                    buf.clear();
                    if res.is_err() {
                        out.close();
                        return;
                    }
                }
            }
        }
        if !buf.is_empty() {
            let (res, b) = conn.write_all(std::mem::take(&mut buf)).await;
            buf = b;
            buf.clear();
            if res.is_err() {
                out.close();
                return;
            }
        }
        out.bytes.set(out.bytes.get().saturating_sub(written));
        out.drained.notify(usize::MAX);
        if let Some(note) = &written_note {
            for t in stamps.drain(..) {
                note(micros(t.elapsed()));
            }
        }
    }
}

pub(super) fn micros(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

async fn next_item(out: &OutQueue) -> Option<Item> {
    loop {
        if let Some(item) = out.pop() {
            return Some(item);
        }
        if out.closed.get() {
            return None;
        }
        let l = out.ready.listen();
        if !out.items.borrow().is_empty() || out.closed.get() {
            continue;
        }
        l.await;
    }
}

fn buf_len(batch: &[Item]) -> usize {
    batch.iter().map(Item::bytes).sum()
}

fn encode_head(
    buf: &mut Vec<u8>,
    request_id: u64,
    reply: &Reply,
) -> Result<(), ringmq_wire::WireError> {
    frame::encode_prefix(
        buf,
        reply.status,
        Flags::RESPONSE,
        request_id,
        reply.header.len(),
        reply.body.len(),
    )?;
    buf.extend_from_slice(&reply.header);
    Ok(())
}
