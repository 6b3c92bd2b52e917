//! The group's dead-letter queue (`%DLQ%<group>`), read with the admin client: how many
//! messages it holds (polled while e2e waits for the last deliveries) and which perf
//! messages are in it (for the verify check, at the end of the run).

use std::collections::HashSet;

use ringmq_client::{Admin, Error};

use crate::payload;

pub use ringmq_client::wire::command::dlq_topic;

/// Messages read per pull from the dead-letter queue.
const READ_BATCH: u32 = 256;
/// Most dead letters read for one check (beyond it the check counts the rest as lost and
/// says so).
pub const READ_MAX: u64 = 10_000_000;

/// Messages stored in the group's dead-letter queue (0 when it does not exist yet).
pub async fn count(admin: &Admin, group: &str) -> Result<u64, String> {
    let topic = dlq_topic(group);
    let route = match admin.topic_route(&topic).await {
        Ok(r) => r,
        Err(Error::NoRoute { .. }) => return Ok(0),
        Err(e) => return Err(format!("route of {topic}: {e}")),
    };
    let mut n = 0;
    for mq in route.read_queues.iter() {
        let min = admin
            .min_offset(mq)
            .await
            .map_err(|e| format!("{mq}: {e}"))?;
        let max = admin
            .max_offset(mq)
            .await
            .map_err(|e| format!("{mq}: {e}"))?;
        n += max.saturating_sub(min);
    }
    Ok(n)
}

/// The perf messages (producer id, sequence) in the group's dead-letter queue, and whether
/// [`READ_MAX`] cut the reading short.
pub async fn messages(admin: &Admin, group: &str) -> Result<(HashSet<(u64, u64)>, bool), String> {
    let topic = dlq_topic(group);
    let route = match admin.topic_route(&topic).await {
        Ok(r) => r,
        Err(Error::NoRoute { .. }) => return Ok((HashSet::new(), false)),
        Err(e) => return Err(format!("route of {topic}: {e}")),
    };
    let mut out = HashSet::new();
    let mut read = 0u64;
    for mq in route.read_queues.iter() {
        let mut at = admin
            .min_offset(mq)
            .await
            .map_err(|e| format!("{mq}: {e}"))?;
        let max = admin
            .max_offset(mq)
            .await
            .map_err(|e| format!("{mq}: {e}"))?;
        while at < max {
            if read >= READ_MAX {
                return Ok((out, true));
            }
            let want = ((max - at).min(u64::from(READ_BATCH))) as u32;
            let msgs = admin
                .read_messages(mq, at, want)
                .await
                .map_err(|e| format!("reading {mq} at {at}: {e}"))?;
            let Some(last) = msgs.last() else { break };
            at = last.queue_offset + 1;
            read += msgs.len() as u64;
            out.extend(
                msgs.iter()
                    .filter_map(|m| payload::parse(&m.body))
                    .map(|h| (h.producer, h.seq)),
            );
        }
    }
    Ok((out, false))
}
