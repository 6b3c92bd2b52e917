//! Repeated entries counted before a request is decoded. A protobuf entry can be two bytes on
//! the wire and a few hundred in memory (an empty `Message` decodes to every field of a
//! message), so a 16 MiB SendMessage of empty messages, or an AckMessage of a million
//! empty receipt handles, would decode into gigabytes before any check on the decoded
//! request could refuse it. [`EntryCap`] wraps the service: for SendMessage and
//! AckMessage it reads the request's one message (at most `REQUEST_BYTES_MAX`, as tonic
//! would), walks its top-level fields without decoding them, and answers the gRPC status
//! RESOURCE_EXHAUSTED when the repeated field holds more than [`ENTRIES_SCANNED_MAX`]
//! entries. Up to that count the request is decoded and the RPC's own limit (1,024 messages
//! or entries) answers in the response's `Status`, as before.

use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use tonic::body::Body;
use tonic::codegen::http::{Request, Response};
use tonic::codegen::{BoxFuture, Service};
use tonic::server::NamedService;

/// Most entries of a request's repeated field read before it is refused undecoded.
pub const ENTRIES_SCANNED_MAX: usize = 4096;

/// (method path, field number of its repeated entries).
const COUNTED: [(&str, u64); 2] = [
    ("/apache.rocketmq.v2.MessagingService/SendMessage", 1),
    ("/apache.rocketmq.v2.MessagingService/AckMessage", 3),
];

/// The service behind, with SendMessage and AckMessage counted first.
#[derive(Clone)]
pub(crate) struct EntryCap<S> {
    pub(crate) inner: S,
    pub(crate) request_bytes_max: usize,
}

impl<S: NamedService> NamedService for EntryCap<S> {
    const NAME: &'static str = S::NAME;
}

impl<S> Service<Request<Body>> for EntryCap<S>
where
    S: Service<Request<Body>, Response = Response<Body>> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let field = COUNTED
            .iter()
            .find(|(p, _)| *p == req.uri().path())
            .map(|(_, f)| *f);
        let Some(field) = field else {
            return Box::pin(self.inner.call(req));
        };
        // The clone is ready only after its own poll_ready: take the one polled, leave it.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let limit = self.request_bytes_max.saturating_add(5);
        Box::pin(async move {
            let (parts, body) = req.into_parts();
            let bytes = match Limited::new(body, limit).collect().await {
                Ok(c) => c.to_bytes(),
                Err(e) => {
                    let s = tonic::Status::resource_exhausted(format!(
                        "request not read: {e} (at most {limit} bytes)"
                    ));
                    return Ok(s.into_http());
                }
            };
            if let Some(n) = count(&bytes, field).filter(|n| *n > ENTRIES_SCANNED_MAX) {
                let s = tonic::Status::resource_exhausted(format!(
                    "{n} entries in one request, over {ENTRIES_SCANNED_MAX}: refused undecoded"
                ));
                return Ok(s.into_http());
            }
            let body = Body::new(Full::new(bytes));
            inner.call(Request::from_parts(parts, body)).await
        })
    }
}

/// How many times top-level field `field` occurs in the one uncompressed gRPC message of
/// `frame` (5-byte prefix, then the message); `None` when it does not read as one (the
/// decoder then answers).
fn count(frame: &Bytes, field: u64) -> Option<usize> {
    let (head, msg) = (frame.get(..5)?, frame.get(5..)?);
    if head[0] != 0 {
        return None;
    }
    let mut at = 0;
    let mut n = 0usize;
    while at < msg.len() {
        let tag = varint(msg, &mut at)?;
        match tag & 7 {
            0 => {
                varint(msg, &mut at)?;
            }
            1 => at = at.checked_add(8)?,
            2 => {
                let len = usize::try_from(varint(msg, &mut at)?).ok()?;
                at = at.checked_add(len)?;
            }
            5 => at = at.checked_add(4)?,
            _ => return None,
        }
        if tag >> 3 == field {
            n += 1;
        }
    }
    (at == msg.len()).then_some(n)
}

fn varint(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*at)?;
        *at += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(msg: &impl prost::Message) -> Bytes {
        let body = msg.encode_to_vec();
        let mut v = vec![0u8];
        v.extend_from_slice(&(body.len() as u32).to_be_bytes());
        v.extend_from_slice(&body);
        Bytes::from(v)
    }

    #[test]
    fn entries_are_counted_without_decoding() {
        let req = crate::pb::AckMessageRequest {
            group: Some(crate::pb::Resource {
                name: "g".into(),
                ..Default::default()
            }),
            entries: vec![crate::pb::AckMessageEntry::default(); 5000],
            ..Default::default()
        };
        assert_eq!(count(&framed(&req), 3), Some(5000));
        assert_eq!(count(&framed(&req), 1), Some(1));
        let send = crate::pb::SendMessageRequest {
            messages: vec![crate::pb::Message::default(); 7],
        };
        assert_eq!(count(&framed(&send), 1), Some(7));
        assert_eq!(
            count(&Bytes::from_static(&[0, 0, 0, 0, 2, 0x1a, 9]), 3),
            None
        );
        assert_eq!(count(&Bytes::from_static(&[1, 0, 0, 0, 0]), 3), None);
    }
}
