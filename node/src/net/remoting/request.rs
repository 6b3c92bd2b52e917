//! Remoting request -> the native request that means the same. The result is a native frame
//! for the service (so the broker's one request path serves both protocols) and a
//! [`ReplyKind`] saying how to read the native answer back into RocketMQ's response; or an
//! answer made here when the request cannot be served (an unknown code, a missing field).
//!
//! | remoting code | native request | notes |
//! |---|---|---|
//! | SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE | SEND_MESSAGE / SEND_BATCH_MESSAGE | records built here: born host from the socket, CRC computed; a request-reply request gets `CLUSTER` |
//! | SEND_REPLY_MESSAGE, SEND_REPLY_MESSAGE_V2 | SEND_REPLY_MESSAGE | one record, as a send |
//! | PULL_MESSAGE, LITE_PULL_MESSAGE | PULL_MESSAGE | sysFlag: commit offset, suspend, subscription (else the group's heartbeat subscription) |
//! | QUERY_CONSUMER_OFFSET | QUERY_CONSUMER_OFFSET, then GET_MIN_OFFSET when none is stored | offset 0 when the queue still starts at 0 (RocketMQ's answer) |
//! | UPDATE_CONSUMER_OFFSET, GET_MAX/MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP | same | |
//! | HEART_BEAT | HEART_BEAT | JSON body -> native body |
//! | UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP, CONSUMER_SEND_MSG_BACK, END_TRANSACTION | same | |
//! | LOCK_BATCH_MQ, UNLOCK_BATCH_MQ | same | JSON body -> native body |
//! | QUERY_MESSAGE, VIEW_MESSAGE_BY_ID | same | |
//! | RECALL_MESSAGE | RECALL_MESSAGE | the answer's `msgId` is the recalled message's id |
//! | GET_ROUTEINFO_BY_TOPIC, GET_BROKER_CLUSTER_INFO, GET_ALL_TOPIC_LIST_FROM_NAMESERVER | same | name server |
//! | CHECK_CLIENT_CONFIG | answered here | SUCCESS: SQL92 is checked when the pull parses it |
//! | AUTH_CREATE_USER ... AUTH_LIST_ACL (3001-3010) | same numbers | [`auth`]: extFields -> native header, JSON bodies pass through |
//! | POP_MESSAGE, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME | POP_MESSAGE, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME | order=true: orderly POP (reconsume counts in the records, no orderCountInfo); an ack whose handle says retry names the pop retry topic |

use std::net::SocketAddr;

use ringmq_wire::code::RequestCode;
use ringmq_wire::codec::{Empty, Encode};
use ringmq_wire::command::pull::FilterType;
use ringmq_wire::command::{
    pop_retry_topic, AckRequest, Boundary, ChangeInvisibleTimeRequest, ConsumeFromWhere,
    ConsumeType, ConsumerGroupData, ConsumerSendBackRequest, EndTransactionRequest,
    GetConsumerListRequest, GetOffsetRequest, GetRouteRequest, HeartbeatData, LockBatchRequest,
    MessageModel, MessageQueue, PopInitMode, PopRequest, PullRequest, QueryConsumerOffsetRequest,
    QueryMessageRequest, RecallRequest, SearchOffsetRequest, SendRequest, Subscription,
    TransactionResolution, UnregisterClientRequest, UpdateConsumerOffsetRequest,
    ViewMessageRequest,
};
use ringmq_wire::frame;
use ringmq_wire::properties::{self, keys};
use ringmq_wire::record::{self, Message};
use ringmq_wire::remoting::batch;
use ringmq_wire::remoting::body::{self as rbody, JsonBody};
use ringmq_wire::remoting::code::{request as rc, response};
use ringmq_wire::remoting::ext::{ExtFields, FromExt};
use ringmq_wire::remoting::frame::Command;
use ringmq_wire::remoting::headers::{self as h, message_sys_flag as sys};

use super::view::{self, global};
use super::Peer;
use crate::net::shard_view::ShardView;

mod admin;
mod auth;
use crate::net::reply::Body;
use crate::net::service::Service;

/// Largest pull body asked of the broker: rocketmq-client-rust refuses bodies over 4 MiB.
pub const PULL_BODY_BYTES_MAX: u32 = 4 * 1024 * 1024 - 64 * 1024;

/// What a translation gave.
#[derive(Debug)]
pub enum Translated {
    /// A native request frame, and how to read its answer.
    Native { frame: Vec<u8>, kind: ReplyKind },
    /// An admin request answered from several native requests.
    Admin(super::admin::Job),
    /// An answer made here.
    Answer(Command, Body),
}

/// How the native answer becomes a remoting response.
#[derive(Debug, Clone)]
pub enum ReplyKind {
    /// No fields, no body.
    Plain,
    /// A send: the stored records' lengths (for the offset ids of a batch), the
    /// transaction id (the first message's unique key), and for a single message with a
    /// schedule property what its `recallHandle` is made of (when the broker scheduled it).
    Send {
        record_lens: Vec<usize>,
        transaction_id: Option<String>,
        recall: Option<RecallBase>,
        /// On a shard's own port: the topic, to name the queue in the shard's view.
        view_topic: Option<String>,
    },
    /// RECALL_MESSAGE: the `msgId` field.
    Recall,
    /// On a shard's own port: the queue's id in the shard's view, written into the records.
    Pull {
        view_queue: Option<u32>,
    },
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
    /// POP_MESSAGE: the checkpoint fields, the records as the body.
    Pop,
    /// CHANGE_MESSAGE_INVISIBLETIME: the new checkpoint's fields.
    ChangeInvisible,
    QueryMessage,
}

/// The queue an ack names: a receipt handle marked retry (5th field not 0) names the group's
/// pop retry topic even when the client sends the message's original topic.
fn pop_queue_topic(group: &str, topic: &str, extra_info: &str) -> String {
    let retry = extra_info.split(' ').nth(4).is_some_and(|f| f != "0");
    if retry && !ringmq_wire::command::is_retry_topic(topic) {
        pop_retry_topic(group, topic)
    } else {
        topic.to_string()
    }
}

/// The topic and broker name of a scheduled send, for its `recallHandle`.
#[derive(Debug, Clone)]
pub struct RecallBase {
    pub topic: String,
    pub broker_name: String,
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
    pub(super) fn bad(what: impl Into<String>) -> Self {
        Refusal {
            code: response::SYSTEM_ERROR,
            remark: what.into(),
        }
    }
}

pub(super) type Result<T> = std::result::Result<T, Refusal>;

fn translate_inner<S: Service + ?Sized>(
    svc: &S,
    cmd: &Command,
    body: &[u8],
    peer: Peer,
) -> Result<Translated> {
    let ext = &cmd.ext_fields;
    let code = cmd.code;
    let view = svc.shard_view();
    match code {
        rc::SEND_MESSAGE
        | rc::SEND_MESSAGE_V2
        | rc::SEND_BATCH_MESSAGE
        | rc::SEND_REPLY_MESSAGE
        | rc::SEND_REPLY_MESSAGE_V2 => send(cmd, body, peer.addr, svc.cluster_name(), view, || {
            svc.broker_name()
        }),
        rc::RECALL_MESSAGE => {
            let r: h::RecallMessageRequestHeader = typed(code, ext)?;
            let h = RecallRequest {
                producer_group: r.producer_group.unwrap_or_default(),
                topic: r.topic,
                recall_handle: view::recall_to_broker(view, r.recall_handle),
            };
            native(RequestCode::RecallMessage, &h, &[], ReplyKind::Recall)
        }
        rc::PULL_MESSAGE | rc::LITE_PULL_MESSAGE => {
            let mut h = pull(svc, typed(code, ext)?)?;
            let view_queue = view.map(|_| h.queue_id);
            h.queue_id = global(view, &h.topic, h.queue_id);
            native(
                RequestCode::PullMessage,
                &h,
                &[],
                ReplyKind::Pull { view_queue },
            )
        }
        rc::QUERY_CONSUMER_OFFSET => {
            let r: h::QueryConsumerOffsetRequestHeader = typed(code, ext)?;
            let queue_id = global(view, &r.topic, queue(r.queue_id)?);
            let min = GetOffsetRequest {
                topic: r.topic.clone(),
                queue_id,
            };
            let h = QueryConsumerOffsetRequest {
                consumer_group: r.consumer_group,
                topic: r.topic,
                queue_id,
            };
            // RocketMQ: `setZeroIfNotFound=false` asks for QUERY_NOT_FOUND, never 0.
            let kind = if r.set_zero_if_not_found == Some(false) {
                ReplyKind::Offset
            } else {
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
                ReplyKind::ConsumerOffset { min_offset_frame }
            };
            native(RequestCode::QueryConsumerOffset, &h, &[], kind)
        }
        rc::UPDATE_CONSUMER_OFFSET => {
            let r: h::UpdateConsumerOffsetRequestHeader = typed(code, ext)?;
            let h = UpdateConsumerOffsetRequest {
                consumer_group: r.consumer_group,
                queue_id: global(view, &r.topic, queue(r.queue_id)?),
                topic: r.topic,
                offset: offset(r.commit_offset)?,
            };
            native(RequestCode::UpdateConsumerOffset, &h, &[], ReplyKind::Plain)
        }
        rc::GET_MAX_OFFSET => {
            let r: h::GetMaxOffsetRequestHeader = typed(code, ext)?;
            let h = GetOffsetRequest {
                queue_id: global(view, &r.topic, queue(r.queue_id)?),
                topic: r.topic,
            };
            native(RequestCode::GetMaxOffset, &h, &[], ReplyKind::Offset)
        }
        rc::GET_MIN_OFFSET => {
            let r: h::GetMinOffsetRequestHeader = typed(code, ext)?;
            let h = GetOffsetRequest {
                queue_id: global(view, &r.topic, queue(r.queue_id)?),
                topic: r.topic,
            };
            native(RequestCode::GetMinOffset, &h, &[], ReplyKind::Offset)
        }
        rc::SEARCH_OFFSET_BY_TIMESTAMP => {
            let r: h::SearchOffsetRequestHeader = typed(code, ext)?;
            let h = SearchOffsetRequest {
                boundary: if r.is_upper() {
                    Boundary::Upper
                } else {
                    Boundary::Lower
                },
                queue_id: global(view, &r.topic, queue(r.queue_id)?),
                topic: r.topic,
                timestamp_ms: r.timestamp,
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
            let r: h::UnregisterClientRequestHeader = typed(code, ext)?;
            let h = UnregisterClientRequest {
                client_id: r.client_id,
                producer_group: r.producer_group.filter(|g| !g.is_empty()),
                consumer_group: r.consumer_group.filter(|g| !g.is_empty()),
            };
            native(RequestCode::UnregisterClient, &h, &[], ReplyKind::Plain)
        }
        rc::GET_CONSUMER_LIST_BY_GROUP => {
            let r: h::GetConsumerListByGroupRequestHeader = typed(code, ext)?;
            let h = GetConsumerListRequest {
                consumer_group: r.consumer_group,
            };
            native(
                RequestCode::GetConsumerListByGroup,
                &h,
                &[],
                ReplyKind::ConsumerList,
            )
        }
        rc::CONSUMER_SEND_MSG_BACK => {
            let r: h::ConsumerSendMsgBackRequestHeader = typed(code, ext)?;
            let h = ConsumerSendBackRequest {
                consumer_group: r.group,
                original_topic: r.origin_topic.unwrap_or_default(),
                physical_offset: offset(r.offset)?,
                delay_level: r.delay_level,
                // 0 (absent: the C++ client sends none; or not positive) leaves it to the
                // group's retry limit, as RocketMQ's broker does.
                max_reconsume_times: r
                    .max_reconsume_times
                    .and_then(|m| u32::try_from(m).ok())
                    .unwrap_or(0),
                original_message_id: r.origin_msg_id.unwrap_or_default(),
            };
            native(RequestCode::ConsumerSendMsgBack, &h, &[], ReplyKind::Plain)
        }
        rc::POP_MESSAGE => {
            let r: h::PopMessageRequestHeader = typed(code, ext)?;
            let filter_type = match r.exp_type.as_deref() {
                None | Some("") | Some("TAG") => FilterType::Tag,
                Some("SQL92") => FilterType::Sql92,
                Some(other) => {
                    return Err(Refusal::bad(format!("expType {other} is not TAG or SQL92")))
                }
            };
            let queue_id = match u32::try_from(r.queue_id) {
                Ok(q) => i32::try_from(global(view, &r.topic, q)).unwrap_or(i32::MAX),
                Err(_) => -1,
            };
            let h = PopRequest {
                consumer_group: r.consumer_group,
                topic: r.topic,
                queue_id,
                max_messages: u32::try_from(r.max_msg_nums).unwrap_or(0),
                invisible_time_ms: u64::try_from(r.invisible_time).unwrap_or(0),
                poll_time_ms: u32::try_from(r.poll_time.max(0)).unwrap_or(u32::MAX),
                filter_type,
                expression: r
                    .exp
                    .filter(|e| !e.is_empty())
                    .unwrap_or_else(|| "*".into()),
                init_mode: if r.init_mode == 1 {
                    PopInitMode::Max
                } else {
                    PopInitMode::Min
                },
                order: r.order == Some(true),
            };
            native(RequestCode::PopMessage, &h, &[], ReplyKind::Pop)
        }
        rc::ACK_MESSAGE => {
            let r: h::AckMessageRequestHeader = typed(code, ext)?;
            let topic = pop_queue_topic(&r.consumer_group, &r.topic, &r.extra_info);
            let (queue_id, extra_info) =
                view::receipt_to_broker(view, &topic, queue(r.queue_id)?, r.extra_info);
            let h = AckRequest {
                queue_id,
                extra_info,
                topic,
                consumer_group: r.consumer_group,
                offset: offset(r.offset)?,
            };
            native(RequestCode::AckMessage, &h, &[], ReplyKind::Plain)
        }
        rc::CHANGE_MESSAGE_INVISIBLETIME => {
            let r: h::ChangeInvisibleTimeRequestHeader = typed(code, ext)?;
            let topic = pop_queue_topic(&r.consumer_group, &r.topic, &r.extra_info);
            let (queue_id, extra_info) =
                view::receipt_to_broker(view, &topic, queue(r.queue_id)?, r.extra_info);
            let h = ChangeInvisibleTimeRequest {
                queue_id,
                extra_info,
                topic,
                consumer_group: r.consumer_group,
                offset: offset(r.offset)?,
                invisible_time_ms: u64::try_from(r.invisible_time).unwrap_or(0),
            };
            native(
                RequestCode::ChangeMessageInvisibleTime,
                &h,
                &[],
                ReplyKind::ChangeInvisible,
            )
        }
        rc::END_TRANSACTION => {
            let r: h::EndTransactionRequestHeader = typed(code, ext)?;
            let resolution = match r.commit_or_rollback {
                sys::TRANSACTION_COMMIT_TYPE => TransactionResolution::Commit,
                sys::TRANSACTION_ROLLBACK_TYPE => TransactionResolution::Rollback,
                _ => TransactionResolution::Unknown,
            };
            let h = EndTransactionRequest {
                producer_group: r.producer_group,
                resolution,
                half_queue_offset: offset(r.tran_state_table_offset)?,
                physical_offset: offset(r.commit_log_offset)?,
                message_id: r.msg_id,
                transaction_id: r.transaction_id.unwrap_or_default(),
                // The C++ client writes booleans as 0 / 1.
                from_transaction_check: r.from_transaction_check
                    || ext.get("fromTransactionCheck").is_some_and(|v| v == "1"),
            };
            native(RequestCode::EndTransaction, &h, &[], ReplyKind::Plain)
        }
        rc::LOCK_BATCH_MQ | rc::UNLOCK_BATCH_MQ => {
            let req = rbody::LockBatchRequestBody::from_json(body)
                .map_err(|e| Refusal::bad(format!("lock batch body: {e}")))?;
            let native_body = lock_batch(req, view)?
                .to_vec()
                .map_err(|e| Refusal::bad(format!("lock batch: {e}")))?;
            if code == rc::LOCK_BATCH_MQ {
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
            let r: h::QueryMessageRequestHeader = typed(code, ext)?;
            let h = QueryMessageRequest {
                topic: r.topic,
                key: r.key,
                max_messages: u32::try_from(r.max_num).unwrap_or(0),
                begin_timestamp_ms: r.begin_timestamp,
                end_timestamp_ms: r.end_timestamp,
            };
            native(RequestCode::QueryMessage, &h, &[], ReplyKind::QueryMessage)
        }
        rc::VIEW_MESSAGE_BY_ID => {
            let r: h::ViewMessageRequestHeader = typed(code, ext)?;
            let h = ViewMessageRequest {
                physical_offset: offset(r.offset)?,
            };
            native(RequestCode::ViewMessageById, &h, &[], ReplyKind::Records)
        }
        rc::GET_ROUTEINFO_BY_TOPIC => {
            let r: h::GetRouteInfoRequestHeader = typed(code, ext)?;
            let h = GetRouteRequest { topic: r.topic };
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
        other => match admin::translate(other, ext, body)? {
            Some(t) => Ok(t),
            None => match auth::translate(other, ext, body)? {
                Some(t) => Ok(t),
                None => Err(Refusal {
                    code: response::REQUEST_CODE_NOT_SUPPORTED,
                    remark: format!("request code {other} is not supported by ringmq"),
                }),
            },
        },
    }
}

/// A typed header from the request's extFields; a refusal names the request and the field.
pub(super) fn typed<T: FromExt>(code: i32, ext: &ExtFields) -> Result<T> {
    T::from_ext(ext).map_err(|e| Refusal::bad(format!("request code {code}: {e}")))
}

fn queue(queue_id: i32) -> Result<u32> {
    u32::try_from(queue_id).map_err(|_| Refusal::bad(format!("queueId {queue_id} is negative")))
}

fn offset(o: i64) -> Result<u64> {
    u64::try_from(o).map_err(|_| Refusal::bad(format!("offset {o} is negative")))
}

/// A native request frame (request id 0: the remoting opaque is kept by the caller).
pub(super) fn native<H: Encode>(
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

/// SYSFLAG bits the record encoder derives from the hosts (born / store host is IPv6).
const SYSFLAG_HOST_BITS: i32 = sys::BORNHOST_V6_FLAG | sys::STOREHOSTADDRESS_V6_FLAG;

/// SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE / SEND_REPLY_MESSAGE(_V2): the
/// native send, its records encoded straight into the native frame (the body is copied
/// once). A request message (request-reply) gets the broker's `cluster` as its `CLUSTER`
/// property, as RocketMQ's broker stores it; a scheduled send's answer carries the recall
/// handle made with `broker_name`.
fn send(
    cmd: &Command,
    body: &[u8],
    born_host: SocketAddr,
    cluster: Option<&str>,
    view: Option<ShardView>,
    broker_name: impl FnOnce() -> Option<String>,
) -> Result<Translated> {
    let reply = cmd.code == rc::SEND_REPLY_MESSAGE || cmd.code == rc::SEND_REPLY_MESSAGE_V2;
    let v2 = matches!(
        cmd.code,
        rc::SEND_MESSAGE_V2 | rc::SEND_BATCH_MESSAGE | rc::SEND_REPLY_MESSAGE_V2
    );
    let h = if v2 {
        h::SendMessageRequestHeader::from_ext_v2(&cmd.ext_fields)
    } else {
        h::SendMessageRequestHeader::from_ext(&cmd.ext_fields)
    }
    .map_err(|e| Refusal::bad(format!("request code {}: {e}", cmd.code)))?;
    let topic = h.topic.as_str();
    let queue_id = u32::try_from(h.queue_id).map_err(|_| Refusal {
        code: response::MESSAGE_ILLEGAL,
        remark: format!("queueId {} is negative", h.queue_id),
    })?;
    let queue_id = global(view, topic, queue_id);
    // The C++ client writes `batch` as 1.
    let batch_key = if v2 { "m" } else { "batch" };
    let batch = cmd.code == rc::SEND_BATCH_MESSAGE
        || h.batch
        || cmd.ext_fields.get(batch_key).is_some_and(|v| v == "1");
    if reply && batch {
        return Err(Refusal {
            code: response::MESSAGE_ILLEGAL,
            remark: "a reply is one message, not a batch".to_string(),
        });
    }
    let illegal = |e: ringmq_wire::WireError| Refusal {
        code: response::MESSAGE_ILLEGAL,
        remark: format!("message of topic {topic}: {e}"),
    };
    let props = with_cluster(
        h.properties.as_deref().unwrap_or(""),
        cluster.filter(|_| !reply),
    );
    let props = props.as_ref();
    let template = Message {
        topic,
        queue_id,
        flag: h.flag,
        sys_flag: (h.sys_flag & !SYSFLAG_HOST_BITS) as u32,
        born_timestamp_ms: h.born_timestamp,
        born_host,
        store_host_v6: false,
        reconsume_times: h.reconsume_times.unwrap_or(0),
        prepared_transaction_offset: 0,
        body: &[],
        properties: &[],
    };
    // One pass: the records are encoded straight into the frame, sized from the entries'
    // sizes (a record is a batch entry with the record's fixed part for the entry's).
    let count = if batch { batch::count_hint(body) } else { 1 };
    if count == 0 {
        return Err(Refusal {
            code: response::MESSAGE_ILLEGAL,
            remark: "a batch with no message".to_string(),
        });
    }
    let encoder = record::BatchEncoder::new(&template).map_err(illegal)?;
    let fixed = encoder.encoded_len(0, 0);
    let records_hint = if batch {
        (body.len() + count * fixed).saturating_sub(count * batch::ENTRY_FIXED_BYTES)
    } else {
        fixed + body.len() + props.len()
    };
    let mut header = SendRequest {
        producer_group: h.producer_group,
        topic: topic.to_string(),
        queue_id,
        batch,
        record_count: u32::try_from(count).unwrap_or(u32::MAX),
    };
    let header_bytes = header
        .to_vec()
        .map_err(|e| Refusal::bad(format!("send header: {e}")))?;
    let header_len = header_bytes.len();
    let mut frame = Vec::with_capacity(frame::PREFIX_BYTES + header_len + records_hint);
    frame.resize(frame::PREFIX_BYTES, 0);
    frame.extend_from_slice(&header_bytes);
    let mut record_lens = Vec::with_capacity(count);
    let mut first_props: &[u8] = &[];
    if batch {
        // The batch decoder stops with an error past its message cap.
        for item in batch::iter(body) {
            let item = item.map_err(illegal)?;
            if record_lens.is_empty() {
                first_props = item.properties;
            }
            record_lens.push(
                encoder
                    .encode(item.flag, item.body, item.properties, &mut frame)
                    .map_err(illegal)?,
            );
        }
    } else {
        first_props = props.as_bytes();
        record_lens.push(
            encoder
                .encode(h.flag, body, first_props, &mut frame)
                .map_err(illegal)?,
        );
    }
    if record_lens.len() != count {
        // Only a batch whose sizes chain past a bad entry gets here, and the decoder refuses
        // such a batch first; the header is rewritten all the same (the count is fixed-width).
        header.record_count = u32::try_from(record_lens.len()).unwrap_or(u32::MAX);
        let again = header
            .to_vec()
            .map_err(|e| Refusal::bad(format!("send header: {e}")))?;
        if again.len() != header_len {
            return Err(Refusal::bad("send header changed length"));
        }
        frame[frame::PREFIX_BYTES..frame::PREFIX_BYTES + header_len].copy_from_slice(&again);
    }
    let records_len = frame.len() - frame::PREFIX_BYTES - header_len;
    let transaction_id = uniq_key(first_props);
    // Only a single message can be scheduled (the broker refuses a scheduled batch).
    let recall = (!batch && ringmq_wire::schedule::has_schedule_property(first_props))
        .then(broker_name)
        .flatten()
        .map(|broker_name| RecallBase {
            topic: topic.to_string(),
            broker_name,
        });
    let code = if reply {
        RequestCode::SendReplyMessage
    } else if batch {
        RequestCode::SendBatchMessage
    } else {
        RequestCode::SendMessage
    };
    let mut prefix = &mut frame[..frame::PREFIX_BYTES];
    frame::encode_prefix(
        &mut prefix,
        code,
        frame::Flags::REQUEST,
        0,
        header_len,
        records_len,
    )
    .map_err(illegal)?;
    Ok(Translated::Native {
        frame,
        kind: ReplyKind::Send {
            record_lens,
            transaction_id,
            recall,
            view_topic: view.map(|_| topic.to_string()),
        },
    })
}

/// `props` with `CLUSTER=<cluster>` added when they are a request's (they carry
/// `CORRELATION_ID` and `REPLY_TO_CLIENT`) and name no cluster yet.
fn with_cluster<'a>(props: &'a str, cluster: Option<&str>) -> std::borrow::Cow<'a, str> {
    let p = props.as_bytes();
    let request = properties::get(p, keys::CORRELATION_ID).is_some()
        && properties::get(p, keys::REPLY_TO_CLIENT).is_some()
        && properties::get(p, keys::CLUSTER).is_none();
    match cluster {
        Some(c) if request => {
            let mut out = String::with_capacity(props.len() + keys::CLUSTER.len() + c.len() + 2);
            out.push_str(props);
            if !props.is_empty() && !props.ends_with(char::from(properties::PROPERTY_SEPARATOR)) {
                out.push(char::from(properties::PROPERTY_SEPARATOR));
            }
            out.push_str(keys::CLUSTER);
            out.push(char::from(properties::NAME_VALUE_SEPARATOR));
            out.push_str(c);
            out.push(char::from(properties::PROPERTY_SEPARATOR));
            std::borrow::Cow::Owned(out)
        }
        _ => std::borrow::Cow::Borrowed(props),
    }
}

fn uniq_key(props: &[u8]) -> Option<String> {
    properties::get(props, keys::UNIQ_KEY).map(str::to_owned)
}

/// PULL_MESSAGE / LITE_PULL_MESSAGE.
fn pull<S: Service + ?Sized>(svc: &S, r: h::PullMessageRequestHeader) -> Result<PullRequest> {
    let (filter_type, expression) = if r.has_subscription() {
        let t = match r.expression_type.as_deref() {
            Some(t) if t.eq_ignore_ascii_case(rbody::EXPRESSION_TYPE_SQL92) => FilterType::Sql92,
            Some(t) if !t.is_empty() && !t.eq_ignore_ascii_case(rbody::EXPRESSION_TYPE_TAG) => {
                return Err(Refusal::bad(format!("expressionType {t} is not supported")))
            }
            _ => FilterType::Tag,
        };
        (t, r.subscription.clone().unwrap_or_else(|| "*".to_string()))
    } else {
        svc.subscription(&r.consumer_group, &r.topic)
            .ok_or_else(|| Refusal {
                code: response::SUBSCRIPTION_NOT_EXIST,
                remark: format!(
                    "group {} has no subscription to {} on this broker: send a heartbeat first",
                    r.consumer_group, r.topic
                ),
            })?
    };
    let commit_offset = r
        .has_commit_offset()
        .then(|| u64::try_from(r.commit_offset).ok())
        .flatten();
    let suspend_timeout_ms = if r.has_suspend() {
        u32::try_from(r.suspend_timeout_millis).unwrap_or(u32::MAX)
    } else {
        0
    };
    let max_bytes = r
        .max_msg_bytes
        .and_then(|b| u32::try_from(b).ok())
        .unwrap_or(PULL_BODY_BYTES_MAX)
        .min(PULL_BODY_BYTES_MAX);
    Ok(PullRequest {
        queue_id: queue(r.queue_id)?,
        queue_offset: u64::try_from(r.queue_offset).unwrap_or(0),
        max_messages: u32::try_from(r.max_msg_nums).unwrap_or(0),
        consumer_group: r.consumer_group,
        topic: r.topic,
        max_bytes,
        filter_type,
        expression,
        suspend_timeout_ms,
        commit_offset,
    })
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
                        filter_type: if s
                            .expression_type
                            .eq_ignore_ascii_case(rbody::EXPRESSION_TYPE_SQL92)
                        {
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

fn lock_batch(b: rbody::LockBatchRequestBody, view: Option<ShardView>) -> Result<LockBatchRequest> {
    let mut queues = b
        .mq_set
        .into_iter()
        .map(|q| {
            Ok(MessageQueue {
                queue_id: queue(q.queue_id)?,
                topic: q.topic,
                broker_name: q.broker_name,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    view::queues_to_broker(view, &mut queues);
    Ok(LockBatchRequest {
        consumer_group: b.consumer_group,
        client_id: b.client_id,
        queues,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_gets_the_cluster_and_nothing_else_does() {
        let req = "CORRELATION_ID\u{1}c\u{2}REPLY_TO_CLIENT\u{1}id\u{2}";
        let out = with_cluster(req, Some("DefaultCluster"));
        assert_eq!(
            properties::get(out.as_bytes(), keys::CLUSTER),
            Some("DefaultCluster")
        );
        assert_eq!(
            properties::get(out.as_bytes(), keys::CORRELATION_ID),
            Some("c")
        );
        // Java 5.x leaves the last separator out.
        let out = with_cluster(
            "CORRELATION_ID\u{1}c\u{2}REPLY_TO_CLIENT\u{1}id",
            Some("C1"),
        );
        assert_eq!(
            properties::get(out.as_bytes(), keys::REPLY_TO_CLIENT),
            Some("id")
        );
        assert_eq!(properties::get(out.as_bytes(), keys::CLUSTER), Some("C1"));
        for unchanged in [
            "TAGS\u{1}a\u{2}",
            "",
            "CORRELATION_ID\u{1}c\u{2}REPLY_TO_CLIENT\u{1}id\u{2}CLUSTER\u{1}Other\u{2}",
        ] {
            assert_eq!(with_cluster(unchanged, Some("C1")), unchanged);
        }
        assert_eq!(with_cluster(req, None), req);
    }
}
