//! Request-reply (RocketMQ's RPC over topics): the names both sides agree on. Pure.
//!
//! A requester sends an ordinary message carrying [`keys::CORRELATION_ID`],
//! [`keys::REPLY_TO_CLIENT`] (its client id), [`keys::TTL`] and [`keys::CLUSTER`]. A replier
//! that consumed it sends a reply with SEND_REPLY_MESSAGE (324) to the cluster's reply topic
//! ([`reply_topic`]), carrying [`keys::MESSAGE_TYPE`] = [`REPLY_MESSAGE_FLAG`] and the
//! request's CORRELATION_ID, REPLY_TO_CLIENT and TTL. The broker pushes the reply to the
//! connection the requester's latest heartbeat came on with PUSH_REPLY_MESSAGE_TO_CLIENT
//! (326, oneway, header [`crate::command::PushReplyRequest`], body: the reply record) and
//! stores it in the reply topic (`storeReplyMessageEnable`).
//!
//! [`keys::CORRELATION_ID`]: crate::properties::keys::CORRELATION_ID
//! [`keys::REPLY_TO_CLIENT`]: crate::properties::keys::REPLY_TO_CLIENT
//! [`keys::TTL`]: crate::properties::keys::TTL
//! [`keys::CLUSTER`]: crate::properties::keys::CLUSTER
//! [`keys::MESSAGE_TYPE`]: crate::properties::keys::MESSAGE_TYPE

/// `MSG_TYPE` of a reply message (RocketMQ's `MixAll.REPLY_MESSAGE_FLAG`).
pub const REPLY_MESSAGE_FLAG: &str = "reply";
/// A cluster's reply topic is `<cluster>` + this (RocketMQ's `MixAll.REPLY_TOPIC_POSTFIX`
/// with its `_`).
pub const REPLY_TOPIC_SUFFIX: &str = "_REPLY_TOPIC";
/// Queues of a reply topic (RocketMQ creates it with one read and one write queue).
pub const REPLY_TOPIC_QUEUES: u32 = 1;

/// The reply topic of `cluster` (RocketMQ's `MixAll.getReplyTopic`).
pub fn reply_topic(cluster: &str) -> String {
    let mut t = String::with_capacity(cluster.len() + REPLY_TOPIC_SUFFIX.len());
    t.push_str(cluster);
    t.push_str(REPLY_TOPIC_SUFFIX);
    t
}

/// True for a reply topic name (`<cluster>_REPLY_TOPIC`).
pub fn is_reply_topic(topic: &str) -> bool {
    topic.len() > REPLY_TOPIC_SUFFIX.len() && topic.ends_with(REPLY_TOPIC_SUFFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_topic_is_rocketmqs_name() {
        assert_eq!(reply_topic("DefaultCluster"), "DefaultCluster_REPLY_TOPIC");
        assert!(is_reply_topic("DefaultCluster_REPLY_TOPIC"));
        assert!(!is_reply_topic("_REPLY_TOPIC"));
        assert!(!is_reply_topic("Orders"));
    }
}
