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

crate::wire_struct! {
    /// Undecided half messages of one producer group on a broker.
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct TransactionGroupPending {
        pub producer_group: String,
        pub pending: u64,
        /// Store time of the oldest, ms since the epoch.
        pub oldest_stored_ms: i64,
    }
}

crate::wire_struct! {
    /// GET_TRANSACTION_STATUS (1011, ringmq) response body: the broker's transactions,
    /// summed over its shards. Request header: [`Empty`](crate::codec::Empty).
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct TransactionStatus {
        pub groups: Vec<TransactionGroupPending>,
        /// CHECK_TRANSACTION_STATE requests sent since the broker started.
        pub checks_sent: u64,
        /// Checks counted with no live producer of the group to ask.
        pub checks_unanswerable: u64,
        /// Halves moved to `TRANS_CHECK_MAX_TIME_TOPIC` since the broker started.
        pub moved_to_check_max: u64,
        /// Copies a crash had cut off, stored again at start.
        pub redone: u64,
        /// `transactionTimeOut`, `transactionCheckInterval` (ms) and `transactionCheckMax`.
        pub timeout_ms: u64,
        pub check_interval_ms: u64,
        pub check_max: u32,
        /// False on a slave: it replicates halves and decisions, only its master checks.
        pub checking: bool,
        /// Shards still indexing halves and decisions after a start: their pending halves
        /// are not counted yet.
        pub shards_indexing: u32,
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
