//! Remoting request -> the native request that means the same. The result is a native frame
//! for the service (so the broker's one request path serves both protocols) and a
//! [`ReplyKind`] saying how to read the native answer back into RocketMQ's response; or an
//! answer made here when the request cannot be served (an unknown code, a missing field).
//!
//! | remoting code | native request | notes |
//! |---|---|---|
//! | SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE | SEND_MESSAGE / SEND_BATCH_MESSAGE | records built here: born host from the socket, CRC computed |
//! | PULL_MESSAGE, LITE_PULL_MESSAGE | PULL_MESSAGE | sysFlag: commit offset, suspend, subscription (else the group's heartbeat subscription) |
//! | QUERY_CONSUMER_OFFSET | QUERY_CONSUMER_OFFSET, then GET_MIN_OFFSET when none is stored | offset 0 when the queue still starts at 0 (RocketMQ's answer) |
//! | UPDATE_CONSUMER_OFFSET, GET_MAX/MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP | same | |
//! | HEART_BEAT | HEART_BEAT | JSON body -> native body |
//! | UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP, CONSUMER_SEND_MSG_BACK, END_TRANSACTION | same | |
//! | LOCK_BATCH_MQ, UNLOCK_BATCH_MQ | same | JSON body -> native body |
//! | QUERY_MESSAGE, VIEW_MESSAGE_BY_ID | same | |
//! | GET_ROUTEINFO_BY_TOPIC, GET_BROKER_CLUSTER_INFO, GET_ALL_TOPIC_LIST_FROM_NAMESERVER | same | name server |
//! | CHECK_CLIENT_CONFIG | answered here | SUCCESS: SQL92 is checked when the pull parses it |

use std::net::SocketAddr;
use std::str::FromStr;

use ringmq_wire::code::RequestCode;
use ringmq_wire::codec::{Empty, Encode};
use ringmq_wire::command::pull::FilterType;
use ringmq_wire::command::{
    Boundary, ConsumeFromWhere, ConsumeType, ConsumerGroupData, ConsumerSendBackRequest,
    EndTransactionRequest, GetConsumerListRequest, GetOffsetRequest, GetRouteRequest,
    HeartbeatData, LockBatchRequest, MessageModel, MessageQueue, PullRequest,
    QueryConsumerOffsetRequest, QueryMessageRequest, SearchOffsetRequest, SendRequest,
    Subscription, TransactionResolution, UnregisterClientRequest, UpdateConsumerOffsetRequest,
    ViewMessageRequest,
};
use ringmq_wire::frame;
use ringmq_wire::properties::{self, keys};
use ringmq_wire::record::{self, Message};
use ringmq_wire::remoting::batch;
use ringmq_wire::remoting::body::{self as rbody, JsonBody};
use ringmq_wire::remoting::code::{request as rc, response};
use ringmq_wire::remoting::frame::Command;

type ExtFields = std::collections::BTreeMap<String, String>;

use super::Peer;
use crate::net::connection::Service;
use crate::net::reply::Body;

/// Pull sysFlag bits (RocketMQ `PullSysFlag`).
const PULL_COMMIT_OFFSET: i32 = 0x1;
const PULL_SUSPEND: i32 = 0x2;
const PULL_SUBSCRIPTION: i32 = 0x4;
/// Largest pull body asked of the broker: rocketmq-client-rust refuses bodies over 4 MiB.
pub const PULL_BODY_BYTES_MAX: u32 = 4 * 1024 * 1024 - 64 * 1024;

/// What a translation gave.
#[derive(Debug)]
pub enum Translated {
    /// A native request frame, and how to read its answer.
    Native { frame: Vec<u8>, kind: ReplyKind },
    /// An answer made here.
    Answer(Command, Body),
}

/// How the native answer becomes a remoting response.
#[derive(Debug, Clone)]
pub enum ReplyKind {
    /// No fields, no body.
    Plain,
    /// A send: the stored records' lengths (for the offset ids of a batch) and the
    /// transaction id (the first message's unique key).
    Send {
        record_lens: Vec<usize>,
        transaction_id: Option<String>,
    },
    Pull,
    /// An `offset` field (QUERY_CONSUMER_OFFSET, GET_MAX/MIN_OFFSET, SEARCH_OFFSET...).
    Offset,
    /// QUERY_CONSUMER_OFFSET: when nothing is stored, this GET_MIN_OFFSET frame decides.
    ConsumerOffset {
        min_offset_frame: Vec<u8>,
    },
    ConsumerList,
    LockBatch,
    Route,
    ClusterInfo,
    TopicList,
    /// The body passes through (records).
    Records,
    QueryMessage,
}

/// Translates one remoting request.
pub fn translate<S: Service + ?Sized>(
    svc: &S,
    cmd: &Command,
    body: &[u8],
    peer: Peer,
) -> Translated {
    match translate_inner(svc, cmd, body, peer) {
        Ok(t) => t,
        Err(Refusal { code, remark }) => Translated::Answer(
            Command::response(code, cmd.opaque, Some(remark)),
            Body::Empty,
        ),
    }
}

/// Why a request gets an answer made here.
#[derive(Debug)]
pub struct Refusal {
    pub code: i32,
    pub remark: String,
}

impl Refusal {
    fn bad(what: impl Into<String>) -> Self {
        Refusal {
            code: response::SYSTEM_ERROR,
            remark: what.into(),
        }
    }
}

type Result<T> = std::result::Result<T, Refusal>;

fn translate_inner<S: Service + ?Sized>(
    svc: &S,
    cmd: &Command,
    body: &[u8],
    peer: Peer,
) -> Result<Translated> {
    let ext = Ext {
        map: &cmd.ext_fields,
        code: cmd.code,
    };
    match cmd.code {
        rc::SEND_MESSAGE | rc::SEND_MESSAGE_V2 | rc::SEND_BATCH_MESSAGE => {
            let (header, records, kind) = send(cmd, &ext, body, peer.addr)?;
            let code = if header.batch {
                RequestCode::SendBatchMessage
            } else {
                RequestCode::SendMessage
            };
            native(code, &header, &records, kind)
        }
        rc::PULL_MESSAGE | rc::LITE_PULL_MESSAGE => {
            let h = pull(svc, &ext)?;
            native(RequestCode::PullMessage, &h, &[], ReplyKind::Pull)
        }
        rc::QUERY_CONSUMER_OFFSET => {
            let h = QueryConsumerOffsetRequest {
                consumer_group: ext.str("consumerGroup")?,
                topic: ext.str("topic")?,
                queue_id: ext.num("queueId")?,
            };
            let min = GetOffsetRequest {
                topic: h.topic.clone(),
                queue_id: h.queue_id,
            };
            let mut min_offset_frame = Vec::new();
            frame::encode_request(
                &mut min_offset_frame,
                RequestCode::GetMinOffset,
                false,
                0,
                &min,
                &[],
            )
            .map_err(|e| Refusal::bad(e.to_string()))?;
            native(
                RequestCode::QueryConsumerOffset,
                &h,
                &[],
                ReplyKind::ConsumerOffset { min_offset_frame },
            )
        }
        rc::UPDATE_CONSUMER_OFFSET => {
            let h = UpdateConsumerOffsetRequest {
                consumer_group: ext.str("consumerGroup")?,
                topic: ext.str("topic")?,
                queue_id: ext.num("queueId")?,
                offset: ext.num("commitOffset")?,
            };
            native(RequestCode::UpdateConsumerOffset, &h, &[], ReplyKind::Plain)
        }
        rc::GET_MAX_OFFSET | rc::GET_MIN_OFFSET => {
            let h = GetOffsetRequest {
                topic: ext.str("topic")?,
                queue_id: ext.num("queueId")?,
            };
            let code = if cmd.code == rc::GET_MAX_OFFSET {
                RequestCode::GetMaxOffset
            } else {
                RequestCode::GetMinOffset
            };
            native(code, &h, &[], ReplyKind::Offset)
        }
        rc::SEARCH_OFFSET_BY_TIMESTAMP => {
            let boundary = match ext.opt("boundaryType") {
                Some(b) if b.eq_ignore_ascii_case("upper") => Boundary::Upper,
                _ => Boundary::Lower,
            };
            let h = SearchOffsetRequest {
                topic: ext.str("topic")?,
                queue_id: ext.num("queueId")?,
                timestamp_ms: ext.num("timestamp")?,
                boundary,
            };
            native(
                RequestCode::SearchOffsetByTimestamp,
                &h,
                &[],
                ReplyKind::Offset,
            )
        }
        rc::HEART_BEAT => {
            let hb = rbody::HeartbeatData::from_json(body)
                .map_err(|e| Refusal::bad(format!("heartbeat body: {e}")))?;
            let native_body = heartbeat(hb)
                .to_vec()
                .map_err(|e| Refusal::bad(format!("heartbeat: {e}")))?;
            native(
                RequestCode::HeartBeat,
                &Empty,
                &native_body,
                ReplyKind::Plain,
            )
        }
        rc::UNREGISTER_CLIENT => {
            let h = UnregisterClientRequest {
                client_id: ext.str("clientID")?,
                producer_group: ext.opt_nonempty("producerGroup"),
                consumer_group: ext.opt_nonempty("consumerGroup"),
            };
            native(RequestCode::UnregisterClient, &h, &[], ReplyKind::Plain)
        }
        rc::GET_CONSUMER_LIST_BY_GROUP => {
            let h = GetConsumerListRequest {
                consumer_group: ext.str("consumerGroup")?,
            };
            native(
                RequestCode::GetConsumerListByGroup,
                &h,
                &[],
                ReplyKind::ConsumerList,
            )
        }
        rc::CONSUMER_SEND_MSG_BACK => {
            let h = ConsumerSendBackRequest {
                consumer_group: ext.str("group")?,
                original_topic: ext.opt("originTopic").unwrap_or_default().to_string(),
                physical_offset: ext.num("offset")?,
                delay_level: ext.opt_num("delayLevel")?.unwrap_or(0),
                max_reconsume_times: ext
                    .opt_num::<i32>("maxReconsumeTimes")?
                    .map_or(u32::MAX, |m| u32::try_from(m).unwrap_or(0)),
                original_message_id: ext.opt("originMsgId").unwrap_or_default().to_string(),
            };
            native(RequestCode::ConsumerSendMsgBack, &h, &[], ReplyKind::Plain)
        }
        rc::END_TRANSACTION => {
            let resolution = match ext.num::<i32>("commitOrRollback")? {
                TRANSACTION_COMMIT_TYPE => TransactionResolution::Commit,
                TRANSACTION_ROLLBACK_TYPE => TransactionResolution::Rollback,
                _ => TransactionResolution::Unknown,
            };
            let h = EndTransactionRequest {
                producer_group: ext.str("producerGroup")?,
                resolution,
                half_queue_offset: ext.num("tranStateTableOffset")?,
                physical_offset: ext.num("commitLogOffset")?,
                message_id: ext.opt("msgId").unwrap_or_default().to_string(),
                transaction_id: ext.opt("transactionId").unwrap_or_default().to_string(),
                from_transaction_check: ext.flag("fromTransactionCheck"),
            };
            native(RequestCode::EndTransaction, &h, &[], ReplyKind::Plain)
        }
        rc::LOCK_BATCH_MQ | rc::UNLOCK_BATCH_MQ => {
            let req = rbody::LockBatchRequestBody::from_json(body)
                .map_err(|e| Refusal::bad(format!("lock batch body: {e}")))?;
            let native_body = lock_batch(req)?
                .to_vec()
                .map_err(|e| Refusal::bad(format!("lock batch: {e}")))?;
            if cmd.code == rc::LOCK_BATCH_MQ {
                native(
                    RequestCode::LockBatchMq,
                    &Empty,
                    &native_body,
                    ReplyKind::LockBatch,
                )
            } else {
                native(
                    RequestCode::UnlockBatchMq,
                    &Empty,
                    &native_body,
                    ReplyKind::Plain,
                )
            }
        }
        rc::QUERY_MESSAGE => {
            let h = QueryMessageRequest {
                topic: ext.str("topic")?,
                key: ext.str("key")?,
                max_messages: ext.num("maxNum")?,
                begin_timestamp_ms: ext.num("beginTimestamp")?,
                end_timestamp_ms: ext.num("endTimestamp")?,
            };
            native(RequestCode::QueryMessage, &h, &[], ReplyKind::QueryMessage)
        }
        rc::VIEW_MESSAGE_BY_ID => {
            let h = ViewMessageRequest {
                physical_offset: ext.num("offset")?,
            };
            native(RequestCode::ViewMessageById, &h, &[], ReplyKind::Records)
        }
        rc::GET_ROUTEINFO_BY_TOPIC => {
            let h = GetRouteRequest {
                topic: ext.str("topic")?,
            };
            native(RequestCode::GetRouteInfoByTopic, &h, &[], ReplyKind::Route)
        }
        rc::GET_BROKER_CLUSTER_INFO => native(
            RequestCode::GetBrokerClusterInfo,
            &Empty,
            &[],
            ReplyKind::ClusterInfo,
        ),
        rc::GET_ALL_TOPIC_LIST_FROM_NAMESERVER => native(
            RequestCode::GetAllTopicListFromNameserver,
            &Empty,
            &[],
            ReplyKind::TopicList,
        ),
        rc::CHECK_CLIENT_CONFIG => Ok(Translated::Answer(
            Command::response(response::SUCCESS, cmd.opaque, None),
            Body::Empty,
        )),
        other => Err(Refusal {
            code: response::REQUEST_CODE_NOT_SUPPORTED,
            remark: format!("request code {other} is not supported by ringmq"),
        }),
    }
}

/// A native request frame (request id 0: the remoting opaque is kept by the caller).
fn native<H: Encode>(
    code: RequestCode,
    header: &H,
    body: &[u8],
    kind: ReplyKind,
) -> Result<Translated> {
    let mut frame = Vec::with_capacity(64 + body.len());
    frame::encode_request(&mut frame, code, false, 0, header, body)
        .map_err(|e| Refusal::bad(format!("{}: {e}", code.name())))?;
    Ok(Translated::Native { frame, kind })
}

/// A heartbeat's JSON body as the native one. SQL92 subscriptions keep their expression;
/// tag subscriptions are re-read from `subString` (the C++ client's `codeSet` is not
/// RocketMQ's hash, so the broker derives tag hashes itself).
fn heartbeat(hb: rbody::HeartbeatData) -> HeartbeatData {
    HeartbeatData {
        client_id: hb.client_id,
        producer_groups: hb
            .producer_data_set
            .into_iter()
            .map(|p| p.group_name)
            .collect(),
        consumer_groups: hb
            .consumer_data_set
            .into_iter()
            .map(|c| ConsumerGroupData {
                group: c.group_name,
                consume_type: match c.consume_type {
                    Some(rbody::ConsumeType::Actively) => ConsumeType::Actively,
                    _ => ConsumeType::Passively,
                },
                message_model: match c.message_model {
                    Some(rbody::MessageModel::Broadcasting) => MessageModel::Broadcasting,
                    _ => MessageModel::Clustering,
                },
                consume_from_where: match c.consume_from_where {
                    Some(rbody::ConsumeFromWhere::FirstOffset) => ConsumeFromWhere::FirstOffset,
                    Some(rbody::ConsumeFromWhere::Timestamp) => ConsumeFromWhere::Timestamp,
                    _ => ConsumeFromWhere::LastOffset,
                },
                subscriptions: c
                    .subscription_data_set
                    .into_iter()
                    .map(|s| Subscription {
                        topic: s.topic,
                        filter_type: if s.expression_type.eq_ignore_ascii_case("SQL92") {
                            FilterType::Sql92
                        } else {
                            FilterType::Tag
                        },
                        expression: s.sub_string,
                        version: u64::try_from(s.sub_version).unwrap_or(0),
                    })
                    .collect(),
            })
            .collect(),
    }
}

fn lock_batch(b: rbody::LockBatchRequestBody) -> Result<LockBatchRequest> {
    let queues = b
        .mq_set
        .into_iter()
        .map(|q| {
            Ok(MessageQueue {
                queue_id: u32::try_from(q.queue_id)
                    .map_err(|_| Refusal::bad(format!("queueId {} is negative", q.queue_id)))?,
                topic: q.topic,
                broker_name: q.broker_name,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(LockBatchRequest {
        consumer_group: b.consumer_group,
        client_id: b.client_id,
        queues,
    })
}

/// `commitOrRollback` values (RocketMQ `MessageSysFlag`).
const TRANSACTION_COMMIT_TYPE: i32 = 0x8;
const TRANSACTION_ROLLBACK_TYPE: i32 = 0xC;
/// SYSFLAG bits the encoder derives from the hosts (born / store host is IPv6).
const SYSFLAG_HOST_BITS: u32 = 0x10 | 0x20;

/// SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE: the native header and the records.
fn send(
    cmd: &Command,
    ext: &Ext<'_>,
    body: &[u8],
    born_host: SocketAddr,
) -> Result<(SendRequest, Vec<u8>, ReplyKind)> {
    let v2 = cmd.code == rc::SEND_MESSAGE_V2 || cmd.code == rc::SEND_BATCH_MESSAGE;
    let name = |long: &'static str, short: &'static str| if v2 { short } else { long };
    let producer_group = ext.str(name("producerGroup", "a"))?;
    let topic = ext.str(name("topic", "b"))?;
    let queue_id: i32 = ext.num(name("queueId", "e"))?;
    let queue_id = u32::try_from(queue_id).map_err(|_| Refusal {
        code: response::MESSAGE_ILLEGAL,
        remark: format!("queueId {queue_id} is negative"),
    })?;
    let sys_flag =
        ext.opt_num::<i32>(name("sysFlag", "f"))?.unwrap_or(0) as u32 & !SYSFLAG_HOST_BITS;
    let born_timestamp_ms = ext.opt_num::<i64>(name("bornTimestamp", "g"))?.unwrap_or(0);
    let flag = ext.opt_num::<i32>(name("flag", "h"))?.unwrap_or(0);
    let props = ext.opt(name("properties", "i")).unwrap_or("");
    let reconsume_times = ext
        .opt_num::<i32>(name("reconsumeTimes", "j"))?
        .unwrap_or(0);
    let batch = cmd.code == rc::SEND_BATCH_MESSAGE || ext.flag(name("batch", "m"));
    let illegal = |e: ringmq_wire::WireError| Refusal {
        code: response::MESSAGE_ILLEGAL,
        remark: format!("message of topic {topic}: {e}"),
    };
    let template = Message {
        topic: &topic,
        queue_id,
        flag,
        sys_flag,
        born_timestamp_ms,
        born_host,
        store_host_v6: false,
        reconsume_times,
        prepared_transaction_offset: 0,
        body: &[],
        properties: &[],
    };
    let mut records = Vec::with_capacity(body.len() + 256);
    let mut record_lens = Vec::new();
    let mut transaction_id = None;
    if batch {
        // The batch decoder stops with an error past its message cap.
        for item in batch::iter(body) {
            let item = item.map_err(illegal)?;
            let before = records.len();
            let m = Message {
                body: item.body,
                properties: item.properties.as_bytes(),
                flag: item.flag,
                ..template.clone()
            };
            record::encode(&m, &mut records).map_err(illegal)?;
            record_lens.push(records.len() - before);
            if transaction_id.is_none() {
                transaction_id = uniq_key(item.properties.as_bytes());
            }
        }
        if record_lens.is_empty() {
            return Err(Refusal {
                code: response::MESSAGE_ILLEGAL,
                remark: "a batch with no message".to_string(),
            });
        }
    } else {
        let m = Message {
            body,
            properties: props.as_bytes(),
            ..template
        };
        record::encode(&m, &mut records).map_err(illegal)?;
        record_lens.push(records.len());
        transaction_id = uniq_key(props.as_bytes());
    }
    let header = SendRequest {
        producer_group,
        topic: topic.clone(),
        queue_id,
        batch,
        record_count: u32::try_from(record_lens.len()).unwrap_or(u32::MAX),
    };
    Ok((
        header,
        records,
        ReplyKind::Send {
            record_lens,
            transaction_id,
        },
    ))
}

fn uniq_key(props: &[u8]) -> Option<String> {
    properties::get(props, keys::UNIQ_KEY).map(str::to_owned)
}

/// PULL_MESSAGE / LITE_PULL_MESSAGE.
fn pull<S: Service + ?Sized>(svc: &S, ext: &Ext<'_>) -> Result<PullRequest> {
    let consumer_group = ext.str("consumerGroup")?;
    let topic = ext.str("topic")?;
    let sys_flag = ext.opt_num::<i32>("sysFlag")?.unwrap_or(0);
    let (filter_type, expression) = if sys_flag & PULL_SUBSCRIPTION != 0 {
        let t = match ext.opt("expressionType") {
            Some(t) if t.eq_ignore_ascii_case("SQL92") => FilterType::Sql92,
            Some(t) if !t.is_empty() && !t.eq_ignore_ascii_case("TAG") => {
                return Err(Refusal::bad(format!("expressionType {t} is not supported")))
            }
            _ => FilterType::Tag,
        };
        (t, ext.opt("subscription").unwrap_or("*").to_string())
    } else {
        svc.subscription(&consumer_group, &topic).ok_or_else(|| Refusal {
            code: response::SUBSCRIPTION_NOT_EXIST,
            remark: format!(
                "group {consumer_group} has no subscription to {topic} on this broker: send a heartbeat first"
            ),
        })?
    };
    let queue_offset: i64 = ext.num("queueOffset")?;
    let commit_offset = if sys_flag & PULL_COMMIT_OFFSET != 0 {
        ext.opt_num::<i64>("commitOffset")?
            .and_then(|o| u64::try_from(o).ok())
    } else {
        None
    };
    let suspend_timeout_ms = if sys_flag & PULL_SUSPEND != 0 {
        ext.opt_num::<u32>("suspendTimeoutMillis")?
            .unwrap_or(15_000)
    } else {
        0
    };
    let max_bytes = ext
        .opt_num::<i64>("maxMsgBytes")?
        .and_then(|b| u32::try_from(b).ok())
        .unwrap_or(PULL_BODY_BYTES_MAX)
        .min(PULL_BODY_BYTES_MAX);
    Ok(PullRequest {
        consumer_group,
        topic,
        queue_id: ext.num("queueId")?,
        queue_offset: u64::try_from(queue_offset).unwrap_or(0),
        max_messages: ext.opt_num("maxMsgNums")?.unwrap_or(32),
        max_bytes,
        filter_type,
        expression,
        suspend_timeout_ms,
        commit_offset,
    })
}

/// Typed reads of a request's extFields; a refusal names the field and the request code.
struct Ext<'a> {
    map: &'a ExtFields,
    code: i32,
}

impl Ext<'_> {
    fn opt(&self, key: &str) -> Option<&str> {
        self.map.get(key).map(String::as_str)
    }

    fn opt_nonempty(&self, key: &str) -> Option<String> {
        self.opt(key).filter(|v| !v.is_empty()).map(str::to_owned)
    }

    fn str(&self, key: &str) -> Result<String> {
        self.opt(key).map(str::to_owned).ok_or_else(|| {
            Refusal::bad(format!(
                "request code {}: the required field {key} is missing",
                self.code
            ))
        })
    }

    fn opt_num<T: FromStr>(&self, key: &str) -> Result<Option<T>> {
        match self.opt(key) {
            None | Some("") => Ok(None),
            Some(v) => v.trim().parse::<T>().map(Some).map_err(|_| {
                Refusal::bad(format!(
                    "request code {}: field {key} is not a number in range: {v:?}",
                    self.code
                ))
            }),
        }
    }

    fn num<T: FromStr>(&self, key: &str) -> Result<T> {
        self.opt_num(key)?.ok_or_else(|| {
            Refusal::bad(format!(
                "request code {}: the required field {key} is missing",
                self.code
            ))
        })
    }

    /// A boolean as Java and C++ clients send it: `true` / `1`.
    fn flag(&self, key: &str) -> bool {
        self.opt(key)
            .is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
    }
}
