//! Native Rust client for ringmq: producers, consumers and a few admin calls, on tokio.
//!
//! The client speaks ringmq's native protocol through [`ringmq_wire`] (re-exported as
//! [`wire`]). It never blocks the caller's runtime and keeps no global state: each
//! [`Producer`], [`PushConsumer`], [`PullConsumer`] and [`Admin`] owns its connections,
//! routes and timers, and stops them on `shutdown()` (or when dropped).
//!
//! # Producing
//!
//! ```no_run
//! # async fn demo() -> ringmq_client::Result<()> {
//! use ringmq_client::{Message, Producer};
//!
//! let producer = Producer::builder()
//!     .group("order-service")
//!     .name_servers("127.0.0.1:9876")
//!     .start()
//!     .await?;
//! let r = producer
//!     .send(Message::new("Orders", "order 42 created").with_tag("created").with_key("42"))
//!     .await?;
//! println!("stored as {} in {} at offset {}", r.msg_id, r.queue, r.queue_offset);
//!
//! // Ordered: every message with the same sharding key goes to one queue, in order.
//! producer.send_ordered(Message::new("Orders", "order 42 paid"), "42").await?;
//!
//! // Async: start many sends, await the results later (they are pipelined).
//! let pending = producer.send_async(Message::new("Orders", "order 43 created")).await;
//! pending.await?;
//! producer.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! Send modes: [`Producer::send`] (waits for the broker), [`Producer::send_async`] (a
//! future) and [`Producer::send_with_callback`], [`Producer::send_oneway`] (no answer),
//! [`Producer::send_batch`] (one queue, contiguous offsets), [`Producer::send_to_queue`],
//! [`Producer::send_with_selector`] and [`Producer::send_ordered`]. Messages carry a tag,
//! keys, user properties, a flag, and a delay level or delivery time ([`Message`]).
//!
//! ## Retries and duplicates
//!
//! A send is retried (up to `retries` times within `send_timeout`; on another broker when
//! there is one, on the same queue for ordered sends) only when the broker **certainly did
//! not store** the message ([`Outcome::NotStored`]):
//!
//! | failure | stored? | retried |
//! |---|---|---|
//! | no connection, reconnect backoff, shut down, no route | no | yes |
//! | SYSTEM_BUSY, SERVICE_NOT_AVAILABLE, SYSTEM_ERROR, DISK_FULL, WRONG_SHARD, TOPIC_NOT_EXIST, NO_PERMISSION, LIMIT_EXCEEDED | no | yes |
//! | request written, then timeout or connection lost ([`Outcome::Unknown`]) | maybe | only with `retry_unknown_outcome(true)`: may duplicate |
//! | MESSAGE_ILLEGAL, MALFORMED_REQUEST, FRAME_TOO_LARGE, an invalid message ([`Outcome::Rejected`]) | no | no: retrying cannot help |
//! | FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE | **yes** | no: returned as a [`SendStatus`] |
//!
//! Every error is an [`Error`] that carries the broker's status and remark when the broker
//! answered ([`Error::status`], [`Error::remark`]) and says whether the request may have
//! been carried out ([`Error::outcome`]).
//!
//! ## Connections
//!
//! Routes come from the name servers, are refreshed every `route_refresh_interval` (30 s)
//! and at once after a routing error. The client opens one connection per broker *shard*
//! (HELLO asks the broker to hand it to the shard that owns the queue), reuses it for every
//! request to that shard, with many requests in flight at once matched by request id, and
//! reconnects with exponential backoff when it breaks.
//!
//! ## TLS and credentials
//!
//! [`ClientConfig::tls`] turns TLS on for every connection the client opens (name servers
//! and brokers), trusting the CAs of one PEM bundle, optionally with a client certificate
//! (mutual TLS); see [`TlsOptions`]. [`ClientConfig::credentials`] carries the access key and
//! secret key requests are signed with ([`Credentials`]; their `Debug` and `Display` never
//! show the secret). Every builder has `.tls(...)` and `.credentials(...)`:
//!
//! ```no_run
//! # async fn demo() -> ringmq_client::Result<()> {
//! use ringmq_client::{Credentials, Producer, TlsOptions};
//!
//! let producer = Producer::builder()
//!     .group("order-service")
//!     .name_servers("127.0.0.1:9876")
//!     .tls(TlsOptions::with_ca("/etc/ringmq/ca.pem"))
//!     .credentials(Credentials::new("order-service", std::env::var("RINGMQ_SECRET_KEY").unwrap_or_default()))
//!     .start()
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! ## Transactions
//!
//! A [`TransactionProducer`] makes a message and a local transaction succeed or fail
//! together: [`TransactionProducer::send_in_transaction`] stores the message as a hidden
//! *half*, runs the executor (the local transaction), and sends its decision: Commit
//! (delivered), Rollback (never delivered) or Unknown (nothing sent). The broker checks back
//! a half left undecided after `transactionTimeOut` with a live producer of the group, whose
//! checker answers; see [`producer::TransactionProducer`] and `docs/transactions.md`.
//!
//! ```no_run
//! # async fn demo() -> ringmq_client::Result<()> {
//! use ringmq_client::{Message, TransactionProducer, TransactionState};
//!
//! let producer = TransactionProducer::builder()
//!     .group("order-service")
//!     .name_servers("127.0.0.1:9876")
//!     .executor(|_half, order: u64| async move {
//!         // write order `order` to the database, then:
//!         TransactionState::Commit
//!     })
//!     .checker(|_check| async { TransactionState::Rollback }) // look the order up
//!     .start()
//!     .await?;
//! let r = producer.send_in_transaction(Message::new("Orders", "order 42 created"), 42).await?;
//! println!("{:?}, {:?}", r.state, r.end);
//! # Ok(()) }
//! ```
//!
//! ## Request-reply
//!
//! [`Producer::request`] sends a message and waits for its reply; a replier consuming the
//! topic answers with [`Producer::send_reply`]`(`[`Reply::to`]`(&request, body)?)` and the
//! broker pushes the reply back to the requester. No reply within the timeout:
//! [`Error::RequestTimeout`]. See `docs/consumers.md`, "Request-reply".
//!
//! ```no_run
//! # async fn demo(producer: ringmq_client::Producer) -> ringmq_client::Result<()> {
//! use std::time::Duration;
//! use ringmq_client::Message;
//!
//! let reply = producer
//!     .request(Message::new("Quotes", "item-7"), Duration::from_secs(3))
//!     .await?;
//! println!("{:?}", reply.body);
//! # Ok(()) }
//! ```
//!
//! # Consuming
//!
//! ```no_run
//! # async fn demo() -> ringmq_client::Result<()> {
//! use ringmq_client::{ConsumeResult, PushConsumer, ReceivedMessage, StartPosition};
//!
//! let consumer = PushConsumer::builder()
//!     .group("billing")
//!     .name_servers("127.0.0.1:9876")
//!     .subscribe("Orders", "created || paid")
//!     .start_position(StartPosition::First)
//!     .start(|msgs: Vec<ReceivedMessage>, _ctx| async move {
//!         for m in &msgs {
//!             println!("{} {:?}", m.msg_id, m.body);
//!         }
//!         ConsumeResult::Success // Retry: handed back to the broker, comes again later
//!     })
//!     .await?;
//! // ... later
//! consumer.shutdown().await; // commits offsets, leaves the group
//! # Ok(()) }
//! ```
//!
//! The [`PushConsumer`] long-polls each of its queues and calls the listener with batches
//! (`consume_batch_max`), at most `consume_concurrency` calls at once. Delivery is
//! at-least-once: a queue's offset is committed only up to the first message the listener
//! has not succeeded on and that was not handed back to the broker. Offsets are committed
//! every `commit_interval`, when a queue moves to another member, and at shutdown, so a
//! restarted group continues where it left off.
//!
//! A listener that reads a few fields of many messages can take them in place instead:
//! [`PushConsumerBuilder::start_batch`](consumer::PushConsumerBuilder::start_batch) calls a
//! [`BatchListener`] with a [`MessageBatch`] (the pulled bytes, shared; each [`MessageView`]
//! reads its record without copying it, a property by a scan of the record's properties, the
//! message id only when asked), with the same calls, retries and ordering. A
//! `Vec<ReceivedMessage>` listener pays an owned copy of every message (strings and a map of
//! its properties); `ringmq-perf`'s consumers use batches.
//!
//! A body that a RocketMQ producer compressed (zlib, LZ4 or ZSTD, marked in the record's
//! SYSFLAG) reaches the application inflated, COMPRESSED cleared; one that cannot be
//! inflated arrives as stored and still marked ([`ReceivedMessage::body_compressed`]). See
//! [`inflate`].
//!
//! ## Retries and dead letters
//!
//! In a clustering group, a batch the listener fails ([`ConsumeResult::Retry`] or a panic)
//! is handed back to the broker message by message (CONSUMER_SEND_MSG_BACK) and its offsets
//! count as consumed, so one poison message does not stop its queue. The broker stores each
//! in the group's retry topic `%RETRY%<group>`, which every member consumes by itself, after
//! a delay that grows with each retry (delay level `3 + retries`: 10 s, 30 s, 1 min, ...);
//! a retried message reaches the listener with its original `topic` and its
//! `reconsume_times` counted up. After `max_reconsume_times` retries (default: the group's
//! limit on the broker, 16) the broker moves it to the dead-letter topic `%DLQ%<group>`,
//! which can be read like any topic. A message whose hand-back fails (e.g. its master is
//! down) is handed to the listener again by the consumer itself after `redeliver_backoff`,
//! as is every failed message of a broadcasting member. [`PullConsumer::send_back`] does
//! the hand-back by hand.
//!
//! ## Orderly consumption
//!
//! With `orderly(true)` each queue's messages go to the listener one call at a time, in
//! queue order, and in a clustering group only while this member holds the queue's lock on
//! its broker (LOCK_BATCH_MQ, renewed every `lock_renew_interval`, 20 s), so two members never
//! consume one queue at once, also while queues move between members. A failed call
//! suspends the queue for `suspend_current_queue` (1 s) and hands the same messages over
//! again; a message still failing after `max_reconsume_times` retries (16 when unset) goes to
//! the dead-letter topic and the queue goes on. A released queue is committed, then
//! unlocked; a member that dies loses its locks when its connections close.
//!
//! ## Membership
//!
//! [`MessageModel::Clustering`] (default) balances a group's queues across its members:
//! every member takes its share of the sorted queue list by the broker's sorted member list
//! ([`consumer::allocate_average`]). It is computed again when a broker tells the members
//! that the group changed (NOTIFY_CONSUMER_IDS_CHANGED, sent when a member joins, leaves,
//! or its connection closes), every `rebalance_interval` (20 s) as a fallback, and soon
//! again while queues of the assignment could not be taken yet. A member heartbeats to
//! every broker it reads (master and slaves) before its first rebalance and every
//! `heartbeat_interval`, so its first rebalance already counts it.
//! [`MessageModel::Broadcasting`] gives every member every queue and keeps its offsets in a
//! local file (`offset_dir`). A queue with no committed offset starts at
//! [`StartPosition::First`], [`StartPosition::Last`] (default) or
//! [`StartPosition::Timestamp`].
//!
//! The [`PullConsumer`] lets the caller pull: directly (any queue, any offset, long polling
//! optional, explicit commits), or managed ([`PullConsumer::assign`] or
//! [`PullConsumer::subscribe`], then [`PullConsumer::poll`] and
//! [`PullConsumer::commit_positions`]).
//!
//! ## Masters and slaves
//!
//! A broker name may have slaves (`brokerRole=SLAVE`, broker id 1, 2, ...): they replicate
//! their master and hold the same queues at the same offsets. **Producers only ever send to
//! masters.** Consumers (push, and pull in every mode) read a queue from its master while
//! the master is reachable and listed by the name servers. When it is not (connection
//! refused, lost or timed out, SERVICE_NOT_AVAILABLE, or the master expired from the
//! route) they move that broker's reads to its slave with the lowest broker id, at once (the
//! failed request is sent to the slave right away):
//!
//! - each queue keeps its in-memory position, so nothing is read again; a queue taken while
//!   the master is down starts from the group's committed offset as the slave has it (it
//!   copies its master's every 5 s) or from the start position;
//! - offsets are committed to the slave while the master is down (UPDATE_CONSUMER_OFFSET
//!   and the offset carried by pulls), and to the master again once reads are back on it
//!   (every queue commits again after a switch);
//! - a slave that is behind the consumer (it has not replicated what was already read from
//!   the master) is treated as having nothing new: the consumer waits for it (or for the
//!   master) and never rewinds to the slave's end;
//! - while any broker is read from a slave, the consumer fetches its routes again and tries
//!   the master's shards every `master_probe_interval` (5 s): reads go back to the master as
//!   soon as it accepts connections again or the name servers list it again. A pull already
//!   parked on the slave finishes first (at most `long_poll`).
//!
//! Heartbeats go to every replica, and the group's member list is asked of a slave when no
//! master answers, so rebalancing keeps working while masters are down; the consumable
//! queues ([`route::TopicRouteInfo::consume_queues`]) include those of a broker that has only
//! a slave left. Delivery stays at-least-once: a batch in flight at a switch may come again.
//! Offsets committed to a slave are not copied back to the master (the slave copies the
//! master's, never the reverse): a member that takes a queue after the master returned, and
//! before the running members committed to it again, starts from the master's older offset.
//!
//! ## Message trace
//!
//! `.trace(true)` on a [`ProducerBuilder`] or a
//! [`PushConsumerBuilder`](consumer::PushConsumerBuilder) records each send and listener call
//! to the trace topic in RocketMQ's format, off the traced path (a bounded queue and a
//! background producer); [`Admin::message_trace`] reads a message's timeline back. See
//! [`trace`].
//!
//! See `client/examples/` for runnable programs (`producer`, `ordered_producer`,
//! `transaction`, `request_reply`, `push_consumer`, `pull_consumer`, `orderly`, `trace`)
//! against `ringmq standalone`.
#![forbid(unsafe_code)]

pub use ringmq_wire as wire;

pub mod admin;
mod background;
pub mod batch;
#[cfg(feature = "cli")]
pub mod cli;
pub mod compress;
pub mod consumer;
pub mod error;
pub mod inflate;
mod instance;
pub mod message;
mod net;
pub mod producer;
pub mod route;
pub mod security;
pub mod tls;
pub mod trace;

pub use admin::Admin;
pub use batch::{MessageBatch, MessageView};
pub use consumer::{
    BatchListener, ConsumeContext, ConsumeResult, MessageListener, MessageModel, MessageSelector,
    PoppedMessage, PullConsumer, PullResult, PullStatus, PushConsumer, SimpleConsumer,
    StartPosition,
};
pub use error::{Error, Outcome, Result};
pub use instance::ClientConfig;
pub use message::{Message, ReceivedMessage};
pub use net::InProcess;
pub use producer::{
    EndOutcome, HalfMessage, Producer, ProducerBuilder, QueueSelector, Reply, SendHandle,
    SendResult, SendStatus, TransactionCheck, TransactionProducer, TransactionProducerBuilder,
    TransactionSendResult, TransactionState,
};
pub use route::MessageQueue;
pub use security::Credentials;
pub use tls::TlsOptions;
