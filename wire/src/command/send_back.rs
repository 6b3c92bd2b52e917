//! CONSUMER_SEND_MSG_BACK (36): a consumer hands back a message it failed to process. The
//! broker re-stores it in the group's retry topic (`%RETRY%<group>`) with the next delay, or
//! in the dead-letter topic (`%DLQ%<group>`) once `max_reconsume_times` is reached.
//! Response fields: none.

/// Prefix of a consumer group's retry topic (`%RETRY%<group>`).
pub const RETRY_TOPIC_PREFIX: &str = "%RETRY%";
/// Prefix of a consumer group's dead-letter topic (`%DLQ%<group>`).
pub const DLQ_TOPIC_PREFIX: &str = "%DLQ%";

/// The retry topic of a consumer group.
pub fn retry_topic(group: &str) -> String {
    format!("{RETRY_TOPIC_PREFIX}{group}")
}

/// The dead-letter topic of a consumer group.
pub fn dlq_topic(group: &str) -> String {
    format!("{DLQ_TOPIC_PREFIX}{group}")
}

/// True for a retry topic (`%RETRY%...`).
pub fn is_retry_topic(topic: &str) -> bool {
    topic.starts_with(RETRY_TOPIC_PREFIX)
}

/// True for a dead-letter topic (`%DLQ%...`).
pub fn is_dlq_topic(topic: &str) -> bool {
    topic.starts_with(DLQ_TOPIC_PREFIX)
}

crate::wire_struct! {
    /// CONSUMER_SEND_MSG_BACK request header.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ConsumerSendBackRequest {
        pub consumer_group: String,
        /// The topic the message was consumed from.
        pub original_topic: String,
        /// CommitLog offset of the message on this broker.
        pub physical_offset: u64,
        /// 0: the broker picks the next level from the reconsume count; -1: straight to the
        /// dead-letter topic; 1..=18: that delay level.
        pub delay_level: i32,
        pub max_reconsume_times: u32,
        /// The message's id (`UNIQ_KEY` or offset id), kept in the retried copy.
        pub original_message_id: String,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Decode, Encode};

    #[test]
    fn send_back_round_trip() {
        let r = ConsumerSendBackRequest {
            consumer_group: "cg".into(),
            original_topic: "orders".into(),
            physical_offset: 4096,
            delay_level: -1,
            max_reconsume_times: 16,
            original_message_id: "0A00000700002A9F0000000000001000".into(),
        };
        let bytes = r.to_vec().unwrap();
        assert_eq!(&bytes[20..24], &(-1i32).to_be_bytes());
        assert_eq!(ConsumerSendBackRequest::decode(&bytes).unwrap(), r);
    }
}
