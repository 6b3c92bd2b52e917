//! Topics: the name servers' topic list and routes, creating, setting and deleting a topic
//! on the masters (and waiting until the name servers publish the change), a broker's topic
//! configs, and a topic's queue status.

use std::net::SocketAddr;
use std::time::Duration;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::Empty;
use ringmq_wire::command::route::perm;
use ringmq_wire::command::{
    CreateTopicRequest, DeleteTopicInNamesrvRequest, DeleteTopicRequest, GetRouteRequest,
    TopicConfig, TopicConfigTable, TopicList, TopicRoute,
};
use tokio::time::Instant;

use super::{Admin, BrokerRef, TopicTarget, ROUTE_POLL_PAUSE};
use crate::error::{Error, Result};
use crate::net::{Endpoint, Peer};
use crate::route::{MessageQueue, TopicRouteInfo};

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

impl Admin {
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
            return Err(Error::no_route_answer(topic, answer.remark()));
        }
        answer.expect(&[Status::Success])?.decode_body()
    }

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

    // ---- helpers ------------------------------------------------------------------------

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
