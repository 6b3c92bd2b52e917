//! Transactions: END_TRANSACTION (37, producer -> broker) commits or rolls back a half
//! message; CHECK_TRANSACTION_STATE (39, broker -> producer, ONEWAY, body: the half record)
//! asks a producer of the group how an unresolved half ended, and the producer answers with
//! END_TRANSACTION (`from_transaction_check` set). Response fields of END_TRANSACTION: none.

crate::wire_enum! {
    /// How a producer resolves a half message (RocketMQ `LocalTransactionState`).
    pub enum TransactionResolution: u8 ("transaction resolution") {
        Commit = 0 => "COMMIT_MESSAGE",
        Rollback = 1 => "ROLLBACK_MESSAGE",
        /// Not known yet; the broker checks back later.
        Unknown = 2 => "UNKNOW",
    }
}

crate::wire_struct! {
    /// END_TRANSACTION request header (may be sent ONEWAY).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct EndTransactionRequest {
        pub producer_group: String,
        pub resolution: TransactionResolution,
        /// Queue offset of the half message in the half topic.
        pub half_queue_offset: u64,
        /// CommitLog offset of the half message.
        pub physical_offset: u64,
        pub message_id: String,
        pub transaction_id: String,
        /// Set when answering a CHECK_TRANSACTION_STATE.
        pub from_transaction_check: bool,
    }
}

crate::wire_struct! {
    /// CHECK_TRANSACTION_STATE request header; the body is the half record.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct CheckTransactionRequest {
        pub half_queue_offset: u64,
        pub physical_offset: u64,
        pub message_id: String,
        pub transaction_id: String,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Decode, Encode};

    #[test]
    fn transaction_round_trip() {
        let e = EndTransactionRequest {
            producer_group: "pg".into(),
            resolution: TransactionResolution::Rollback,
            half_queue_offset: 1,
            physical_offset: 2,
            message_id: "m".into(),
            transaction_id: "t".into(),
            from_transaction_check: true,
        };
        let bytes = e.to_vec().unwrap();
        assert_eq!(bytes[4], 1);
        assert_eq!(EndTransactionRequest::decode(&bytes).unwrap(), e);
        let c = CheckTransactionRequest {
            half_queue_offset: 1,
            physical_offset: 2,
            message_id: "m".into(),
            transaction_id: "t".into(),
        };
        assert_eq!(
            CheckTransactionRequest::decode(&c.to_vec().unwrap()).unwrap(),
            c
        );
    }
}
