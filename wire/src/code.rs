//! Request codes and response statuses of the native protocol. Where RocketMQ has the same
//! request or response, ringmq uses RocketMQ's number (`RequestCode`, `ResponseCode`), so logs
//! and tooling read the same; ringmq's own codes start at 1000.
//!
//! Invariant: a code is never renumbered or reused; an unknown code decodes to
//! [`WireError::UnknownCode`](crate::WireError::UnknownCode) and the receiver answers
//! REQUEST_CODE_NOT_SUPPORTED.

/// Version of the native protocol this crate speaks (sent in HELLO).
pub const PROTOCOL_VERSION: u16 = 1;

/// First code of ringmq's own range, for both request codes and statuses.
pub const RINGMQ_CODE_MIN: u16 = 1000;

crate::wire_enum! {
    /// What a request asks for; the `code` of a request frame.
    pub enum RequestCode: u16 ("request") {
        SendMessage = 10 => "SEND_MESSAGE",
        PullMessage = 11 => "PULL_MESSAGE",
        QueryMessage = 12 => "QUERY_MESSAGE",
        QueryConsumerOffset = 14 => "QUERY_CONSUMER_OFFSET",
        UpdateConsumerOffset = 15 => "UPDATE_CONSUMER_OFFSET",
        UpdateAndCreateTopic = 17 => "UPDATE_AND_CREATE_TOPIC",
        UpdateBrokerConfig = 25 => "UPDATE_BROKER_CONFIG",
        GetBrokerConfig = 26 => "GET_BROKER_CONFIG",
        GetAllTopicConfig = 21 => "GET_ALL_TOPIC_CONFIG",
        GetBrokerRuntimeInfo = 28 => "GET_BROKER_RUNTIME_INFO",
        SearchOffsetByTimestamp = 29 => "SEARCH_OFFSET_BY_TIMESTAMP",
        GetMaxOffset = 30 => "GET_MAX_OFFSET",
        GetMinOffset = 31 => "GET_MIN_OFFSET",
        ViewMessageById = 33 => "VIEW_MESSAGE_BY_ID",
        HeartBeat = 34 => "HEART_BEAT",
        UnregisterClient = 35 => "UNREGISTER_CLIENT",
        ConsumerSendMsgBack = 36 => "CONSUMER_SEND_MSG_BACK",
        EndTransaction = 37 => "END_TRANSACTION",
        GetConsumerListByGroup = 38 => "GET_CONSUMER_LIST_BY_GROUP",
        /// Broker -> producer.
        CheckTransactionState = 39 => "CHECK_TRANSACTION_STATE",
        /// Broker -> consumer.
        NotifyConsumerIdsChanged = 40 => "NOTIFY_CONSUMER_IDS_CHANGED",
        LockBatchMq = 41 => "LOCK_BATCH_MQ",
        UnlockBatchMq = 42 => "UNLOCK_BATCH_MQ",
        /// Every committed consumer offset of one shard (a slave copies its master's).
        GetAllConsumerOffset = 43 => "GET_ALL_CONSUMER_OFFSET",
        /// Add (or change) one account of the broker's ACL file (admin).
        UpdateAndCreateAclConfig = 50 => "UPDATE_AND_CREATE_ACL_CONFIG",
        /// Remove one account of the broker's ACL file (admin).
        DeleteAclConfig = 51 => "DELETE_ACL_CONFIG",
        /// The broker's ACL accounts, without secret keys (admin).
        GetBrokerClusterAclConfig = 54 => "GET_BROKER_CLUSTER_ACL_CONFIG",
        PutKvConfig = 100 => "PUT_KV_CONFIG",
        GetKvConfig = 101 => "GET_KV_CONFIG",
        DeleteKvConfig = 102 => "DELETE_KV_CONFIG",
        RegisterBroker = 103 => "REGISTER_BROKER",
        UnregisterBroker = 104 => "UNREGISTER_BROKER",
        GetRouteInfoByTopic = 105 => "GET_ROUTEINFO_BY_TOPIC",
        GetBrokerClusterInfo = 106 => "GET_BROKER_CLUSTER_INFO",
        /// A consumer group's settings (its retry limit).
        UpdateAndCreateSubscriptionGroup = 200 => "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP",
        /// ringmq: the consumer groups a broker knows (live members, subscriptions, settings).
        GetAllSubscriptionGroupConfig = 201 => "GET_ALL_SUBSCRIPTIONGROUP_CONFIG",
        DeleteSubscriptionGroup = 207 => "DELETE_SUBSCRIPTIONGROUP",
        /// The live members of a producer group (admin; RocketMQ's number).
        GetProducerConnectionList = 204 => "GET_PRODUCER_CONNECTION_LIST",
        GetAllTopicListFromNameserver = 206 => "GET_ALL_TOPIC_LIST_FROM_NAMESERVER",
        DeleteTopicInBroker = 215 => "DELETE_TOPIC_IN_BROKER",
        DeleteTopicInNamesrv = 216 => "DELETE_TOPIC_IN_NAMESRV",
        /// An operator moves a group's committed offset of one queue (admin; consumers
        /// commit with UPDATE_CONSUMER_OFFSET). RocketMQ's number; ringmq's header is
        /// per queue.
        InvokeBrokerToResetOffset = 222 => "INVOKE_BROKER_TO_RESET_OFFSET",
        SendBatchMessage = 320 => "SEND_BATCH_MESSAGE",
        /// Withdraws a scheduled message before it is due, by the handle its send returned
        /// (RocketMQ 5.3's number).
        RecallMessage = 370 => "RECALL_MESSAGE",
        /// Request-reply: a replier sends a reply (the header and body of SEND_MESSAGE).
        SendReplyMessage = 324 => "SEND_REPLY_MESSAGE",
        /// Broker -> requester: a reply, pushed to the requester's connection.
        PushReplyMessageToClient = 326 => "PUSH_REPLY_MESSAGE_TO_CLIENT",
        /// ringmq: first request on a connection (client id, protocol version).
        Hello = 1000 => "HELLO",
        /// ringmq: pending scheduled messages per delay level and timer, next due time.
        GetScheduleStatus = 1010 => "GET_SCHEDULE_STATUS",
        /// ringmq: undecided half messages per producer group, check-backs made.
        GetTransactionStatus = 1011 => "GET_TRANSACTION_STATUS",
        /// ringmq: who the caller is to the broker's ACL (access key, admin, permissions).
        WhoAmI = 1012 => "WHOAMI",
        /// ringmq: every ACL 2.0 user (with its password) and policy, for a slave to copy
        /// (super users only).
        AuthSnapshot = 1013 => "AUTH_SNAPSHOT",
        /// ACL 2.0 (RocketMQ 5's numbers, which are also its remoting codes): users.
        AuthCreateUser = 3001 => "AUTH_CREATE_USER",
        AuthUpdateUser = 3002 => "AUTH_UPDATE_USER",
        AuthDeleteUser = 3003 => "AUTH_DELETE_USER",
        AuthGetUser = 3004 => "AUTH_GET_USER",
        AuthListUser = 3005 => "AUTH_LIST_USER",
        /// ACL 2.0: a subject's policies.
        AuthCreateAcl = 3006 => "AUTH_CREATE_ACL",
        AuthUpdateAcl = 3007 => "AUTH_UPDATE_ACL",
        AuthDeleteAcl = 3008 => "AUTH_DELETE_ACL",
        AuthGetAcl = 3009 => "AUTH_GET_ACL",
        AuthListAcl = 3010 => "AUTH_LIST_ACL",
        /// POP consumption (RocketMQ 5's POP_MESSAGE, 200050, which a u16 cannot hold).
        PopMessage = 1030 => "POP_MESSAGE",
        /// RocketMQ 5's ACK_MESSAGE (200051).
        AckMessage = 1031 => "ACK_MESSAGE",
        /// RocketMQ 5's BATCH_ACK_MESSAGE (200151); ringmq's acks one queue's handles.
        BatchAckMessage = 1032 => "BATCH_ACK_MESSAGE",
        /// RocketMQ 5's CHANGE_MESSAGE_INVISIBLETIME (200053).
        ChangeMessageInvisibleTime = 1033 => "CHANGE_MESSAGE_INVISIBLETIME",
        /// ringmq: one shard's POP counts per group (admin).
        GetPopStatus = 1034 => "GET_POP_STATUS",
        /// ringmq replication: a slave shard subscribes to the master's shard.
        HaSubscribe = 1100 => "HA_SUBSCRIBE",
        /// ringmq replication: master -> slave CommitLog bytes.
        HaTransfer = 1101 => "HA_TRANSFER",
        /// ringmq replication: slave -> master acknowledged offset.
        HaAck = 1102 => "HA_ACK",
        /// Controller: a broker's heartbeat to the leader controller (RocketMQ's
        /// BROKER_HEARTBEAT, 904, in controller mode).
        ControllerBrokerHeartbeat = 1200 => "CONTROLLER_BROKER_HEARTBEAT",
        /// Controller: a master changes its set's SyncStateSet (RocketMQ's 1001).
        ControllerAlterSyncStateSet = 1201 => "CONTROLLER_ALTER_SYNC_STATE_SET",
        /// Controller: elect a master now (RocketMQ's 1002, `electMaster`).
        ControllerElectMaster = 1202 => "CONTROLLER_ELECT_MASTER",
        /// Controller: broker sets' replicated state (RocketMQ's 1004).
        ControllerGetReplicaInfo = 1203 => "CONTROLLER_GET_REPLICA_INFO",
        /// Controller: the Raft group as one controller sees it (RocketMQ's 1005).
        ControllerGetMetadataInfo = 1204 => "CONTROLLER_GET_METADATA_INFO",
        /// Controller <-> controller: a Raft message.
        ControllerRaft = 1205 => "CONTROLLER_RAFT",
    }
}

crate::wire_enum! {
    /// Outcome of a request; the `code` of a response frame. The response header's remark
    /// says more.
    pub enum Status: u16 ("status") {
        Success = 0 => "SUCCESS",
        SystemError = 1 => "SYSTEM_ERROR",
        /// Flow control: too many requests in flight; retry later.
        SystemBusy = 2 => "SYSTEM_BUSY",
        RequestCodeNotSupported = 3 => "REQUEST_CODE_NOT_SUPPORTED",
        /// SYNC_FLUSH: the message is stored but the fdatasync did not finish in time.
        FlushDiskTimeout = 10 => "FLUSH_DISK_TIMEOUT",
        /// SYNC_MASTER: the message is stored on the master; no slave is in sync.
        SlaveNotAvailable = 11 => "SLAVE_NOT_AVAILABLE",
        /// SYNC_MASTER: the message is stored on the master; the slave did not ack in time.
        FlushSlaveTimeout = 12 => "FLUSH_SLAVE_TIMEOUT",
        MessageIllegal = 13 => "MESSAGE_ILLEGAL",
        /// Shutting down, a slave asked to write, and the like.
        ServiceNotAvailable = 14 => "SERVICE_NOT_AVAILABLE",
        NoPermission = 16 => "NO_PERMISSION",
        TopicNotExist = 17 => "TOPIC_NOT_EXIST",
        /// No message at the offset yet (after any long-poll wait).
        PullNotFound = 19 => "PULL_NOT_FOUND",
        PullRetryImmediately = 20 => "PULL_RETRY_IMMEDIATELY",
        /// The requested offset is outside `[min, max]`; use the response's next offset.
        PullOffsetMoved = 21 => "PULL_OFFSET_MOVED",
        QueryNotFound = 22 => "QUERY_NOT_FOUND",
        /// A subscription's expression did not parse (RocketMQ's number); the remark names
        /// the group, the topic, the byte position and what was expected.
        SubscriptionParseFailed = 23 => "SUBSCRIPTION_PARSE_FAILED",
        SubscriptionNotExist = 24 => "SUBSCRIPTION_NOT_EXIST",
        /// ringmq: the frame's length is over the receiver's maximum.
        FrameTooLarge = 1000 => "FRAME_TOO_LARGE",
        /// ringmq: writes are refused because the disk is over its usage threshold.
        DiskFull = 1001 => "DISK_FULL",
        /// ringmq: the queue lives on another shard of this broker; the response fields are
        /// a [`WrongShard`](crate::command::WrongShard).
        WrongShard = 1002 => "WRONG_SHARD",
        /// ringmq: a configured maximum (batch size, parked pulls, connections, ...) was hit.
        LimitExceeded = 1003 => "LIMIT_EXCEEDED",
        TopicAlreadyExists = 1004 => "TOPIC_ALREADY_EXISTS",
        /// ringmq: the request header or body did not decode.
        MalformedRequest = 1005 => "MALFORMED_REQUEST",
        /// ringmq: HELLO asked for a protocol version this peer does not speak.
        ProtocolVersionNotSupported = 1006 => "PROTOCOL_VERSION_NOT_SUPPORTED",
        /// ringmq: a SQL92 subscription reached a broker with `enablePropertyFilter=false`.
        /// RocketMQ answers SYSTEM_ERROR, which ringmq clients retry; this is final.
        PropertyFilterDisabled = 1007 => "PROPERTY_FILTER_DISABLED",
        /// ringmq: an ack or invisible-time change for a POP message that is no longer in
        /// flight under that receipt handle (acked, or its invisible time ended and it is
        /// delivered again). RocketMQ 5's gRPC code of the same name.
        InvalidReceiptHandle = 1010 => "INVALID_RECEIPT_HANDLE",
        /// ringmq: RECALL_MESSAGE came after the scheduled message was delivered (or dropped at
        /// its due time); nothing was recalled. RocketMQ answers ILLEGAL_OPERATION.
        RecallTooLate = 1008 => "RECALL_TOO_LATE",
        /// ringmq: a reply could not be pushed to its requester (no heartbeat of its
        /// REPLY_TO_CLIENT on this broker, or its connection closed or is full); nothing
        /// was stored. RocketMQ answers SYSTEM_ERROR, which clients retry; this is final.
        ReplyToClientNotFound = 1009 => "REPLY_TO_CLIENT_NOT_FOUND",
        /// ringmq controller: this controller is not the Raft leader; the response fields are
        /// a [`NotLeader`](crate::command::NotLeader) naming it when known.
        ControllerNotLeader = 1011 => "CONTROLLER_NOT_LEADER",
        /// ringmq controller: the request names a master epoch or SyncStateSet epoch that is
        /// no longer current (RocketMQ's CONTROLLER_FENCED_MASTER_EPOCH).
        ControllerFencedEpoch = 1012 => "CONTROLLER_FENCED_EPOCH",
        /// ringmq controller: no broker of the set can be elected (none alive in the
        /// SyncStateSet, and unclean elections are off).
        ControllerElectFailed = 1013 => "CONTROLLER_ELECT_MASTER_FAILED",
        /// ringmq controller: the set is unknown to the controllers.
        ControllerUnknownSet = 1014 => "CONTROLLER_BROKER_SET_NOT_FOUND",
        /// ringmq: a write reached a broker that is not its set's master now (a slave, or a
        /// master that lost its controller lease); nothing was stored. Refresh the route and
        /// send to the current master.
        NotMaster = 1015 => "NOT_MASTER",
        /// ringmq controller: a SYNC_MASTER send refused before it was stored because the
        /// SyncStateSet has fewer members than `minInSyncReplicas` (RocketMQ's
        /// IN_SYNC_REPLICAS_NOT_ENOUGH).
        InSyncReplicasNotEnough = 1016 => "IN_SYNC_REPLICAS_NOT_ENOUGH",
    }
}

impl Status {
    /// The request did what it asked.
    pub fn is_ok(self) -> bool {
        self == Status::Success
    }

    /// A send with this status stored the message on the broker, even if the durability it
    /// asked for was not confirmed (RocketMQ's `PutMessageResult.isOk()`): the producer must
    /// not resend blindly or it creates a duplicate.
    pub fn message_stored(self) -> bool {
        matches!(
            self,
            Status::Success
                | Status::FlushDiskTimeout
                | Status::SlaveNotAvailable
                | Status::FlushSlaveTimeout
        )
    }

    /// The request was not carried out for a transient reason and may be sent again
    /// (to the same broker after a pause, to the right shard, or to another broker).
    pub fn is_retriable(self) -> bool {
        matches!(
            self,
            Status::SystemError
                | Status::SystemBusy
                | Status::ServiceNotAvailable
                | Status::PullRetryImmediately
                | Status::DiskFull
                | Status::WrongShard
                | Status::NotMaster
                | Status::InSyncReplicasNotEnough
                | Status::ControllerNotLeader
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WireError;

    #[test]
    fn rocketmq_numbers() {
        assert_eq!(u16::from(RequestCode::SendMessage), 10);
        assert_eq!(u16::from(RequestCode::GetAllTopicListFromNameserver), 206);
        assert_eq!(u16::from(RequestCode::SendBatchMessage), 320);
        assert_eq!(u16::from(RequestCode::SendReplyMessage), 324);
        assert_eq!(u16::from(RequestCode::PushReplyMessageToClient), 326);
        assert_eq!(u16::from(Status::PullOffsetMoved), 21);
        assert_eq!(
            Status::SubscriptionNotExist.name(),
            "SUBSCRIPTION_NOT_EXIST"
        );
    }

    #[test]
    fn codes_round_trip_and_unknown_is_an_error() {
        for &c in RequestCode::ALL {
            assert_eq!(RequestCode::try_from(u16::from(c)), Ok(c));
        }
        for &s in Status::ALL {
            assert_eq!(Status::try_from(u16::from(s)), Ok(s));
        }
        assert_eq!(
            RequestCode::try_from(9),
            Err(WireError::UnknownCode {
                what: "request",
                code: 9
            })
        );
        assert!(Status::try_from(999).is_err());
    }

    #[test]
    fn ringmq_codes_are_in_their_range() {
        for c in [
            RequestCode::Hello,
            RequestCode::HaSubscribe,
            RequestCode::HaAck,
            RequestCode::WhoAmI,
        ] {
            assert!(u16::from(c) >= RINGMQ_CODE_MIN);
        }
        assert!(u16::from(Status::FrameTooLarge) >= RINGMQ_CODE_MIN);
    }

    #[test]
    fn status_helpers() {
        assert!(Status::Success.is_ok());
        assert!(Status::FlushSlaveTimeout.message_stored());
        assert!(!Status::FlushSlaveTimeout.is_retriable());
        assert!(Status::SystemBusy.is_retriable());
        assert!(!Status::TopicNotExist.message_stored());
    }
}
