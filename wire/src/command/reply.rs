//! Request-reply ([`crate::reply`]): SEND_REPLY_MESSAGE (324, replier -> broker) has the
//! header, body (one record) and response fields of SEND_MESSAGE
//! ([`SendRequest`](super::SendRequest), [`SendResponse`](super::SendResponse)); a response
//! with `record_count` 0 means the broker pushed the reply without storing it
//! (`storeReplyMessageEnable=false`). PUSH_REPLY_MESSAGE_TO_CLIENT (326, broker ->
//! requester, ONEWAY) has the header below and the reply record as its body.

crate::wire_struct! {
    /// PUSH_REPLY_MESSAGE_TO_CLIENT request header; the body is the reply record as the
    /// broker received it, with its store host and store time written in (queue and
    /// physical offsets are 0: the reply is pushed before it is stored).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct PushReplyRequest {
        /// The broker that pushed it (the reply record's broker name for the requester).
        pub broker_name: String,
        /// The replier's producer group (RocketMQ's header carries it).
        pub producer_group: String,
    }
}
