//! Native reply -> the remoting response a RocketMQ client reads: the status becomes
//! RocketMQ's response code ([`response_code`]), the native remark the remark, the native
//! response fields RocketMQ's extFields (every value a JSON string: the C++ client ignores
//! numbers there and rocketmq-client-rust refuses them), and bodies that grow with the
//! cluster RocketMQ's JSON (standard JSON, quoted keys). Records pass through untouched: a
//! pull's body is still the log's bytes, sent by splice.

use std::collections::BTreeMap;

use ringmq_wire::code::Status;
use ringmq_wire::codec::Decode;
use ringmq_wire::command::route::{BrokerData, ClusterInfo, TopicRoute};
use ringmq_wire::command::{
    read_remark, ChangeInvisibleTimeResponse, ConsumerList, LockBatchResponse, MessageQueue,
    OffsetResponse, PopResponse, PullResponse, QueryMessageResponse, RecallResponse, Response,
    SendResponse, TopicList,
};
use ringmq_wire::recall::RecallHandle;
use ringmq_wire::remoting::body::{self as rbody, JsonBody};
use ringmq_wire::remoting::code::response_code;
use ringmq_wire::remoting::ext::{ExtFields, ToExt};
use ringmq_wire::remoting::frame::Command;
use ringmq_wire::remoting::headers as h;

use super::request::ReplyKind;
use super::view;
use crate::net::reply::{Body, Reply};
use crate::net::shard_view::ShardView;

/// The remoting response (opaque and flag are set by the caller) and its body; `view`: the
/// connection's shard view (queue ids in the answer are the shard's).
pub fn translate(kind: &ReplyKind, r: Reply, view: Option<ShardView>) -> (Command, Body) {
    let remark = read_remark(&r.header)
        .map(|(s, _)| s.to_string())
        .unwrap_or_default();
    let mut cmd = Command::response(
        response_code(r.status),
        0,
        (!remark.is_empty()).then_some(remark),
    );
    let as_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let (ext, body) = match kind {
        ReplyKind::Send {
            record_lens,
            transaction_id,
            recall,
            view_topic,
        } => {
            let stored = r.status.message_stored();
            let ext = fields::<SendResponse>(&r).filter(|_| stored).map(|f| {
                let recall_handle = recall
                    .as_ref()
                    .filter(|_| f.deliver_at_ms != 0)
                    .map(|base| {
                        RecallHandle {
                            topic: base.topic.clone(),
                            broker_name: base.broker_name.clone(),
                            deliver_at_ms: f.deliver_at_ms,
                            message_id: f.message_ids_joined(record_lens.iter().copied()),
                        }
                        .encode()
                    });
                let queue_id = match view_topic {
                    Some(t) => view::local(view, t, f.queue_id),
                    None => f.queue_id,
                };
                let mut ext = ExtFields::with_capacity(
                    33 * record_lens.len() + 192,
                    h::SendMessageResponseHeader::KEYS.len(),
                );
                h::SendMessageResponseHeader {
                    msg_id: String::new(),
                    queue_id: i32::try_from(queue_id).unwrap_or(i32::MAX),
                    queue_offset: as_i64(f.first_queue_offset),
                    transaction_id: transaction_id.clone(),
                    batch_uniq_id: None,
                    recall_handle,
                }
                .put_ext(&mut ext);
                // The ids (a batch's comma-joined, 33 bytes a message) written straight
                // into the fields' text, which was sized for them.
                ext.insert_with("msgId", |text| {
                    f.push_message_ids_joined(text, record_lens.iter().copied())
                });
                ext
            });
            (ext, Body::Empty)
        }
        ReplyKind::Recall => {
            let ext = fields::<RecallResponse>(&r).map(|f| {
                h::RecallMessageResponseHeader {
                    msg_id: f.message_id,
                }
                .to_ext()
            });
            (ext, Body::Empty)
        }
        ReplyKind::Pull { view_queue } => {
            let ext = fields::<PullResponse>(&r).map(|f| {
                h::PullMessageResponseHeader {
                    suggest_which_broker_id: as_i64(f.suggest_broker_id),
                    next_begin_offset: as_i64(f.next_begin_offset),
                    min_offset: as_i64(f.min_offset),
                    max_offset: as_i64(f.max_offset),
                    ..Default::default()
                }
                .to_ext()
            });
            (ext, in_view(view, r.body, *view_queue))
        }
        ReplyKind::Offset | ReplyKind::ConsumerOffset { .. } => {
            // QUERY_CONSUMER_OFFSET's fields have the same one-u64 layout.
            let ext = fields::<OffsetResponse>(&r).map(|f| {
                h::OffsetResponseHeader {
                    offset: as_i64(f.offset),
                }
                .to_ext()
            });
            (ext, Body::Empty)
        }
        ReplyKind::Pop => {
            let popped = fields::<PopResponse>(&r);
            // The records come from the shard that keeps the checkpoint: its ids.
            let keeper = view.zip(popped.as_ref()).map(|(v, f)| ShardView {
                shard: f.revive_shard,
                shard_count: v.shard_count,
            });
            let ext = popped.map(|f| {
                h::PopMessageResponseHeader {
                    pop_time: f.pop_time_ms,
                    invisible_time: as_i64(f.invisible_time_ms),
                    revive_qid: i32::from(f.revive_shard),
                    rest_num: as_i64(f.rest_num),
                    ..Default::default()
                }
                .to_ext()
            });
            (ext, in_view(keeper, r.body, None))
        }
        ReplyKind::ChangeInvisible => {
            let ext = fields::<ChangeInvisibleTimeResponse>(&r).map(|f| {
                h::ChangeInvisibleTimeResponseHeader {
                    pop_time: f.pop_time_ms,
                    invisible_time: as_i64(f.invisible_time_ms),
                    revive_qid: i32::from(f.revive_shard),
                }
                .to_ext()
            });
            (ext, Body::Empty)
        }
        ReplyKind::QueryMessage => {
            let ext = fields::<QueryMessageResponse>(&r).map(|f| {
                h::QueryMessageResponseHeader {
                    index_last_update_timestamp: f.index_last_update_timestamp_ms,
                    index_last_update_phyoffset: as_i64(f.index_last_update_physical_offset),
                }
                .to_ext()
            });
            (ext, r.body)
        }
        other => (None, body_of(other, r, view)),
    };
    if let Some(ext) = ext {
        cmd.ext_fields = ext;
    }
    (cmd, body)
}

/// The body of an answer with no response fields.
fn body_of(kind: &ReplyKind, r: Reply, view: Option<ShardView>) -> Body {
    match kind {
        ReplyKind::Records => r.body,
        ReplyKind::Plain => Body::Empty,
        ReplyKind::ConsumerList => json_body(&r, |l: ConsumerList| {
            rbody::GetConsumerListByGroupResponseBody {
                consumer_id_list: l.client_ids,
            }
            .to_json()
        }),
        ReplyKind::LockBatch => json_body(&r, |mut l: LockBatchResponse| {
            view::queues_to_view(view, &mut l.locked);
            rbody::LockBatchResponseBody {
                lock_ok_mq_set: l.locked.into_iter().map(queue_json).collect(),
            }
            .to_json()
        }),
        ReplyKind::Route => json_body(&r, |route: TopicRoute| {
            route_json(&view::split_route(&route)).to_json()
        }),
        ReplyKind::ClusterInfo => json_body(&r, |c: ClusterInfo| cluster_json(&c).to_json()),
        ReplyKind::TopicList => json_body(&r, |l: TopicList| {
            serde_json::to_vec(&serde_json::json!({ "topicList": l.topics })).unwrap_or_default()
        }),
        // Answered with fields above.
        ReplyKind::Send { .. }
        | ReplyKind::Recall
        | ReplyKind::Pull { .. }
        | ReplyKind::Offset
        | ReplyKind::ConsumerOffset { .. }
        | ReplyKind::Pop
        | ReplyKind::ChangeInvisible
        | ReplyKind::QueryMessage => Body::Empty,
    }
}

/// Records of a pull (`queue`) or POP (`None`) answer with the view's queue ids. Bodies on a
/// shard's own port are bytes (its connections ask for copies, not log runs).
fn in_view(view: Option<ShardView>, body: Body, queue: Option<u32>) -> Body {
    match (view, body) {
        (Some(v), Body::Bytes(mut b)) => {
            view::patch_records(v, &mut b, queue);
            Body::Bytes(b)
        }
        (Some(v), Body::Shared { parts, .. }) => {
            let mut b = parts.concat();
            view::patch_records(v, &mut b, queue);
            Body::Bytes(b)
        }
        (Some(_), Body::Log { .. }) => {
            log::warn!("remoting: records of a shard's port came as log runs; not answered");
            Body::Empty
        }
        (_, body) => body,
    }
}

fn fields<T: Decode>(r: &Reply) -> Option<T> {
    Response::<T>::decode(&r.header).ok()?.fields
}

/// A native body of type `T` as JSON; an empty body stays empty (an error answer).
fn json_body<T: Decode>(r: &Reply, to_json: impl FnOnce(T) -> Vec<u8>) -> Body {
    if r.status != Status::Success {
        return Body::Empty;
    }
    let bytes = match &r.body {
        Body::Bytes(b) => b.as_slice(),
        _ => &[],
    };
    match T::decode(bytes) {
        Ok(v) => Body::Bytes(to_json(v)),
        Err(e) => {
            log::warn!("remoting: a native answer body did not decode: {e}");
            Body::Empty
        }
    }
}

fn queue_json(q: MessageQueue) -> rbody::MessageQueue {
    rbody::MessageQueue {
        topic: q.topic,
        broker_name: q.broker_name,
        queue_id: i32::try_from(q.queue_id).unwrap_or(i32::MAX),
    }
}

/// RocketMQ's `TopicRouteData`, with every field the Java, Go, C++ and Rust clients'
/// decoders require (`topicSysFlag`, `enableActingMaster`, `filterServerTable`).
pub fn route_json(route: &TopicRoute) -> rbody::TopicRouteData {
    let count = |n: u32| i32::try_from(n).unwrap_or(i32::MAX);
    rbody::TopicRouteData {
        order_topic_conf: None,
        queue_datas: route
            .queues
            .iter()
            .map(|q| rbody::QueueData {
                broker_name: q.broker_name.clone(),
                read_queue_nums: count(q.read_queue_count),
                write_queue_nums: count(q.write_queue_count),
                perm: i32::from(q.perm),
                topic_sys_flag: 0,
            })
            .collect(),
        broker_datas: route.brokers.iter().map(broker_json).collect(),
        filter_server_table: BTreeMap::new(),
    }
}

fn broker_json(b: &BrokerData) -> rbody::BrokerData {
    rbody::BrokerData {
        cluster: b.cluster.clone(),
        broker_name: b.broker_name.clone(),
        broker_addrs: b
            .replicas
            .iter()
            .map(|(id, r)| (i64::try_from(*id).unwrap_or(i64::MAX), r.address.clone()))
            .collect(),
        zone_name: None,
        enable_acting_master: false,
    }
}

/// RocketMQ's `ClusterInfo`: brokers by name, broker names by cluster. A broker whose shards
/// routes name as brokers of their own (`<brokerName>@<shard>`, [`view::split_route`]) is
/// one broker in `brokerAddrTable`, so cluster views list it once; its cluster's name set
/// holds the shards' names too, so a tool that finds a topic's cluster from its route's
/// broker names (mqadmin's `topicClusterList`) finds it. The tools skip names of a
/// cluster's set that `brokerAddrTable` lacks.
pub fn cluster_json(c: &ClusterInfo) -> rbody::ClusterInfo {
    let mut out = rbody::ClusterInfo::default();
    for b in &c.brokers {
        out.broker_addr_table
            .insert(b.broker_name.clone(), broker_json(b));
        let names = &mut out
            .cluster_addr_table
            .entry(b.cluster.clone())
            .or_default()
            .0;
        names.push(b.broker_name.clone());
        names.extend(view::shard_names(b));
    }
    out
}
