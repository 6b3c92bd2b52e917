//! Long polls that wait for queues of other shards (a POP of any queue parks on the shard it
//! landed on while the topic's other queues belong to other shards). The waiting shard asks
//! each owner, through the owner's mailbox, to tell it once when one of the owner's queues of
//! the topic may have become ready (`Mail::Watch`). The owner keeps that wish per (topic,
//! waiting shard) and, at its next [`Shard::wake_queue`] of the topic (an append, an ack
//! that frees an orderly queue, a rewind) or [`Shard::wake_all`] (the read cap moved), sends
//! one `Mail::Ready` back and forgets the wish. The waiting shard wakes its requests that
//! wait for the topic; one that still waits asks again ([`TopicWait::arm`]) before it looks
//! at the owner's queues, and a mailbox keeps the order of one sender's mails, so whatever
//! becomes ready after that look is told.
//!
//! Cost: an owner nobody waits on pays one read of a local `Cell` per wake (no lock, no cache
//! line shared with another core); a burst of events on a topic sends one mail per waiting
//! shard, not one per message. Bounds: a shard wishes at another for at most the topics of
//! its parked long polls (`limits::PARKED_PULLS_PER_SHARD_MAX`, at most two topics each). A
//! wish ends with the last request of its shard waiting for its topic (`Mail::Watch` off),
//! or, when that mail found the owner's mailbox full, at the owner's next event of the topic
//! (told once, then forgotten). A `Ready` that finds the waiting shard's mailbox full keeps
//! the wish for the owner's next event; a `Watch` that finds the owner's full is sent again
//! by the request within [`ARM_RETRY_MS`].

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use event_listener::{Event, EventListener};

use crate::broker::shard::Shard;
use crate::shard::mailbox::Mail;

/// A request that could not ask every owner to tell it (a mailbox was full) looks again
/// after at most this long.
pub const ARM_RETRY_MS: u64 = 500;

/// Both sides of the waits across shards, one per shard (see the module docs).
#[derive(Default)]
pub struct Watches {
    /// Waiting side: per topic, this shard's requests that wait for it on other shards.
    waits: RefCell<BTreeMap<String, Wait>>,
    /// Owning side: per topic, the shards waiting for a queue of it here, each to be told
    /// once.
    wishes: RefCell<BTreeMap<String, Vec<u16>>>,
    /// How many (topic, shard) wishes `wishes` holds: while 0, a wake costs one `Cell` read.
    wished: Cell<usize>,
}

/// This shard's requests waiting for one topic on other shards.
struct Wait {
    requests: usize,
    /// Notified when an owner tells this shard (`Mail::Ready`).
    event: Rc<Event>,
    /// Owners asked to tell this shard and not heard from since (their wish is live).
    armed: Vec<u16>,
}

/// What a mail to another shard's mailbox became.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sent {
    Queued,
    /// The mailbox is full.
    Full,
    /// No such shard, or it stopped.
    Gone,
}

impl Watches {
    /// One more request of this shard waits for `topic`; the event the owners' word
    /// notifies.
    fn wait(&self, topic: &str) -> Rc<Event> {
        let mut waits = self.waits.borrow_mut();
        let w = waits.entry(topic.to_string()).or_insert_with(|| Wait {
            requests: 0,
            event: Rc::new(Event::new()),
            armed: Vec::new(),
        });
        w.requests += 1;
        Rc::clone(&w.event)
    }

    /// One request fewer waits for `topic`; after the last, the owners asked are told to
    /// forget it.
    fn unwait(&self, topic: &str, me: u16, mut send: impl FnMut(u16, Mail) -> Sent) {
        let mut waits = self.waits.borrow_mut();
        let Some(w) = waits.get_mut(topic) else {
            return;
        };
        w.requests -= 1;
        if w.requests > 0 {
            return;
        }
        let Some(w) = waits.remove(topic) else {
            return;
        };
        for owner in w.armed {
            // Lost to a full mailbox: the owner tells this shard once more, for nothing.
            let _ = send(
                owner,
                Mail::Watch {
                    topic: topic.to_string(),
                    from: me,
                    on: false,
                },
            );
        }
    }

    /// Asks each of `owners` not asked since it last told this shard; false when one could
    /// not be asked.
    fn arm(
        &self,
        topic: &str,
        owners: &[u16],
        me: u16,
        mut send: impl FnMut(u16, Mail) -> Sent,
    ) -> bool {
        let mut waits = self.waits.borrow_mut();
        let w = waits
            .get_mut(topic)
            .expect("a TopicWait keeps its topic's entry until it is dropped");
        let mut all = true;
        for &owner in owners {
            if owner == me || w.armed.contains(&owner) {
                continue;
            }
            let watch = Mail::Watch {
                topic: topic.to_string(),
                from: me,
                on: true,
            };
            if send(owner, watch) == Sent::Queued {
                w.armed.push(owner);
            } else {
                all = false;
            }
        }
        all
    }

    /// Shard `from` told this one about `topic`: the requests waiting for it look again.
    fn heard(&self, topic: &str, from: u16) {
        if let Some(w) = self.waits.borrow_mut().get_mut(topic) {
            w.armed.retain(|&s| s != from);
            w.event.notify(usize::MAX);
        }
    }

    /// Shard `from` waits for a queue of `topic` here (`on`), or no longer.
    fn wish(&self, topic: String, from: u16, on: bool) {
        let mut wishes = self.wishes.borrow_mut();
        if on {
            let shards = wishes.entry(topic).or_default();
            if !shards.contains(&from) {
                shards.push(from);
                self.wished.set(self.wished.get() + 1);
            }
        } else if let Some(shards) = wishes.get_mut(&topic) {
            if let Some(i) = shards.iter().position(|&s| s == from) {
                shards.swap_remove(i);
                self.wished.set(self.wished.get() - 1);
            }
            if shards.is_empty() {
                wishes.remove(&topic);
            }
        }
    }

    /// Tells the shards waiting for `topic` here, once each: a wish is done once told (or
    /// its shard is gone), kept for the next event when the shard's mailbox is full.
    fn tell(&self, topic: &str, me: u16, mut send: impl FnMut(u16, Mail) -> Sent) {
        if self.wished.get() == 0 {
            return;
        }
        let mut wishes = self.wishes.borrow_mut();
        let Some(shards) = wishes.get_mut(topic) else {
            return;
        };
        let before = shards.len();
        shards.retain(|&to| {
            let ready = Mail::Ready {
                topic: topic.to_string(),
                from: me,
            };
            send(to, ready) == Sent::Full
        });
        let told = before - shards.len();
        self.wished.set(self.wished.get() - told);
        if shards.is_empty() {
            wishes.remove(topic);
        }
    }

    /// Wakes every request of this shard waiting for other shards (shutdown, read cap moved).
    fn wake_waiting(&self) {
        for w in self.waits.borrow().values() {
            w.event.notify(usize::MAX);
        }
    }

    /// The topics some shard waits for here.
    fn wished_topics(&self) -> Vec<String> {
        if self.wished.get() == 0 {
            return Vec::new();
        }
        self.wishes.borrow().keys().cloned().collect()
    }
}

/// One request's wait for a topic on other shards; ends when dropped.
pub struct TopicWait {
    shard: Rc<Shard>,
    topic: String,
    event: Rc<Event>,
}

impl TopicWait {
    /// Ready when an owner of the topic tells this shard (from now on).
    pub fn listen(&self) -> EventListener {
        self.event.listen()
    }

    /// Asks each of `owners` not asked since it last told this shard to tell it at its next
    /// event of the topic. Call before looking at their queues. False when one could not be
    /// asked (its mailbox full): look again within [`ARM_RETRY_MS`].
    pub fn arm(&self, owners: &[u16]) -> bool {
        let shard = &self.shard;
        shard
            .watches
            .arm(&self.topic, owners, shard.id, |to, m| shard.mail_to(to, m))
    }
}

impl Drop for TopicWait {
    fn drop(&mut self) {
        let shard = &self.shard;
        shard
            .watches
            .unwait(&self.topic, shard.id, |to, m| shard.mail_to(to, m));
    }
}

impl Shard {
    /// Waits for queues of `topic` on other shards until the returned guard is dropped (see
    /// the module docs): [`TopicWait::arm`] asks the owners, [`TopicWait::listen`] hears them.
    pub fn wait_elsewhere(self: &Rc<Self>, topic: &str) -> TopicWait {
        TopicWait {
            shard: Rc::clone(self),
            topic: topic.to_string(),
            event: self.watches.wait(topic),
        }
    }

    /// `Mail::Watch`: shard `from` waits for a queue of `topic` here (`on`), or no longer.
    pub(crate) fn watch_mail(&self, topic: String, from: u16, on: bool) {
        self.watches.wish(topic, from, on);
    }

    /// `Mail::Ready`: shard `from` told this one; its requests waiting for `topic` look again.
    pub(crate) fn ready_mail(&self, topic: &str, from: u16) {
        self.watches.heard(topic, from);
    }

    /// Tells the shards waiting for `topic` here, once each (from [`Shard::wake_queue`]).
    pub(crate) fn tell_waiting(&self, topic: &str) {
        self.watches
            .tell(topic, self.id, |to, m| self.mail_to(to, m));
    }

    /// Tells every shard waiting for any topic here, and wakes this shard's requests
    /// waiting for other shards (from [`Shard::wake_all`]).
    pub(crate) fn tell_all_waiting(&self) {
        for topic in self.watches.wished_topics() {
            self.tell_waiting(&topic);
        }
        self.watches.wake_waiting();
    }

    fn mail_to(&self, to: u16, mail: Mail) -> Sent {
        let Some(mb) = self.broker.mailboxes.get(usize::from(to)) else {
            return Sent::Gone;
        };
        match mb.try_send(mail) {
            Ok(()) => Sent::Queued,
            Err(flume::TrySendError::Full(_)) => Sent::Full,
            Err(flume::TrySendError::Disconnected(_)) => Sent::Gone,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Mails sent, answered with `answer` in turn (then `Queued`).
    #[derive(Default)]
    struct Post {
        sent: Vec<(u16, Mail)>,
        answers: Vec<Sent>,
    }

    impl Post {
        fn send(&mut self, to: u16, m: Mail) -> Sent {
            self.sent.push((to, m));
            if self.answers.is_empty() {
                Sent::Queued
            } else {
                self.answers.remove(0)
            }
        }

        fn take(&mut self) -> Vec<String> {
            self.sent
                .drain(..)
                .map(|(to, m)| match m {
                    Mail::Watch { topic, from, on } => format!("{to}<-watch {topic} {from} {on}"),
                    Mail::Ready { topic, from } => format!("{to}<-ready {topic} {from}"),
                    other => format!("{to}<-{other:?}"),
                })
                .collect()
        }
    }

    #[test]
    fn an_owner_tells_each_waiting_shard_once_per_wish() {
        let owner = Watches::default();
        let mut post = Post::default();
        owner.tell("t", 1, |to, m| post.send(to, m));
        assert!(post.take().is_empty(), "nobody waits: nothing sent");
        owner.wish("t".into(), 0, true);
        owner.wish("t".into(), 0, true);
        owner.wish("t".into(), 2, true);
        assert_eq!(owner.wished.get(), 2, "a wish sent twice is one");
        owner.tell("u", 1, |to, m| post.send(to, m));
        assert!(post.take().is_empty(), "another topic tells nobody");
        // A burst of events: one word per waiting shard, then nothing until asked again.
        for _ in 0..3 {
            owner.tell("t", 1, |to, m| post.send(to, m));
        }
        assert_eq!(post.take(), vec!["0<-ready t 1", "2<-ready t 1"]);
        assert_eq!(owner.wished.get(), 0);
        assert!(owner.wished_topics().is_empty());
    }

    #[test]
    fn a_full_mailbox_keeps_the_wish_for_the_next_event() {
        let owner = Watches::default();
        let mut post = Post {
            answers: vec![Sent::Full],
            ..Post::default()
        };
        owner.wish("t".into(), 0, true);
        owner.tell("t", 1, |to, m| post.send(to, m));
        assert_eq!(owner.wished.get(), 1, "kept");
        owner.tell("t", 1, |to, m| post.send(to, m));
        assert_eq!(owner.wished.get(), 0, "told");
        assert_eq!(post.take().len(), 2);
        // Withdrawn before any event: forgotten.
        owner.wish("t".into(), 0, true);
        owner.wish("t".into(), 0, false);
        assert_eq!(owner.wished.get(), 0);
        owner.tell("t", 1, |to, m| post.send(to, m));
        assert!(post.take().is_empty());
    }

    #[test]
    fn a_waiting_shard_asks_each_owner_again_only_after_its_word() {
        let waiting = Watches::default();
        let mut post = Post::default();
        let event = waiting.wait("t");
        let second = waiting.wait("t");
        assert!(Rc::ptr_eq(&event, &second), "one event per topic");
        assert!(waiting.arm("t", &[1, 2, 0], 0, |to, m| post.send(to, m)));
        assert_eq!(post.take(), vec!["1<-watch t 0 true", "2<-watch t 0 true"]);
        assert!(waiting.arm("t", &[1, 2], 0, |to, m| post.send(to, m)));
        assert!(post.take().is_empty(), "asked already");
        let listener = event.listen();
        waiting.heard("t", 2);
        assert!(
            futures_ready(listener),
            "the word of an owner wakes the waiting requests"
        );
        assert!(waiting.arm("t", &[1, 2], 0, |to, m| post.send(to, m)));
        assert_eq!(post.take(), vec!["2<-watch t 0 true"]);
        // A full mailbox: not asked, and said so.
        waiting.heard("t", 1);
        post.answers = vec![Sent::Full];
        assert!(!waiting.arm("t", &[1], 0, |to, m| post.send(to, m)));
        assert!(waiting.arm("t", &[1], 0, |to, m| post.send(to, m)));
        post.take();
        // The last request gone: the owners asked forget it.
        waiting.unwait("t", 0, |to, m| post.send(to, m));
        assert!(post.take().is_empty(), "one request still waits");
        waiting.unwait("t", 0, |to, m| post.send(to, m));
        let mut forgot = post.take();
        forgot.sort();
        assert_eq!(forgot, vec!["1<-watch t 0 false", "2<-watch t 0 false"]);
        assert!(waiting.waits.borrow().is_empty());
        waiting.heard("t", 1);
    }

    /// Whether a listener is already notified (polled once, no runtime needed).
    fn futures_ready(mut l: EventListener) -> bool {
        use std::future::Future;
        use std::pin::Pin;
        use std::task::{Context, Poll, Waker};
        let mut cx = Context::from_waker(Waker::noop());
        matches!(Pin::new(&mut l).poll(&mut cx), Poll::Ready(()))
    }
}
