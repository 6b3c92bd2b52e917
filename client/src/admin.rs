//! Administrative calls: everything `ringmq-ctl` does, as a library, so programs can do it
//! too. An [`Admin`] talks to the name servers (cluster, routes, topic list) and to brokers
//! (topics, offsets, groups, messages, runtime info and configuration), and combines them
//! into the views an operator asks for: [`Admin::cluster_status`], [`Admin::topic_status`],
//! [`Admin::group_progress`], [`Admin::reset_offset`].
//!
//! | area | calls | requests |
//! |---|---|---|
//! | name servers | [`Admin::cluster_info`], [`Admin::brokers`], [`Admin::topic_list`], [`Admin::topic_route`], [`Admin::topic_route_data`] | GET_BROKER_CLUSTER_INFO, GET_ALL_TOPIC_LIST_FROM_NAMESERVER, GET_ROUTEINFO_BY_TOPIC |
//! | topics | [`Admin::create_topic`], [`Admin::put_topic`], [`Admin::delete_topic`], [`Admin::topic_configs`], [`Admin::topic_status`] | UPDATE_AND_CREATE_TOPIC, DELETE_TOPIC_IN_BROKER, DELETE_TOPIC_IN_NAMESRV, GET_ALL_TOPIC_CONFIG, GET_MIN/MAX_OFFSET, PULL_MESSAGE |
//! | queues | [`Admin::min_offset`], [`Admin::max_offset`], [`Admin::offset_at`], [`Admin::committed_offset`], [`Admin::commit_offset`], [`Admin::pull`] | GET_MIN/MAX_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP, QUERY/UPDATE_CONSUMER_OFFSET, PULL_MESSAGE |
//! | groups | [`Admin::group_list`], [`Admin::group_members`], [`Admin::group_progress`], [`Admin::reset_offset`] | GET_ALL_SUBSCRIPTIONGROUP_CONFIG, GET_ALL_CONSUMER_OFFSET, GET_CONSUMER_LIST_BY_GROUP |
//! | messages | [`Admin::view_message`], [`Admin::query_by_key`], [`Admin::read_messages`] | VIEW_MESSAGE_BY_ID, QUERY_MESSAGE, PULL_MESSAGE |
//! | brokers | [`Admin::runtime_info`], [`Admin::cluster_status`], [`Admin::broker_config`], [`Admin::update_broker_config`], [`Admin::set_read_only`] | GET_BROKER_RUNTIME_INFO, GET/UPDATE_BROKER_CONFIG |
//!
//! Calls about one queue go straight to the shard that owns it (the topic's route is fetched
//! when needed). Nothing here retries: an operator's tool reports the first failure.
//!
//! Resetting a group's offsets while its consumers run does not stop them: they commit
//! their own positions over the reset at their next commit. Stop the group first (RocketMQ
//! tells live consumers to reset; ringmq has no such request yet).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::{Empty, Encode};
use ringmq_wire::command::route::{perm, BrokerRole, MASTER_ID};
use ringmq_wire::command::{
    BrokerConfigTable, BrokerRuntimeInfo, ClusterInfo, ConsumerGroupList, ConsumerList,
    ConsumerOffsetEntry, ConsumerOffsetTable, CreateTopicRequest, DeleteTopicInNamesrvRequest,
    DeleteTopicRequest, GetAllConsumerOffsetRequest, GetConsumerListRequest, GetRouteRequest,
    QueryConsumerOffsetRequest, QueryConsumerOffsetResponse, QueryMessageRequest, TopicConfig,
    TopicConfigTable, TopicList, TopicRoute, UpdateConsumerOffsetRequest, ViewMessageRequest,
};
use ringmq_wire::record;
use tokio::time::Instant;

use crate::consumer::{self, allocate_average, PullResult, PullStatus};
use crate::error::{Error, Result};
use crate::instance::{ClientConfig, Instance};
use crate::message::{decode_records, ReceivedMessage};
use crate::net::{Answer, Endpoint, Peer};
use crate::route::{MessageQueue, TopicRouteInfo};

/// How often `create_topic` asks the name servers whether the route is published yet.
pub const ROUTE_POLL_PAUSE: Duration = Duration::from_millis(50);

/// The consumer group named in the admin's own pulls (RocketMQ's tools use the same name).
/// Pulls from it never commit an offset.
pub const TOOLS_GROUP: &str = "TOOLS_CONSUMER";

/// Most messages one pull of [`Admin::read_messages`] asks for.
pub const READ_BATCH_MAX: u32 = 32;

/// Bytes one admin pull may return: the broker's pull limit, enough for the largest record.
pub const PULL_BYTES_MAX: u32 = 8 * 1024 * 1024;

/// `brokerPermission` of a broker that refuses writes ([`Admin::set_read_only`]).
pub const BROKER_PERMISSION_READ_ONLY: u8 = perm::READ;
/// `brokerPermission` of a broker that takes reads and writes.
pub const BROKER_PERMISSION_READ_WRITE: u8 = perm::READ_WRITE;

/// Administrative calls.
#[derive(Debug, Clone)]
pub struct Admin {
    inst: Arc<Instance>,
}

/// One broker process (a master or a slave) as the name servers list it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerRef {
    pub cluster: String,
    /// Broker name (shared by a master and its slaves).
    pub name: String,
    /// [`MASTER_ID`] (0) for a master, 1.. for slaves.
    pub id: u64,
    pub addr: SocketAddr,
    pub role: BrokerRole,
    pub shard_count: u16,
    pub version: String,
}

impl BrokerRef {
    pub fn is_master(&self) -> bool {
        self.id == MASTER_ID
    }
}

/// Which brokers a topic change goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopicTarget {
    /// Every master the name servers know.
    AllMasters,
    /// Every master of this cluster.
    Cluster(String),
    /// One broker: its name (its master) or its address (`ip:port`, a master).
    Broker(String),
}

/// A topic's settings on a broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicSpec {
    pub topic: String,
    pub read_queues: u32,
    pub write_queues: u32,
    /// [`perm`] bits: `perm::READ_WRITE` (6), `perm::READ` (4), `perm::WRITE` (2).
    pub perm: u8,
}

impl TopicSpec {
    /// A read-write topic with `queues` read and write queues.
    pub fn new(topic: impl Into<String>, queues: u32) -> Self {
        TopicSpec {
            topic: topic.into(),
            read_queues: queues,
            write_queues: queues,
            perm: perm::READ_WRITE,
        }
    }
}

/// The state of one queue of a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueStatus {
    pub queue: MessageQueue,
    /// Shard that owns the queue on its broker (`None`: the route does not say).
    pub shard: Option<u16>,
    /// Oldest offset still stored.
    pub min_offset: u64,
    /// One past the newest message.
    pub max_offset: u64,
    /// Store time of the newest message (ms since the epoch); `None` for an empty queue.
    pub last_store_ms: Option<i64>,
}

/// A consumer group as the brokers know it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupSummary {
    pub group: String,
    /// Live members (client ids, sorted), over every master.
    pub members: Vec<String>,
    /// Subscribed topics and their tag expressions.
    pub subscriptions: BTreeMap<String, String>,
    /// Topics for which the group has committed offsets.
    pub offset_topics: BTreeSet<String>,
    /// Broker names that know the group.
    pub brokers: BTreeSet<String>,
}

/// A consumer group's progress on one queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueProgress {
    pub queue: MessageQueue,
    /// One past the newest message on the broker.
    pub broker_max_offset: u64,
    /// The group's committed offset (`None`: never committed).
    pub committed_offset: Option<u64>,
    /// Messages not yet consumed: `broker_max_offset - committed_offset` (`None` without a
    /// committed offset).
    pub lag: Option<u64>,
    /// The member that owns the queue now (average allocation, as the client computes it).
    pub member: Option<String>,
}

/// A consumer group's progress on its topics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupProgress {
    pub group: String,
    /// Live members (sorted), over the topics' masters.
    pub members: Vec<String>,
    pub queues: Vec<QueueProgress>,
}

impl GroupProgress {
    /// Sum of the queues' lags.
    pub fn total_lag(&self) -> u64 {
        self.queues.iter().filter_map(|q| q.lag).sum()
    }

    /// The queues each live member owns (members without queues included).
    pub fn assignment(&self) -> BTreeMap<String, Vec<MessageQueue>> {
        let mut out: BTreeMap<String, Vec<MessageQueue>> = self
            .members
            .iter()
            .map(|m| (m.clone(), Vec::new()))
            .collect();
        for q in &self.queues {
            if let Some(m) = &q.member {
                out.entry(m.clone()).or_default().push(q.queue.clone());
            }
        }
        out
    }
}

/// Where [`Admin::reset_offset`] moves a group's offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetTo {
    /// The oldest message still stored.
    Earliest,
    /// After the newest message (skip everything stored so far).
    Latest,
    /// The first message stored at or after this time (ms since the epoch).
    Timestamp(i64),
}

/// One queue's offset change made by [`Admin::reset_offset`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetReset {
    pub queue: MessageQueue,
    pub old: Option<u64>,
    pub new: u64,
}

/// One broker's line of [`Admin::cluster_status`].
#[derive(Debug, Clone)]
pub struct BrokerStatus {
    pub broker: BrokerRef,
    /// Messages stored per second, over the broker's shards.
    pub msgs_in_per_s: Option<f64>,
    /// Messages delivered per second, over the broker's shards.
    pub msgs_out_per_s: Option<f64>,
    pub disk_used_percent: Option<f64>,
    /// A slave's distance behind its master: bytes (largest over its shards).
    pub repl_lag_bytes: Option<u64>,
    /// A slave's distance behind its master as its master measures it, ms.
    pub repl_lag_ms: Option<u64>,
    /// The runtime info it answered, if it did.
    pub runtime: Option<BrokerRuntimeInfo>,
    /// Why the broker did not answer.
    pub error: Option<String>,
}

impl Admin {
    /// An admin client with default settings for these name servers (`host:port;...`).
    pub async fn connect(name_servers: &str) -> Result<Admin> {
        let cfg = ClientConfig {
            name_servers: split_name_servers(name_servers),
            ..ClientConfig::default()
        };
        Self::with_config(cfg).await
    }

    /// An admin client with these settings (timeouts, instance name, ...).
    pub async fn with_config(cfg: ClientConfig) -> Result<Admin> {
        Ok(Admin {
            inst: Instance::new(cfg).await?,
        })
    }

    /// The settings in use.
    pub fn config(&self) -> &ClientConfig {
        &self.inst.cfg
    }

    /// Closes every connection (calls after this reconnect).
    pub fn close(&self) {
        self.inst.pool.close_all();
    }

    // ---- name servers -------------------------------------------------------------------

    /// Every broker the name servers know.
    pub async fn cluster_info(&self) -> Result<ClusterInfo> {
        self.inst.cluster_info().await
    }

    /// Every broker process the name servers know, sorted by cluster, name and id. A
    /// replica whose address is not `ip:port` is left out (and logged).
    pub async fn brokers(&self) -> Result<Vec<BrokerRef>> {
        let info = self.inst.cluster_info().await?;
        let mut out = Vec::new();
        for b in &info.brokers {
            for (id, r) in &b.replicas {
                match r.address.parse() {
                    Ok(addr) => out.push(BrokerRef {
                        cluster: b.cluster.clone(),
                        name: b.broker_name.clone(),
                        id: *id,
                        addr,
                        role: r.role,
                        shard_count: r.shard_count.max(1),
                        version: r.version.clone(),
                    }),
                    Err(_) => log::warn!(
                        "broker {} id {id} publishes address {:?}, which is not ip:port",
                        b.broker_name,
                        r.address
                    ),
                }
            }
        }
        out.sort_by(|a, b| (&a.cluster, &a.name, a.id).cmp(&(&b.cluster, &b.name, b.id)));
        Ok(out)
    }

    /// Every topic the name servers know, sorted.
    pub async fn topic_list(&self) -> Result<Vec<String>> {
        let answer = self
            .inst
            .namesrv_call(RequestCode::GetAllTopicListFromNameserver, &Empty)
            .await?
            .expect(&[Status::Success])?;
        let mut list: TopicList = answer.decode_body()?;
        list.topics.sort();
        list.topics.dedup();
        Ok(list.topics)
    }

    /// A topic's route as the name servers have it now, digested.
    pub async fn topic_route(&self, topic: &str) -> Result<TopicRouteInfo> {
        Ok((*self.inst.fetch_route(topic).await?).clone())
    }

    /// A topic's route as the name servers send it: every replica of every broker group,
    /// and each group's queue counts, permission and shard placement.
    pub async fn topic_route_data(&self, topic: &str) -> Result<TopicRoute> {
        let answer = self
            .inst
            .namesrv_call(
                RequestCode::GetRouteInfoByTopic,
                &GetRouteRequest {
                    topic: topic.to_string(),
                },
            )
            .await?;
        if answer.status()? == Status::TopicNotExist {
            return Err(Error::NoRoute {
                topic: topic.to_string(),
                detail: answer.remark().to_string(),
            });
        }
        answer.expect(&[Status::Success])?.decode_body()
    }

    /// The address of a broker given as `ip:port` (used as is, the name servers are not
    /// asked) or as a broker name (its master's address).
    pub async fn broker_addr(&self, name_or_addr: &str) -> Result<SocketAddr> {
        if let Ok(addr) = name_or_addr.parse() {
            return Ok(addr);
        }
        let brokers = self.brokers().await?;
        match brokers
            .iter()
            .find(|b| b.name == name_or_addr && b.is_master())
        {
            Some(b) => Ok(b.addr),
            None => Err(unknown_broker(name_or_addr, &brokers)),
        }
    }

    /// The masters a topic change goes to. A [`TopicTarget::Broker`] must be a registered
    /// master (a slave copies its master's topics).
    pub async fn target_masters(&self, target: &TopicTarget) -> Result<Vec<BrokerRef>> {
        let brokers = self.brokers().await?;
        let masters: Vec<BrokerRef> = match target {
            TopicTarget::AllMasters => brokers.iter().filter(|b| b.is_master()).cloned().collect(),
            TopicTarget::Cluster(c) => {
                let found: Vec<BrokerRef> = brokers
                    .iter()
                    .filter(|b| b.is_master() && &b.cluster == c)
                    .cloned()
                    .collect();
                if found.is_empty() {
                    let known: BTreeSet<&str> =
                        brokers.iter().map(|b| b.cluster.as_str()).collect();
                    return Err(Error::Config(format!(
                        "no master of cluster {c:?} is registered (clusters: {})",
                        join_or_none(known)
                    )));
                }
                found
            }
            TopicTarget::Broker(b) => {
                let by_addr: Option<SocketAddr> = b.parse().ok();
                let found = brokers.iter().find(|r| match by_addr {
                    Some(a) => r.addr == a,
                    None => &r.name == b && r.is_master(),
                });
                match found {
                    Some(r) if r.is_master() => vec![r.clone()],
                    Some(r) => {
                        return Err(Error::Config(format!(
                            "{b} is slave {} of broker {}; topics are changed on the master",
                            r.id, r.name
                        )))
                    }
                    None => return Err(unknown_broker(b, &brokers)),
                }
            }
        };
        if masters.is_empty() {
            return Err(Error::Config(
                "the name servers know no master broker".into(),
            ));
        }
        Ok(masters)
    }

    // ---- topics -------------------------------------------------------------------------

    /// Creates (or updates) `topic` with `queues` read and write queues on every master
    /// the name servers know (waiting for at least one to register), then waits until the
    /// name servers publish a route with that many writable queues per master. All within
    /// `wait`.
    pub async fn create_topic(&self, topic: &str, queues: u32, wait: Duration) -> Result<()> {
        let deadline = Instant::now() + wait;
        let masters = loop {
            let masters = self.masters().await?;
            if !masters.is_empty() {
                break masters;
            }
            if Instant::now() >= deadline {
                return Err(Error::NoRoute {
                    topic: topic.to_string(),
                    detail: "the name servers know no master broker".into(),
                });
            }
            tokio::time::sleep(ROUTE_POLL_PAUSE).await;
        };
        let req = CreateTopicRequest {
            topic: topic.to_string(),
            read_queue_count: queues,
            write_queue_count: queues,
            perm: perm::READ_WRITE,
            attributes: Default::default(),
        };
        for addr in &masters {
            self.call(*addr, RequestCode::UpdateAndCreateTopic, &req, &[])
                .await?
                .expect(&[Status::Success])?;
        }
        let want = masters.len() * queues as usize;
        loop {
            match self.inst.fetch_route(topic).await {
                Ok(r) if r.write_queues.len() >= want => return Ok(()),
                Ok(_) | Err(Error::NoRoute { .. }) => {}
                Err(e) => return Err(e),
            }
            if Instant::now() >= deadline {
                return Err(Error::NoRoute {
                    topic: topic.to_string(),
                    detail: format!("created, but no route with {want} queues within {wait:?}"),
                });
            }
            tokio::time::sleep(ROUTE_POLL_PAUSE).await;
        }
    }

    /// Sets a topic on the target masters (UPDATE_AND_CREATE_TOPIC creates or updates),
    /// then waits up to `wait` until the name servers publish each target's new queue
    /// counts. Returns each master with the config it answered.
    pub async fn put_topic(
        &self,
        spec: &TopicSpec,
        target: &TopicTarget,
        wait: Duration,
    ) -> Result<Vec<(BrokerRef, TopicConfig)>> {
        let deadline = Instant::now() + wait;
        let masters = self.target_masters(target).await?;
        let req = CreateTopicRequest {
            topic: spec.topic.clone(),
            read_queue_count: spec.read_queues,
            write_queue_count: spec.write_queues,
            perm: spec.perm,
            attributes: Default::default(),
        };
        let mut out = Vec::new();
        for b in masters {
            let answer = self
                .call(b.addr, RequestCode::UpdateAndCreateTopic, &req, &[])
                .await?
                .expect(&[Status::Success])?;
            let cfg: TopicConfig = answer.required_fields()?;
            out.push((b, cfg));
        }
        loop {
            let published = match self.topic_route_data(&spec.topic).await {
                Ok(route) => out.iter().all(|(b, _)| {
                    route.queues.iter().any(|q| {
                        q.broker_name == b.name
                            && q.read_queue_count == spec.read_queues
                            && q.write_queue_count == spec.write_queues
                    })
                }),
                Err(Error::NoRoute { .. }) => false,
                Err(e) => return Err(e),
            };
            if published {
                return Ok(out);
            }
            if Instant::now() >= deadline {
                return Err(Error::NoRoute {
                    topic: spec.topic.clone(),
                    detail: format!(
                        "set on the brokers, but the name servers did not publish it within {wait:?}"
                    ),
                });
            }
            tokio::time::sleep(ROUTE_POLL_PAUSE).await;
        }
    }

    /// Every topic config of a broker.
    pub async fn topic_configs(&self, addr: SocketAddr) -> Result<TopicConfigTable> {
        self.call(addr, RequestCode::GetAllTopicConfig, &Empty, &[])
            .await?
            .expect(&[Status::Success])?
            .decode_body()
    }

    /// One topic's config on a broker (`None`: the broker does not have it).
    pub async fn topic_config(&self, addr: SocketAddr, topic: &str) -> Result<Option<TopicConfig>> {
        Ok(self
            .topic_configs(addr)
            .await?
            .topics
            .into_iter()
            .find(|t| t.topic == topic))
    }

    /// Deletes a topic from every master (of `cluster`, or all) that has it, then from
    /// every name server. Returns the masters it was deleted from; a topic no broker and
    /// no name server knows is [`Error::NoRoute`].
    pub async fn delete_topic(&self, topic: &str, cluster: Option<&str>) -> Result<Vec<BrokerRef>> {
        let target = match cluster {
            Some(c) => TopicTarget::Cluster(c.to_string()),
            None => TopicTarget::AllMasters,
        };
        let masters = self.target_masters(&target).await?;
        let req = DeleteTopicRequest {
            topic: topic.to_string(),
        };
        let mut deleted = Vec::new();
        for b in masters {
            let answer = self
                .call(b.addr, RequestCode::DeleteTopicInBroker, &req, &[])
                .await?
                .expect(&[Status::Success, Status::TopicNotExist])?;
            if answer.status()? == Status::Success {
                deleted.push(b);
            }
        }
        let req = DeleteTopicInNamesrvRequest {
            topic: topic.to_string(),
            cluster: cluster.map(String::from),
        };
        // A name server that is down now learns the new topic table when the brokers
        // register again; only when none answers is the delete incomplete.
        let mut in_namesrv = false;
        let mut answered = 0usize;
        let mut last_err = None;
        for addr in self.name_server_addrs().await? {
            match self.namesrv_delete(addr, &req).await {
                Ok(found) => {
                    answered += 1;
                    in_namesrv |= found;
                }
                Err(e) => {
                    log::warn!("deleting topic {topic} on name server {addr}: {e}");
                    last_err = Some(e);
                }
            }
        }
        if let (0, Some(e)) = (answered, last_err) {
            return Err(e);
        }
        if deleted.is_empty() && !in_namesrv {
            return Err(Error::NoRoute {
                topic: topic.to_string(),
                detail: "no broker and no name server has it".into(),
            });
        }
        Ok(deleted)
    }

    /// Min and max offset and the newest message's store time of every queue of a topic
    /// (read or write), on every broker group with a master, in route order.
    pub async fn topic_status(&self, topic: &str) -> Result<Vec<QueueStatus>> {
        let route = self.inst.fetch_route(topic).await?;
        let mut out = Vec::new();
        for (name, entry) in &route.brokers {
            if entry.master.is_none() {
                continue;
            }
            for queue_id in 0..entry.queue_shards.len() as u32 {
                let mq = MessageQueue::new(topic, name, queue_id);
                let min_offset = self.min_offset(&mq).await?;
                let max_offset = self.max_offset(&mq).await?;
                let last_store_ms = if max_offset > min_offset {
                    let r = self.pull(&mq, max_offset - 1, 1).await?;
                    r.messages.first().map(|m| m.store_timestamp_ms)
                } else {
                    None
                };
                out.push(QueueStatus {
                    shard: route.shard(&mq),
                    queue: mq,
                    min_offset,
                    max_offset,
                    last_store_ms,
                });
            }
        }
        Ok(out)
    }

    // ---- queues -------------------------------------------------------------------------

    /// The oldest offset a queue still stores.
    pub async fn min_offset(&self, mq: &MessageQueue) -> Result<u64> {
        consumer::queue_offset(&self.inst, mq, false).await
    }

    /// One past the newest message of a queue.
    pub async fn max_offset(&self, mq: &MessageQueue) -> Result<u64> {
        consumer::queue_offset(&self.inst, mq, true).await
    }

    /// The first offset stored at or after `timestamp_ms`.
    pub async fn offset_at(&self, mq: &MessageQueue, timestamp_ms: i64) -> Result<u64> {
        consumer::search_offset(&self.inst, mq, timestamp_ms).await
    }

    /// A group's committed offset of a queue (`None`: never committed).
    pub async fn committed_offset(&self, group: &str, mq: &MessageQueue) -> Result<Option<u64>> {
        let header = QueryConsumerOffsetRequest {
            consumer_group: group.to_string(),
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
        };
        let answer = self
            .inst
            .queue_call(
                mq,
                RequestCode::QueryConsumerOffset,
                &header,
                self.inst.cfg.request_timeout,
            )
            .await?
            .expect(&[Status::Success, Status::QueryNotFound])?;
        if answer.status()? == Status::QueryNotFound {
            return Ok(None);
        }
        Ok(Some(
            answer
                .required_fields::<QueryConsumerOffsetResponse>()?
                .offset,
        ))
    }

    /// Sets a group's committed offset of a queue.
    pub async fn commit_offset(&self, group: &str, mq: &MessageQueue, offset: u64) -> Result<()> {
        let header = UpdateConsumerOffsetRequest {
            consumer_group: group.to_string(),
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            offset,
        };
        self.inst
            .queue_call(
                mq,
                RequestCode::UpdateConsumerOffset,
                &header,
                self.inst.cfg.request_timeout,
            )
            .await?
            .expect(&[Status::Success])?;
        Ok(())
    }

    /// Up to `max` messages of a queue from `offset` (no long polling, nothing committed).
    pub async fn pull(&self, mq: &MessageQueue, offset: u64, max: u32) -> Result<PullResult> {
        consumer::pull_queue(
            &self.inst,
            TOOLS_GROUP,
            mq,
            offset,
            max.max(1),
            PULL_BYTES_MAX,
            "*",
            Duration::ZERO,
            None,
        )
        .await
    }

    /// Up to `count` messages of a queue from `offset`, in order (several pulls if needed);
    /// fewer when the queue ends. An offset below the queue's minimum is an error naming it.
    pub async fn read_messages(
        &self,
        mq: &MessageQueue,
        offset: u64,
        count: u32,
    ) -> Result<Vec<ReceivedMessage>> {
        let mut out = Vec::new();
        let mut at = offset;
        while (out.len() as u32) < count {
            let want = (count - out.len() as u32).min(READ_BATCH_MAX);
            let r = self.pull(mq, at, want).await?;
            match r.status {
                PullStatus::Found => {
                    if r.next_offset <= at {
                        break;
                    }
                    out.extend(r.messages.into_iter().take((count as usize) - out.len()));
                    at = r.next_offset;
                }
                PullStatus::NoMatchedMessage => at = r.next_offset.max(at + 1),
                PullStatus::NoNewMessage => break,
                PullStatus::OffsetIllegal => {
                    if out.is_empty() {
                        return Err(Error::Config(format!(
                            "offset {at} is outside {mq} (min {}, max {})",
                            r.min_offset, r.max_offset
                        )));
                    }
                    break;
                }
            }
        }
        Ok(out)
    }

    // ---- groups -------------------------------------------------------------------------

    /// The consumer groups one broker knows: live members and subscriptions.
    pub async fn subscription_groups(&self, addr: SocketAddr) -> Result<ConsumerGroupList> {
        self.call(
            addr,
            RequestCode::GetAllSubscriptionGroupConfig,
            &Empty,
            &[],
        )
        .await?
        .expect(&[Status::Success])?
        .decode_body()
    }

    /// Every committed offset one shard of a broker keeps.
    pub async fn consumer_offsets(
        &self,
        addr: SocketAddr,
        shard: u16,
    ) -> Result<Vec<ConsumerOffsetEntry>> {
        let table: ConsumerOffsetTable = self
            .call(
                addr,
                RequestCode::GetAllConsumerOffset,
                &GetAllConsumerOffsetRequest { shard_id: shard },
                &[],
            )
            .await?
            .expect(&[Status::Success])?
            .decode_body()?;
        Ok(table.entries)
    }

    /// Every consumer group the masters know: live ones (with members and subscriptions)
    /// and groups that only have committed offsets. Sorted by name.
    pub async fn group_list(&self) -> Result<Vec<GroupSummary>> {
        let mut groups: BTreeMap<String, GroupSummary> = BTreeMap::new();
        for b in self
            .brokers()
            .await?
            .into_iter()
            .filter(BrokerRef::is_master)
        {
            for g in self.subscription_groups(b.addr).await?.groups {
                let e = group_entry(&mut groups, &g.group);
                e.members.extend(g.members);
                for s in g.subscriptions {
                    e.subscriptions.insert(s.topic, s.expression);
                }
                e.brokers.insert(b.name.clone());
            }
            for shard in 0..b.shard_count {
                for o in self.consumer_offsets(b.addr, shard).await? {
                    let e = group_entry(&mut groups, &o.consumer_group);
                    e.offset_topics.insert(o.topic);
                    e.brokers.insert(b.name.clone());
                }
            }
        }
        let mut out: Vec<GroupSummary> = groups.into_values().collect();
        for g in &mut out {
            g.members.sort();
            g.members.dedup();
        }
        Ok(out)
    }

    /// A group's live members (sorted), asked of the first of `masters` that answers, as
    /// the client's rebalance does.
    pub async fn group_members(&self, group: &str, masters: &[SocketAddr]) -> Result<Vec<String>> {
        let req = GetConsumerListRequest {
            consumer_group: group.to_string(),
        };
        let mut last = None;
        for addr in masters {
            let answer = self
                .call(*addr, RequestCode::GetConsumerListByGroup, &req, &[])
                .await
                .and_then(|a| a.expect(&[Status::Success]));
            match answer {
                Ok(a) => {
                    let mut list: ConsumerList = a.decode_body()?;
                    list.client_ids.sort();
                    return Ok(list.client_ids);
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or(Error::Config(format!(
            "no master to ask for the members of group {group}"
        ))))
    }

    /// A group's progress per queue: broker max offset, committed offset, lag and the member
    /// that owns the queue. Topics: `topic`, or else every topic the group subscribes to or
    /// has committed offsets for.
    pub async fn group_progress(&self, group: &str, topic: Option<&str>) -> Result<GroupProgress> {
        let topics: Vec<String> = match topic {
            Some(t) => vec![t.to_string()],
            None => {
                let summary = self
                    .group_list()
                    .await?
                    .into_iter()
                    .find(|g| g.group == group)
                    .ok_or_else(|| {
                        Error::Config(format!(
                            "no broker knows consumer group {group} (no live member, no committed offset)"
                        ))
                    })?;
                let mut t: BTreeSet<String> = summary.subscriptions.into_keys().collect();
                t.extend(summary.offset_topics);
                t.into_iter().collect()
            }
        };
        let mut progress = GroupProgress {
            group: group.to_string(),
            ..GroupProgress::default()
        };
        let mut all_members = BTreeSet::new();
        for topic in topics {
            let route = self.inst.fetch_route(&topic).await?;
            let members = self.group_members(group, &route.masters()).await?;
            let queues = route.read_queues.clone();
            let mut owner: BTreeMap<MessageQueue, String> = BTreeMap::new();
            for m in &members {
                for q in allocate_average(&queues, &members, m) {
                    owner.insert(q, m.clone());
                }
            }
            for mq in queues {
                let broker_max_offset = self.max_offset(&mq).await?;
                let committed_offset = self.committed_offset(group, &mq).await?;
                progress.queues.push(QueueProgress {
                    lag: committed_offset.map(|c| broker_max_offset.saturating_sub(c)),
                    member: owner.get(&mq).cloned(),
                    queue: mq,
                    broker_max_offset,
                    committed_offset,
                });
            }
            all_members.extend(members);
        }
        progress.members = all_members.into_iter().collect();
        Ok(progress)
    }

    /// Moves a group's committed offsets of every readable queue of `topic` to `to`.
    /// Stop the group's consumers first: running ones commit their positions over it.
    pub async fn reset_offset(
        &self,
        group: &str,
        topic: &str,
        to: ResetTo,
    ) -> Result<Vec<OffsetReset>> {
        let route = self.inst.fetch_route(topic).await?;
        if route.read_queues.is_empty() {
            return Err(Error::NoRoute {
                topic: topic.to_string(),
                detail: "no readable queue".into(),
            });
        }
        let mut out = Vec::new();
        for mq in route.read_queues.iter() {
            let new = match to {
                ResetTo::Earliest => self.min_offset(mq).await?,
                ResetTo::Latest => self.max_offset(mq).await?,
                ResetTo::Timestamp(t) => self.offset_at(mq, t).await?,
            };
            let old = self.committed_offset(group, mq).await?;
            self.commit_offset(group, mq, new).await?;
            out.push(OffsetReset {
                queue: mq.clone(),
                old,
                new,
            });
        }
        Ok(out)
    }

    // ---- messages -----------------------------------------------------------------------

    /// The message with this offset message id (store host and physical offset, 32 or 56
    /// hex characters), from the broker that stored it.
    pub async fn view_message(&self, msg_id: &str) -> Result<ReceivedMessage> {
        let (addr, physical_offset) = record::parse_message_id(msg_id)
            .map_err(|e| Error::Config(format!("message id {msg_id:?}: {e}")))?;
        let broker_name = match self.brokers().await {
            Ok(bs) => bs
                .into_iter()
                .find(|b| b.addr == addr)
                .map(|b| b.name)
                .unwrap_or_default(),
            Err(e) => {
                log::debug!("looking up the broker at {addr}: {e}");
                String::new()
            }
        };
        let answer = self
            .call(
                addr,
                RequestCode::ViewMessageById,
                &ViewMessageRequest { physical_offset },
                &[],
            )
            .await?
            .expect(&[Status::Success])?;
        decode_records(&answer.body, &broker_name)?
            .into_iter()
            .next()
            .ok_or_else(|| answer.error(Status::QueryNotFound))
    }

    /// Messages of `topic` whose key (`KEYS` or unique key) is `key`, at most `max` per
    /// broker group, from every master of the topic (each broker searches its shards).
    pub async fn query_by_key(
        &self,
        topic: &str,
        key: &str,
        max: u32,
    ) -> Result<Vec<ReceivedMessage>> {
        let route = self.inst.fetch_route(topic).await?;
        let req = QueryMessageRequest {
            topic: topic.to_string(),
            key: key.to_string(),
            max_messages: max.max(1),
            begin_timestamp_ms: 0,
            end_timestamp_ms: i64::MAX,
        };
        let mut out = Vec::new();
        for (name, entry) in &route.brokers {
            let Some(addr) = entry.master else { continue };
            let answer = self
                .call(addr, RequestCode::QueryMessage, &req, &[])
                .await?
                .expect(&[Status::Success, Status::QueryNotFound])?;
            if answer.status()? == Status::Success {
                out.extend(decode_records(&answer.body, name)?);
            }
        }
        out.sort_by_key(|m| {
            (
                m.store_timestamp_ms,
                m.broker_name.clone(),
                m.physical_offset,
            )
        });
        Ok(out)
    }

    // ---- brokers ------------------------------------------------------------------------

    /// A broker's counters per shard and its runtime key/values.
    pub async fn runtime_info(&self, addr: SocketAddr) -> Result<BrokerRuntimeInfo> {
        self.call(addr, RequestCode::GetBrokerRuntimeInfo, &Empty, &[])
            .await?
            .expect(&[Status::Success])?
            .decode_body()
    }

    /// Every broker with its rates, disk use and (slaves) replication lag. Rates come from
    /// the brokers' per-shard rates (`shard.N.msgs_in_per_s`, `shard.N.msgs_out_per_s`)
    /// or, where a broker does not publish them, from two samples of its counters `sample`
    /// apart (no rate when `sample` is zero). A broker that does not answer is listed with
    /// its error.
    pub async fn cluster_status(&self, sample: Duration) -> Result<Vec<BrokerStatus>> {
        let brokers = self.brokers().await?;
        let mut first = Vec::with_capacity(brokers.len());
        for b in &brokers {
            first.push((Instant::now(), self.runtime_info(b.addr).await));
        }
        let need_sample = first
            .iter()
            .any(|(_, r)| r.as_ref().is_ok_and(|i| published_rates(i).is_none()));
        let mut second: Vec<Option<(Instant, BrokerRuntimeInfo)>> = vec![None; brokers.len()];
        if need_sample && !sample.is_zero() {
            tokio::time::sleep(sample).await;
            for (i, b) in brokers.iter().enumerate() {
                if matches!(&first[i].1, Ok(info) if published_rates(info).is_none()) {
                    let at = Instant::now();
                    if let Ok(info) = self.runtime_info(b.addr).await {
                        second[i] = Some((at, info));
                    }
                }
            }
        }
        let mut out = Vec::with_capacity(brokers.len());
        for (i, b) in brokers.iter().enumerate() {
            let (at, result) = &first[i];
            let mut s = BrokerStatus {
                broker: b.clone(),
                msgs_in_per_s: None,
                msgs_out_per_s: None,
                disk_used_percent: None,
                repl_lag_bytes: None,
                repl_lag_ms: None,
                runtime: None,
                error: None,
            };
            match result {
                Ok(info) => {
                    let rates = published_rates(info).or_else(|| {
                        second[i]
                            .as_ref()
                            .and_then(|(at2, info2)| sampled_rates(info, info2, *at2 - *at))
                    });
                    if let Some((r_in, r_out)) = rates {
                        s.msgs_in_per_s = Some(r_in);
                        s.msgs_out_per_s = Some(r_out);
                    }
                    s.disk_used_percent = info
                        .extra
                        .get("disk_used_percent")
                        .and_then(|v| v.parse().ok());
                    if !b.is_master() {
                        s.repl_lag_bytes = shard_max(info, "ha_lag_bytes");
                        let master = brokers.iter().position(|m| {
                            m.name == b.name && m.cluster == b.cluster && m.is_master()
                        });
                        s.repl_lag_ms = master
                            .and_then(|m| first[m].1.as_ref().ok())
                            .and_then(|mi| shard_max(mi, "ha_lag_ms"));
                    }
                    s.runtime = Some(info.clone());
                }
                Err(e) => s.error = Some(e.to_string()),
            }
            out.push(s);
        }
        Ok(out)
    }

    /// Every effective configuration key of a broker, RocketMQ spelling.
    pub async fn broker_config(&self, addr: SocketAddr) -> Result<BTreeMap<String, String>> {
        let table: BrokerConfigTable = self
            .call(addr, RequestCode::GetBrokerConfig, &Empty, &[])
            .await?
            .expect(&[Status::Success])?
            .decode_body()?;
        Ok(table.entries)
    }

    /// Changes runtime keys of a broker (an allow-list; the broker refuses any other key
    /// with MESSAGE_ILLEGAL and applies nothing of the request).
    pub async fn update_broker_config(
        &self,
        addr: SocketAddr,
        changes: BTreeMap<String, String>,
    ) -> Result<()> {
        let body = BrokerConfigTable { entries: changes }.to_vec()?;
        self.call(addr, RequestCode::UpdateBrokerConfig, &Empty, &body)
            .await?
            .expect(&[Status::Success])?;
        Ok(())
    }

    /// Makes a broker refuse writes (`on`, `brokerPermission=4`: sends answer
    /// NO_PERMISSION, reads go on) or take them again (`brokerPermission=6`).
    pub async fn set_read_only(&self, addr: SocketAddr, on: bool) -> Result<()> {
        let value = if on {
            BROKER_PERMISSION_READ_ONLY
        } else {
            BROKER_PERMISSION_READ_WRITE
        };
        self.update_broker_config(
            addr,
            BTreeMap::from([("brokerPermission".to_string(), value.to_string())]),
        )
        .await
    }

    // ---- helpers ------------------------------------------------------------------------

    async fn call(
        &self,
        addr: SocketAddr,
        code: RequestCode,
        header: &(impl Encode + ?Sized),
        body: &[u8],
    ) -> Result<Answer> {
        self.inst
            .broker_call(
                addr,
                None,
                code,
                header,
                body,
                self.inst.cfg.request_timeout,
            )
            .await
    }

    /// DELETE_TOPIC_IN_NAMESRV on one name server; whether it had the topic.
    async fn namesrv_delete(
        &self,
        addr: SocketAddr,
        req: &DeleteTopicInNamesrvRequest,
    ) -> Result<bool> {
        let ep = Endpoint {
            addr,
            peer: Peer::Namesrv,
        };
        let (conn, _) = self.inst.pool.get(ep).await?;
        let answer = conn
            .call(
                RequestCode::DeleteTopicInNamesrv,
                req,
                &[],
                self.inst.cfg.request_timeout,
            )
            .await?
            .expect(&[Status::Success, Status::TopicNotExist])?;
        Ok(answer.status()? == Status::Success)
    }

    async fn masters(&self) -> Result<Vec<SocketAddr>> {
        Ok(self
            .brokers()
            .await?
            .into_iter()
            .filter(BrokerRef::is_master)
            .map(|b| b.addr)
            .collect())
    }

    async fn name_server_addrs(&self) -> Result<Vec<SocketAddr>> {
        let mut out = Vec::new();
        for ns in &self.inst.cfg.name_servers {
            let found = tokio::net::lookup_host(ns.as_str())
                .await
                .map_err(|e| Error::Config(format!("name server {ns}: {e}")))?
                .next()
                .ok_or_else(|| Error::Config(format!("name server {ns} resolves to nothing")))?;
            out.push(found);
        }
        Ok(out)
    }
}

/// `host:port;host:port` as a list (blanks and empty entries dropped).
pub fn split_name_servers(name_servers: &str) -> Vec<String> {
    name_servers
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// Messages in and out per second summed over a broker's shards from the per-shard rates
/// it publishes (`shard.N.msgs_in_per_s`, `shard.N.msgs_out_per_s`); `None` unless every
/// shard publishes both.
pub fn published_rates(info: &BrokerRuntimeInfo) -> Option<(f64, f64)> {
    if info.shards.is_empty() {
        return None;
    }
    let mut sum = (0.0, 0.0);
    for s in &info.shards {
        let get = |k: &str| -> Option<f64> {
            info.extra
                .get(&format!("shard.{}.{k}", s.shard_id))
                .and_then(|v| v.parse().ok())
        };
        sum.0 += get("msgs_in_per_s")?;
        sum.1 += get("msgs_out_per_s")?;
    }
    Some(sum)
}

/// Messages in and out per second between two runtime infos of one broker taken
/// `elapsed` apart (`None` if no time passed).
pub fn sampled_rates(
    before: &BrokerRuntimeInfo,
    after: &BrokerRuntimeInfo,
    elapsed: Duration,
) -> Option<(f64, f64)> {
    let secs = elapsed.as_secs_f64();
    if secs <= 0.0 {
        return None;
    }
    let total = |i: &BrokerRuntimeInfo| {
        i.shards
            .iter()
            .fold((0u64, 0u64), |(a, b), s| (a + s.msgs_in, b + s.msgs_out))
    };
    let (i0, o0) = total(before);
    let (i1, o1) = total(after);
    Some((
        i1.saturating_sub(i0) as f64 / secs,
        o1.saturating_sub(o0) as f64 / secs,
    ))
}

/// The largest `shard.N.<key>` value of a broker's runtime info (`None` if no shard has it).
pub fn shard_max(info: &BrokerRuntimeInfo, key: &str) -> Option<u64> {
    info.extra
        .iter()
        .filter_map(|(k, v)| {
            let rest = k.strip_prefix("shard.")?;
            let (_, name) = rest.split_once('.')?;
            (name == key).then(|| v.parse::<u64>().ok()).flatten()
        })
        .max()
}

fn group_entry<'a>(
    groups: &'a mut BTreeMap<String, GroupSummary>,
    name: &str,
) -> &'a mut GroupSummary {
    groups
        .entry(name.to_string())
        .or_insert_with(|| GroupSummary {
            group: name.to_string(),
            ..GroupSummary::default()
        })
}

fn unknown_broker(name_or_addr: &str, brokers: &[BrokerRef]) -> Error {
    let names: BTreeSet<&str> = brokers.iter().map(|b| b.name.as_str()).collect();
    Error::Config(format!(
        "no broker {name_or_addr:?} is registered with the name servers (brokers: {})",
        join_or_none(names)
    ))
}

fn join_or_none(items: BTreeSet<&str>) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items.into_iter().collect::<Vec<_>>().join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringmq_wire::command::ShardStats;

    fn info(shards: &[(u64, u64)], extra: &[(&str, &str)]) -> BrokerRuntimeInfo {
        BrokerRuntimeInfo {
            broker_name: "b".into(),
            broker_id: 0,
            shards: shards
                .iter()
                .enumerate()
                .map(|(i, &(msgs_in, msgs_out))| ShardStats {
                    shard_id: i as u16,
                    msgs_in,
                    msgs_out,
                    ..ShardStats::default()
                })
                .collect(),
            extra: extra
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn rates_published_or_sampled() {
        let partial = info(
            &[(0, 0), (0, 0)],
            &[
                ("shard.0.msgs_in_per_s", "5"),
                ("shard.0.msgs_out_per_s", "1"),
            ],
        );
        assert_eq!(published_rates(&partial), None, "shard 1 publishes nothing");
        let full = info(
            &[(0, 0), (0, 0)],
            &[
                ("shard.0.msgs_in_per_s", "5"),
                ("shard.0.msgs_out_per_s", "1"),
                ("shard.1.msgs_in_per_s", "7"),
                ("shard.1.msgs_out_per_s", "2"),
            ],
        );
        assert_eq!(published_rates(&full), Some((12.0, 3.0)));
        let a = info(&[(10, 0), (20, 5)], &[]);
        let b = info(&[(30, 0), (40, 25)], &[]);
        assert_eq!(
            sampled_rates(&a, &b, Duration::from_secs(2)),
            Some((20.0, 10.0))
        );
        assert_eq!(sampled_rates(&a, &b, Duration::ZERO), None);
    }

    #[test]
    fn shard_max_reads_per_shard_keys() {
        let i = info(
            &[],
            &[
                ("shard.0.ha_lag_bytes", "10"),
                ("shard.1.ha_lag_bytes", "300"),
                ("shard.1.ha_lag_ms", "7"),
                ("disk_used_percent", "41.0"),
            ],
        );
        assert_eq!(shard_max(&i, "ha_lag_bytes"), Some(300));
        assert_eq!(shard_max(&i, "ha_lag_ms"), Some(7));
        assert_eq!(shard_max(&i, "ha_slaves"), None);
    }

    #[test]
    fn progress_totals_and_assignment() {
        let q = |id| MessageQueue::new("t", "b", id);
        let p = GroupProgress {
            group: "g".into(),
            members: vec!["c1".into(), "c2".into()],
            queues: vec![
                QueueProgress {
                    queue: q(0),
                    broker_max_offset: 10,
                    committed_offset: Some(4),
                    lag: Some(6),
                    member: Some("c1".into()),
                },
                QueueProgress {
                    queue: q(1),
                    broker_max_offset: 3,
                    committed_offset: None,
                    lag: None,
                    member: Some("c1".into()),
                },
            ],
        };
        assert_eq!(p.total_lag(), 6);
        let a = p.assignment();
        assert_eq!(a["c1"], vec![q(0), q(1)]);
        assert!(a["c2"].is_empty());
        assert_eq!(split_name_servers(" a:1; ;b:2 "), vec!["a:1", "b:2"]);
    }
}
