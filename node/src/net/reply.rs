//! Replies: a status, an encoded response header, and a body that is bytes or runs of a log
//! segment (sent with splice, zero copy). `Outcome` says whether a handler answered now,
//! will answer later (a SYNC_FLUSH wait, a parked pull, a forwarded request), or never
//! (one-way requests).

use std::future::Future;
use std::pin::Pin;

use ringmq_wire::code::Status;
use ringmq_wire::codec::{Empty, Encode};
use ringmq_wire::command::Response;

use crate::io::net::SharedFile;

/// Bytes of a log segment to send as part of a body.
#[derive(Clone)]
pub struct LogRun {
    pub file: SharedFile,
    pub offset: u64,
    pub len: usize,
}

impl std::fmt::Debug for LogRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogRun")
            .field("offset", &self.offset)
            .field("len", &self.len)
            .finish()
    }
}

/// A response body.
#[derive(Debug, Default)]
pub enum Body {
    #[default]
    Empty,
    Bytes(Vec<u8>),
    /// Zero-copy runs of the log; `len` is their total.
    Log {
        runs: Vec<LogRun>,
        len: usize,
    },
    /// Views of the log's mapping, sent from it (no copy in this process); `len` is their
    /// total.
    Shared {
        parts: Vec<bytes::Bytes>,
        len: usize,
    },
}

impl Body {
    pub fn len(&self) -> usize {
        match self {
            Body::Empty => 0,
            Body::Bytes(b) => b.len(),
            Body::Log { len, .. } | Body::Shared { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A reply to one request.
#[derive(Debug)]
pub struct Reply {
    pub status: Status,
    pub header: Vec<u8>,
    pub body: Body,
}

/// A reply that can cross threads (forwarded requests; bodies are always bytes).
#[derive(Debug)]
pub struct SendReply {
    pub status: Status,
    pub header: Vec<u8>,
    pub body: Vec<u8>,
}

impl Reply {
    /// SUCCESS with `fields`.
    pub fn ok<T: Encode>(fields: T) -> Reply {
        Self::with(Status::Success, Response::ok(fields), Body::Empty)
    }

    /// SUCCESS with `fields` and a body.
    pub fn ok_body<T: Encode>(fields: T, body: Body) -> Reply {
        Self::with(Status::Success, Response::ok(fields), body)
    }

    /// A status with fields and a remark (statuses that still carry data).
    pub fn status_fields<T: Encode>(status: Status, remark: impl Into<String>, fields: T) -> Reply {
        let mut r = Response::ok(fields);
        r.remark = remark.into();
        Self::with(status, r, Body::Empty)
    }

    /// The status and remark, for logs.
    pub fn remark(&self) -> String {
        let remark = ringmq_wire::command::read_remark(&self.header)
            .map(|(r, _)| r.to_string())
            .unwrap_or_default();
        format!("{}: {remark}", self.status.name())
    }

    /// A status with only a remark.
    pub fn error(status: Status, remark: impl Into<String>) -> Reply {
        Self::with(status, Response::<Empty>::remark(remark), Body::Empty)
    }

    fn with<T: Encode>(status: Status, header: Response<T>, body: Body) -> Reply {
        match header.to_vec() {
            Ok(header) => Reply {
                status,
                header,
                body,
            },
            Err(e) => {
                let header = Response::<Empty>::remark(format!("cannot encode the response: {e}"))
                    .to_vec()
                    .unwrap_or_default();
                Reply {
                    status: Status::SystemError,
                    header,
                    body: Body::Empty,
                }
            }
        }
    }

    /// The thread-crossing form. Log runs must have been turned into bytes already; views
    /// of the mapping are copied.
    pub fn into_send(self) -> SendReply {
        let body = match self.body {
            Body::Bytes(b) => b,
            Body::Shared { parts, .. } => parts.concat(),
            Body::Empty | Body::Log { .. } => Vec::new(),
        };
        SendReply {
            status: self.status,
            header: self.header,
            body,
        }
    }

    pub fn from_send(r: SendReply) -> Reply {
        Reply {
            status: r.status,
            header: r.header,
            body: if r.body.is_empty() {
                Body::Empty
            } else {
                Body::Bytes(r.body)
            },
        }
    }
}

/// What a handler returns.
pub enum Outcome {
    Now(Reply),
    Later(Pin<Box<dyn Future<Output = Reply>>>),
}

impl std::fmt::Debug for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Now(r) => f.debug_tuple("Now").field(r).finish(),
            Outcome::Later(_) => f.write_str("Later"),
        }
    }
}

impl From<Reply> for Outcome {
    fn from(r: Reply) -> Self {
        Outcome::Now(r)
    }
}

impl Outcome {
    pub fn later(fut: impl Future<Output = Reply> + 'static) -> Self {
        Outcome::Later(Box::pin(fut))
    }
}
