//! The remoting edge: a connection whose first frame is a RocketMQ remoting frame is served
//! here. Each remoting request is translated into the native request that means the same
//! ([`request`]), handed to the same service as native frames (so one handler decides, for
//! both protocols), and the native reply is translated back ([`reply`]) into the response a
//! RocketMQ client reads, in the header serialization the request used. Frames the server
//! sends on its own (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE) are translated by
//! [`PushCodec`].
//!
//! Limits: past `CONNECTION_REQUESTS_IN_FLIGHT_MAX` requests in flight on one connection, a
//! send waits up to `waitTimeMillsInSendQueue` (200 ms; the connection is not read until a
//! request finishes, so TCP slows the client down) before it is answered SYSTEM_BUSY; any
//! other request is answered SYSTEM_BUSY at once.
//!
//! Bad input: a frame over the limit, a header that does not parse or a frame that is not
//! remoting at all closes this connection (its request id is unknown, so no answer can be
//! matched); a request with a missing or malformed field gets SYSTEM_ERROR with a remark
//! naming the field; a code ringmq does not serve gets REQUEST_CODE_NOT_SUPPORTED naming it.
//! Nothing is stored from a request that did not translate.

use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;

use ringmq_wire::remoting::code::response;
use ringmq_wire::remoting::frame::{self as rframe, Command, SerializeType};

use crate::acl::{Caller, ConnGuard};
use crate::io::net::Conn;
use crate::io::rt;
use crate::limits;
use crate::net::out_queue::{answer_later, Item, OutQueue};
use crate::net::reply::{Body, Outcome, Reply};
use crate::net::service::{Service, READ_CHUNK_BYTES};
use ringmq_wire::code::Status;
use ringmq_wire::codec::Decode;
use ringmq_wire::command::{OffsetResponse, QueryConsumerOffsetResponse};

pub mod admin;
pub mod push;
pub mod reply;
pub mod request;
pub mod view;

pub use push::PushCodec;

/// What a translation needs to know about the connection.
#[derive(Debug, Clone, Copy)]
pub struct Peer {
    /// The client's address (a sent message's born host).
    pub addr: SocketAddr,
}

/// Serves a remoting connection until it closes.
pub async fn read_loop<S: Service + 'static>(
    svc: &Rc<S>,
    conn: &Conn,
    out: &Rc<OutQueue>,
    inflight: &Rc<Cell<usize>>,
    mut buf: Vec<u8>,
    mut guard: Option<ConnGuard>,
) {
    let peer = Peer {
        addr: conn
            .peer_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0))),
    };
    if let Some(st) = first_serialize_type(&buf) {
        out.set_remoting(PushCodec::new(st));
    }
    let max = svc.frame_bytes_max().min(rframe::FRAME_BYTES_MAX);
    let mut start = 0usize;
    loop {
        while !out.is_closed() {
            match rframe::check(&buf[start..], max) {
                Ok(Some(n)) => {
                    // Parsed in place: the translation copies what it keeps.
                    let f = &buf[start..start + n];
                    start += n;
                    if inflight.get() >= limits::CONNECTION_REQUESTS_IN_FLIGHT_MAX && is_send(f) {
                        // A client pipelining sends (RocketMQ's async sends) is slowed down by
                        // TCP, not refused: nothing more is read until a request finishes
                        // (for `waitTimeMillsInSendQueue` at most; then the send is answered
                        // SYSTEM_BUSY).
                        rt::timeout(svc.send_wait(), out.wait_inflight_below(inflight)).await;
                    }
                    if let Err(e) = handle_frame(svc, out, inflight, peer, f, guard.as_mut()) {
                        log::warn!("remoting connection from {}: {e}; closing it", peer.addr);
                        return;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    log::warn!("remoting connection from {}: {e}; closing it", peer.addr);
                    return;
                }
            }
        }
        if out.is_closed() {
            return;
        }
        if start == buf.len() {
            buf.clear();
            start = 0;
        } else if start > buf.len() / 2 {
            buf.drain(..start);
            start = 0;
        }
        out.wait_below_limit().await;
        buf.reserve(READ_CHUNK_BYTES);
        let (res, b) = conn.read_append(buf).await;
        buf = b;
        match res {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// Is `f` a request that stores messages (sends, batches, replies)?
fn is_send(f: &[u8]) -> bool {
    use ringmq_wire::remoting::code::request as code;
    rframe::parse(f).is_ok_and(|p| {
        !p.command.is_response()
            && matches!(
                p.command.code,
                code::SEND_MESSAGE
                    | code::SEND_MESSAGE_V2
                    | code::SEND_BATCH_MESSAGE
                    | code::SEND_REPLY_MESSAGE
                    | code::SEND_REPLY_MESSAGE_V2
            )
    })
}

fn first_serialize_type(buf: &[u8]) -> Option<SerializeType> {
    rframe::peek(buf).and_then(|p| SerializeType::from_byte(p.serialize_type).ok())
}

/// Handles one frame; `Err` closes the connection.
fn handle_frame<S: Service + 'static>(
    svc: &Rc<S>,
    out: &Rc<OutQueue>,
    inflight: &Rc<Cell<usize>>,
    peer: Peer,
    f: &[u8],
    guard: Option<&mut ConnGuard>,
) -> Result<(), String> {
    let parsed = rframe::parse(f).map_err(|e| format!("unreadable frame: {e}"))?;
    let st = parsed.serialize_type;
    let cmd = parsed.command;
    if cmd.is_response() {
        // A client's answer to a request the broker sent: the broker sends only oneway
        // requests, so there is nothing waiting for it.
        return Ok(());
    }
    let oneway = cmd.is_oneway();
    let opaque = cmd.opaque;
    if inflight.get() >= limits::CONNECTION_REQUESTS_IN_FLIGHT_MAX {
        if !oneway {
            let remark = format!(
                "over {} requests in flight on this connection",
                limits::CONNECTION_REQUESTS_IN_FLIGHT_MAX
            );
            push(
                out,
                st,
                error(response::SYSTEM_BUSY, opaque, remark),
                Body::Empty,
            );
        }
        return Ok(());
    }
    let caller = match guard {
        None => Caller::Open,
        Some(g) => match g.remoting(&cmd.ext_fields, parsed.body) {
            Ok(c) => {
                g.note_served();
                c
            }
            Err(refusal) => {
                if !oneway {
                    let resp = error(response::NO_PERMISSION, opaque, refusal.remark);
                    push(out, st, resp, Body::Empty);
                }
                if g.should_close() {
                    return Err("refused too many times in a row".to_owned());
                }
                return Ok(());
            }
        },
    };
    let view = svc.shard_view();
    let translated = request::translate(svc.as_ref(), &cmd, parsed.body, peer);
    let (native, kind) = match translated {
        request::Translated::Native { frame, kind } => (frame, kind),
        request::Translated::Answer(resp, body) => {
            if !oneway {
                push(out, st, with_opaque(resp, opaque), body);
            }
            return Ok(());
        }
        request::Translated::Admin(job) => {
            let svc = Rc::clone(svc);
            let fut = async move { admin::run(svc.as_ref(), &caller, job).await };
            answer_later(out, inflight, fut, move |out, (resp, body)| {
                if !oneway {
                    push(out, st, with_opaque(resp, opaque), body);
                }
            });
            return Ok(());
        }
    };
    if let request::ReplyKind::ConsumerOffset { min_offset_frame } = &kind {
        // Two native requests: the stored offset, then (none stored) the queue's min offset.
        let first = svc.handle(native, &caller);
        let second = Rc::clone(svc);
        let min_frame = min_offset_frame.clone();
        let fut = async move { consumer_offset(first, second.as_ref(), min_frame, &caller).await };
        answer_later(out, inflight, fut, deliver(kind, st, opaque, oneway, view));
        return Ok(());
    }
    let deliver = deliver(kind, st, opaque, oneway, view);
    let timed = svc.timing().then(|| {
        (
            crate::io::clock::Instant::now(),
            ringmq_wire::frame::peek(&native).map(|p| p.code),
        )
    });
    let note = {
        let svc = Rc::clone(svc);
        move |r: &Reply| {
            if let Some((t0, Some(code))) = timed {
                svc.served(
                    code,
                    r.status,
                    crate::metrics::shard::Protocol::Remoting,
                    t0,
                );
            }
        }
    };
    // Every record in `native` was encoded by `request::translate` from the client's bytes.
    match svc.handle_encoded_here(native, &caller) {
        Outcome::Now(r) => {
            note(&r);
            deliver(out, r)
        }
        Outcome::Later(fut) => answer_later(out, inflight, fut, move |out, r| {
            note(&r);
            deliver(out, r)
        }),
    }
    Ok(())
}

/// What queues the answer to one request: nothing for a oneway request, else the native
/// reply translated into the response to `opaque`.
fn deliver(
    kind: request::ReplyKind,
    st: SerializeType,
    opaque: i32,
    oneway: bool,
    view: Option<crate::net::shard_view::ShardView>,
) -> impl FnOnce(&OutQueue, Reply) {
    move |out, r| {
        if !oneway {
            let (resp, body) = reply::translate(&kind, r, view);
            push(out, st, with_opaque(resp, opaque), body);
        }
    }
}

async fn resolve(o: Outcome) -> Reply {
    match o {
        Outcome::Now(r) => r,
        Outcome::Later(f) => f.await,
    }
}

/// QUERY_CONSUMER_OFFSET as RocketMQ answers it: a group with no stored offset on a queue
/// that still starts at 0 gets offset 0 (so a new group reads what was sent before it
/// started), otherwise QUERY_NOT_FOUND.
async fn consumer_offset<S: Service>(
    first: Outcome,
    svc: &S,
    min_frame: Vec<u8>,
    caller: &Caller,
) -> Reply {
    let r = resolve(first).await;
    if r.status != Status::QueryNotFound {
        return r;
    }
    let min = resolve(svc.handle(min_frame, caller)).await;
    let starts_at_zero = min.status == Status::Success
        && ringmq_wire::command::Response::<OffsetResponse>::decode(&min.header)
            .ok()
            .and_then(|h| h.fields)
            .is_some_and(|f| f.offset == 0);
    if starts_at_zero {
        Reply::ok(QueryConsumerOffsetResponse { offset: 0 })
    } else {
        r
    }
}

/// A response command with `code` and `remark`.
pub fn error(code: i32, opaque: i32, remark: String) -> Command {
    Command::response(code, opaque, Some(remark))
}

fn with_opaque(mut c: Command, opaque: i32) -> Command {
    c.opaque = opaque;
    c.flag = rframe::FLAG_RESPONSE;
    c
}

/// The prefix and header of `resp` for a body of `body_len` bytes, in a buffer sized for
/// it; one that cannot be encoded becomes SYSTEM_ERROR with an empty body (`false`).
pub fn response_head(resp: &Command, st: SerializeType, body_len: usize) -> (Vec<u8>, bool) {
    // The fixed fields, the remark and each field's quotes and separators fit in 256 bytes
    // plus 8 a field (text that needs escaping grows the buffer).
    let mut head = Vec::with_capacity(
        256 + resp.remark.as_ref().map_or(0, String::len)
            + resp.ext_fields.text_bytes()
            + 8 * resp.ext_fields.len(),
    );
    match rframe::encode_head(&mut head, resp, st, body_len) {
        Ok(()) => (head, true),
        Err(e) => {
            head.clear();
            let fallback = error(
                response::SYSTEM_ERROR,
                resp.opaque,
                format!("the response could not be encoded: {e}"),
            );
            if rframe::encode_head(&mut head, &fallback, st, 0).is_err() {
                head.clear();
            }
            (head, false)
        }
    }
}

/// Queues a response; one that cannot be encoded becomes SYSTEM_ERROR.
fn push(out: &OutQueue, st: SerializeType, resp: Command, body: Body) {
    match response_head(&resp, st, body.len()) {
        (head, true) => out.push_item(Item::Head(head, body)),
        (head, false) if !head.is_empty() => out.push_item(Item::Head(head, Body::Empty)),
        (_, false) => {}
    }
}
