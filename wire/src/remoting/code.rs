//! RocketMQ's request and response codes as remoting carries them (`RequestCode`,
//! `ResponseCode`, `RemotingSysResponseCode`), and the one mapping from a native
//! [`Status`] to the response code a RocketMQ client reads. Native codes already use
//! RocketMQ's numbers where both have the same request or outcome; ringmq's own statuses
//! (1000 and up) become the RocketMQ code whose handling in clients matches.

use crate::code::Status;

/// Request codes a RocketMQ client or broker sends that ringmq reads or writes.
pub mod request {
    pub const SEND_MESSAGE: i32 = 10;
    pub const PULL_MESSAGE: i32 = 11;
    pub const QUERY_MESSAGE: i32 = 12;
    pub const QUERY_CONSUMER_OFFSET: i32 = 14;
    pub const UPDATE_CONSUMER_OFFSET: i32 = 15;
    pub const UPDATE_AND_CREATE_TOPIC: i32 = 17;
    pub const GET_ALL_TOPIC_CONFIG: i32 = 21;
    pub const GET_BROKER_RUNTIME_INFO: i32 = 28;
    pub const SEARCH_OFFSET_BY_TIMESTAMP: i32 = 29;
    pub const GET_MAX_OFFSET: i32 = 30;
    pub const GET_MIN_OFFSET: i32 = 31;
    pub const GET_EARLIEST_MSG_STORETIME: i32 = 32;
    pub const VIEW_MESSAGE_BY_ID: i32 = 33;
    pub const HEART_BEAT: i32 = 34;
    pub const UNREGISTER_CLIENT: i32 = 35;
    pub const CONSUMER_SEND_MSG_BACK: i32 = 36;
    pub const END_TRANSACTION: i32 = 37;
    pub const GET_CONSUMER_LIST_BY_GROUP: i32 = 38;
    pub const CHECK_TRANSACTION_STATE: i32 = 39;
    pub const NOTIFY_CONSUMER_IDS_CHANGED: i32 = 40;
    pub const LOCK_BATCH_MQ: i32 = 41;
    pub const UNLOCK_BATCH_MQ: i32 = 42;
    pub const CHECK_CLIENT_CONFIG: i32 = 46;
    pub const GET_ROUTEINFO_BY_TOPIC: i32 = 105;
    pub const GET_BROKER_CLUSTER_INFO: i32 = 106;
    pub const GET_ALL_TOPIC_LIST_FROM_NAMESERVER: i32 = 206;
    pub const SEND_MESSAGE_V2: i32 = 310;
    pub const SEND_BATCH_MESSAGE: i32 = 320;
    pub const SEND_REPLY_MESSAGE: i32 = 324;
    pub const SEND_REPLY_MESSAGE_V2: i32 = 325;
    pub const PUSH_REPLY_MESSAGE_TO_CLIENT: i32 = 326;
    pub const LITE_PULL_MESSAGE: i32 = 361;
    pub const POP_MESSAGE: i32 = 200050;
    pub const ACK_MESSAGE: i32 = 200051;
    pub const CHANGE_MESSAGE_INVISIBLETIME: i32 = 200053;
    pub const BATCH_ACK_MESSAGE: i32 = 200151;
    pub const RECALL_MESSAGE: i32 = 370;
    // Admin requests (mqadmin, RocketMQ Dashboard, the clients' MQAdmin).
    pub const UPDATE_BROKER_CONFIG: i32 = 25;
    pub const GET_BROKER_CONFIG: i32 = 26;
    pub const UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: i32 = 200;
    pub const GET_ALL_SUBSCRIPTIONGROUP_CONFIG: i32 = 201;
    pub const GET_TOPIC_STATS_INFO: i32 = 202;
    pub const GET_CONSUMER_CONNECTION_LIST: i32 = 203;
    pub const GET_PRODUCER_CONNECTION_LIST: i32 = 204;
    pub const DELETE_SUBSCRIPTIONGROUP: i32 = 207;
    pub const GET_CONSUME_STATS: i32 = 208;
    pub const DELETE_TOPIC_IN_BROKER: i32 = 215;
    pub const DELETE_TOPIC_IN_NAMESRV: i32 = 216;
    pub const INVOKE_BROKER_TO_RESET_OFFSET: i32 = 222;
    pub const GET_TOPICS_BY_CLUSTER: i32 = 224;
    pub const QUERY_TOPIC_CONSUME_BY_WHO: i32 = 300;
    pub const GET_CONSUMER_RUNNING_INFO: i32 = 307;
    pub const CLONE_GROUP_OFFSET: i32 = 314;
    pub const GET_BROKER_CONSUME_STATS: i32 = 317;
    /// Several topics or groups deleted at once (the Rust port's admin tool sends them).
    pub const DELETE_TOPIC_IN_BROKER_LIST: i32 = 5002;
    pub const DELETE_SUBSCRIPTIONGROUP_LIST: i32 = 5003;
    pub const QUERY_TOPICS_BY_CONSUMER: i32 = 343;
    pub const GET_TOPIC_CONFIG: i32 = 351;
    pub const GET_SUBSCRIPTIONGROUP_CONFIG: i32 = 352;
}

/// Response codes.
pub mod response {
    pub const SUCCESS: i32 = 0;
    pub const SYSTEM_ERROR: i32 = 1;
    pub const SYSTEM_BUSY: i32 = 2;
    pub const REQUEST_CODE_NOT_SUPPORTED: i32 = 3;
    pub const FLUSH_DISK_TIMEOUT: i32 = 10;
    pub const SLAVE_NOT_AVAILABLE: i32 = 11;
    pub const FLUSH_SLAVE_TIMEOUT: i32 = 12;
    pub const MESSAGE_ILLEGAL: i32 = 13;
    pub const SERVICE_NOT_AVAILABLE: i32 = 14;
    pub const NO_PERMISSION: i32 = 16;
    pub const TOPIC_NOT_EXIST: i32 = 17;
    pub const PULL_NOT_FOUND: i32 = 19;
    pub const PULL_RETRY_IMMEDIATELY: i32 = 20;
    pub const PULL_OFFSET_MOVED: i32 = 21;
    pub const QUERY_NOT_FOUND: i32 = 22;
    pub const SUBSCRIPTION_PARSE_FAILED: i32 = 23;
    pub const SUBSCRIPTION_NOT_EXIST: i32 = 24;
    pub const SUBSCRIPTION_NOT_LATEST: i32 = 25;
    /// POP: nothing to pop within the poll time.
    pub const POLLING_TIMEOUT: i32 = 210;
    pub const TRANSACTION_SHOULD_COMMIT: i32 = 200;
    pub const TRANSACTION_SHOULD_ROLLBACK: i32 = 201;
    pub const TRANSACTION_STATE_UNKNOW: i32 = 202;
    /// RECALL_MESSAGE refused (a bad handle, a time already past).
    pub const ILLEGAL_OPERATION: i32 = 604;
    /// POP: nothing under that receipt handle (RocketMQ's `NO_MESSAGE`).
    pub const NO_MESSAGE: i32 = 208;
}

/// The RocketMQ response code for a native status.
pub fn response_code(s: Status) -> i32 {
    match s {
        // ringmq's own statuses, as the RocketMQ outcome a client handles the same way:
        // a write refused for disk space is SERVICE_NOT_AVAILABLE on RocketMQ; a limit hit
        // is flow control; a request that did not decode is RocketMQ's
        // RemotingCommandException, answered SYSTEM_ERROR; a SQL92 pull to a broker
        // without property filters is SYSTEM_ERROR on RocketMQ too.
        Status::DiskFull => response::SERVICE_NOT_AVAILABLE,
        // A write to a broker that is not master now: RocketMQ's producers resend a
        // SERVICE_NOT_AVAILABLE to another broker.
        Status::NotMaster | Status::InSyncReplicasNotEnough => response::SERVICE_NOT_AVAILABLE,
        Status::LimitExceeded => response::SYSTEM_BUSY,
        // RocketMQ refuses a recall whose time has passed with ILLEGAL_OPERATION.
        Status::RecallTooLate => response::ILLEGAL_OPERATION,
        // An ack or change for a POP message no longer in flight under that handle.
        Status::InvalidReceiptHandle => response::NO_MESSAGE,
        Status::FrameTooLarge
        | Status::WrongShard
        | Status::TopicAlreadyExists
        | Status::MalformedRequest
        | Status::ProtocolVersionNotSupported
        | Status::PropertyFilterDisabled
        | Status::ReplyToClientNotFound
        | Status::ControllerNotLeader
        | Status::ControllerFencedEpoch
        | Status::ControllerElectFailed
        | Status::ControllerUnknownSet => response::SYSTEM_ERROR,
        other => i32::from(u16::from(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_maps_to_a_rocketmq_code() {
        for &s in Status::ALL {
            let c = response_code(s);
            assert!(c < i32::from(crate::code::RINGMQ_CODE_MIN), "{s:?} -> {c}");
        }
        assert_eq!(
            response_code(Status::PullOffsetMoved),
            response::PULL_OFFSET_MOVED
        );
        assert_eq!(
            response_code(Status::DiskFull),
            response::SERVICE_NOT_AVAILABLE
        );
    }
}
