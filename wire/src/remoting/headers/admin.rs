//! The headers of RocketMQ's admin requests, as `mqadmin`, RocketMQ Dashboard and the
//! clients' `MQAdmin` send them: topics (create, delete, stats, config), subscription groups
//! (create, delete), offsets (consume stats, reset), connections, and the name server's
//! per-cluster topic list. Key names as RocketMQ's `remoting/protocol/header/*.java` spell
//! them.

use super::{ExtFields, ExtValue, FromExt, Result, ToExt};

ext_header! {
    /// UPDATE_AND_CREATE_TOPIC (17). `attributes` is RocketMQ's `+key=value,-key` list.
    pub struct CreateTopicRequestHeader {
        pub topic: String = "topic",
        pub default_topic: Option<String> = "defaultTopic",
        pub read_queue_nums: i32 = "readQueueNums",
        pub write_queue_nums: i32 = "writeQueueNums",
        pub perm: i32 = "perm",
        pub topic_filter_type: Option<String> = "topicFilterType",
        pub topic_sys_flag: Option<i32> = "topicSysFlag",
        pub order: Option<bool> = "order",
        pub attributes: Option<String> = "attributes",
        pub force: Option<bool> = "force",
    }
}

ext_header! {
    /// Requests that name one topic: DELETE_TOPIC_IN_BROKER (215), GET_TOPIC_STATS_INFO
    /// (202), QUERY_TOPIC_CONSUME_BY_WHO (300), GET_TOPIC_CONFIG (351).
    pub struct TopicRequestHeader {
        pub topic: String = "topic",
    }
}

ext_header! {
    /// DELETE_TOPIC_IN_NAMESRV (216).
    pub struct DeleteTopicFromNamesrvRequestHeader {
        pub topic: String = "topic",
        pub cluster_name: Option<String> = "clusterName",
    }
}

ext_header! {
    /// GET_TOPICS_BY_CLUSTER (224).
    pub struct GetTopicsByClusterRequestHeader {
        pub cluster: String = "cluster",
    }
}

ext_header! {
    /// GET_CONSUME_STATS (208): one topic, a `;`-separated `topicList`, or (neither) every
    /// topic the group has offsets for.
    pub struct GetConsumeStatsRequestHeader {
        pub consumer_group: String = "consumerGroup",
        pub topic: Option<String> = "topic",
        pub topic_list: Option<String> = "topicList",
    }
}

ext_header! {
    /// GET_CONSUMER_CONNECTION_LIST (203).
    pub struct GetConsumerConnectionListRequestHeader {
        pub consumer_group: String = "consumerGroup",
    }
}

ext_header! {
    /// GET_PRODUCER_CONNECTION_LIST (204).
    pub struct GetProducerConnectionListRequestHeader {
        pub producer_group: String = "producerGroup",
    }
}

ext_header! {
    /// DELETE_SUBSCRIPTIONGROUP (207).
    pub struct DeleteSubscriptionGroupRequestHeader {
        pub group_name: String = "groupName",
        pub clean_offset: bool = "cleanOffset",
    }
}

ext_header! {
    /// GET_SUBSCRIPTIONGROUP_CONFIG (352), QUERY_TOPICS_BY_CONSUMER (343).
    pub struct GroupRequestHeader {
        pub group: String = "group",
    }
}

ext_header! {
    /// INVOKE_BROKER_TO_RESET_OFFSET (222): to `offset` on queue `queueId` when both are
    /// given, else every queue to the offset of `timestamp` (-1: the queue's end).
    pub struct ResetOffsetRequestHeader {
        pub group: String = "group",
        pub topic: String = "topic",
        pub queue_id: Option<i32> = "queueId",
        pub offset: Option<i64> = "offset",
        pub timestamp: i64 = "timestamp",
        pub is_force: bool = "isForce",
    }
}

ext_header! {
    /// GET_BROKER_CONSUME_STATS (317): every group's consume stats on one broker; `isOrder`
    /// keeps only topics marked orderly.
    pub struct GetConsumeStatsInBrokerHeader {
        pub is_order: Option<bool> = "isOrder",
    }
}

ext_header! {
    /// CLONE_GROUP_OFFSET (314): `destGroup` takes `srcGroup`'s committed offsets on `topic`
    /// (every topic of `srcGroup` when absent); `offline` skips the subscription check.
    pub struct CloneGroupOffsetRequestHeader {
        pub src_group: String = "srcGroup",
        pub dest_group: String = "destGroup",
        pub topic: Option<String> = "topic",
        pub offline: Option<bool> = "offline",
    }
}

ext_header! {
    /// The answer to GET_BROKER_CONFIG: the configuration's `DataVersion` as JSON.
    pub struct GetBrokerConfigResponseHeader {
        pub version: String = "version",
    }
}
