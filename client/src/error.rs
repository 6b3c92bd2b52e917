//! `Error`: everything a client call can fail with, typed, with the broker's status and remark
//! carried through. One enum for the crate's boundary (the caller's side of the network).
//!
//! The one question a producer must answer after a failed send is "could the broker have
//! stored it?" ([`Error::outcome`]):
//! - [`Outcome::NotStored`]: the broker certainly did not store the message: the frame never
//!   left this process (no connection, reconnect backoff, shut down, invalid message), or the
//!   broker answered a status that refuses before storing (SYSTEM_BUSY,
//!   SERVICE_NOT_AVAILABLE, DISK_FULL, TOPIC_NOT_EXIST, NO_PERMISSION, ...). Resending cannot
//!   duplicate. An admin lookup that found nothing ([`Error::NotFound`]) is here too: it
//!   changed nothing.
//! - [`Outcome::Unknown`]: the frame was written but no answer came (timeout, connection lost):
//!   the broker may have stored it. Resending may duplicate.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use ringmq_wire::code::Status;
use ringmq_wire::WireError;
use thiserror::Error;

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Whether a failed request may have been carried out by the broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The broker certainly did not carry out the request: safe to send again.
    NotStored,
    /// The request reached the socket but no answer came: it may have been carried out.
    Unknown,
    /// The broker answered: it refused the request for a reason that retrying does not fix
    /// (an invalid message, a malformed request, ...). Not carried out.
    Rejected,
}

/// A client error.
#[derive(Debug, Error)]
pub enum Error {
    /// The broker or name server answered with a status other than the one expected.
    #[error("{status} from {addr}: {remark}")]
    Broker {
        status: Status,
        remark: String,
        addr: SocketAddr,
    },
    /// The peer answered with a status code this client does not know.
    #[error("unknown status code {code} from {addr}: {remark}")]
    UnknownStatus {
        code: u16,
        remark: String,
        addr: SocketAddr,
    },
    /// No TCP connection could be made.
    #[error("connecting to {addr}: {source}")]
    Connect {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    /// The TCP connection was made but the TLS handshake failed (nothing was sent).
    #[error("TLS handshake with {addr} failed: {source}")]
    Tls {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    /// A connection attempt failed recently; the next one is not due yet.
    #[error("{addr}: {cause} (reconnecting with backoff, next attempt in {retry_in:?})")]
    Backoff {
        addr: SocketAddr,
        retry_in: Duration,
        /// Why the last attempt failed (unreachable, refused HELLO, TLS handshake).
        cause: String,
    },
    /// The connection closed. `written` tells whether the request had been written;
    /// `cause`, when known, why the connection ended (a read or write error, e.g. a TLS
    /// alert from a server that refused this client's certificate).
    #[error(
        "connection to {addr} closed before the answer to {request} (written: {written}){}",
        cause_note(.cause.as_deref())
    )]
    ConnectionClosed {
        addr: SocketAddr,
        request: &'static str,
        written: bool,
        cause: Option<String>,
    },
    /// No answer within the timeout. The request was written (it may have been carried out).
    #[error("{request} to {addr} got no answer within {after:?}")]
    Timeout {
        addr: SocketAddr,
        request: &'static str,
        after: Duration,
    },
    /// Too many requests are waiting on one connection (see `requests_in_flight_max`).
    #[error("{addr}: {in_flight} requests already in flight on this connection")]
    Busy { addr: SocketAddr, in_flight: usize },
    /// The peer sent bytes that are not a valid answer.
    #[error("protocol error from {addr}: {source}")]
    Protocol {
        addr: SocketAddr,
        #[source]
        source: WireError,
    },
    /// The message (or batch) cannot be sent as it is; nothing was sent.
    #[error("invalid message: {0}")]
    InvalidMessage(String),
    /// Encoding a request failed (a field over its limit); nothing was sent.
    #[error("encoding the request: {0}")]
    Encode(#[from] WireError),
    /// No broker serves the topic (or none can be written/read).
    #[error("no route for topic {topic}: {detail}")]
    NoRoute { topic: String, detail: String },
    /// An admin lookup found nothing: no such broker, cluster, consumer group or offset.
    /// `what` names what was looked for and where (and, when short, what exists instead);
    /// it is the whole message. Nothing was carried out.
    #[error("{what}")]
    NotFound { what: String },
    /// A builder was given an invalid setting.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The producer or consumer was shut down.
    #[error("the client is shut down")]
    Shutdown,
    /// A local file (broadcasting offsets) could not be read or written.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
    /// Every attempt of a send failed; `last` is the last attempt's error.
    #[error("send failed after {attempts} attempt(s): {last}")]
    RetriesExhausted { attempts: u32, last: Box<Error> },
    /// A request ([`Producer::request`](crate::Producer::request)) was stored, but no reply
    /// came within its timeout (the replier is slow, gone, or its reply could not be pushed
    /// here). The request's entry is gone: a reply arriving later is dropped.
    #[error("no reply to request {correlation_id} within {timeout:?}")]
    RequestTimeout {
        correlation_id: String,
        timeout: Duration,
    },
    /// `limit` requests of this producer already wait for their replies; nothing was sent.
    #[error("{limit} requests already wait for their replies")]
    RequestsPending { limit: usize },
}

impl Error {
    /// The broker status, if the broker answered.
    pub fn status(&self) -> Option<Status> {
        match self {
            Error::Broker { status, .. } => Some(*status),
            Error::RetriesExhausted { last, .. } => last.status(),
            _ => None,
        }
    }

    /// The broker's remark, if the broker answered.
    /// NO_ROUTE from a name server's TOPIC_NOT_EXIST answer. Its remark names the topic
    /// itself ("no route for topic T: why"): only the why is kept, which the error's own
    /// text follows.
    pub(crate) fn no_route_answer(topic: &str, remark: &str) -> Error {
        let prefix = format!("no route for topic {topic}: ");
        Error::NoRoute {
            topic: topic.to_string(),
            detail: remark.strip_prefix(&prefix).unwrap_or(remark).to_string(),
        }
    }

    pub fn remark(&self) -> Option<&str> {
        match self {
            Error::Broker { remark, .. } | Error::UnknownStatus { remark, .. } => Some(remark),
            Error::RetriesExhausted { last, .. } => last.remark(),
            _ => None,
        }
    }

    /// Could the broker have carried out the request? See the module docs.
    pub fn outcome(&self) -> Outcome {
        match self {
            Error::Broker { status, .. } => {
                if refused_before_storing(*status) {
                    Outcome::NotStored
                } else {
                    Outcome::Rejected
                }
            }
            Error::UnknownStatus { .. } => Outcome::Unknown,
            Error::Connect { .. }
            | Error::Tls { .. }
            | Error::Backoff { .. }
            | Error::Busy { .. }
            | Error::NoRoute { .. }
            | Error::NotFound { .. }
            | Error::RequestsPending { .. }
            | Error::Shutdown => Outcome::NotStored,
            Error::ConnectionClosed { written, .. } => {
                if *written {
                    Outcome::Unknown
                } else {
                    Outcome::NotStored
                }
            }
            Error::Timeout { .. } | Error::Protocol { .. } | Error::RequestTimeout { .. } => {
                Outcome::Unknown
            }
            Error::InvalidMessage(_) | Error::Encode(_) | Error::Config(_) | Error::Io { .. } => {
                Outcome::Rejected
            }
            Error::RetriesExhausted { last, .. } => last.outcome(),
        }
    }

    /// True when the failure concerns where the request went (a stale route, an unreachable
    /// or refusing broker): the route should be fetched again.
    pub fn is_routing_error(&self) -> bool {
        match self {
            Error::Broker { status, .. } => matches!(
                status,
                Status::TopicNotExist
                    | Status::NoPermission
                    | Status::ServiceNotAvailable
                    | Status::WrongShard
                    | Status::NotMaster
            ),
            Error::Connect { .. }
            | Error::Tls { .. }
            | Error::Backoff { .. }
            | Error::ConnectionClosed { .. }
            | Error::NoRoute { .. } => true,
            _ => false,
        }
    }
}

impl Error {
    /// The broker this error came from, when the error suggests that broker may no longer
    /// be its group's master: it cannot be reached (refused, reset, closed, no connection or
    /// answer in time) or it answered NOT_MASTER or SERVICE_NOT_AVAILABLE. The route of the
    /// request's topic is worth fetching at once
    /// ([`Instance::refresh_route_after_failure`](crate::instance::Instance::refresh_route_after_failure)):
    /// after a failover the name servers name the set's new master within milliseconds.
    pub fn failover_suspect(&self) -> Option<SocketAddr> {
        match self {
            Error::Connect { addr, .. }
            | Error::Tls { addr, .. }
            | Error::Backoff { addr, .. }
            | Error::ConnectionClosed { addr, .. }
            | Error::Timeout { addr, .. } => Some(*addr),
            Error::Broker { status, addr, .. } => {
                matches!(status, Status::NotMaster | Status::ServiceNotAvailable).then_some(*addr)
            }
            Error::RetriesExhausted { last, .. } => last.failover_suspect(),
            _ => None,
        }
    }
}

fn cause_note(cause: Option<&str>) -> String {
    cause.map_or_else(String::new, |c| format!(": {c}"))
}

/// Statuses with which a broker refuses a send before anything is appended, so the message
/// is certainly not stored and may be sent again (to another broker, or later):
/// SYSTEM_BUSY, SERVICE_NOT_AVAILABLE, DISK_FULL, WRONG_SHARD, SYSTEM_ERROR (the wire
/// crate's [`Status::is_retriable`]), plus TOPIC_NOT_EXIST, NO_PERMISSION and LIMIT_EXCEEDED
/// (this broker does not take the topic: another may).
pub fn refused_before_storing(status: Status) -> bool {
    !status.message_stored()
        && (status.is_retriable()
            || matches!(
                status,
                Status::TopicNotExist | Status::NoPermission | Status::LimitExceeded
            ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failover_suspects() {
        let broker = |status| Error::Broker {
            status,
            remark: String::new(),
            addr: addr(),
        };
        for s in [Status::NotMaster, Status::ServiceNotAvailable] {
            assert_eq!(broker(s).failover_suspect(), Some(addr()), "{s}");
            assert!(broker(s).is_routing_error(), "{s}");
        }
        for s in [
            Status::SystemBusy,
            Status::TopicNotExist,
            Status::MessageIllegal,
        ] {
            assert_eq!(broker(s).failover_suspect(), None, "{s}");
        }
        let refused = Error::Connect {
            addr: addr(),
            source: io::Error::from(io::ErrorKind::ConnectionRefused),
        };
        assert_eq!(refused.failover_suspect(), Some(addr()));
        let lost = Error::ConnectionClosed {
            addr: addr(),
            request: "SEND_MESSAGE",
            written: true,
            cause: None,
        };
        assert_eq!(lost.failover_suspect(), Some(addr()));
        assert_eq!(Error::InvalidMessage("x".into()).failover_suspect(), None);
    }

    fn addr() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 1))
    }

    #[test]
    fn outcomes() {
        let busy = Error::Broker {
            status: Status::SystemBusy,
            remark: "busy".into(),
            addr: addr(),
        };
        assert_eq!(busy.outcome(), Outcome::NotStored);
        assert_eq!(busy.status(), Some(Status::SystemBusy));
        let illegal = Error::Broker {
            status: Status::MessageIllegal,
            remark: "too big".into(),
            addr: addr(),
        };
        assert_eq!(illegal.outcome(), Outcome::Rejected);
        let t = Error::Timeout {
            addr: addr(),
            request: "SEND_MESSAGE",
            after: Duration::from_secs(1),
        };
        assert_eq!(t.outcome(), Outcome::Unknown);
        let closed = Error::ConnectionClosed {
            addr: addr(),
            request: "SEND_MESSAGE",
            written: false,
            cause: Some("received fatal alert: CertificateRequired".into()),
        };
        assert!(closed
            .to_string()
            .ends_with("(written: false): received fatal alert: CertificateRequired"));
        assert_eq!(closed.outcome(), Outcome::NotStored);
        let wrapped = Error::RetriesExhausted {
            attempts: 3,
            last: Box::new(busy),
        };
        assert_eq!(wrapped.status(), Some(Status::SystemBusy));
        assert_eq!(wrapped.remark(), Some("busy"));
        let missing = Error::NotFound {
            what: "no broker \"b9\" is registered with the name servers".into(),
        };
        assert_eq!(missing.outcome(), Outcome::NotStored);
        assert!(!missing.is_routing_error());
        assert_eq!(
            missing.to_string(),
            "no broker \"b9\" is registered with the name servers"
        );
        assert!(!refused_before_storing(Status::FlushDiskTimeout));
        assert!(refused_before_storing(Status::NotMaster));
        assert!(refused_before_storing(Status::TopicNotExist));
    }
}
