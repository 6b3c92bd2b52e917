//! RocketMQ's admin requests over remoting whose answer is made of several native answers
//! (a topic's stats are each queue's min and max offset; a group's consume stats add its
//! committed offsets). A [`Job`] is what [`super::request`] made of the request; [`run`]
//! asks the native requests it needs of the same service, in turn, and writes RocketMQ's
//! JSON answer. Each native request is authorized as the caller's, so ACL decides exactly
//! as for the native request.
//!
//! | remoting code | native requests | answer |
//! |---|---|---|
//! | DELETE_TOPIC_IN_BROKER 215 | DELETE_TOPIC_IN_BROKER | SUCCESS also when the topic is not here (RocketMQ's answer) |
//! | DELETE_TOPIC_IN_BROKER_LIST 5002 | DELETE_TOPIC_IN_BROKER per topic | as 215, topic by topic |
//! | DELETE_TOPIC_IN_NAMESRV 216 (name server) | DELETE_TOPIC_IN_NAMESRV | SUCCESS also when no route is left |
//! | DELETE_SUBSCRIPTIONGROUP 207 | DELETE_SUBSCRIPTIONGROUP | SUCCESS also when the group has no settings |
//! | DELETE_SUBSCRIPTIONGROUP_LIST 5003 | DELETE_SUBSCRIPTIONGROUP per group | SUCCESS also for groups with no settings |
//! | GET_ALL_TOPIC_CONFIG 21 | GET_ALL_TOPIC_CONFIG | `TopicConfigAndMappingSerializeWrapper` |
//! | GET_TOPIC_CONFIG 351 | GET_ALL_TOPIC_CONFIG | `TopicConfigAndQueueMapping`; TOPIC_NOT_EXIST |
//! | GET_BROKER_CONFIG 26 | GET_BROKER_CONFIG | properties text, `version` field |
//! | GET_BROKER_RUNTIME_INFO 28 | GET_BROKER_RUNTIME_INFO | `KVTable` with RocketMQ's keys |
//! | GET_ALL_SUBSCRIPTIONGROUP_CONFIG 201 | GET_ALL_SUBSCRIPTIONGROUP_CONFIG | `SubscriptionGroupWrapper` |
//! | GET_SUBSCRIPTIONGROUP_CONFIG 352 | GET_ALL_SUBSCRIPTIONGROUP_CONFIG | `SubscriptionGroupConfig`; SUBSCRIPTION_GROUP_NOT_EXIST |
//! | GET_TOPIC_STATS_INFO 202 | GET_ALL_TOPIC_CONFIG, GET_MIN/MAX_OFFSET per queue | `TopicStatsTable` |
//! | GET_CONSUME_STATS 208 | HELLO, GET_ALL_CONSUMER_OFFSET per shard, GET_MAX_OFFSET per queue | `ConsumeStats` |
//! | GET_CONSUMER_CONNECTION_LIST 203 | GET_ALL_SUBSCRIPTIONGROUP_CONFIG | `ConsumerConnection`; CONSUMER_NOT_ONLINE |
//! | GET_PRODUCER_CONNECTION_LIST 204 | GET_PRODUCER_CONNECTION_LIST | `ProducerConnection`; SYSTEM_ERROR when the group has no live member |
//! | INVOKE_BROKER_TO_RESET_OFFSET 222 | GET_ALL_TOPIC_CONFIG, SEARCH_OFFSET_BY_TIMESTAMP or GET_MAX_OFFSET, INVOKE_BROKER_TO_RESET_OFFSET per queue | `ResetOffsetBody` |
//! | GET_BROKER_CONSUME_STATS 317 | GET_ALL_SUBSCRIPTIONGROUP_CONFIG, HELLO, GET_ALL_CONSUMER_OFFSET per shard, GET_ALL_TOPIC_CONFIG and GET_MAX_OFFSET per queue | `ConsumeStatsList` |
//! | CLONE_GROUP_OFFSET 314 | HELLO, GET_ALL_CONSUMER_OFFSET per shard, GET_ALL_SUBSCRIPTIONGROUP_CONFIG, GET_ALL_TOPIC_CONFIG, INVOKE_BROKER_TO_RESET_OFFSET per queue | SUCCESS |
//! | QUERY_TOPIC_CONSUME_BY_WHO 300 | GET_ALL_SUBSCRIPTIONGROUP_CONFIG, HELLO, GET_ALL_CONSUMER_OFFSET | `GroupList` |
//! | QUERY_TOPICS_BY_CONSUMER 343 | same | `TopicList` |
//! | GET_TOPICS_BY_CLUSTER 224 (name server) | GET_BROKER_CLUSTER_INFO, GET_ALL_TOPIC_LIST_FROM_NAMESERVER, GET_ROUTEINFO_BY_TOPIC per topic | `TopicList` |
//!
//! Bounds: a job asks at most [`NATIVE_CALLS_MAX`] native requests; one that would need
//! more is answered SYSTEM_ERROR saying so, before any is sent.

mod groups;
mod topics;

use ringmq_wire::code::{RequestCode, Status, PROTOCOL_VERSION};
use ringmq_wire::codec::{Decode, Encode};
use ringmq_wire::command::{read_remark, HelloRequest, HelloResponse, Response};
use ringmq_wire::frame;
use ringmq_wire::remoting::code::{response, response_code};
use ringmq_wire::remoting::frame::Command;
use ringmq_wire::remoting::headers::{CloneGroupOffsetRequestHeader, ResetOffsetRequestHeader};

use crate::acl::Caller;
use crate::net::reply::{Body, Outcome, Reply};
use crate::net::service::Service;

/// Most native requests one admin request may cost (a topic of 1,024 queues, twice).
pub const NATIVE_CALLS_MAX: usize = 4096;

/// An admin request that needs several native answers.
#[derive(Debug, Clone)]
pub enum Job {
    AllTopicConfig,
    TopicConfig { topic: String },
    BrokerConfig,
    RuntimeInfo,
    AllGroups,
    GroupConfig { group: String },
    TopicStats { topic: String },
    ConsumeStats { group: String, topics: Vec<String> },
    ConsumerConnection { group: String },
    ProducerConnection { group: String },
    DeleteTopic { topic: String },
    DeleteTopicInNamesrv(ringmq_wire::command::DeleteTopicInNamesrvRequest),
    DeleteGroup { group: String },
    DeleteGroups { groups: Vec<String> },
    DeleteTopics { topics: Vec<String> },
    ResetOffset(ResetOffsetRequestHeader),
    CloneOffset(CloneGroupOffsetRequestHeader),
    BrokerConsumeStats { is_order: bool },
    ConsumeByWho { topic: String },
    TopicsByConsumer { group: String },
    TopicsByCluster { cluster: String },
}

/// The remoting answer (opaque and flag set by the caller) and its body.
pub type Answer = (Command, Body);

/// Runs `job` against `svc` as `caller`.
pub async fn run<S: Service + ?Sized>(svc: &S, caller: &Caller, job: Job) -> Answer {
    let mut n = Natives {
        svc,
        caller,
        calls: 0,
    };
    let answered = match job {
        Job::AllTopicConfig => topics::all_configs(&mut n).await,
        Job::TopicConfig { topic } => topics::config(&mut n, &topic).await,
        Job::BrokerConfig => topics::broker_config(&mut n).await,
        Job::RuntimeInfo => topics::runtime_info(&mut n).await,
        Job::TopicStats { topic } => topics::stats(&mut n, &topic).await,
        Job::TopicsByCluster { cluster } => topics::by_cluster(&mut n, &cluster).await,
        Job::AllGroups => groups::all_configs(&mut n).await,
        Job::GroupConfig { group } => groups::config(&mut n, &group).await,
        Job::ConsumeStats { group, topics } => groups::consume_stats(&mut n, &group, topics).await,
        Job::ConsumerConnection { group } => groups::consumer_connection(&mut n, &group).await,
        Job::ProducerConnection { group } => groups::producer_connection(&mut n, &group).await,
        Job::DeleteTopic { topic } => topics::delete(&mut n, &topic).await,
        Job::DeleteTopicInNamesrv(h) => topics::delete_in_namesrv(&mut n, h).await,
        Job::DeleteGroup { group } => groups::delete(&mut n, &group).await,
        Job::DeleteGroups { groups } => groups::delete_list(&mut n, groups).await,
        Job::DeleteTopics { topics } => topics::delete_list(&mut n, topics).await,
        Job::ResetOffset(h) => groups::reset_offset(&mut n, h).await,
        Job::CloneOffset(h) => groups::clone_offset(&mut n, h).await,
        Job::BrokerConsumeStats { is_order } => {
            groups::broker_consume_stats(&mut n, is_order).await
        }
        Job::ConsumeByWho { topic } => groups::consume_by_who(&mut n, &topic).await,
        Job::TopicsByConsumer { group } => groups::topics_by_consumer(&mut n, &group).await,
    };
    match answered {
        Ok(a) => a,
        Err(Failed { code, remark }) => (Command::response(code, 0, Some(remark)), Body::Empty),
    }
}

/// Why a job answers with an error.
#[derive(Debug)]
pub struct Failed {
    pub code: i32,
    pub remark: String,
}

impl Failed {
    fn new(code: i32, remark: impl Into<String>) -> Self {
        Failed {
            code,
            remark: remark.into(),
        }
    }
}

type Result<T> = std::result::Result<T, Failed>;

/// A successful answer with `body`.
fn ok(body: Vec<u8>) -> Result<Answer> {
    Ok((
        Command::response(response::SUCCESS, 0, None),
        Body::Bytes(body),
    ))
}

/// The native requests of one job, counted against [`NATIVE_CALLS_MAX`].
struct Natives<'a, S: Service + ?Sized> {
    svc: &'a S,
    caller: &'a Caller,
    calls: usize,
}

impl<S: Service + ?Sized> Natives<'_, S> {
    /// Refuses a job before it sends `more` requests past the cap.
    fn budget(&self, more: usize) -> Result<()> {
        if self.calls.saturating_add(more) > NATIVE_CALLS_MAX {
            return Err(Failed::new(
                response::SYSTEM_ERROR,
                format!("this request needs over {NATIVE_CALLS_MAX} queue lookups; ask per topic"),
            ));
        }
        Ok(())
    }

    /// One native request; a status other than SUCCESS is returned as the reply.
    async fn raw<H: Encode>(&mut self, code: RequestCode, h: &H, body: &[u8]) -> Result<Reply> {
        self.budget(1)?;
        self.calls += 1;
        let mut f = Vec::with_capacity(64 + body.len());
        frame::encode_request(&mut f, code, false, 0, h, body)
            .map_err(|e| Failed::new(response::SYSTEM_ERROR, format!("{}: {e}", code.name())))?;
        Ok(match self.svc.handle(f, self.caller) {
            Outcome::Now(r) => r,
            Outcome::Later(fut) => fut.await,
        })
    }

    /// One native request that must succeed: its reply, or the failure as RocketMQ's code.
    async fn call<H: Encode>(&mut self, code: RequestCode, h: &H, body: &[u8]) -> Result<Reply> {
        let r = self.raw(code, h, body).await?;
        if r.status == Status::Success {
            Ok(r)
        } else {
            Err(failed(&r))
        }
    }

    /// A deletion: SUCCESS also when the native answer is `absent` (RocketMQ deletes
    /// idempotently).
    async fn absent_ok<H: Encode>(
        &mut self,
        code: RequestCode,
        h: &H,
        absent: Status,
    ) -> Result<Answer> {
        let r = self.raw(code, h, &[]).await?;
        if r.status == Status::Success || r.status == absent {
            Ok((Command::response(response::SUCCESS, 0, None), Body::Empty))
        } else {
            Err(failed(&r))
        }
    }

    /// A native request's body of type `T`.
    async fn body<H: Encode, T: Decode>(&mut self, code: RequestCode, h: &H) -> Result<T> {
        let r = self.call(code, h, &[]).await?;
        decode_body(code, &r)
    }

    /// A native request's response fields of type `T`.
    async fn fields<H: Encode, T: Decode>(&mut self, code: RequestCode, h: &H) -> Result<T> {
        let r = self.call(code, h, &[]).await?;
        decode_fields(code, &r)
    }

    /// This broker's shard count.
    async fn shard_count(&mut self) -> Result<u16> {
        let hello = HelloRequest {
            protocol_version: PROTOCOL_VERSION,
            client_id: String::new(),
            client_version: String::from("remoting admin"),
            preferred_shard: None,
        };
        let h: HelloResponse = self.fields(RequestCode::Hello, &hello).await?;
        Ok(h.shard_count.max(1))
    }
}

/// The queues of `topic`'s first `count` that the caller sees, as (the id the caller knows,
/// the broker's id): all of them on the broker's port; on a shard's port (a broker of its
/// own to RocketMQ clients, `net::shard_view`) that shard's, numbered from 0.
fn view_queues<S: Service + ?Sized>(svc: &S, topic: &str, count: u32) -> Vec<(u32, u32)> {
    match svc.shard_view() {
        Some(v) => (0..v.count(topic, count))
            .map(|j| (j, v.global(topic, j)))
            .collect(),
        None => (0..count).map(|q| (q, q)).collect(),
    }
}

/// A native error reply as RocketMQ's code and the native remark.
fn failed(r: &Reply) -> Failed {
    let remark = read_remark(&r.header)
        .map(|(s, _)| s.to_string())
        .unwrap_or_default();
    Failed::new(response_code(r.status), remark)
}

fn decode_body<T: Decode>(code: RequestCode, r: &Reply) -> Result<T> {
    let bytes = match &r.body {
        Body::Bytes(b) => b.as_slice(),
        _ => &[],
    };
    T::decode(bytes).map_err(|e| {
        Failed::new(
            response::SYSTEM_ERROR,
            format!("{}: the answer did not decode: {e}", code.name()),
        )
    })
}

fn decode_fields<T: Decode>(code: RequestCode, r: &Reply) -> Result<T> {
    Response::<T>::decode(&r.header)
        .ok()
        .and_then(|h| h.fields)
        .ok_or_else(|| {
            Failed::new(
                response::SYSTEM_ERROR,
                format!("{}: the answer has no fields", code.name()),
            )
        })
}

/// A native count as RocketMQ's `long`.
fn long(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
