//! A shard's periodic metrics publish (`crate::metrics::shard`): what it recorded, plus the
//! gauges only its own state can answer, computed here on its loop and swapped into
//! `Broker::metric_views[shard]` for the metrics thread.

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
    view.build_us = crate::broker::shard::ack::micros(t0.elapsed());
    if let Some(slot) = shard.broker.metric_views.get(usize::from(shard.id)) {
        let fresh = Arc::new(view);
        let old = std::mem::replace(&mut *slot.lock().unwrap_or_else(|p| p.into_inner()), fresh);
        // The previous view is freed here, outside the lock.
        drop(old);
    }
}

/// Consumer lag per (group, topic) on this shard: committed offsets against queue ends, the
/// age of the oldest message not committed (its store time read once per committed offset),
/// and what was pulled but not committed. Offsets come sorted by (group, topic, queue), so
/// each (group, topic) is one run of entries.
fn lag(shard: &Shard, now: i64, series_max: usize) -> Vec<Lag> {
    let offsets = shard.offsets.borrow();
    let store = shard.store.borrow();
    let mut m = shard.metrics.borrow_mut();
    let mut rows: Vec<Lag> = Vec::new();
    let mut overflow = Lag {
        group: OVERFLOW.to_string(),
        topic: OVERFLOW.to_string(),
        ..Lag::default()
    };
    let mut overflowed = false;
    for (group, topic, queue, committed) in offsets.iter() {
        let Some((_, max)) = store.queue_range(topic, queue) else {
            continue;
        };
        let messages = max.saturating_sub(committed);
        let oldest_ms = if messages == 0 {
            0
        } else {
            m.stamp(group, topic, queue, committed, || {
                store.store_time_of(topic, queue, committed)
            })
            .map_or(0, |t| u64::try_from(now - t).unwrap_or(0))
        };
        let inflight = m
            .pulled
            .get(group)
            .and_then(|t| t.get(topic))
            .and_then(|q| q.get(&queue))
            .map_or(0, |&next| next.min(max).saturating_sub(committed));
        let same = rows
            .last()
            .is_some_and(|r| r.group == group && r.topic == topic);
        let row = if same {
            rows.last_mut().unwrap_or(&mut overflow)
        } else if rows.len() < series_max {
            rows.push(Lag {
                group: group.to_string(),
                topic: topic.to_string(),
                ..Lag::default()
            });
            rows.last_mut().unwrap_or(&mut overflow)
        } else {
            overflowed = true;
            &mut overflow
        };
        row.messages += messages;
        row.inflight += inflight;
        row.oldest_ms = row.oldest_ms.max(oldest_ms);
    }
    if overflowed {
        rows.push(overflow);
    }
    rows
}
