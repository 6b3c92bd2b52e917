//! Which replica of a broker group a consumer reads from: the master while it is reachable
//! and in the route, else a slave of the same broker name (the lowest broker id), which holds
//! the same queues at the same offsets. Pulls, min/max offsets, offset searches and consumer
//! offset queries and commits all go this way (a slave accepts UPDATE_CONSUMER_OFFSET and
//! the offset piggybacked on a pull). Writes never do: producers only ever use masters.
//!
//! Rules, per broker name:
//! - the route lists no master (it expired from the name servers): read from the slave;
//! - the master is in the route but a request to it fails because it cannot be reached
//!   (connection refused or lost, reconnect backoff, no answer in time,
//!   SERVICE_NOT_AVAILABLE) and the route lists a slave: the master is marked down, and the
//!   same request is sent to the slave at once (every request sent this way is idempotent:
//!   reads, and commits of an absolute offset);
//! - such a failure also fetches the route at once
//!   ([`Instance::refresh_route_after_failure`]): after a failover (controller mode) the
//!   route names the set's new master, and the next request goes there;
//! - back to the master when the route lists it again after it had gone, or when
//!   [`ReadPath::probe`] (the consumer's timer, every `master_probe_interval`) connects to
//!   the marked-down master: both are noticed without waiting on any pull.
//!
//! Independently of that, a broker with `slaveReadEnable` answers a pull whose consumer is far
//! behind (its reads would leave the page cache) with a suggestion to read from a slave
//! (`suggest_broker_id` not 0): the next pulls of that queue go to the broker's first slave
//! while the master stays up, until the slave suggests the master again (the consumer caught
//! up), or the slave cannot be reached. Such pulls carry no offset commit (commits keep going
//! to the master).
//!
//! A slave that is behind the consumer (it has not replicated what the consumer already read
//! from the master, or has not copied the topic yet) answers PULL_OFFSET_MOVED with a next
//! offset below the one asked for. Following it would rewind the consumer and deliver
//! messages again, so such an answer is reported as "nothing new yet" at the same offset
//! ([`Pulled::slave_behind`]): the consumer waits until the slave, or the master, has more.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::Encode;

use crate::error::{Error, Result};
use crate::instance::Instance;
use crate::net::Answer;
use crate::route::{BrokerEntry, MessageQueue};

/// Where a request went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Served {
    pub addr: SocketAddr,
    /// True for the master, false for a slave.
    pub master: bool,
}

/// What one broker name's reads know.
#[derive(Debug, Default)]
struct BrokerReads {
    /// The master marked down (unreachable while in the route), with a topic whose route
    /// lists the broker (for probing).
    down: Option<(SocketAddr, String)>,
    /// The replica reads went to last.
    serving: Option<Served>,
}

/// One consumer's choice of replica per broker name.
#[derive(Debug, Default)]
pub(crate) struct ReadPath {
    brokers: Mutex<HashMap<String, BrokerReads>>,
    /// Counts changes of replica for any broker (commits are sent again after a change).
    switches: AtomicU64,
    /// Queues a broker told to pull from a slave (`slaveReadEnable`, consumer far behind).
    slow: Mutex<HashSet<MessageQueue>>,
}

/// True when the error says the peer cannot be reached (or cannot serve at all), as opposed
/// to an answer about the request.
pub(crate) fn is_unreachable(e: &Error) -> bool {
    match e {
        Error::Connect { .. }
        | Error::Tls { .. }
        | Error::Backoff { .. }
        | Error::ConnectionClosed { .. }
        | Error::Timeout { .. } => true,
        Error::Broker { status, .. } => *status == Status::ServiceNotAvailable,
        _ => false,
    }
}

impl ReadPath {
    pub fn new() -> Self {
        Self::default()
    }

    /// Grows by one whenever reads of some broker move to another replica.
    pub fn switches(&self) -> u64 {
        self.switches.load(Ordering::Acquire)
    }

    /// True while reads of any broker go to a slave.
    pub fn on_slave(&self) -> bool {
        self.lock()
            .values()
            .any(|b| b.down.is_some() || b.serving.is_some_and(|s| !s.master))
    }

    /// Where reads of `entry` go now: its master unless the master is missing from the
    /// route or marked down (and a slave is listed); `None` if no replica is listed.
    fn pick(&self, entry: &BrokerEntry) -> Option<Served> {
        let mut brokers = self.lock();
        let b = brokers.entry(entry.name.clone()).or_default();
        if b.down
            .as_ref()
            .is_some_and(|(m, _)| entry.master != Some(*m))
        {
            // The route changed (the master expired, or another one registered): the mark
            // is stale.
            b.down = None;
        }
        let master = |addr| Served { addr, master: true };
        let slave = |addr| Served {
            addr,
            master: false,
        };
        let target = match (entry.master, entry.first_slave()) {
            (Some(_), Some(s)) if b.down.is_some() => slave(s),
            (Some(m), _) => master(m),
            (None, Some(s)) => slave(s),
            (None, None) => return None,
        };
        Self::serve(&self.switches, &entry.name, b, target);
        Some(target)
    }

    /// True while the broker's suggestion sends `mq`'s pulls to a slave.
    pub fn is_slow(&self, mq: &MessageQueue) -> bool {
        self.slow
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(mq)
    }

    /// Follows a pull answer's `suggest_broker_id`: a slave (not 0) while the consumer is
    /// far behind; the master again when a slave suggests it.
    pub fn note_suggestion(&self, mq: &MessageQueue, served: Served, suggest_broker_id: u64) {
        let mut slow = self.slow.lock().unwrap_or_else(|p| p.into_inner());
        if suggest_broker_id != 0 {
            if slow.insert(mq.clone()) {
                log::info!("{mq}: far behind, reading from a slave (the broker suggests it)");
            }
        } else if !served.master && slow.remove(mq) {
            log::info!("{mq}: caught up, reading from the master again");
        }
    }

    fn forget_slow(&self, mq: &MessageQueue) {
        self.slow
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(mq);
    }

    /// Records the replica reads go to, logging and counting a change.
    fn serve(switches: &AtomicU64, name: &str, b: &mut BrokerReads, target: Served) {
        if b.serving == Some(target) {
            return;
        }
        let why = || match &b.down {
            Some((m, _)) => format!("master {m} is unreachable"),
            None => "no master is in the route".to_string(),
        };
        match (b.serving, target.master) {
            (Some(_), true) => log::info!("{name}: reading from master {} again", target.addr),
            (Some(_), false) => {
                log::info!("{name}: reading from slave {} ({})", target.addr, why())
            }
            (None, false) => log::debug!("{name}: reading from slave {} ({})", target.addr, why()),
            (None, true) => {}
        }
        if b.serving.is_some() {
            switches.fetch_add(1, Ordering::AcqRel);
        }
        b.serving = Some(target);
    }

    /// Marks `entry`'s master down after `e`; reads go to `slave` from now on.
    fn master_down(&self, entry: &BrokerEntry, master: SocketAddr, topic: &str, e: &Error) {
        let Some(slave) = entry.first_slave() else {
            return;
        };
        let mut brokers = self.lock();
        let b = brokers.entry(entry.name.clone()).or_default();
        if b.down.is_none() {
            log::warn!("{}: master {master} is unreachable: {e}", entry.name);
        }
        b.down = Some((master, topic.to_string()));
        Self::serve(
            &self.switches,
            &entry.name,
            b,
            Served {
                addr: slave,
                master: false,
            },
        );
    }

    /// Sends one request about `mq` to the replica its reads go to (see the module docs),
    /// moving to the slave at once when the master cannot be reached. A routing failure
    /// refreshes the route before the answer or error is returned.
    pub async fn call(
        &self,
        inst: &Instance,
        mq: &MessageQueue,
        code: RequestCode,
        header: &(impl Encode + ?Sized),
        timeout: Duration,
    ) -> Result<(Answer, Served)> {
        let mut route = inst.route(&mq.topic).await?;
        if !route
            .brokers
            .get(&mq.broker_name)
            .is_some_and(BrokerEntry::has_replica)
        {
            route = inst.refresh_route(&mq.topic).await?;
        }
        let Some(entry) = route.brokers.get(&mq.broker_name) else {
            return Err(Error::NoRoute {
                topic: mq.topic.clone(),
                detail: format!("broker {} is not in the route", mq.broker_name),
            });
        };
        let Some(first) = self.pick(entry) else {
            return Err(Error::NoRoute {
                topic: mq.topic.clone(),
                detail: format!("broker {} has no registered replica", mq.broker_name),
            });
        };
        let shard = route.shard(mq);
        if code == RequestCode::PullMessage && first.master && self.is_slow(mq) {
            if let Some(slave) = entry.first_slave() {
                let served = Served {
                    addr: slave,
                    master: false,
                };
                let result = inst
                    .broker_call(slave, shard, code, header, &[], timeout)
                    .await;
                match &result {
                    // The slave is gone: back to the master for this pull and the next.
                    Err(e) if is_unreachable(e) => self.forget_slow(mq),
                    _ => return finish(inst, mq, result, served).await,
                }
            } else {
                self.forget_slow(mq);
            }
        }
        let result = inst
            .broker_call(first.addr, shard, code, header, &[], timeout)
            .await;
        if let Err(e) = &result {
            if first.master && is_unreachable(e) {
                // A failover names a new master within milliseconds: the next request of
                // this broker goes there (`pick` drops the mark when the route changes).
                let _ = inst
                    .refresh_route_after_failure(&mq.topic, first.addr)
                    .await;
                if let Some(slave) = entry.first_slave() {
                    self.master_down(entry, first.addr, &mq.topic, e);
                    let served = Served {
                        addr: slave,
                        master: false,
                    };
                    let result = inst
                        .broker_call(slave, shard, code, header, &[], timeout)
                        .await;
                    return finish(inst, mq, result, served).await;
                }
            }
        }
        finish(inst, mq, result, first).await
    }

    /// The consumer's timer: while any broker is read from a slave, fetches the routes again
    /// (a master that expired and came back is listed again) and tries to connect to every
    /// marked-down master still in the route; a master that accepts a connection on each
    /// shard of the queues is read from again.
    pub async fn probe(&self, inst: &Instance) {
        if !self.on_slave() {
            return;
        }
        inst.refresh_all_routes().await;
        let down: Vec<(String, SocketAddr, String)> = self
            .lock()
            .iter()
            .filter_map(|(name, b)| {
                b.down
                    .as_ref()
                    .map(|(m, topic)| (name.clone(), *m, topic.clone()))
            })
            .collect();
        for (name, master, topic) in down {
            let Ok(route) = inst.route(&topic).await else {
                continue;
            };
            let Some(entry) = route.brokers.get(&name) else {
                continue;
            };
            if entry.master != Some(master) {
                // The next pick sees the new route and drops the mark.
                continue;
            }
            let mut shards: Vec<u16> = entry.queue_shards.clone();
            shards.sort_unstable();
            shards.dedup();
            let mut up = true;
            for shard in shards {
                if let Err(e) = inst.broker_conn(master, Some(shard)).await {
                    log::debug!("{name}: master {master} shard {shard} still unreachable: {e}");
                    up = false;
                    break;
                }
            }
            if up {
                let mut brokers = self.lock();
                if let Some(b) = brokers.get_mut(&name) {
                    if b.down.as_ref().is_some_and(|(m, _)| *m == master) {
                        log::info!("{name}: master {master} is reachable again");
                        b.down = None;
                    }
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, BrokerReads>> {
        self.brokers.lock().unwrap_or_else(|p| p.into_inner())
    }
}

async fn finish(
    inst: &Instance,
    mq: &MessageQueue,
    result: Result<Answer>,
    served: Served,
) -> Result<(Answer, Served)> {
    inst.refresh_if_misrouted(&mq.topic, &result).await;
    result.map(|a| (a, served))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    fn entry(master: Option<u16>, slaves: &[(u64, u16)]) -> BrokerEntry {
        BrokerEntry {
            name: "b".into(),
            cluster: "c".into(),
            master: master.map(addr),
            slaves: slaves.iter().map(|&(id, p)| (id, addr(p))).collect(),
            shard_count: 2,
            queue_shards: vec![0, 1],
        }
    }

    fn refused() -> Error {
        Error::Connect {
            addr: addr(1),
            source: std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
        }
    }

    #[test]
    fn master_first_then_slave_while_down_then_master_again() {
        let path = ReadPath::new();
        let both = entry(Some(1), &[(2, 12), (1, 11)]);
        let m = path.pick(&both).unwrap();
        assert_eq!((m.addr, m.master), (addr(1), true));
        assert!(!path.on_slave());
        assert_eq!(path.switches(), 0);

        path.master_down(&both, addr(1), "t", &refused());
        let s = path.pick(&both).unwrap();
        assert_eq!(
            (s.addr, s.master),
            (addr(11), false),
            "the slave with the lowest id"
        );
        assert!(path.on_slave());
        assert_eq!(path.switches(), 1);

        // The master expires from the route: still the slave, the mark is dropped.
        let slave_only = entry(None, &[(1, 11)]);
        assert_eq!(path.pick(&slave_only).unwrap().addr, addr(11));
        assert_eq!(path.switches(), 1);
        // It registers again: reads go back to it at once.
        assert_eq!(path.pick(&both).unwrap().addr, addr(1));
        assert_eq!(path.switches(), 2);
        assert!(!path.on_slave());

        // Marked down, then another master registers under the broker name: use it.
        path.master_down(&both, addr(1), "t", &refused());
        assert_eq!(path.pick(&both).unwrap().addr, addr(11));
        let moved = entry(Some(3), &[(1, 11)]);
        assert_eq!(path.pick(&moved).unwrap().addr, addr(3));
    }

    #[test]
    fn no_slave_means_the_master_or_nothing() {
        let path = ReadPath::new();
        let alone = entry(Some(1), &[]);
        path.master_down(&alone, addr(1), "t", &refused());
        assert_eq!(path.pick(&alone).unwrap().addr, addr(1));
        assert!(path.pick(&entry(None, &[])).is_none());
    }

    #[test]
    fn unreachable_errors() {
        assert!(is_unreachable(&refused()));
        assert!(is_unreachable(&Error::Backoff {
            addr: addr(1),
            retry_in: Duration::from_millis(5),
            cause: "connection refused".to_owned(),
        }));
        assert!(is_unreachable(&Error::ConnectionClosed {
            addr: addr(1),
            request: "PULL_MESSAGE",
            written: true,
            cause: None,
        }));
        assert!(is_unreachable(&Error::Broker {
            status: Status::ServiceNotAvailable,
            remark: String::new(),
            addr: addr(1),
        }));
        assert!(!is_unreachable(&Error::Broker {
            status: Status::TopicNotExist,
            remark: String::new(),
            addr: addr(1),
        }));
    }
}
