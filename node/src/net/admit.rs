//! Admission of a new connection on a listener (client, HA, name server) by the listener's
//! `tls.server.mode`: which connections are TLS, which plaintext, and which are refused.
//!
//! A TLS connection starts with a handshake record (first byte 0x16); a native or remoting
//! frame starts with its big-endian length, under 16 MiB, so its first byte is 0x00 (a test in
//! `io::tls` holds the two apart). So one byte decides:
//! - disabled: nothing is read here; the connection is served as before;
//! - permissive: 0x16 -> TLS handshake, anything else -> plaintext (the bytes read are handed
//!   on as the connection's first bytes);
//! - enforcing: 0x16 -> TLS; plaintext gets one answer where its protocol allows one
//!   (native: NO_PERMISSION to each request whose prefix arrived; remoting: NO_PERMISSION to
//!   the first request), remark [`ENFORCING_REMARK`], then the connection is closed.
//!
//! Bounds: the TLS handshake, and on an enforcing listener also the wait for the first
//! bytes and the refused request, each take at most `io::tls::HANDSHAKE_TIMEOUT`; a refused
//! connection is read for at most [`REFUSAL_READ_BYTES_MAX`]. Inside TLS the usual protocol
//! detection runs on the decrypted bytes (`connection::serve`).

use std::net::SocketAddr;
use std::time::Duration;

use ringmq_wire::code::Status;
use ringmq_wire::frame::{self, Flags};
use ringmq_wire::remoting::code::response;
use ringmq_wire::remoting::frame as rframe;
use ringmq_wire::remoting::Protocol;

use crate::io::net::Conn;
use crate::io::rt;
use crate::io::tls::{self, TlsServer};
use crate::net::reply::Reply;
use crate::net::service::READ_CHUNK_BYTES;

/// The remark of the answer to plaintext on an enforcing listener.
pub const ENFORCING_REMARK: &str = "this listener accepts TLS only (tls.server.mode=enforcing)";
/// Most bytes of a refused plaintext connection read to find the request to answer.
pub const REFUSAL_READ_BYTES_MAX: usize = 64 * 1024;
/// How long a refused connection is read (discarding) after the answer, so that it closes
/// with a FIN behind the answer rather than a reset that could destroy it.
const REFUSAL_LINGER: Duration = Duration::from_secs(1);

/// Admits `conn` accepted on `listener` (a name for logs, e.g. `shard 0 client port`):
/// the connection to serve (TLS or plaintext) and the plaintext bytes already read from it,
/// or `None` when it was refused or closed. `refused` runs when plaintext is refused by an
/// enforcing listener (the ACL counts it as `tls_required`).
pub async fn admit(
    tls: Option<&TlsServer>,
    conn: Conn,
    listener: &str,
    refused: impl FnOnce(),
) -> Option<(Conn, Vec<u8>)> {
    let Some(server) = tls else {
        return Some((conn, Vec::new()));
    };
    let peer = conn
        .peer_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    let enforcing = server.enforcing;
    let first = if enforcing {
        rt::timeout(tls::HANDSHAKE_TIMEOUT, first_bytes(&conn))
            .await
            .flatten()?
    } else {
        first_bytes(&conn).await?
    };
    match tls::starts_tls(&first) {
        Some(true) => match conn.accept_tls(server, first).await {
            Ok(c) => Some((c, Vec::new())),
            Err(e) => {
                log::warn!("{listener}: TLS handshake with {peer} failed: {e}; closing");
                None
            }
        },
        _ if enforcing => {
            refused();
            log::warn!(
                "{listener}: refused a plaintext connection from {peer} (tls.server.mode=enforcing)"
            );
            refuse_plaintext(&conn, first).await;
            None
        }
        _ => Some((conn, first)),
    }
}

/// The first bytes of a connection; `None` if it closed first.
async fn first_bytes(conn: &Conn) -> Option<Vec<u8>> {
    let (res, buf) = conn.read_append(Vec::with_capacity(READ_CHUNK_BYTES)).await;
    match res {
        Ok(n) if n > 0 => Some(buf),
        _ => None,
    }
}

/// Answers the plaintext request(s) in `buf` (reading on, bounded, until one is complete)
/// with NO_PERMISSION, then closes.
async fn refuse_plaintext(conn: &Conn, mut buf: Vec<u8>) {
    let answer = rt::timeout(tls::HANDSHAKE_TIMEOUT, async {
        loop {
            match answer_for(&buf) {
                Answer::Pending if buf.len() < REFUSAL_READ_BYTES_MAX => {}
                Answer::Pending | Answer::Nothing => return None,
                Answer::Bytes(b) => return Some(b),
            }
            buf.reserve((REFUSAL_READ_BYTES_MAX - buf.len()).min(READ_CHUNK_BYTES));
            let (res, b) = conn.read_append(buf).await;
            buf = b;
            if !matches!(res, Ok(n) if n > 0) {
                return None;
            }
        }
    })
    .await
    .flatten();
    if let Some(bytes) = answer {
        let _ = conn.write_all(bytes).await;
    }
    conn.shutdown().await;
    let _ = rt::timeout(REFUSAL_LINGER, async {
        let mut read = 0usize;
        let mut b = Vec::with_capacity(READ_CHUNK_BYTES);
        while read < REFUSAL_READ_BYTES_MAX {
            b.clear();
            let (res, back) = conn.read_append(b).await;
            b = back;
            match res {
                Ok(n) if n > 0 => read += n,
                _ => return,
            }
        }
    })
    .await;
}

enum Answer {
    /// Read more.
    Pending,
    /// Nothing can be answered (not a frame, a oneway request, too large): just close.
    Nothing,
    Bytes(Vec<u8>),
}

/// The NO_PERMISSION answer(s) to the plaintext requests at the start of `buf`.
fn answer_for(buf: &[u8]) -> Answer {
    match Protocol::detect(buf) {
        None => Answer::Pending,
        Some(Protocol::Native) => native_answer(buf),
        Some(Protocol::Remoting) => remoting_answer(buf),
    }
}

/// One answer per native request whose prefix is in `buf` (a client opens with HELLO and
/// usually sends its first request in the same write; its library waits only for the
/// second).
fn native_answer(buf: &[u8]) -> Answer {
    let reply = Reply::error(Status::NoPermission, ENFORCING_REMARK);
    let mut out = Vec::new();
    let mut at = 0usize;
    while let Some(p) = frame::peek(&buf[at..]) {
        let Ok(flags) = Flags::from_bits(p.flags) else {
            break;
        };
        if !flags.is_response() && !flags.is_oneway() {
            let framed = frame::encode_prefix(
                &mut out,
                reply.status,
                Flags::RESPONSE,
                p.request_id,
                reply.header.len(),
                0,
            );
            if framed.is_err() {
                break;
            }
            out.extend_from_slice(&reply.header);
        }
        match usize::try_from(p.frame_len) {
            Ok(n) if n >= frame::PREFIX_BYTES && at + n <= buf.len() => at += n,
            _ => break,
        }
    }
    if !out.is_empty() {
        Answer::Bytes(out)
    } else if at == 0 && buf.len() < frame::PREFIX_BYTES {
        Answer::Pending
    } else {
        Answer::Nothing
    }
}

/// The answer to the first remoting request, once it has arrived whole (its opaque and
/// header serialization are in its header).
fn remoting_answer(buf: &[u8]) -> Answer {
    match rframe::check(buf, REFUSAL_READ_BYTES_MAX) {
        Ok(None) => Answer::Pending,
        Err(_) => Answer::Nothing,
        Ok(Some(n)) => {
            let Ok(parsed) = rframe::parse(&buf[..n]) else {
                return Answer::Nothing;
            };
            if parsed.command.is_response() || parsed.command.is_oneway() {
                return Answer::Nothing;
            }
            let resp = rframe::Command::response(
                response::NO_PERMISSION,
                parsed.command.opaque,
                Some(ENFORCING_REMARK.to_owned()),
            );
            let mut head = Vec::new();
            match rframe::encode_head(&mut head, &resp, parsed.serialize_type, 0) {
                Ok(()) => Answer::Bytes(head),
                Err(_) => Answer::Nothing,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringmq_wire::code::RequestCode;
    use ringmq_wire::codec::Empty;
    use ringmq_wire::remoting::frame::{Command, SerializeType};

    fn responses(mut b: &[u8]) -> Vec<(u64, u16)> {
        let mut out = Vec::new();
        while let Ok(Some(n)) = frame::check(b, frame::FRAME_BYTES_MAX) {
            let f = frame::parse(&b[..n]).expect("a frame");
            assert!(f.is_response());
            out.push((f.request_id, f.code));
            b = &b[n..];
        }
        out
    }

    #[test]
    fn native_requests_each_get_no_permission() {
        let mut buf = ringmq_wire::command::opener_frame("t");
        frame::encode_request(&mut buf, RequestCode::GetMaxOffset, false, 7, &Empty, &[])
            .expect("encodes");
        let Answer::Bytes(b) = answer_for(&buf) else {
            panic!("no answer")
        };
        let got = responses(&b);
        assert_eq!(got.len(), 2);
        assert_eq!(got[1], (7, Status::NoPermission as u16));
        // Half a prefix: read on.
        assert!(matches!(answer_for(&buf[..10]), Answer::Pending));
        // A oneway request alone: nothing to answer.
        let mut oneway = Vec::new();
        frame::encode_request(&mut oneway, RequestCode::HaAck, true, 3, &Empty, &[])
            .expect("encodes");
        assert!(matches!(answer_for(&oneway), Answer::Nothing));
    }

    #[test]
    fn a_remoting_request_gets_no_permission_in_its_serialization() {
        for st in [SerializeType::Json, SerializeType::RocketMq] {
            let cmd = Command::request(105, 42, ringmq_wire::remoting::ext::ExtFields::new());
            let f = rframe::encode(&cmd, st, &[]).expect("encodes");
            assert!(matches!(answer_for(&f[..f.len() - 1]), Answer::Pending));
            let Answer::Bytes(b) = answer_for(&f) else {
                panic!("no answer")
            };
            let n = rframe::check(&b, rframe::FRAME_BYTES_MAX)
                .expect("valid")
                .expect("whole");
            let p = rframe::parse(&b[..n]).expect("parses");
            assert_eq!(p.serialize_type, st);
            assert_eq!(p.command.code, response::NO_PERMISSION);
            assert_eq!(p.command.opaque, 42);
            assert_eq!(p.command.remark.as_deref(), Some(ENFORCING_REMARK));
        }
    }
}
