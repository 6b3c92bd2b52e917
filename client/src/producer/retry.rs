//! What a send does after a failed attempt: whether it may send again, and where.
//!
//! - Sent again only when the broker certainly stored nothing ([`Outcome::NotStored`]: no
//!   connection, reconnect backoff, or a refusal status such as NOT_MASTER,
//!   SERVICE_NOT_AVAILABLE, SYSTEM_BUSY), or, with `retry_unknown_outcome`, when the outcome
//!   is unknown (written, then no answer: it may be stored, so a retry may duplicate it). A
//!   status that means *stored* ([`Status::message_stored`]) is never an error of a send and
//!   is never sent again.
//! - Where: after a failure that suggests a failover ([`Error::failover_suspect`]) the route
//!   is fetched at once; if it now names another master for the same broker name, the retry
//!   goes to that master, on the same queue, without a pause (a controller moved the set's
//!   master). Otherwise the retry avoids the failed broker name when another one has the
//!   topic (unordered sends), after [`BUSY_RETRY_PAUSE`] for refusals.

use std::net::SocketAddr;
use std::time::Duration;

use crate::error::{Error, Outcome};
use crate::route::{MessageQueue, TopicRouteInfo};

/// Pause before retrying after SYSTEM_BUSY and similar refusals.
pub const BUSY_RETRY_PAUSE: Duration = Duration::from_millis(50);

/// May a send that failed with `e` be sent again (attempts and time allowing)?
pub(super) fn may_resend(e: &Error, retry_unknown_outcome: bool) -> bool {
    match e.outcome() {
        Outcome::NotStored => true,
        Outcome::Unknown => retry_unknown_outcome,
        Outcome::Rejected => false,
    }
}

/// Where the next attempt of a send goes (the first: anywhere).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Next {
    /// The same queue again (its broker name has a new master).
    pub same_queue: Option<MessageQueue>,
    /// A broker name to stay away from when another one has the topic.
    pub avoid: Option<String>,
    pub pause: Duration,
}

/// The next attempt after attempt on `mq` at `addr` failed with `e`; `route` is the route
/// as fetched after the failure (if it was).
pub(super) fn next_attempt(
    e: &Error,
    mq: &MessageQueue,
    addr: SocketAddr,
    route: Option<&TopicRouteInfo>,
) -> Next {
    let moved = route
        .and_then(|r| r.master(&mq.broker_name))
        .is_some_and(|m| m != addr);
    if moved {
        return Next {
            same_queue: Some(mq.clone()),
            avoid: None,
            pause: Duration::ZERO,
        };
    }
    Next {
        same_queue: None,
        avoid: Some(mq.broker_name.clone()),
        pause: pause_after(e),
    }
}

/// The next attempt after a failure that happened before a queue was chosen (no route, no
/// master known): anywhere, after a pause.
pub(super) fn next_attempt_unrouted(e: &Error) -> Next {
    Next {
        pause: pause_after(e),
        ..Next::default()
    }
}

fn pause_after(e: &Error) -> Duration {
    match e {
        Error::Backoff { retry_in, .. } => *retry_in,
        Error::Broker { .. } | Error::Busy { .. } | Error::NoRoute { .. } => BUSY_RETRY_PAUSE,
        _ => Duration::ZERO,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use ringmq_wire::code::Status;
    use ringmq_wire::command::route::{
        perm, BrokerData, BrokerReplica, BrokerRole, QueueData, TopicRoute, MASTER_ID,
    };

    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    fn broker_error(status: Status) -> Error {
        Error::Broker {
            status,
            remark: String::new(),
            addr: addr(1),
        }
    }

    #[test]
    fn which_failures_are_sent_again() {
        for &s in Status::ALL {
            let e = broker_error(s);
            let expected = !s.message_stored()
                && (s.is_retriable()
                    || matches!(
                        s,
                        Status::TopicNotExist | Status::NoPermission | Status::LimitExceeded
                    ));
            assert_eq!(may_resend(&e, false), expected, "{s}");
            assert_eq!(
                may_resend(&e, true),
                expected,
                "{s}: an answer is no unknown"
            );
        }
        // The failover statuses: nothing was stored, send again.
        for s in [
            Status::NotMaster,
            Status::ServiceNotAvailable,
            Status::SystemBusy,
        ] {
            assert!(may_resend(&broker_error(s), false), "{s}");
        }
        // Stored (durability unconfirmed), or refused for good: never sent again.
        for s in [
            Status::Success,
            Status::FlushDiskTimeout,
            Status::FlushSlaveTimeout,
            Status::SlaveNotAvailable,
            Status::MessageIllegal,
            Status::MalformedRequest,
        ] {
            assert!(!may_resend(&broker_error(s), true), "{s}");
        }
        let refused = Error::Connect {
            addr: addr(1),
            source: std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
        };
        assert!(may_resend(&refused, false), "never reached the broker");
        let unwritten = Error::ConnectionClosed {
            addr: addr(1),
            request: "SEND_MESSAGE",
            written: false,
            cause: None,
        };
        assert!(may_resend(&unwritten, false));
        // Written, then no answer: may be stored; sent again only when asked for.
        let written = Error::ConnectionClosed {
            addr: addr(1),
            request: "SEND_MESSAGE",
            written: true,
            cause: None,
        };
        let timeout = Error::Timeout {
            addr: addr(1),
            request: "SEND_MESSAGE",
            after: Duration::from_secs(3),
        };
        for e in [&written, &timeout] {
            assert!(!may_resend(e, false), "{e}");
            assert!(may_resend(e, true), "{e}");
        }
    }

    fn route(master_of_a: u16) -> TopicRouteInfo {
        let broker = |name: &str, port| BrokerData {
            cluster: "c".into(),
            broker_name: name.into(),
            replicas: BTreeMap::from([(
                MASTER_ID,
                BrokerReplica {
                    address: format!("127.0.0.1:{port}"),
                    ha_address: String::new(),
                    role: BrokerRole::SyncMaster,
                    shard_count: 1,
                    version: "0".into(),
                    shard_addresses: Vec::new(),
                },
            )]),
        };
        let queues = |name: &str| QueueData {
            broker_name: name.into(),
            read_queue_count: 2,
            write_queue_count: 2,
            perm: perm::READ_WRITE,
            queue_shards: vec![0, 0],
        };
        TopicRouteInfo::from_wire(&TopicRoute {
            topic: "t".into(),
            brokers: vec![broker("a", master_of_a), broker("b", 20)],
            queues: vec![queues("a"), queues("b")],
        })
    }

    #[test]
    fn a_new_master_of_the_same_broker_name_comes_first() {
        let mq = MessageQueue::new("t", "a", 1);
        let e = broker_error(Status::NotMaster);
        // The route names another master for broker a: same queue, at once.
        let moved = next_attempt(&e, &mq, addr(10), Some(&route(11)));
        assert_eq!(
            moved,
            Next {
                same_queue: Some(mq.clone()),
                avoid: None,
                pause: Duration::ZERO
            }
        );
        // Still the failed master (or no route fetched): another broker name, after a pause
        // for a refusal.
        for r in [Some(route(10)), None] {
            let n = next_attempt(&e, &mq, addr(10), r.as_ref());
            assert_eq!(n.same_queue, None);
            assert_eq!(n.avoid.as_deref(), Some("a"));
            assert_eq!(n.pause, BUSY_RETRY_PAUSE);
        }
        let refused = Error::Connect {
            addr: addr(10),
            source: std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
        };
        let n = next_attempt(&refused, &mq, addr(10), Some(&route(10)));
        assert_eq!((n.avoid.as_deref(), n.pause), (Some("a"), Duration::ZERO));
    }
}
