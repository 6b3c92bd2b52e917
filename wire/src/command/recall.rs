//! RECALL_MESSAGE (370): withdraw a scheduled message before it is due, by the handle its
//! send returned ([`crate::recall::RecallHandle`]). The broker answers SUCCESS when the
//! message will not be delivered (also when it was already recalled: the remark says so),
//! RECALL_TOO_LATE when it was already delivered, MESSAGE_ILLEGAL for a handle that names no
//! scheduled message of the topic on this broker. Response fields: [`RecallResponse`].

crate::wire_struct! {
    /// RECALL_MESSAGE request header (RocketMQ's `RecallMessageRequestHeader`).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct RecallRequest {
        /// The caller's producer group (informational; may be empty).
        pub producer_group: String,
        /// The topic the message was sent to; must be the handle's.
        pub topic: String,
        pub recall_handle: String,
    }
}

crate::wire_struct! {
    /// RECALL_MESSAGE response fields.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct RecallResponse {
        /// The recalled message's id (the handle's).
        pub message_id: String,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Decode, Encode};

    #[test]
    fn recall_round_trip() {
        let r = RecallRequest {
            producer_group: "pg".into(),
            topic: "Orders".into(),
            recall_handle: "djEgT3JkZXJz".into(),
        };
        assert_eq!(RecallRequest::decode(&r.to_vec().unwrap()).unwrap(), r);
        let a = RecallResponse {
            message_id: "7F00000100002A9F0000000000001000".into(),
        };
        assert_eq!(RecallResponse::decode(&a.to_vec().unwrap()).unwrap(), a);
    }
}
