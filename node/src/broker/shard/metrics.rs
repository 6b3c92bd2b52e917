//! A shard's periodic metrics publish (`crate::metrics::shard`): what it recorded, plus the
//! gauges only its own state can answer, computed here on its loop and swapped into
//! `Broker::metric_views[shard]` for the metrics thread.

use std::collections::HashMap;
use std::sync::Arc;

use crate::broker::shard::Shard;
use crate::broker::Broker;
use crate::io::clock::Instant;
use crate::metrics::shard::{BrokerGauges, Lag, SlaveLag, OVERFLOW};

/// Builds and publishes this shard's view; nothing when metrics are off.
pub fn publish(shard: &Shard) {
    if !shard.metrics.borrow().is_on() {
        return;
    }
    let t0 = Instant::now();
    let now = Broker::now_ms();
    let (mut view, series_max) = {
        let m = shard.metrics.borrow();
        (m.view(), m.series_max())
    };
    view.lag = lag(shard, now, series_max);
    {
        let store = shard.store.borrow();
        let end = store.write_offset();
        view.flush_behind_bytes = end.saturating_sub(store.synced_offset());
        view.dispatch_behind_bytes = shard
            .index
            .as_ref()
            .map_or(0, |i| end.saturating_sub(i.borrow().end_offset()));
        view.reserve_ms = store
            .store_time_at(store.min_offset())
            .map_or(0, |t| u64::try_from(now - t).unwrap_or(0));
        view.slaves = shard
            .replicas
            .borrow()
            .iter()
            .map(|r| {
                let bytes = end.saturating_sub(r.acked);
                SlaveLag {
                    slave: r.id,
                    bytes,
                    ms: if bytes == 0 {
                        0
                    } else {
                        u64::try_from(now - r.caught_up_ms).unwrap_or(0)
                    },
                }
            })
            .collect();
    }
    if shard.id == 0 {
        let broker = &shard.broker;
        let topics = broker.topics.snapshot().topics.len() as u64;
        let (producers, consumers, members) = broker.lock_groups().client_counts(now);
        view.broker = Some(BrokerGauges {
            topics,
            groups: members.iter().filter(|(_, n)| *n > 0).count() as u64,
            producers,
            consumers,
            members,
        });
    }
    view.build_us = crate::broker::produce::micros(t0.elapsed());
    if let Some(slot) = shard.broker.metric_views.get(usize::from(shard.id)) {
        let fresh = Arc::new(view);
        let old = std::mem::replace(&mut *slot.lock().unwrap_or_else(|p| p.into_inner()), fresh);
        // The previous view is freed here, outside the lock.
        drop(old);
    }
}

/// Consumer lag per (group, topic) on this shard: committed offsets against queue ends, the
/// age of the oldest message not committed, and what was pulled but not committed.
fn lag(shard: &Shard, now: i64, series_max: usize) -> Vec<Lag> {
    let offsets = shard.offsets.borrow().all();
    let store = shard.store.borrow();
    let m = shard.metrics.borrow();
    let mut rows: HashMap<(String, String), Lag> = HashMap::new();
    for (group, topic, queue, committed) in offsets {
        let Some((_, max)) = store.queue_range(&topic, queue) else {
            continue;
        };
        let messages = max.saturating_sub(committed);
        let oldest_ms = if messages == 0 {
            0
        } else {
            store
                .store_time_of(&topic, queue, committed)
                .map_or(0, |t| u64::try_from(now - t).unwrap_or(0))
        };
        let inflight = m
            .pulled
            .get(&group)
            .and_then(|t| t.get(&topic))
            .and_then(|q| q.get(&queue))
            .map_or(0, |&next| next.min(max).saturating_sub(committed));
        let key = if rows.len() < series_max || rows.contains_key(&(group.clone(), topic.clone())) {
            (group, topic)
        } else {
            (OVERFLOW.to_string(), OVERFLOW.to_string())
        };
        let row = rows.entry(key).or_insert_with_key(|(g, t)| Lag {
            group: g.clone(),
            topic: t.clone(),
            ..Lag::default()
        });
        row.messages += messages;
        row.inflight += inflight;
        row.oldest_ms = row.oldest_ms.max(oldest_ms);
    }
    rows.into_values().collect()
}
