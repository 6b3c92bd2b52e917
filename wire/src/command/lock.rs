//! Orderly consumption: LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42). A member of a
//! clustering group locks the queues it was assigned on their broker before consuming them
//! in order; a lock expires if not renewed (RocketMQ: 60 s, renewed every 20 s).
//!
//! Both requests: header [`Empty`](crate::codec::Empty), body [`LockBatchRequest`].
//! LOCK_BATCH_MQ response body: [`LockBatchResponse`] (the queues now locked by this client);
//! UNLOCK_BATCH_MQ response fields: none.

crate::wire_struct! {
    /// One queue of a topic on a broker (RocketMQ `MessageQueue`).
    #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
    pub struct MessageQueue {
        pub topic: String,
        pub broker_name: String,
        pub queue_id: u32,
    }
}

crate::wire_struct! {
    /// LOCK_BATCH_MQ / UNLOCK_BATCH_MQ body.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct LockBatchRequest {
        pub consumer_group: String,
        pub client_id: String,
        pub queues: Vec<MessageQueue>,
    }
}

crate::wire_struct! {
    /// LOCK_BATCH_MQ response body.
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct LockBatchResponse {
        pub locked: Vec<MessageQueue>,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Decode, Encode};

    #[test]
    fn lock_round_trip() {
        let q = MessageQueue {
            topic: "t".into(),
            broker_name: "b".into(),
            queue_id: 3,
        };
        assert_eq!(q.to_vec().unwrap(), b"\x00\x01t\x00\x01b\x00\x00\x00\x03");
        let r = LockBatchRequest {
            consumer_group: "cg".into(),
            client_id: "c".into(),
            queues: vec![q.clone()],
        };
        assert_eq!(LockBatchRequest::decode(&r.to_vec().unwrap()).unwrap(), r);
        let l = LockBatchResponse { locked: vec![q] };
        assert_eq!(LockBatchResponse::decode(&l.to_vec().unwrap()).unwrap(), l);
    }
}
