//! SEND_MESSAGE (10) and SEND_BATCH_MESSAGE (320). The body is one record
//! ([`crate::record`]) or several back to back, encoded by the producer with broker-owned
//! fields zero; the broker validates them, assigns offsets, patches them in place and
//! appends the bytes unchanged.
//!
//! The records of one send go to one queue and are stored contiguously: record `i` gets
//! queue offset `first_queue_offset + i` and physical offset `first_physical_offset` plus
//! the lengths of the records before it, so the response needs no per-record list and the
//! client derives every message id ([`SendResponse::message_id`]).

use std::net::SocketAddr;

crate::wire_struct! {
    /// SEND_MESSAGE / SEND_BATCH_MESSAGE request header.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct SendRequest {
        pub producer_group: String,
        pub topic: String,
        pub queue_id: u32,
        /// Set for SEND_BATCH_MESSAGE; a SEND_MESSAGE body holds exactly one record.
        pub batch: bool,
        /// Records in the body; the broker checks it against what it decodes.
        pub record_count: u32,
    }
}

crate::wire_struct! {
    /// SEND response fields, present on SUCCESS and on the statuses that still stored the
    /// records ([`Status::message_stored`](crate::code::Status::message_stored)).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct SendResponse {
        pub queue_id: u32,
        /// Queue offset of the first record.
        pub first_queue_offset: u64,
        /// Records stored (equal to the request's `record_count`).
        pub record_count: u32,
        /// CommitLog offset of the first record (unique per broker).
        pub first_physical_offset: u64,
        /// STOREHOSTADDRESS the broker wrote into the records (for message ids).
        pub store_host: SocketAddr,
        pub store_timestamp_ms: i64,
        /// When the message is due, ms since the epoch, for a scheduled message (stored
        /// under the timer topic until then); 0 for a message delivered at once.
        pub deliver_at_ms: i64,
    }
}

impl SendResponse {
    /// Queue offset of record `index` of the send.
    pub fn queue_offset(&self, index: u32) -> u64 {
        self.first_queue_offset.saturating_add(u64::from(index))
    }

    /// Queue offset of the last record (the first one if none were stored).
    pub fn last_queue_offset(&self) -> u64 {
        self.queue_offset(self.record_count.saturating_sub(1))
    }

    /// RocketMQ's offset message id of the record stored at `physical_offset`.
    pub fn message_id(&self, physical_offset: u64) -> String {
        crate::record::message_id(self.store_host, physical_offset)
    }

    /// The message ids of [`Self::message_ids`] joined with commas, in one string (RocketMQ's
    /// `msgId` of a batch).
    pub fn message_ids_joined(&self, record_lens: impl IntoIterator<Item = usize>) -> String {
        let mut out = String::with_capacity(33 * (self.record_count as usize).min(4096));
        self.push_message_ids_joined(&mut out, record_lens);
        out
    }

    /// [`Self::message_ids_joined`] appended to `out`.
    pub fn push_message_ids_joined(
        &self,
        out: &mut String,
        record_lens: impl IntoIterator<Item = usize>,
    ) {
        out.reserve(33 * (self.record_count as usize).min(4096));
        let mut at = self.first_physical_offset;
        let offsets = record_lens.into_iter().map(|len| {
            let offset = at;
            at = at.saturating_add(len as u64);
            offset
        });
        crate::record::push_message_ids(out, self.store_host, offsets, ',');
    }

    /// Message ids of the records, given their encoded lengths in send order.
    pub fn message_ids(&self, record_lens: impl IntoIterator<Item = usize>) -> Vec<String> {
        let mut at = self.first_physical_offset;
        record_lens
            .into_iter()
            .map(|len| {
                let id = self.message_id(at);
                at = at.saturating_add(len as u64);
                id
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Decode, Encode};

    #[test]
    fn send_round_trip_and_ids() {
        let req = SendRequest {
            producer_group: "pg".into(),
            topic: "orders".into(),
            queue_id: 3,
            batch: true,
            record_count: 2,
        };
        let bytes = req.to_vec().unwrap();
        assert_eq!(bytes.len(), 4 + 8 + 4 + 1 + 4);
        assert_eq!(SendRequest::decode(&bytes).unwrap(), req);
        let resp = SendResponse {
            queue_id: 3,
            first_queue_offset: 100,
            record_count: 2,
            first_physical_offset: 4096,
            store_host: "10.0.0.7:10911".parse().unwrap(),
            store_timestamp_ms: 1_700_000_000_000,
            deliver_at_ms: 0,
        };
        assert_eq!(SendResponse::decode(&resp.to_vec().unwrap()).unwrap(), resp);
        assert_eq!(resp.last_queue_offset(), 101);
        let ids = resp.message_ids([200, 300]);
        assert_eq!(ids[0], "0A00000700002A9F0000000000001000");
        assert_eq!(ids[1], "0A00000700002A9F00000000000010C8");
        assert_eq!(resp.message_ids_joined([200, 300]), ids.join(","));
        let v6 = SendResponse {
            store_host: "[::1]:10911".parse().unwrap(),
            ..resp
        };
        assert_eq!(v6.message_ids_joined([200]), v6.message_id(4096));
        assert_eq!(v6.message_id(4096).len(), 56);
    }
}
