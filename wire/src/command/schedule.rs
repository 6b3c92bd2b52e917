//! GET_SCHEDULE_STATUS (1010, ringmq): what a broker holds scheduled (delay levels and
//! delivery times) and when the next one is due. Request header: [`Empty`](crate::codec::Empty).
//! Response fields: none; body: [`ScheduleStatus`].

crate::wire_struct! {
    /// One delay level of `messageDelayLevel`.
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct ScheduleLevel {
        pub level: u32,
        pub delay_ms: u64,
        /// Messages of this level not yet delivered.
        pub pending: u64,
    }
}

crate::wire_struct! {
    /// The broker's schedule, summed over its shards.
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct ScheduleStatus {
        pub levels: Vec<ScheduleLevel>,
        /// Messages sent with a delivery time (no level) not yet delivered.
        pub timer_pending: u64,
        /// Earliest due time of a pending message, ms since the epoch (the start of its
        /// one-second slot while it is more than 300 ms away); 0 when none.
        pub next_due_ms: i64,
        /// Scheduled messages delivered since the broker started.
        pub delivered: u64,
        /// Shards still indexing their schedule after a start (nothing is delivered early
        /// meanwhile; it is delivered late).
        pub shards_indexing: u32,
        /// False on a slave: it replicates the schedule, only its master delivers.
        pub delivering: bool,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Decode, Encode};

    #[test]
    fn schedule_status_round_trip() {
        let s = ScheduleStatus {
            levels: vec![ScheduleLevel {
                level: 3,
                delay_ms: 10_000,
                pending: 5,
            }],
            timer_pending: 2,
            next_due_ms: 1_800_000_000_000,
            delivered: 9,
            shards_indexing: 0,
            delivering: true,
        };
        assert_eq!(ScheduleStatus::decode(&s.to_vec().unwrap()).unwrap(), s);
    }
}
