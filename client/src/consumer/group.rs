//! Group membership of one consumer: heartbeats (who we are, what we subscribe to) to every
//! replica, master and slave, of the brokers of the subscribed topics (as RocketMQ's
//! consumers do), the member list, and the assignment the member list gives us. In
//! clustering mode the assignment is [`allocate_average`] over the topic's consumable
//! queues (those of every broker with a master or a slave) and the sorted member list, asked
//! of a master, or of a slave when no master answers; in broadcasting mode it is every
//! consumable queue.
//!
//! A topic whose route or member list cannot be read keeps its current assignment: a
//! transient error never drops queues. Nor does a member list that does not name this
//! member yet (its heartbeat has not reached the broker that answered): the heartbeat is
//! sent again and the list asked again once, and if this member is still missing the
//! topic keeps its queues and the assignment is reported unsettled, so the caller tries
//! again soon. Member lists are asked first of the brokers that acknowledged this member's
//! latest heartbeat.
//!
//! Brokers tell members that the group changed (NOTIFY_CONSUMER_IDS_CHANGED, see
//! [`crate::net::inbox`]); [`Group::changed`] is the wake-up the consumer waits on.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::command::heartbeat::{
    ConsumeFromWhere, ConsumeType, ConsumerGroupData, HeartbeatData, MessageModel as WireModel,
    Subscription as WireSubscription,
};
use ringmq_wire::command::{ConsumerList, GetConsumerListRequest, UnregisterClientRequest};
use tokio::sync::Notify;

use super::replica::ReadPath;
use super::{allocate_average, MessageModel, MessageSelector, StartPosition};
use crate::error::{Error, Result};
use crate::instance::{encode_heartbeat, Instance};
use crate::net::Answer;
use crate::route::MessageQueue;

/// The members (sorted) an answer to GET_CONSUMER_LIST_BY_GROUP lists.
pub(crate) fn members_in(answer: &Answer) -> Result<Vec<String>> {
    let mut list: ConsumerList = answer.decode_body()?;
    list.client_ids.sort();
    Ok(list.client_ids)
}

/// One consumer's membership in its group.
#[derive(Debug)]
pub struct Group {
    pub inst: Arc<Instance>,
    /// The replica each broker's reads go to (shared with the offset store).
    pub reads: Arc<ReadPath>,
    pub name: String,
    pub model: MessageModel,
    pub start: StartPosition,
    pub push: bool,
    /// topic -> what it keeps.
    subscriptions: Mutex<BTreeMap<String, MessageSelector>>,
    version: std::sync::atomic::AtomicU64,
    /// Brokers that acknowledged the latest heartbeat.
    acked: Mutex<BTreeSet<SocketAddr>>,
    /// Notified when a broker says the group's members changed.
    changed: Arc<Notify>,
    /// topic -> the member list its latest rebalance allocated over.
    last_members: Mutex<BTreeMap<String, Vec<String>>>,
}

/// For this long after a broker connection came back, a member list missing members the
/// last rebalance saw is not acted on (the topic keeps its queues and the rebalance is
/// retried): a broker that restarted hears from the members one by one as they reconnect,
/// and the first to heartbeat would otherwise take the others' queues and read them again
/// from the group's committed offset, which the restart may have set back.
pub const REJOIN_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

/// What a rebalance computed.
#[derive(Debug, Default)]
pub struct Assignment {
    pub queues: BTreeSet<MessageQueue>,
    /// False if some topic kept its current queues (its route or member list could not be
    /// read, or the list did not name this member yet).
    pub settled: bool,
}

impl Group {
    pub fn new(
        inst: Arc<Instance>,
        reads: Arc<ReadPath>,
        name: &str,
        model: MessageModel,
        start: StartPosition,
        push: bool,
    ) -> Self {
        let changed = inst.pool.inbox().register_group(name);
        Group {
            inst,
            reads,
            name: name.to_string(),
            model,
            start,
            push,
            subscriptions: Mutex::new(BTreeMap::new()),
            version: std::sync::atomic::AtomicU64::new(1),
            acked: Mutex::new(BTreeSet::new()),
            changed,
            last_members: Mutex::new(BTreeMap::new()),
        }
    }

    /// Notified (one pending wake-up at most) when a broker says the members changed.
    pub fn changed(&self) -> Arc<Notify> {
        Arc::clone(&self.changed)
    }

    pub fn subscribe(&self, topic: &str, selector: &MessageSelector) {
        self.lock().insert(topic.to_string(), selector.clone());
        self.version
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn unsubscribe(&self, topic: &str) {
        self.lock().remove(topic);
        self.version
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn subscriptions(&self) -> BTreeMap<String, MessageSelector> {
        self.lock().clone()
    }

    /// The selector of a topic (every message when not subscribed).
    pub fn selector(&self, topic: &str) -> MessageSelector {
        self.lock()
            .get(topic)
            .cloned()
            .unwrap_or_else(MessageSelector::all)
    }

    /// Sends a heartbeat to every replica (master and slaves) of every subscribed topic;
    /// remembers which acknowledged it.
    pub async fn heartbeat(&self) {
        if let Err(e) = self.heartbeat_checked().await {
            log::warn!("{}: {e}", self.name);
        }
    }

    /// [`Group::heartbeat`], failing when a broker refuses a subscription for good (a SQL92
    /// expression it cannot parse, or SQL92 on a broker with `enablePropertyFilter=false`);
    /// other failures only leave that broker out of the acknowledged set.
    pub async fn heartbeat_checked(&self) -> Result<()> {
        let Some(body) = encode_heartbeat(&self.heartbeat_data()) else {
            return Ok(());
        };
        let mut acked = BTreeSet::new();
        let mut refused = None;
        for addr in self.replicas().await {
            let r = self
                .inst
                .broker_call(
                    addr,
                    None,
                    RequestCode::HeartBeat,
                    &ringmq_wire::codec::Empty,
                    &body,
                    self.inst.cfg.request_timeout,
                )
                .await
                .and_then(|a| a.expect(&[Status::Success]));
            match r {
                Ok(_) => {
                    acked.insert(addr);
                }
                Err(e @ Error::Broker { status, .. }) if subscription_refused(status) => {
                    refused.get_or_insert(e);
                }
                Err(e) => {
                    log::debug!("heartbeat to {addr}: {e}");
                    if e.failover_suspect().is_some() {
                        self.inst.refresh_routes_naming(addr).await;
                    }
                }
            }
        }
        *self.lock_acked() = acked;
        refused.map_or(Ok(()), Err)
    }

    /// Leaves the group on every replica (so the others rebalance without waiting for the
    /// brokers to expire us).
    pub async fn unregister(&self) {
        let req = UnregisterClientRequest {
            client_id: self.inst.id.clone(),
            producer_group: None,
            consumer_group: Some(self.name.clone()),
        };
        self.inst.unregister_from(self.replicas().await, &req).await;
    }

    /// The queues this member should own now. Topics whose route or member list cannot be
    /// read, or whose member list does not name this member, keep the queues of `current`.
    pub async fn target_assignment(&self, current: &BTreeSet<MessageQueue>) -> Assignment {
        let mut out = Assignment {
            queues: BTreeSet::new(),
            settled: true,
        };
        for topic in self.subscriptions().keys() {
            match self.topic_assignment(topic).await {
                Ok(qs) => out.queues.extend(qs),
                Err(e) => {
                    log::debug!("rebalance of {topic} for {}: {e}", self.name);
                    out.settled = false;
                    out.queues
                        .extend(current.iter().filter(|q| &q.topic == topic).cloned());
                }
            }
        }
        out
    }

    async fn topic_assignment(&self, topic: &str) -> Result<Vec<MessageQueue>> {
        let route = self.inst.route(topic).await?;
        let queues = route.consume_queues.clone();
        if self.model == MessageModel::Broadcasting {
            return Ok(queues);
        }
        let mut ask = route.masters();
        ask.extend(route.slaves());
        let mut members = self.members(&self.acked_first(ask.clone())).await?;
        if !members.contains(&self.inst.id) {
            log::debug!(
                "{}: the member list of {} does not name this member yet; heartbeating again",
                self.inst.id,
                self.name
            );
            self.heartbeat().await;
            members = self.members(&self.acked_first(ask)).await?;
        }
        if !members.contains(&self.inst.id) {
            return Err(Error::NotFound {
                what: format!("{} in the member list of {}", self.inst.id, self.name),
            });
        }
        let mut last = self.last_members.lock().unwrap_or_else(|p| p.into_inner());
        let rejoining = self
            .inst
            .pool
            .since_reconnect()
            .is_some_and(|d| d < REJOIN_GRACE);
        if let Some(gone) = last
            .get(topic)
            .and_then(|prev| prev.iter().find(|m| !members.contains(m)))
            .filter(|_| rejoining)
        {
            return Err(Error::NotFound {
                what: format!(
                    "{gone} in the member list of {} (a broker came back less than {:?} ago; \
                     waiting for the members to heartbeat)",
                    self.name, REJOIN_GRACE
                ),
            });
        }
        last.insert(topic.to_string(), members.clone());
        Ok(allocate_average(&queues, &members, &self.inst.id))
    }

    /// `brokers` with those that acknowledged the latest heartbeat first (order otherwise
    /// kept).
    fn acked_first(&self, brokers: Vec<SocketAddr>) -> Vec<SocketAddr> {
        let acked = self.lock_acked().clone();
        let (mut first, rest): (Vec<_>, Vec<_>) =
            brokers.into_iter().partition(|a| acked.contains(a));
        first.extend(rest);
        first
    }

    /// The group's members (sorted), asked of the first of `brokers` that answers.
    pub async fn members(&self, brokers: &[SocketAddr]) -> Result<Vec<String>> {
        let req = GetConsumerListRequest {
            consumer_group: self.name.clone(),
        };
        let mut last = None;
        for addr in brokers {
            let answer = self
                .inst
                .broker_call(
                    *addr,
                    None,
                    RequestCode::GetConsumerListByGroup,
                    &req,
                    &[],
                    self.inst.cfg.request_timeout,
                )
                .await
                .and_then(|a| a.expect(&[Status::Success]));
            match answer {
                Ok(a) => return members_in(&a),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or(Error::NoRoute {
            topic: String::new(),
            detail: "no broker to ask for the member list".into(),
        }))
    }

    /// Masters and slaves of the brokers of the subscribed topics.
    async fn replicas(&self) -> Vec<SocketAddr> {
        let mut out = Vec::new();
        for topic in self.subscriptions().keys() {
            if let Ok(route) = self.inst.route(topic).await {
                out.extend(route.masters());
                out.extend(route.slaves());
            }
        }
        out.sort();
        out.dedup();
        out
    }

    fn heartbeat_data(&self) -> HeartbeatData {
        let version = self.version.load(std::sync::atomic::Ordering::Relaxed);
        HeartbeatData {
            client_id: self.inst.id.clone(),
            producer_groups: Vec::new(),
            consumer_groups: vec![ConsumerGroupData {
                group: self.name.clone(),
                consume_type: if self.push {
                    ConsumeType::Passively
                } else {
                    ConsumeType::Actively
                },
                message_model: match self.model {
                    MessageModel::Clustering => WireModel::Clustering,
                    MessageModel::Broadcasting => WireModel::Broadcasting,
                },
                consume_from_where: match self.start {
                    StartPosition::First => ConsumeFromWhere::FirstOffset,
                    StartPosition::Last => ConsumeFromWhere::LastOffset,
                    StartPosition::Timestamp(_) => ConsumeFromWhere::Timestamp,
                },
                subscriptions: self
                    .subscriptions()
                    .into_iter()
                    .map(|(topic, selector)| WireSubscription {
                        topic,
                        filter_type: selector.filter_type(),
                        expression: selector.expression().to_string(),
                        version,
                    })
                    .collect(),
            }],
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, MessageSelector>> {
        self.subscriptions.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_acked(&self) -> std::sync::MutexGuard<'_, BTreeSet<SocketAddr>> {
        self.acked.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Statuses by which a broker refuses a subscription until it changes.
fn subscription_refused(status: Status) -> bool {
    matches!(
        status,
        Status::SubscriptionParseFailed | Status::PropertyFilterDisabled
    )
}
