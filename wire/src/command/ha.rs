//! Replication between a master's shard and the same shard of a slave (ringmq, 1100-1102),
//! in ordinary frames on a connection the slave opens:
//!
//! 1. HA_SUBSCRIBE (slave -> master): the slave shard's identity, its max CommitLog offset
//!    and its epoch list. Response fields: [`HaSubscribeResponse`] (where streaming starts;
//!    below the slave's end when the slave must first truncate its log to it).
//! 2. HA_TRANSFER (master -> slave, ONEWAY): header [`HaTransfer`], body the raw CommitLog
//!    bytes from `physical_offset` (zero copy on the master). An empty body is a heartbeat.
//!    The slave checks `physical_offset` equals its own max offset, else it reconnects. The
//!    bytes of one transfer all belong to one master epoch (named in the header).
//! 3. HA_ACK (slave -> master, ONEWAY): [`HaAck`], after each appended transfer and every
//!    heartbeat interval; the master wakes SYNC_MASTER producers waiting on that offset.

crate::wire_struct! {
    /// HA_SUBSCRIBE request header.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct HaSubscribeRequest {
        pub broker_name: String,
        /// The slave's broker id (1, 2, ...).
        pub broker_id: u64,
        pub shard_id: u16,
        /// Must equal the master's shard count (shard i replicates shard i).
        pub shard_count: u16,
        /// End of the slave shard's CommitLog (0 when empty).
        pub max_physical_offset: u64,
        /// The slave shard's epoch boundaries, oldest first (empty outside controller mode).
        pub epochs: Vec<HaEpochEntry>,
    }
}

crate::wire_struct! {
    /// One epoch boundary of a CommitLog: the master of `epoch` wrote it from
    /// `start_offset` (RocketMQ's EpochEntry).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct HaEpochEntry {
        pub epoch: u32,
        pub start_offset: u64,
    }
}

/// [`HaTransfer::confirm_offset`] when the master caps nothing.
pub const CONFIRM_NONE: u64 = u64::MAX;

crate::wire_struct! {
    /// HA_SUBSCRIBE response fields.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct HaSubscribeResponse {
        /// The master shard's CommitLog end when it answered.
        pub master_max_physical_offset: u64,
        /// Where the first HA_TRANSFER starts (the slave's offset, or the start of the
        /// master's last segment for an empty slave, as RocketMQ does).
        pub start_physical_offset: u64,
    }
}

crate::wire_struct! {
    /// HA_TRANSFER header (body: CommitLog bytes).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct HaTransfer {
        pub shard_id: u16,
        /// CommitLog offset of the first body byte.
        pub physical_offset: u64,
        /// The master shard's CommitLog end when it sent this.
        pub master_max_physical_offset: u64,
        /// The master epoch that wrote the body's bytes (0: written before any epoch).
        pub epoch: u32,
        /// Where that epoch starts in the log (0 for epoch 0).
        pub epoch_start_offset: u64,
        /// The master's confirmOffset: consumers see no record ending above it;
        /// [`CONFIRM_NONE`] when the master caps nothing.
        pub confirm_offset: u64,
    }
}

crate::wire_struct! {
    /// HA_ACK header.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct HaAck {
        pub shard_id: u16,
        /// Everything before this CommitLog offset is appended on the slave.
        pub ack_physical_offset: u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Decode, Encode};

    #[test]
    fn ha_round_trip() {
        let s = HaSubscribeRequest {
            broker_name: "broker-a".into(),
            broker_id: 1,
            shard_id: 0,
            shard_count: 2,
            max_physical_offset: 0,
            epochs: vec![
                HaEpochEntry {
                    epoch: 1,
                    start_offset: 0,
                },
                HaEpochEntry {
                    epoch: 3,
                    start_offset: 4096,
                },
            ],
        };
        assert_eq!(HaSubscribeRequest::decode(&s.to_vec().unwrap()).unwrap(), s);
        let t = HaTransfer {
            shard_id: 1,
            physical_offset: 4096,
            master_max_physical_offset: 8192,
            epoch: 3,
            epoch_start_offset: 4096,
            confirm_offset: CONFIRM_NONE,
        };
        assert_eq!(t.to_vec().unwrap().len(), 38);
        assert_eq!(HaTransfer::decode(&t.to_vec().unwrap()).unwrap(), t);
        let a = HaAck {
            shard_id: 1,
            ack_physical_offset: 8192,
        };
        assert_eq!(a.to_vec().unwrap().len(), 10);
    }
}
