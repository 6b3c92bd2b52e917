//! PULL_MESSAGE: ConsumeQueue lookup (tag filter on the unit's hash, SQL92 filter on the
//! record's properties, see `broker::shard::filter`), then record bytes straight from the log:
//! spliced from the segment file to the socket (zero copy) for larger responses, sent from
//! the log's mapping for smaller ones of `SHARED_MIN_BYTES` and more, copied for the
//! smallest, for scattered ones (runs averaging under `SPLICE_RUN_MIN_BYTES`), when
//! `transferMsgByHeap` is set, or on the epoll fallback loop; a pull that starts in bytes
//! released from memory is read with `O_DIRECT` (`broker::shard::catch_up`). With no
//! data yet the pull is parked on the shard until an append to its queue or its suspend
//! timeout (long polling); parked pulls are bounded per shard (`PARKED_PULLS_PER_SHARD_MAX`),
//! past that they answer at once. A record above the shard's confirmOffset
//! (`Shard::confirm`) is not there yet: PULL_NOT_FOUND, or a wait until the cap moves.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::io::clock::Instant;

use ringmq_wire::code::Status;
use ringmq_wire::command::route::{self, perm};
use ringmq_wire::command::{PullRequest, PullResponse};

use crate::broker::shard::filter::Filter;
use crate::broker::shard::route::store_error;
use crate::broker::shard::Shard;
use crate::broker::shard::{
    SHARED_MIN_BYTES, SHARED_RUNS_MAX, SPLICE_MIN_BYTES, SPLICE_RUN_MIN_BYTES,
};
use crate::io::rt;
use crate::limits;
use crate::metrics::shard::PullPath;
use crate::net::reply::{Body, LogRun, Outcome, Reply};
use crate::store::{PullResult, PullStatus};

/// Handles a pull on the shard that owns the queue.
pub fn pull(shard: &Rc<Shard>, h: PullRequest, zero_copy: bool) -> Outcome {
    let table = shard.broker.topics.snapshot();
    if let Some(cfg) = table.get(&h.topic) {
        if !perm::is_readable(cfg.perm) || !perm::is_readable(shard.broker.live.permission()) {
            return Reply::error(
                Status::NoPermission,
                format!("topic {} is not readable", h.topic),
            )
            .into();
        }
    }
    let filter = match Filter::for_pull(shard, &h) {
        Ok(f) => f,
        Err(reply) => return reply.into(),
    };
    if let Some(commit) = h.commit_offset {
        if !h.consumer_group.is_empty() {
            shard
                .offsets
                .borrow_mut()
                .set(&h.consumer_group, &h.topic, h.queue_id, commit);
        }
    }
    let max_messages = h.max_messages.clamp(1, limits::PULL_MESSAGES_MAX as u32);
    let max_bytes = u64::from(h.max_bytes.max(1)).min(limits::PULL_BYTES_MAX as u64);
    let first = match lookup(shard, &h, h.queue_offset, max_messages, max_bytes, &filter) {
        Ok(r) => r,
        Err(reply) => return reply.into(),
    };
    let suspend = u64::from(h.suspend_timeout_ms).min(limits::LONG_POLL_TIMEOUT_MS_MAX);
    let waitable = matches!(
        first.status,
        PullStatus::NoNewMessage | PullStatus::NoQueue | PullStatus::NoMatchedMessage
    );
    if first.status == PullStatus::Found
        || !waitable
        || suspend == 0
        || !shard.broker.rt.long_polling
        || shard.parked_count.get() >= limits::PARKED_PULLS_PER_SHARD_MAX
    {
        return answer(shard, h, first, zero_copy);
    }
    let shard = Rc::clone(shard);
    Outcome::later(async move {
        shard.parked_count.set(shard.parked_count.get() + 1);
        shard
            .counters()
            .parked_pulls
            .fetch_add(1, Ordering::Relaxed);
        let reply = park(
            &shard,
            &h,
            first,
            suspend,
            max_messages,
            max_bytes,
            &filter,
            zero_copy,
        )
        .await;
        shard.parked_count.set(shard.parked_count.get() - 1);
        shard
            .counters()
            .parked_pulls
            .fetch_sub(1, Ordering::Relaxed);
        reply
    })
}

#[allow(clippy::too_many_arguments)]
async fn park(
    shard: &Rc<Shard>,
    h: &PullRequest,
    mut last: PullResult,
    suspend_ms: u64,
    max_messages: u32,
    max_bytes: u64,
    filter: &Filter,
    zero_copy: bool,
) -> Reply {
    let deadline = Instant::now() + Duration::from_millis(suspend_ms);
    loop {
        let event = shard.queue_event(&h.topic, h.queue_id);
        let listener = event.listen();
        let offset = last.next_offset.max(h.queue_offset);
        last = match lookup(shard, h, offset, max_messages, max_bytes, filter) {
            Ok(r) => r,
            Err(reply) => return reply,
        };
        let waitable = matches!(
            last.status,
            PullStatus::NoNewMessage | PullStatus::NoQueue | PullStatus::NoMatchedMessage
        );
        let now = Instant::now();
        if !waitable || now >= deadline || shard.broker.is_shutting_down() {
            if last.status == PullStatus::Found && shard.catch_up_serves(&last.runs) {
                return respond_released(shard, h, &last, zero_copy).await;
            }
            return respond(shard, h, &last, zero_copy);
        }
        if last.status == PullStatus::NoMatchedMessage {
            continue;
        }
        rt::timeout(deadline - now, listener).await;
    }
}

fn lookup(
    shard: &Shard,
    h: &PullRequest,
    offset: u64,
    max_messages: u32,
    max_bytes: u64,
    filter: &Filter,
) -> Result<PullResult, Reply> {
    let store = shard.store.borrow();
    let sql = filter
        .sql()
        .map(|e| move |props: &[u8]| e.matches_properties(props));
    let mut r = store
        .get_below(
            &h.topic,
            h.queue_id,
            (offset, max_messages, max_bytes),
            |t| filter.tag_matches(t),
            sql,
            shard.visible_end(),
        )
        .map_err(|e| store_error(shard, e))?;
    if r.status == PullStatus::NoQueue {
        // A queue of an existing topic that has never been written: empty, at offset 0.
        r.status = if offset == 0 {
            PullStatus::NoNewMessage
        } else {
            PullStatus::OffsetOverflow
        };
    }
    if r.status == PullStatus::OffsetOverflow && !shard.broker.is_master() {
        // A slave may simply be behind its master: past its end is "nothing yet", never an
        // order to rewind the consumer (and the pull may wait for replication to catch up).
        r.status = PullStatus::NoNewMessage;
        r.next_offset = offset;
    }
    Ok(r)
}

/// Broker id a consumer too far behind is told to read from (RocketMQ's
/// `whichBrokerWhenConsumeSlowly`): the first slave.
pub const SLOW_CONSUMER_BROKER_ID: u64 = 1;

/// The replica the consumer should pull from next (`slaveReadEnable`): a slave while what it
/// read is more than `accessMessageInMemoryMaxRatio` of memory behind the log's end (its
/// reads would leave the page cache), the master otherwise. Slaves answer the same way, so a
/// consumer that caught up goes back to the master.
fn suggested_broker(shard: &Shard, r: &PullResult) -> u64 {
    let (Some(limit), Some(last)) = (shard.broker.rt.slave_read_behind_bytes, r.runs.last()) else {
        return route::MASTER_ID;
    };
    let read_to = last.physical_offset + u64::from(last.len);
    let behind = shard.store.borrow().write_offset().saturating_sub(read_to);
    if behind > limit {
        SLOW_CONSUMER_BROKER_ID
    } else {
        route::MASTER_ID
    }
}

/// The answer to a pull: at once, or once the direct reads of released log bytes it needs
/// are done (`broker::shard::catch_up`).
fn answer(shard: &Rc<Shard>, h: PullRequest, r: PullResult, zero_copy: bool) -> Outcome {
    if r.status == PullStatus::Found && shard.catch_up_serves(&r.runs) {
        let shard = Rc::clone(shard);
        return Outcome::later(async move { respond_released(&shard, &h, &r, zero_copy).await });
    }
    respond(shard, &h, &r, zero_copy).into()
}

/// [`respond`] to a pull found in released log bytes: its records read with `O_DIRECT`
/// where they can be, from the log as usual where not.
async fn respond_released(
    shard: &Rc<Shard>,
    h: &PullRequest,
    r: &PullResult,
    zero_copy: bool,
) -> Reply {
    let body = match shard.read_released(&r.runs, r.bytes as usize).await {
        Some(bytes) => {
            shard
                .metrics
                .borrow_mut()
                .pull_body(PullPath::Direct, r.bytes);
            Ok(Body::Bytes(bytes))
        }
        None => body(shard, r, zero_copy),
    };
    found(shard, h, r, body)
}

fn fields(shard: &Shard, r: &PullResult) -> PullResponse {
    PullResponse {
        next_begin_offset: r.next_offset,
        min_offset: r.min_offset,
        max_offset: r.max_offset,
        message_count: r.messages,
        suggest_broker_id: suggested_broker(shard, r),
    }
}

/// The answer to a pull that found records, carrying `body`.
fn found(shard: &Shard, h: &PullRequest, r: &PullResult, body: Result<Body, Reply>) -> Reply {
    match body {
        Ok(body) => {
            let c = shard.counters();
            c.msgs_out
                .fetch_add(u64::from(r.messages), Ordering::Relaxed);
            c.bytes_out.fetch_add(r.bytes, Ordering::Relaxed);
            shard.metrics.borrow_mut().pulled(
                &h.consumer_group,
                &h.topic,
                h.queue_id,
                r.next_offset,
                u64::from(r.messages),
                r.bytes,
            );
            Reply::ok_body(fields(shard, r), body)
        }
        Err(reply) => reply,
    }
}

fn respond(shard: &Shard, h: &PullRequest, r: &PullResult, zero_copy: bool) -> Reply {
    match r.status {
        PullStatus::Found => found(shard, h, r, body(shard, r, zero_copy)),
        PullStatus::NoNewMessage | PullStatus::NoQueue => {
            Reply::status_fields(Status::PullNotFound, "no new message", fields(shard, r))
        }
        PullStatus::NoMatchedMessage => Reply::status_fields(
            Status::PullRetryImmediately,
            "no message matched the filter",
            fields(shard, r),
        ),
        PullStatus::OffsetTooSmall | PullStatus::OffsetOverflow => Reply::status_fields(
            Status::PullOffsetMoved,
            format!(
                "offset moved: queue holds {}..{}",
                r.min_offset, r.max_offset
            ),
            fields(shard, r),
        ),
    }
}

/// The response's records: spliced from the log file when the response is large
/// ([`SPLICE_MIN_BYTES`]) or when some of its pages are not in memory (a copy would wait for
/// the disk on the shard's thread, where a splice waits on an io_uring worker); else sent
/// from the log's mapping ([`SHARED_MIN_BYTES`] and more, the broker's connections only:
/// not across threads, not where the remoting edge rewrites the records); else copied from
/// the mapping.
fn body(shard: &Shard, r: &PullResult, zero_copy: bool) -> Result<Body, Reply> {
    let total = r.bytes as usize;
    let can_splice = zero_copy
        && shard.splice_ok
        && !shard.broker.rt.transfer_msg_by_heap
        && total / r.runs.len().max(1) >= SPLICE_RUN_MIN_BYTES;
    if can_splice && (total >= SPLICE_MIN_BYTES || !resident(shard, r)) {
        let mut runs = Vec::with_capacity(r.runs.len());
        for run in &r.runs {
            let (file, offset) = shard.segment_file(run.physical_offset).map_err(|e| {
                Reply::error(
                    Status::SystemError,
                    format!("opening the segment for a zero-copy send: {e}"),
                )
            })?;
            runs.push(LogRun {
                file,
                offset,
                len: run.len as usize,
            });
        }
        shard
            .metrics
            .borrow_mut()
            .pull_body(PullPath::File, total as u64);
        return Ok(Body::Log { runs, len: total });
    }
    if zero_copy
        && !shard.broker.rt.transfer_msg_by_heap
        && total >= SHARED_MIN_BYTES
        && r.runs.len() <= SHARED_RUNS_MAX
    {
        if let Some(parts) = shared(shard, r) {
            shard
                .metrics
                .borrow_mut()
                .pull_body(PullPath::Mapped, total as u64);
            return Ok(Body::Shared { parts, len: total });
        }
    }
    let mut bytes = Vec::with_capacity(total);
    let store = shard.store.borrow();
    for run in &r.runs {
        store
            .read_append(run.physical_offset, run.len as usize, &mut bytes)
            .map_err(|e| store_error(shard, e))?;
    }
    drop(store);
    shard
        .metrics
        .borrow_mut()
        .pull_body(PullPath::Copy, total as u64);
    Ok(Body::Bytes(bytes))
}

/// Views of the log's mapping for every run of `r`, or `None` when the disk has none for one
/// of them (the caller copies; a run that cannot be read is reported by the copy).
fn shared(shard: &Shard, r: &PullResult) -> Option<Vec<bytes::Bytes>> {
    let store = shard.store.borrow();
    r.runs
        .iter()
        .map(|run| store.read_shared(run.physical_offset, run.len as usize))
        .collect()
}

/// Whether every run of `r` is in the page cache.
fn resident(shard: &Shard, r: &PullResult) -> bool {
    let store = shard.store.borrow();
    r.runs
        .iter()
        .all(|run| store.resident(run.physical_offset, u64::from(run.len)))
}
