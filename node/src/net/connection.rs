//! One client connection: a read loop that checks each frame's length against the limit
//! before buffering it, hands whole frames to the service ([`Service`]), and a write loop
//! that drains a bounded queue of replies ([`OutQueue`], `out_queue.rs`). A connection whose
//! first frame is a remoting one is read by `remoting/` instead.
//!
//! Limits (see `limits`): requests in flight per connection (past it a send waits up to
//! `waitTimeMillsInSendQueue`, 200 ms, the connection unread until a request finishes; any
//! other request gets SYSTEM_BUSY at once), bytes
//! queued for writing (past it the read loop stops reading until the writer drains),
//! frame size (an oversized frame is answered FRAME_TOO_LARGE, its bytes skipped, the
//! connection kept). A frame that is not a frame at all (bad flags, impossible lengths) gets
//! MALFORMED_REQUEST and the connection is closed: that client only.

use std::cell::Cell;
use std::rc::Rc;

use ringmq_wire::code::Status;
use ringmq_wire::frame::{self, Flags};

use crate::acl::{Caller, ConnGuard, GuardState};
use crate::io::net::Conn;
use crate::io::rt;
use crate::limits;
use crate::metrics::shard::{Protocol as Via, Stage};
pub use crate::net::out_queue::OutQueue;
use crate::net::out_queue::{answer_later, micros, write_loop};
use crate::net::remoting;
use crate::net::reply::{Outcome, Reply};
pub use crate::net::service::{Service, READ_CHUNK_BYTES};
use ringmq_wire::remoting::Protocol;

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
        let mut g = acl.guard(peer).over_tls(conn.is_tls());
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
                    if inflight.get() >= limits::CONNECTION_REQUESTS_IN_FLIGHT_MAX && is_send(&f) {
                        // Slowed down by TCP, not refused: nothing more is read until a
                        // request of this connection finishes (for `waitTimeMillsInSendQueue`
                        // at most).
                        rt::timeout(svc.send_wait(), out.wait_inflight_below(inflight)).await;
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
        out.wait_below_limit().await;
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

/// Is `f` a request that stores messages (sends, batches, replies)?
fn is_send(f: &[u8]) -> bool {
    use ringmq_wire::code::RequestCode;
    frame::peek(f).is_some_and(|p| {
        Flags::from_bits(p.flags).is_ok_and(|fl| !fl.is_response())
            && [
                RequestCode::SendMessage,
                RequestCode::SendBatchMessage,
                RequestCode::SendReplyMessage,
            ]
            .iter()
            .any(|c| u16::from(*c) == p.code)
    })
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
