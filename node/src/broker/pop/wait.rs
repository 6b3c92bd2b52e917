//! Where a pop that finds nothing at once looks, and how it waits. A pop of one queue parks
//! on the shard that owns the queue, woken by the queue's event. A pop of any queue on a
//! broker of several shards parks on the shard it landed on and is woken by a message
//! becoming ready on any queue of the topic (and of the group's pop retry topic, when not
//! orderly) on every shard: this shard's through their events, the other shards' through
//! [`Shard::wait_elsewhere`] (each owner tells this shard once per burst of events: an
//! append, an ack that frees an orderly queue, a rewind). Woken, it pops its own queues,
//! then asks the other shards one after another with no wait ([`no_wait_frame`]), then
//! parks again until its deadline.
//!
//! A request pops on one shard at a time and answers with what that shard popped: messages
//! popped for a request that then answered with another shard's would stay invisible for
//! their invisible time, delivered to nobody.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;

use ringmq_wire::code::Status;
use ringmq_wire::command::PopRequest;

use super::{not_found, try_pop, PopOf};
use crate::broker::shard::filter::Filter;
use crate::broker::shard::route::{forward_or_refuse, Origin};
use crate::broker::shard::watch::{TopicWait, ARM_RETRY_MS};
use crate::broker::shard::Shard;
use crate::io::clock::Instant;
use crate::io::rt;
use crate::limits;
use crate::net::reply::{Outcome, Reply};

/// Where a pop of any queue may look beyond this shard (empty for a pop of one queue, or one
/// forwarded here by another shard).
#[derive(Debug, Default)]
pub(super) struct Elsewhere {
    /// The other shards that own queues the pop may take, asked in turn.
    pub shards: Vec<u16>,
    /// Per topic, the other shards whose queues of it a parked pop waits for.
    pub topics: Vec<(String, Vec<u16>)>,
}

impl Elsewhere {
    /// Adds `owners` (other shards than `me`) of `topic`'s queues.
    pub fn add(&mut self, topic: &str, owners: impl IntoIterator<Item = u16>, me: u16) {
        let mut mine: Vec<u16> = Vec::new();
        for o in owners {
            if o != me && !mine.contains(&o) {
                mine.push(o);
            }
        }
        for &o in &mine {
            if !self.shards.contains(&o) {
                self.shards.push(o);
            }
        }
        if !mine.is_empty() {
            self.topics.push((topic.to_string(), mine));
        }
    }
}

/// One pop as this shard serves it.
pub(super) struct Pop {
    pub h: PopRequest,
    /// This shard's queues the pop may take.
    pub queues: Vec<(String, u32)>,
    pub filter: Filter,
    pub elsewhere: Elsewhere,
    pub origin: Origin,
}

/// The pop of this shard's queues; when they have nothing, of the other shards' (asked with
/// no wait, `asked` not again), then long polling here until the request's poll time ends.
pub(super) fn pop_here(
    shard: &Rc<Shard>,
    mut pop: Pop,
    frame: Vec<u8>,
    asked: Option<u16>,
) -> Outcome {
    match try_pop(shard, &pop.h, &pop.queues, &pop.filter) {
        Err(reply) => return reply.into(),
        Ok(Some(found)) => return found,
        Ok(None) => {}
    }
    let ask = if pop.elsewhere.shards.is_empty() {
        None
    } else {
        no_wait_frame(&pop.h, &frame)
    };
    if ask.is_none() {
        pop.elsewhere = Elsewhere::default();
    }
    let wait_ms = u64::from(pop.h.poll_time_ms).min(limits::LONG_POLL_TIMEOUT_MS_MAX);
    let park = wait_ms > 0
        && (!pop.queues.is_empty() || ask.is_some())
        && shard.broker.rt.long_polling
        && shard.parked_count.get() < limits::PARKED_PULLS_PER_SHARD_MAX;
    let shard = Rc::clone(shard);
    match (park, ask) {
        (true, ask) => Outcome::later(async move { park_here(&shard, pop, ask, wait_ms).await }),
        (false, Some(ask)) => Outcome::later(async move {
            match ask_others(&shard, &pop, &ask, asked).await {
                Some(r) => r,
                None => answer(not_found(&shard, &pop.h)).await,
            }
        }),
        (false, None) => not_found(&shard, &pop.h),
    }
}

/// Long polling: looks (here, then elsewhere) each time something may have become ready,
/// until something is popped or `wait_ms` ends.
async fn park_here(shard: &Rc<Shard>, pop: Pop, ask: Option<Vec<u8>>, wait_ms: u64) -> Reply {
    let parked = Parked::new(shard);
    let deadline = Instant::now() + Duration::from_millis(wait_ms);
    let waits: Vec<(TopicWait, &[u16])> = pop
        .elsewhere
        .topics
        .iter()
        .map(|(t, owners)| (shard.wait_elsewhere(t), owners.as_slice()))
        .collect();
    let out = loop {
        let mut listeners: Vec<event_listener::EventListener> = pop
            .queues
            .iter()
            .map(|(t, q)| shard.queue_event(t, *q).listen())
            .collect();
        listeners.extend(waits.iter().map(|(w, _)| w.listen()));
        // Before the other shards are asked: what becomes ready there after they looked is
        // told.
        let armed = waits
            .iter()
            .fold(true, |all, (w, owners)| w.arm(owners) && all);
        match try_pop(shard, &pop.h, &pop.queues, &pop.filter) {
            Err(reply) => break reply.into(),
            Ok(Some(found)) => break found,
            Ok(None) => {}
        }
        if let Some(ask) = &ask {
            if let Some(r) = ask_others(shard, &pop, ask, None).await {
                break r.into();
            }
        }
        let now = Instant::now();
        if now >= deadline || shard.broker.is_shutting_down() {
            break not_found(shard, &pop.h);
        }
        let mut left = deadline - now;
        if !armed {
            left = left.min(Duration::from_millis(ARM_RETRY_MS));
        }
        rt::timeout(left, AnyOf(listeners)).await;
    };
    drop(waits);
    drop(parked);
    answer(out).await
}

/// Asks the other shards, one after another from this shard's turn (`skip` not), to pop
/// with no wait; the first answer that is not "nothing" (PULL_NOT_FOUND, or SYSTEM_BUSY: its
/// mailbox was full and it popped nothing), or `None`.
async fn ask_others(shard: &Rc<Shard>, pop: &Pop, ask: &[u8], skip: Option<u16>) -> Option<Reply> {
    let shards = &pop.elsewhere.shards;
    let turn = shard.pop().borrow().turn as usize;
    for i in 0..shards.len() {
        let to = shards[(turn + i) % shards.len()];
        if skip == Some(to) {
            continue;
        }
        let r = answer(forward_or_refuse(shard, to, ask.to_vec(), pop.origin)).await;
        if !matches!(r.status, Status::PullNotFound | Status::SystemBusy) {
            return Some(r);
        }
    }
    None
}

async fn answer(out: Outcome) -> Reply {
    match out {
        Outcome::Now(r) => r,
        Outcome::Later(f) => f.await,
    }
}

/// The request of `frame` again with no long polling, for another shard to pop at once;
/// `None` when it cannot be built (then no other shard is asked).
pub(super) fn no_wait_frame(h: &PopRequest, frame: &[u8]) -> Option<Vec<u8>> {
    let parsed = ringmq_wire::frame::parse(frame).ok()?;
    let header = PopRequest {
        poll_time_ms: 0,
        ..h.clone()
    };
    let mut out = Vec::new();
    ringmq_wire::frame::encode_request(
        &mut out,
        ringmq_wire::code::RequestCode::PopMessage,
        false,
        parsed.request_id,
        &header,
        &[],
    )
    .ok()?;
    Some(out)
}

/// A parked pop, counted with the shard's parked long polls while it lives.
struct Parked<'a>(&'a Shard);

impl<'a> Parked<'a> {
    fn new(shard: &'a Shard) -> Self {
        shard.parked_count.set(shard.parked_count.get() + 1);
        shard
            .counters()
            .parked_pulls
            .fetch_add(1, Ordering::Relaxed);
        Parked(shard)
    }
}

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        self.0.parked_count.set(self.0.parked_count.get() - 1);
        self.0
            .counters()
            .parked_pulls
            .fetch_sub(1, Ordering::Relaxed);
    }
}

/// Ready when any of the listeners is.
struct AnyOf(Vec<event_listener::EventListener>);

impl Future for AnyOf {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        for l in self.0.iter_mut() {
            if Pin::new(l).poll(cx).is_ready() {
                return Poll::Ready(());
            }
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elsewhere_names_each_other_shard_once_and_each_topic_with_its_owners() {
        let mut e = Elsewhere::default();
        e.add("t", [0, 1, 2, 1, 0, 2], 0);
        e.add("%RETRY%g_t", [2], 0);
        e.add("%RETRY%g_u", [0], 0);
        assert_eq!(e.shards, vec![1, 2]);
        assert_eq!(
            e.topics,
            vec![
                ("t".to_string(), vec![1, 2]),
                ("%RETRY%g_t".to_string(), vec![2])
            ]
        );
    }
}
