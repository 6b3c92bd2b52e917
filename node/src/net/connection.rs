//! One client connection: a read loop that checks each frame's length against the limit
//! before buffering it, hands whole frames to the service, and a write loop that drains a
//! bounded queue of replies (coalescing small ones into one write, splicing log runs).
//!
//! Limits (see `limits`): requests in flight per connection (past it: SYSTEM_BUSY), bytes
//! queued for writing (past it the read loop stops reading until the writer drains),
//! frame size (an oversized frame is answered FRAME_TOO_LARGE, its bytes skipped, the
//! connection kept). A frame that is not a frame at all (bad flags, impossible lengths) gets
//! MALFORMED_REQUEST and the connection is closed: that client only.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use event_listener::Event;
use ringmq_wire::code::Status;
use ringmq_wire::command::pull::FilterType;
use ringmq_wire::frame::{self, Flags, PREFIX_BYTES};

use crate::acl::{Acl, Caller, ConnGuard, GuardState};
use crate::io::net::{Conn, SplicePipe};
use crate::io::rt;
use crate::limits;
use crate::metrics::shard::{Protocol as Via, Stage};
use crate::net::remoting;
use crate::net::reply::{Body, Outcome, Reply};
use ringmq_wire::remoting::Protocol;

/// Bytes requested from the socket per read.
pub const READ_CHUNK_BYTES: usize = 64 * 1024;
/// Small replies are coalesced into one write up to this size.
pub const WRITE_COALESCE_BYTES: usize = 256 * 1024;

/// What serves the frames of a connection (the broker's shards, the name server).
pub trait Service {
    /// Largest frame accepted.
    fn frame_bytes_max(&self) -> usize;
    /// Handles one request frame (the whole frame, prefix included) from `caller` (already
    /// authenticated; the service authorizes).
    fn handle(&self, frame: Vec<u8>, caller: &Caller) -> Outcome;
    /// The ACL, when on: requests are authenticated before [`Service::handle`].
    fn acl(&self) -> Option<&Acl> {
        None
    }
    /// If this frame is a HELLO asking for another shard, that shard.
    fn handoff_target(&self, _frame: &[u8]) -> Option<u16> {
        None
    }
    /// Whether [`Service::served`] wants to hear about requests (metrics on).
    fn timing(&self) -> bool {
        false
    }
    /// A request with native code `code` was answered `status`, its reply queued `since`
    /// the connection handed its frame over (request latency metrics).
    fn served(
        &self,
        _code: u16,
        _status: Status,
        _protocol: Via,
        _since: crate::io::clock::Instant,
    ) {
    }
    /// A request's frame waited `micros` µs from the read that completed it to its handler
    /// (frames of one read are handled in turn), and a reply waited `micros` µs from being
    /// queued to its write completing (request stage metrics; only when [`Service::timing`]).
    fn stage(&self, _stage: crate::metrics::shard::Stage, _micros: u64) {}
    /// Connection opened / closed (counters).
    fn opened(&self) {}
    fn closed(&self) {}
    /// The connection's queue of outgoing frames, for requests the server sends to the
    /// client on its own (broker -> client notifications).
    fn attached(&self, _out: &Rc<OutQueue>) {}
    /// The subscription of `group` to `topic` from the group's last heartbeat (a remoting
    /// pull without the subscription bit uses it).
    fn subscription(&self, _group: &str, _topic: &str) -> Option<(FilterType, String)> {
        None
    }
    /// The broker's name (`brokerName`), for the recall handle of a scheduled remoting send;
    /// `None` where no broker serves.
    fn broker_name(&self) -> Option<String> {
        None
    }

    /// The broker's cluster (`brokerClusterName`): a remoting request message (one with
    /// `CORRELATION_ID` and `REPLY_TO_CLIENT`) gets it as its `CLUSTER` property, which a
    /// RocketMQ replier needs to name the reply topic.
    fn cluster_name(&self) -> Option<&str> {
        None
    }
}

/// How a read loop ended.
#[derive(Debug)]
pub enum ReadEnd {
    Closed,
    /// Hand the connection to `shard`: the HELLO frame and the bytes read after it.
    HandOff {
        shard: u16,
        hello_frame: Vec<u8>,
        pending: Vec<u8>,
        /// The connection's authentication state (ACL on), rewound to before the HELLO.
        guard: Option<GuardState>,
    },
}

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
    closed: Cell<bool>,
    ready: Event,
    drained: Event,
    /// Set on a remoting connection: frames the server sends on its own are translated.
    remoting: RefCell<Option<remoting::PushCodec>>,
    /// When each queued item was queued, front first (kept only when timing: metrics on).
    stamps: RefCell<VecDeque<crate::io::clock::Instant>>,
    timing: Cell<bool>,
}

impl OutQueue {
    fn push(&self, request_id: u64, reply: Reply) {
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
    pub(crate) fn set_remoting(&self, codec: remoting::PushCodec) {
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

    fn is_idle(&self) -> bool {
        self.items.borrow().is_empty() && self.bytes.get() == 0
    }
}

/// Serves a connection until it closes or is handed to another shard.
pub async fn serve<S: Service + 'static>(svc: Rc<S>, conn: Conn, pending: Vec<u8>) -> ReadEnd {
    serve_resumed(svc, conn, pending, None).await
}

/// [`serve`] for a connection handed over from another shard with its ACL state.
pub async fn serve_resumed<S: Service + 'static>(
    svc: Rc<S>,
    conn: Conn,
    pending: Vec<u8>,
    resume: Option<GuardState>,
) -> ReadEnd {
    let guard = svc.acl().map(|acl| {
        let peer = conn
            .peer_addr()
            .map(|a| a.ip())
            .unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED));
        let mut g = acl.guard(peer);
        if let Some(state) = resume {
            g.resume(state);
        }
        g
    });
    svc.opened();
    let out = Rc::new(OutQueue::default());
    out.timing.set(svc.timing());
    svc.attached(&out);
    let inflight = Rc::new(Cell::new(0usize));
    let written: Option<Box<dyn Fn(u64)>> = svc.timing().then(|| {
        let svc = Rc::clone(&svc);
        Box::new(move |us| svc.stage(Stage::Write, us)) as Box<dyn Fn(u64)>
    });
    let writer = rt::spawn_joinable(write_loop(conn.clone(), Rc::clone(&out), written));
    let end = match detect(&conn, pending).await {
        None => ReadEnd::Closed,
        Some((Protocol::Native, buf)) => read_loop(&svc, &conn, &out, &inflight, buf, guard).await,
        Some((Protocol::Remoting, buf)) => {
            remoting::read_loop(&svc, &conn, &out, &inflight, buf, guard).await;
            ReadEnd::Closed
        }
    };
    if matches!(end, ReadEnd::HandOff { .. }) {
        // Everything answered so far must reach the client before another shard writes.
        while !(out.is_idle() && inflight.get() == 0) {
            let l = out.drained.listen();
            if out.is_idle() && inflight.get() == 0 {
                break;
            }
            l.await;
        }
    } else {
        // Let in-flight replies go out (bounded by their own timeouts), then stop.
        while inflight.get() > 0 && !out.closed.get() {
            let l = out.drained.listen();
            if inflight.get() == 0 {
                break;
            }
            l.await;
        }
    }
    out.close();
    writer.join().await;
    svc.closed();
    end
}

/// Reads until the connection's protocol is known ([`Protocol::detect`]); `None` if the peer
/// closed first.
async fn detect(conn: &Conn, mut buf: Vec<u8>) -> Option<(Protocol, Vec<u8>)> {
    loop {
        if let Some(p) = Protocol::detect(&buf) {
            return Some((p, buf));
        }
        buf.reserve(READ_CHUNK_BYTES);
        let (res, b) = conn.read_append(buf).await;
        buf = b;
        match res {
            Ok(0) | Err(_) => return None,
            Ok(_) => {}
        }
    }
}

async fn read_loop<S: Service + 'static>(
    svc: &Rc<S>,
    conn: &Conn,
    out: &Rc<OutQueue>,
    inflight: &Rc<Cell<usize>>,
    mut buf: Vec<u8>,
    mut guard: Option<ConnGuard>,
) -> ReadEnd {
    let max = svc.frame_bytes_max();
    let mut start = 0usize;
    let mut skip = 0u64;
    // Length of the last large frame handed over whole (see the read below).
    let mut last_large = 0usize;
    // When the last read completed (timing on): its frames wait for the ones before them.
    let timing = svc.timing();
    let mut arrived = timing.then(crate::io::clock::Instant::now);
    loop {
        if skip > 0 {
            let n = (skip as usize).min(buf.len() - start);
            start += n;
            skip -= n as u64;
        }
        while skip == 0 && !out.closed.get() {
            let avail = &buf[start..];
            match frame::check(avail, max) {
                Ok(Some(n)) => {
                    // Only a large frame that fills most of a buffer sized for it is handed
                    // over whole: a small one would pin a large buffer while in flight.
                    let fits = n >= EXACT_READ_FRAME_BYTES && buf.capacity() <= n + n / 8;
                    last_large = if n >= EXACT_READ_FRAME_BYTES { n } else { 0 };
                    let f = if start == 0 && fits && n * 2 >= buf.len() {
                        // Hand the buffer over and keep a copy of the (smaller) rest,
                        // instead of copying the frame out.
                        let rest = buf.split_off(n);
                        std::mem::replace(&mut buf, rest)
                    } else {
                        let f = avail[..n].to_vec();
                        start += n;
                        f
                    };
                    if let Some(shard) = svc.handoff_target(&f) {
                        if inflight.get() == 0 {
                            let rest = buf[start..].to_vec();
                            let guard = guard
                                .as_ref()
                                .map(|g| g.handoff_state(ConnGuard::peek_seq(&f)));
                            return ReadEnd::HandOff {
                                shard,
                                hello_frame: f,
                                pending: rest,
                                guard,
                            };
                        }
                    }
                    if let Some(t) = arrived {
                        svc.stage(Stage::Read, micros(t.elapsed()));
                    }
                    if !handle_frame(svc, out, inflight, f, guard.as_mut()) {
                        return ReadEnd::Closed;
                    }
                }
                Ok(None) => break,
                Err(e) => match refuse(avail, max) {
                    Refusal::NeedPrefix => break,
                    Refusal::TooLarge {
                        request_id,
                        frame_len,
                    } => {
                        let remark = format!(
                            "frame of {frame_len} bytes is over the maximum of {max} bytes"
                        );
                        out.push(request_id, Reply::error(Status::FrameTooLarge, remark));
                        skip = frame_len;
                        let n = (skip as usize).min(buf.len() - start);
                        start += n;
                        skip -= n as u64;
                    }
                    Refusal::Malformed { request_id } => {
                        out.push(
                            request_id,
                            Reply::error(
                                Status::MalformedRequest,
                                format!("not a ringmq frame: {e}"),
                            ),
                        );
                        return ReadEnd::Closed;
                    }
                },
            }
        }
        if out.closed.get() {
            return ReadEnd::Closed;
        }
        if start == buf.len() {
            buf.clear();
            start = 0;
        } else if start > buf.len() / 2 {
            buf.drain(..start);
            start = 0;
        }
        while out.bytes.get() > limits::CONNECTION_QUEUED_BYTES_MAX && !out.closed.get() {
            let l = out.drained.listen();
            if out.bytes.get() <= limits::CONNECTION_QUEUED_BYTES_MAX {
                break;
            }
            l.await;
        }
        // Large frames are read to their exact end into a buffer that holds only them, so
        // they are handed over without a copy: the frame under way once its length is known,
        // else (nothing buffered) the length of the last large frame as a guess.
        let partial = partial_frame_len(&buf[start..]).filter(|&n| n >= EXACT_READ_FRAME_BYTES);
        match partial {
            Some(n) if start > 0 || buf.capacity() > n => {
                let mut b = Vec::with_capacity(n);
                b.extend_from_slice(&buf[start..]);
                buf = b;
                start = 0;
            }
            Some(n) => buf.reserve_exact(n - buf.len()),
            None if start == buf.len() && last_large > 0 => {
                buf = Vec::with_capacity(last_large);
                start = 0;
            }
            None => buf.reserve(READ_CHUNK_BYTES),
        }
        let (res, b) = conn.read_append(buf).await;
        buf = b;
        match res {
            Ok(0) | Err(_) => return ReadEnd::Closed,
            Ok(_) => {}
        }
        if timing {
            arrived = Some(crate::io::clock::Instant::now());
        }
    }
}

/// Frames at least this long are read to their exact end (see the read loop).
const EXACT_READ_FRAME_BYTES: usize = 16 << 10;

/// The whole length of the frame that `buf` begins, once its length field has arrived.
fn partial_frame_len(buf: &[u8]) -> Option<usize> {
    let len: [u8; frame::LENGTH_FIELD_BYTES] =
        buf.get(..frame::LENGTH_FIELD_BYTES)?.try_into().ok()?;
    Some(u32::from_be_bytes(len) as usize + frame::LENGTH_FIELD_BYTES)
}

enum Refusal {
    NeedPrefix,
    TooLarge { request_id: u64, frame_len: u64 },
    Malformed { request_id: u64 },
}

/// Decides how to answer a frame `check` refused.
fn refuse(avail: &[u8], max: usize) -> Refusal {
    let Some(p) = frame::peek(avail) else {
        let len_ok = avail.len() >= 4
            && u64::from(u32::from_be_bytes([avail[0], avail[1], avail[2], avail[3]])) + 4
                > max as u64;
        return if len_ok {
            Refusal::NeedPrefix
        } else {
            Refusal::Malformed { request_id: 0 }
        };
    };
    let flags_ok = Flags::from_bits(p.flags).is_ok_and(|f| !f.is_response());
    if flags_ok && p.frame_len > max as u64 {
        Refusal::TooLarge {
            request_id: p.request_id,
            frame_len: p.frame_len,
        }
    } else {
        Refusal::Malformed {
            request_id: p.request_id,
        }
    }
}

/// Handles one frame; false: close the connection (refused too often in a row).
fn handle_frame<S: Service + 'static>(
    svc: &Rc<S>,
    out: &Rc<OutQueue>,
    inflight: &Rc<Cell<usize>>,
    mut f: Vec<u8>,
    guard: Option<&mut ConnGuard>,
) -> bool {
    let Some(prefix) = frame::peek(&f) else {
        return true;
    };
    let oneway = Flags::from_bits(prefix.flags).is_ok_and(|fl| fl.is_oneway());
    let request_id = prefix.request_id;
    if inflight.get() >= limits::CONNECTION_REQUESTS_IN_FLIGHT_MAX {
        if !oneway {
            out.push(
                request_id,
                Reply::error(
                    Status::SystemBusy,
                    format!(
                        "over {} requests in flight on this connection",
                        limits::CONNECTION_REQUESTS_IN_FLIGHT_MAX
                    ),
                ),
            );
        }
        return true;
    }
    let mut guard = guard;
    let caller = match guard.as_deref_mut() {
        None => {
            // ACL off: a signed request (a client with credentials) is served as unsigned.
            if let Err(e) = ringmq_wire::auth::strip(&mut f) {
                if !oneway {
                    out.push(
                        request_id,
                        Reply::error(Status::MalformedRequest, format!("bad trailer: {e}")),
                    );
                }
                return true;
            }
            Caller::Open
        }
        Some(g) => {
            let now = u64::try_from(crate::io::clock::now_ms()).unwrap_or(0);
            match g.native(&mut f, now) {
                Ok(c) => c,
                Err(refusal) => {
                    if !oneway {
                        out.push(
                            request_id,
                            Reply::error(Status::NoPermission, refusal.remark),
                        );
                    }
                    return !g.should_close();
                }
            }
        }
    };
    let since = svc.timing().then(crate::io::clock::Instant::now);
    let code = prefix.code;
    match svc.handle(f, &caller) {
        Outcome::Now(reply) => {
            if let Some(t0) = since {
                svc.served(code, reply.status, Via::Native, t0);
            }
            let refused = reply.status == Status::NoPermission;
            if !oneway {
                out.push(request_id, reply);
            }
            if let Some(g) = guard {
                if refused {
                    g.note_refused();
                    return !g.should_close();
                }
                g.note_served();
            }
        }
        Outcome::Later(fut) => {
            let svc = Rc::clone(svc);
            answer_later(out, inflight, fut, move |out, reply| {
                if let Some(t0) = since {
                    svc.served(code, reply.status, Via::Native, t0);
                }
                if !oneway {
                    out.push(request_id, reply);
                }
            })
        }
    }
    true
}

/// Runs a reply that comes later as a task of the connection, counted in flight until
/// `deliver` has queued it (whatever the codec).
pub(crate) fn answer_later(
    out: &Rc<OutQueue>,
    inflight: &Rc<Cell<usize>>,
    fut: impl std::future::Future<Output = Reply> + 'static,
    deliver: impl FnOnce(&OutQueue, Reply) + 'static,
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
async fn write_loop(conn: Conn, out: Rc<OutQueue>, written_note: Option<Box<dyn Fn(u64)>>) {
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
                Body::Bytes(b) => buf.extend_from_slice(&b),
                Body::Log { runs, .. } if conn.is_tls() => {
                    // Splice cannot pass through a user-space TLS session: the runs are read
                    // from the log file (io_uring reads, so a cold page does not stall the
                    // shard) into the write buffer and encrypted with the rest.
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
                                    log::warn!("reading a log run at {at} for a TLS connection: {e}; closing it");
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
                    let (res, b) = conn.write_all(std::mem::take(&mut buf)).await;
                    buf = b;
                    buf.clear();
                    if res.is_err() {
                        out.close();
                        return;
                    }
                    if pipe.is_none() {
                        pipe = SplicePipe::new().await.ok();
                    }
                    let Some(p) = &pipe else {
                        out.close();
                        return;
                    };
                    for run in runs {
                        if p.send_file(&run.file, run.offset, run.len, &conn)
                            .await
                            .is_err()
                        {
                            out.close();
                            return;
                        }
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

fn micros(d: std::time::Duration) -> u64 {
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
