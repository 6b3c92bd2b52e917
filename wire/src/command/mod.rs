//! Typed headers (and large bodies) of every request and response, one file per
//! request/response pair (or family). Each type derives its encoding from one field list
//! ([`crate::wire_struct!`]), so encode and decode cannot disagree.
//!
//! A response header is always a [`Response<T>`]: the remark (u16 length + UTF-8, empty on
//! success) first, then an option tag and the command's fields. A client can therefore read
//! the status (frame `code`) and the remark of any response, whatever the command, with
//! [`read_remark`], before (or instead of) decoding the fields.
//!
//! Data that grows with the cluster (topic tables, routes, heartbeats) travels in the body,
//! encoded with the same rules, because a header is capped at 64 KiB.
//!
//! | code | request header | request body | response fields `T` | response body |
//! |---|---|---|---|---|
//! | HELLO | [`HelloRequest`] | - | [`HelloResponse`] | - |
//! | SEND_MESSAGE, SEND_BATCH_MESSAGE | [`SendRequest`] | records | [`SendResponse`] | - |
//! | RECALL_MESSAGE | [`RecallRequest`] | - | [`RecallResponse`] | - |
//! | PULL_MESSAGE | [`PullRequest`] | - | [`PullResponse`] | records |
//! | QUERY_MESSAGE | [`QueryMessageRequest`] | - | [`QueryMessageResponse`] | records |
//! | QUERY_CONSUMER_OFFSET | [`QueryConsumerOffsetRequest`] | - | [`QueryConsumerOffsetResponse`] | - |
//! | UPDATE_CONSUMER_OFFSET | [`UpdateConsumerOffsetRequest`] | - | [`Empty`] | - |
//! | INVOKE_BROKER_TO_RESET_OFFSET | [`UpdateConsumerOffsetRequest`] | - | [`Empty`] | - |
//! | GET_BROKER_CONFIG | [`Empty`] | - | [`Empty`] | [`BrokerConfigTable`] |
//! | UPDATE_BROKER_CONFIG | [`Empty`] | [`BrokerConfigTable`] (keys to change) | [`Empty`] | - |
//! | GET_ALL_SUBSCRIPTIONGROUP_CONFIG | [`Empty`] | - | [`Empty`] | [`ConsumerGroupList`] |
//! | UPDATE_AND_CREATE_SUBSCRIPTIONGROUP | [`SubscriptionGroupConfig`] | - | [`Empty`] | - |
//! | DELETE_SUBSCRIPTIONGROUP | [`DeleteSubscriptionGroupRequest`] | - | [`Empty`] | - |
//! | GET_ALL_CONSUMER_OFFSET | [`GetAllConsumerOffsetRequest`] | - | [`Empty`] | [`ConsumerOffsetTable`] |
//! | GET_MAX_OFFSET, GET_MIN_OFFSET | [`GetOffsetRequest`] | - | [`OffsetResponse`] | - |
//! | SEARCH_OFFSET_BY_TIMESTAMP | [`SearchOffsetRequest`] | - | [`OffsetResponse`] | - |
//! | VIEW_MESSAGE_BY_ID | [`ViewMessageRequest`] | - | [`Empty`] | one record |
//! | HEART_BEAT | [`Empty`] | [`HeartbeatData`] | [`Empty`] | - |
//! | UNREGISTER_CLIENT | [`UnregisterClientRequest`] | - | [`Empty`] | - |
//! | CONSUMER_SEND_MSG_BACK | [`ConsumerSendBackRequest`] | - | [`Empty`] | - |
//! | END_TRANSACTION | [`EndTransactionRequest`] | - | [`Empty`] | - |
//! | CHECK_TRANSACTION_STATE (broker -> producer, oneway) | [`CheckTransactionRequest`] | the half record | - | - |
//! | NOTIFY_CONSUMER_IDS_CHANGED (broker -> consumer, oneway) | [`NotifyConsumerIdsChanged`] | - | - | - |
//! | SEND_REPLY_MESSAGE | [`SendRequest`] | one record | [`SendResponse`] (`record_count` 0: pushed, not stored) | - |
//! | PUSH_REPLY_MESSAGE_TO_CLIENT (broker -> requester, oneway) | [`PushReplyRequest`] | the reply record | - | - |
//! | LOCK_BATCH_MQ | [`Empty`] | [`LockBatchRequest`] | [`Empty`] | [`LockBatchResponse`] |
//! | UNLOCK_BATCH_MQ | [`Empty`] | [`LockBatchRequest`] | [`Empty`] | - |
//! | GET_CONSUMER_LIST_BY_GROUP | [`GetConsumerListRequest`] | - | [`Empty`] | [`ConsumerList`] |
//! | GET_PRODUCER_CONNECTION_LIST | [`GetProducerListRequest`] | - | [`Empty`] | [`ProducerList`] |
//! | GET_BROKER_RUNTIME_INFO | [`Empty`] | - | [`Empty`] | [`BrokerRuntimeInfo`] |
//! | GET_SCHEDULE_STATUS | [`Empty`] | - | [`Empty`] | [`ScheduleStatus`] |
//! | GET_TRANSACTION_STATUS | [`Empty`] | - | [`Empty`] | [`TransactionStatus`] |
//! | UPDATE_AND_CREATE_TOPIC | [`CreateTopicRequest`] | - | [`TopicConfig`] | - |
//! | DELETE_TOPIC_IN_BROKER | [`DeleteTopicRequest`] | - | [`Empty`] | - |
//! | GET_ALL_TOPIC_CONFIG | [`Empty`] | - | [`Empty`] | [`TopicConfigTable`] |
//! | REGISTER_BROKER | [`Empty`] | [`BrokerRegistration`] | [`RegisterBrokerResponse`] | - |
//! | UNREGISTER_BROKER | [`UnregisterBrokerRequest`] | - | [`Empty`] | - |
//! | GET_ROUTEINFO_BY_TOPIC | [`GetRouteRequest`] | - | [`Empty`] | [`TopicRoute`] |
//! | GET_BROKER_CLUSTER_INFO | [`Empty`] | - | [`Empty`] | [`ClusterInfo`] |
//! | GET_ALL_TOPIC_LIST_FROM_NAMESERVER | [`Empty`] | - | [`Empty`] | [`TopicList`] |
//! | DELETE_TOPIC_IN_NAMESRV | [`DeleteTopicInNamesrvRequest`] | - | [`Empty`] | - |
//! | PUT_KV_CONFIG | [`PutKvRequest`] | - | [`Empty`] | - |
//! | GET_KV_CONFIG | [`KvKeyRequest`] | - | [`GetKvResponse`] | - |
//! | DELETE_KV_CONFIG | [`KvKeyRequest`] | - | [`Empty`] | - |
//! | HA_SUBSCRIBE (slave -> master) | [`HaSubscribeRequest`] | - | [`HaSubscribeResponse`] | - |
//! | HA_TRANSFER (master -> slave, oneway) | [`HaTransfer`] | CommitLog bytes | - | - |
//! | HA_ACK (slave -> master, oneway) | [`HaAck`] | - | - | - |
//! | UPDATE_AND_CREATE_ACL_CONFIG | [`AclWriteRequest`] | [`AclAccountChange`] | [`Empty`] | - |
//! | DELETE_ACL_CONFIG | [`DeleteAclRequest`] | - | [`Empty`] | - |
//! | GET_BROKER_CLUSTER_ACL_CONFIG | [`Empty`] | - | [`Empty`] | [`AclConfigList`] |
//! | WHOAMI | [`Empty`] | - | [`Empty`] | [`WhoAmI`] |
//! | AUTH_* (ACL 2.0), AUTH_SNAPSHOT | see [`auth`] | | | |
//! | POP_MESSAGE | [`PopRequest`] | - | [`PopResponse`] | records |
//! | ACK_MESSAGE | [`AckRequest`] | - | [`Empty`] | - |
//! | BATCH_ACK_MESSAGE | [`BatchAckRequest`] | [`AckHandles`] | [`BatchAckResponse`] | - |
//! | CHANGE_MESSAGE_INVISIBLETIME | [`ChangeInvisibleTimeRequest`] | - | [`ChangeInvisibleTimeResponse`] | - |
//! | GET_POP_STATUS | [`GetPopStatusRequest`] | - | [`Empty`] | [`PopStatus`] |
//! | CONTROLLER_* | see [`controller`] | | | |
//! | any, answered WRONG_SHARD | | | [`WrongShard`] | - |

use crate::code::RequestCode;
use crate::codec::sample::{Gen, Sample};
use crate::codec::{Decode, Empty, Encode, Reader, Writer};
use crate::error::Result;
use crate::frame::Frame;

pub mod acl;
pub mod auth;
pub mod broker_admin;
pub mod consumer_list;
pub mod consumer_offset;
pub mod controller;
pub mod group_config;
pub mod ha;
pub mod heartbeat;
pub mod hello;
pub mod kv;
pub mod lock;
pub mod namesrv;
pub mod pop;
pub mod producer_list;
pub mod pull;
pub mod query;
pub mod queue_offset;
pub mod recall;
pub mod reply;
pub mod route;
pub mod runtime;
pub mod schedule;
pub mod send;
pub mod send_back;
pub mod topic;
pub mod transaction;
pub mod view;

pub use acl::*;
pub use auth::*;
pub use broker_admin::*;
pub use consumer_list::*;
pub use consumer_offset::*;
pub use controller::*;
pub use group_config::*;
pub use ha::*;
pub use heartbeat::*;
pub use hello::*;
pub use kv::*;
pub use lock::*;
pub use namesrv::*;
pub use pop::*;
pub use producer_list::*;
pub use pull::*;
pub use query::*;
pub use queue_offset::*;
pub use recall::*;
pub use reply::*;
pub use route::*;
pub use runtime::*;
pub use schedule::*;
pub use send::*;
pub use send_back::*;
pub use topic::*;
pub use transaction::*;
pub use view::*;

macro_rules! requests {
    ($( $variant:ident($ty:ty) ),* $(,)?) => {
        /// A decoded request header, one variant per [`RequestCode`] (same names). Requests
        /// whose data is in the body have an [`Empty`] header; see the table in the module
        /// docs for each code's body and response.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum Request {
            $( $variant($ty), )*
        }

        impl Request {
            /// Decodes the header of a request with `code`.
            pub fn decode(code: RequestCode, header: &[u8]) -> Result<Self> {
                match code {
                    $( RequestCode::$variant => <$ty as Decode>::decode(header).map(Request::$variant), )*
                }
            }

            /// The request code this header belongs to.
            pub fn code(&self) -> RequestCode {
                match self {
                    $( Request::$variant(_) => RequestCode::$variant, )*
                }
            }
        }

        impl Encode for Request {
            fn write(&self, w: &mut Writer<'_>) {
                match self {
                    $( Request::$variant(h) => h.write(w), )*
                }
            }
        }

        impl Sample for Request {
            fn sample(g: &mut Gen<'_>) -> Self {
                match g.pick(RequestCode::ALL) {
                    $( RequestCode::$variant => Request::$variant(<$ty as Sample>::sample(g)), )*
                }
            }
        }
    };
}

requests! {
    SendMessage(SendRequest),
    PullMessage(PullRequest),
    QueryMessage(QueryMessageRequest),
    QueryConsumerOffset(QueryConsumerOffsetRequest),
    UpdateBrokerConfig(Empty),
    GetBrokerConfig(Empty),
    GetAllSubscriptionGroupConfig(Empty),
    UpdateAndCreateSubscriptionGroup(SubscriptionGroupConfig),
    DeleteSubscriptionGroup(DeleteSubscriptionGroupRequest),
    GetAllConsumerOffset(GetAllConsumerOffsetRequest),
    UpdateConsumerOffset(UpdateConsumerOffsetRequest),
    InvokeBrokerToResetOffset(UpdateConsumerOffsetRequest),
    UpdateAndCreateTopic(CreateTopicRequest),
    GetAllTopicConfig(Empty),
    GetBrokerRuntimeInfo(Empty),
    SearchOffsetByTimestamp(SearchOffsetRequest),
    GetMaxOffset(GetOffsetRequest),
    GetMinOffset(GetOffsetRequest),
    ViewMessageById(ViewMessageRequest),
    HeartBeat(Empty),
    UnregisterClient(UnregisterClientRequest),
    ConsumerSendMsgBack(ConsumerSendBackRequest),
    EndTransaction(EndTransactionRequest),
    GetConsumerListByGroup(GetConsumerListRequest),
    CheckTransactionState(CheckTransactionRequest),
    NotifyConsumerIdsChanged(NotifyConsumerIdsChanged),
    LockBatchMq(Empty),
    UnlockBatchMq(Empty),
    PutKvConfig(PutKvRequest),
    GetKvConfig(KvKeyRequest),
    DeleteKvConfig(KvKeyRequest),
    RegisterBroker(Empty),
    UnregisterBroker(UnregisterBrokerRequest),
    GetRouteInfoByTopic(GetRouteRequest),
    GetBrokerClusterInfo(Empty),
    GetAllTopicListFromNameserver(Empty),
    DeleteTopicInBroker(DeleteTopicRequest),
    DeleteTopicInNamesrv(DeleteTopicInNamesrvRequest),
    SendBatchMessage(SendRequest),
    RecallMessage(RecallRequest),
    SendReplyMessage(SendRequest),
    PushReplyMessageToClient(PushReplyRequest),
    Hello(HelloRequest),
    GetScheduleStatus(Empty),
    GetTransactionStatus(Empty),
    HaSubscribe(HaSubscribeRequest),
    HaTransfer(HaTransfer),
    HaAck(HaAck),
    UpdateAndCreateAclConfig(AclWriteRequest),
    DeleteAclConfig(DeleteAclRequest),
    GetBrokerClusterAclConfig(Empty),
    WhoAmI(Empty),
    AuthSnapshot(Empty),
    AuthCreateUser(AuthUserRequest),
    AuthUpdateUser(AuthUserRequest),
    AuthDeleteUser(AuthUserRequest),
    AuthGetUser(AuthUserRequest),
    AuthListUser(AuthListUsersRequest),
    AuthCreateAcl(AuthAclRequest),
    AuthUpdateAcl(AuthAclRequest),
    AuthDeleteAcl(AuthDeleteAclRequest),
    AuthGetAcl(AuthAclRequest),
    AuthListAcl(AuthListAclsRequest),
    GetProducerConnectionList(GetProducerListRequest),
    PopMessage(PopRequest),
    AckMessage(AckRequest),
    BatchAckMessage(BatchAckRequest),
    ChangeMessageInvisibleTime(ChangeInvisibleTimeRequest),
    GetPopStatus(GetPopStatusRequest),
    ControllerBrokerHeartbeat(ControllerHeartbeat),
    ControllerAlterSyncStateSet(AlterSyncStateSet),
    ControllerElectMaster(ElectMasterRequest),
    ControllerGetReplicaInfo(GetReplicaInfoRequest),
    ControllerGetMetadataInfo(Empty),
    ControllerRaft(ControllerRaftRequest),
}

impl Request {
    /// Decodes the header of a request frame (not a response).
    pub fn from_frame(frame: &Frame<'_>) -> Result<Self> {
        Request::decode(frame.request_code()?, frame.header)
    }
}

/// Calls `$m! { path::Type, ... }` with every header, response-header and body type of the
/// protocol (all but [`Request`], which needs its code to decode), so property tests and
/// fuzz targets cover each one: a new command type is added here.
#[doc(hidden)]
#[macro_export]
macro_rules! for_each_wire_type {
    ($m:ident) => {
        $m! {
            $crate::command::Response<$crate::codec::Empty>,
            $crate::command::Response<$crate::command::WrongShard>,
            $crate::command::HelloRequest,
            $crate::command::Response<$crate::command::HelloResponse>,
            $crate::command::SendRequest,
            $crate::command::Response<$crate::command::SendResponse>,
            $crate::command::RecallRequest,
            $crate::command::Response<$crate::command::RecallResponse>,
            $crate::command::PushReplyRequest,
            $crate::command::PullRequest,
            $crate::command::Response<$crate::command::PullResponse>,
            $crate::command::QueryConsumerOffsetRequest,
            $crate::command::Response<$crate::command::QueryConsumerOffsetResponse>,
            $crate::command::UpdateConsumerOffsetRequest,
            $crate::command::GetAllConsumerOffsetRequest,
            $crate::command::BrokerConfigTable,
            $crate::command::ConsumerGroupList,
            $crate::command::ConsumerOffsetTable,
            $crate::command::GetOffsetRequest,
            $crate::command::SearchOffsetRequest,
            $crate::command::Response<$crate::command::OffsetResponse>,
            $crate::command::ViewMessageRequest,
            $crate::command::HeartbeatData,
            $crate::command::UnregisterClientRequest,
            $crate::command::GetConsumerListRequest,
            $crate::command::ConsumerList,
            $crate::command::GetProducerListRequest,
            $crate::command::ProducerList,
            $crate::command::BrokerRuntimeInfo,
            $crate::command::ScheduleStatus,
            $crate::command::TransactionStatus,
            $crate::command::CreateTopicRequest,
            $crate::command::Response<$crate::command::TopicConfig>,
            $crate::command::DeleteTopicRequest,
            $crate::command::TopicConfigTable,
            $crate::command::BrokerRegistration,
            $crate::command::Response<$crate::command::RegisterBrokerResponse>,
            $crate::command::UnregisterBrokerRequest,
            $crate::command::GetRouteRequest,
            $crate::command::TopicRoute,
            $crate::command::ClusterInfo,
            $crate::command::TopicList,
            $crate::command::DeleteTopicInNamesrvRequest,
            $crate::command::PutKvRequest,
            $crate::command::KvKeyRequest,
            $crate::command::Response<$crate::command::GetKvResponse>,
            $crate::command::QueryMessageRequest,
            $crate::command::Response<$crate::command::QueryMessageResponse>,
            $crate::command::ConsumerSendBackRequest,
            $crate::command::SubscriptionGroupConfig,
            $crate::command::DeleteSubscriptionGroupRequest,
            $crate::command::EndTransactionRequest,
            $crate::command::CheckTransactionRequest,
            $crate::command::NotifyConsumerIdsChanged,
            $crate::command::LockBatchRequest,
            $crate::command::LockBatchResponse,
            $crate::command::HaSubscribeRequest,
            $crate::command::HaEpochEntry,
            $crate::command::Response<$crate::command::HaSubscribeResponse>,
            $crate::command::HaTransfer,
            $crate::command::HaAck,
            $crate::command::AclWriteRequest,
            $crate::command::AclAccountChange,
            $crate::command::DeleteAclRequest,
            $crate::command::AclConfigList,
            $crate::command::WhoAmI,
            $crate::command::AuthUserRequest,
            $crate::command::AuthListUsersRequest,
            $crate::command::AuthAclRequest,
            $crate::command::AuthDeleteAclRequest,
            $crate::command::AuthListAclsRequest,
            $crate::command::PopRequest,
            $crate::command::Response<$crate::command::PopResponse>,
            $crate::command::AckRequest,
            $crate::command::BatchAckRequest,
            $crate::command::AckHandles,
            $crate::command::Response<$crate::command::BatchAckResponse>,
            $crate::command::ChangeInvisibleTimeRequest,
            $crate::command::Response<$crate::command::ChangeInvisibleTimeResponse>,
            $crate::command::PopOp,
            $crate::command::GetPopStatusRequest,
            $crate::command::PopStatus,
            $crate::command::ControllerHeartbeat,
            $crate::command::Response<$crate::command::ReplicaSet>,
            $crate::command::AlterSyncStateSet,
            $crate::command::ElectMasterRequest,
            $crate::command::GetReplicaInfoRequest,
            $crate::command::ReplicaSets,
            $crate::command::Response<$crate::command::ControllerMetadata>,
            $crate::command::Response<$crate::command::NotLeader>,
            $crate::command::ControllerRaftRequest,
        }
    };
}

/// A response header: the remark, then the command's fields if the responder sent them
/// (success, and statuses that still carry data such as PULL_OFFSET_MOVED or WRONG_SHARD).
///
/// | bytes | field                                   |
/// |-------|-----------------------------------------|
/// | 2 + n | remark (u16 length + UTF-8)             |
/// | 1     | 0 = no fields follow, 1 = fields follow |
/// | ...   | `T`                                     |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response<T> {
    pub remark: String,
    pub fields: Option<T>,
}

impl<T> Response<T> {
    /// A response with fields and an empty remark.
    pub fn ok(fields: T) -> Self {
        Response {
            remark: String::new(),
            fields: Some(fields),
        }
    }

    /// A response with only a remark (any status).
    pub fn remark(remark: impl Into<String>) -> Self {
        Response {
            remark: remark.into(),
            fields: None,
        }
    }
}

impl<T: Encode> Encode for Response<T> {
    fn write(&self, w: &mut Writer<'_>) {
        self.remark.write(w);
        self.fields.write(w);
    }
}

impl<T: Decode> Decode for Response<T> {
    const MIN_BYTES: usize = 2 + 1;
    fn read(r: &mut Reader<'_>, _what: &'static str) -> Result<Self> {
        Ok(Response {
            remark: String::read(r, "remark")?,
            fields: Option::<T>::read(r, "fields")?,
        })
    }
}

impl<T: crate::codec::sample::Sample> crate::codec::sample::Sample for Response<T> {
    fn sample(g: &mut crate::codec::sample::Gen<'_>) -> Self {
        Response {
            remark: String::sample(g),
            fields: Option::<T>::sample(g),
        }
    }
}

/// The remark of any response header, borrowed, and the bytes after it.
pub fn read_remark(header: &[u8]) -> Result<(&str, &[u8])> {
    let mut r = Reader::new(header);
    let remark = r.str("remark")?;
    Ok((remark, r.rest()))
}

crate::wire_struct! {
    /// Fields of a WRONG_SHARD response, for any request: the queue lives on `shard_id`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct WrongShard {
        pub shard_id: u16,
        pub shard_count: u16,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remark_is_readable_whatever_the_fields() {
        let r = Response::ok(WrongShard {
            shard_id: 1,
            shard_count: 2,
        });
        let mut with_remark = r.clone();
        with_remark.remark = "queue 3 is on shard 1".into();
        let bytes = with_remark.to_vec().unwrap();
        assert_eq!(&bytes[..2], &[0, 21]);
        assert_eq!(bytes[23], 1);
        let (remark, rest) = read_remark(&bytes).unwrap();
        assert_eq!(remark, "queue 3 is on shard 1");
        assert_eq!(rest, &[1, 0, 1, 0, 2]);
        assert_eq!(Response::<WrongShard>::decode(&bytes).unwrap(), with_remark);
        let err = Response::<WrongShard>::remark("boom").to_vec().unwrap();
        assert_eq!(err, b"\x00\x04boom\x00");
        assert_eq!(
            Response::<Empty>::ok(Empty).to_vec().unwrap(),
            vec![0, 0, 1]
        );
    }
}
