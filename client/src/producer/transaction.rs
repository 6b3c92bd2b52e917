//! The transaction producer (RocketMQ's `TransactionMQProducer`): a message and a local
//! transaction succeed or fail together.
//!
//! [`TransactionProducer::send_in_transaction`] sends the message as a *half* message (the
//! prepared sysflag and `TRAN_MSG=true`, with the producer group): the broker stores it
//! hidden from consumers. Then the executor runs the local transaction and decides
//! [`TransactionState::Commit`], [`TransactionState::Rollback`] or
//! [`TransactionState::Unknown`]; a commit or rollback is sent to the broker that stored
//! the half (END_TRANSACTION), Unknown sends nothing. A committed message is delivered like
//! any other; a rolled-back one never.
//!
//! A half left undecided (Unknown, an END_TRANSACTION that was lost, a producer that died
//! in between) is checked back by the broker after `transactionTimeOut`: it asks a live
//! producer of the group (CHECK_TRANSACTION_STATE over the connection of that producer's
//! latest heartbeat), whose checker answers, and the answer goes back as END_TRANSACTION
//! with `from_transaction_check` set. For that, a transaction producer heartbeats every
//! master the name servers list (at start, then every `heartbeat_interval`), and again at
//! once on a broker's connection that a half was sent to and that has not carried a
//! heartbeat yet (a new connection after a broker restart).
//!
//! Invariants: the executor runs only after the half is stored; END_TRANSACTION names the
//! half by the offsets the broker answered and goes to the broker that stored it; at most
//! [`CHECKS_QUEUED_MAX`] check-backs wait and `checks_in_flight_max` run at once (more are
//! dropped and asked again by the broker later).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ringmq_wire::command::transaction::EndTransactionRequest;
use tokio::sync::mpsc;

use super::send::{self, Form};
use super::transaction_end::{
    end_transaction, Checker, TransactionCheck, TransactionFuture, TransactionState,
};
use super::{Pick, Producer, ProducerBuilder, ProducerConfig};
use crate::error::{Error, Result};
use crate::instance::{client_setters, ClientConfig};
use crate::message::Message;
use crate::route::MessageQueue;
use crate::SendResult;

/// Check-backs waiting for the checker, per producer; more are dropped (the broker asks
/// again at its next check interval).
pub const CHECKS_QUEUED_MAX: usize = 4096;
/// Checker calls running at once, by default.
pub const CHECKS_IN_FLIGHT_MAX_DEFAULT: usize = 32;

type Executor<A> = Arc<dyn Fn(HalfMessage, A) -> TransactionFuture + Send + Sync>;
/// A stored half message, handed to the executor.
#[derive(Debug, Clone)]
pub struct HalfMessage {
    /// The message's unique key (`UNIQ_KEY`); a check-back names the same id.
    pub transaction_id: String,
    pub message: Message,
    /// How the broker stored the half: `queue` is the real queue, `queue_offset` the
    /// half's offset in the hidden half queue.
    pub half: SendResult,
}

/// What became of a transaction's END_TRANSACTION.
#[derive(Debug)]
pub enum EndOutcome {
    /// The broker acknowledged the commit or rollback (also "already committed / rolled
    /// back").
    Acknowledged,
    /// The executor answered Unknown: nothing was sent; the broker checks back.
    NotSent,
    /// The decision may not have reached the broker (or it refused it); the half is checked
    /// back and the checker's answer decides.
    Failed(Error),
}

/// The result of [`TransactionProducer::send_in_transaction`].
#[derive(Debug)]
pub struct TransactionSendResult {
    pub transaction_id: String,
    /// The half's send result.
    pub half: SendResult,
    /// The executor's decision.
    pub state: TransactionState,
    pub end: EndOutcome,
}

/// Builds a [`TransactionProducer`]: a producer group, an executor and a checker.
pub struct TransactionProducerBuilder<A> {
    client: ClientConfig,
    cfg: ProducerConfig,
    executor: Option<Executor<A>>,
    checker: Option<Checker>,
    checks_in_flight_max: usize,
}

impl<A> std::fmt::Debug for TransactionProducerBuilder<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransactionProducerBuilder")
            .field("client", &self.client)
            .field("cfg", &self.cfg)
            .field("executor", &self.executor.is_some())
            .field("checker", &self.checker.is_some())
            .finish()
    }
}

impl<A: Send + 'static> TransactionProducerBuilder<A> {
    client_setters!();

    /// The producer group (required): the broker checks back with any live producer of it.
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.cfg.group = group.into();
        self
    }

    /// Runs the local transaction once the half is stored (required). Gets the half and
    /// the `arg` of [`TransactionProducer::send_in_transaction`].
    pub fn executor<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(HalfMessage, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = TransactionState> + Send + 'static,
    {
        self.executor = Some(Arc::new(move |h, a| Box::pin(f(h, a))));
        self
    }

    /// Answers the broker's check-backs (required): how did the local transaction of this
    /// half end? Unknown leaves it to the next check.
    pub fn checker<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(TransactionCheck) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = TransactionState> + Send + 'static,
    {
        self.checker = Some(Arc::new(move |c| Box::pin(f(c))));
        self
    }

    /// More attempts (default 2) for a half that certainly did not reach the broker, and
    /// for an END_TRANSACTION that failed without a refusal (sending a decision twice is
    /// harmless).
    pub fn retries(mut self, n: u32) -> Self {
        self.cfg.retries = n;
        self
    }

    /// Overall time for the half's send, retries included (default 3 s).
    pub fn send_timeout(mut self, t: Duration) -> Self {
        self.cfg.send_timeout = t;
        self
    }

    pub fn message_bytes_max(mut self, n: usize) -> Self {
        self.cfg.message_bytes_max = n;
        self
    }

    /// How often the producer heartbeats every master (default 30 s). A broker checks back
    /// only producers whose heartbeat it has.
    pub fn heartbeat_interval(mut self, t: Duration) -> Self {
        self.cfg.heartbeat_interval = t;
        self
    }

    /// Checker calls running at once (default [`CHECKS_IN_FLIGHT_MAX_DEFAULT`]).
    pub fn checks_in_flight_max(mut self, n: usize) -> Self {
        self.checks_in_flight_max = n;
        self
    }

    /// Starts the producer: heartbeats every master the name servers list (so check-backs
    /// can reach it from now on) and starts its timers and its check-back task.
    pub async fn start(self) -> Result<TransactionProducer<A>> {
        let (Some(executor), Some(checker)) = (self.executor, self.checker) else {
            return Err(Error::Config(
                "a transaction producer needs an executor and a checker".into(),
            ));
        };
        if self.checks_in_flight_max == 0 {
            return Err(Error::Config(
                "checks_in_flight_max must be above zero".into(),
            ));
        }
        let producer = ProducerBuilder {
            client: self.client,
            cfg: self.cfg,
            heartbeat_every_master: true,
            trace: None,
        }
        .start()
        .await?;
        let inner = &producer.inner;
        let (tx, rx) = mpsc::channel(CHECKS_QUEUED_MAX);
        inner
            .inst
            .pool
            .inbox()
            .register_checker(&inner.cfg.group, tx);
        inner
            .background
            .push(tokio::spawn(super::transaction_check::answer(
                Arc::downgrade(inner),
                rx,
                checker,
                self.checks_in_flight_max,
            )));
        super::heartbeat_all(inner).await;
        Ok(TransactionProducer { producer, executor })
    }
}

/// A transaction producer. Cheap to clone (clones share connections, the executor and the
/// checker). Its plain sends are those of [`TransactionProducer::producer`].
pub struct TransactionProducer<A = ()> {
    producer: Producer,
    executor: Executor<A>,
}

impl<A> Clone for TransactionProducer<A> {
    fn clone(&self) -> Self {
        TransactionProducer {
            producer: self.producer.clone(),
            executor: Arc::clone(&self.executor),
        }
    }
}

impl<A> std::fmt::Debug for TransactionProducer<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransactionProducer")
            .field("producer", &self.producer)
            .finish_non_exhaustive()
    }
}

impl<A: Send + 'static> TransactionProducer<A> {
    /// A builder; `A` is the type of the argument handed through to the executor.
    pub fn builder() -> TransactionProducerBuilder<A> {
        let ProducerBuilder { client, cfg, .. } = Producer::builder();
        TransactionProducerBuilder {
            client,
            cfg,
            executor: None,
            checker: None,
            checks_in_flight_max: CHECKS_IN_FLIGHT_MAX_DEFAULT,
        }
    }

    /// Sends `msg` as a half message, runs the executor with `arg`, and sends its decision.
    ///
    /// `Err` only when the half was not stored (or its outcome is unknown): then the
    /// executor did not run. Once the half is stored the result says what the executor
    /// decided and whether the broker got the decision ([`EndOutcome`]); a decision that did
    /// not get through is asked for again by the broker's check-back. A panic in the
    /// executor reaches the caller; the half stays undecided and is checked back, as when
    /// this future is dropped before the executor returns.
    pub async fn send_in_transaction(&self, msg: Message, arg: A) -> Result<TransactionSendResult> {
        let inner = &self.producer.inner;
        let half = send::send(
            inner,
            std::slice::from_ref(&msg),
            Pick::Any,
            None,
            Form::Half,
        )
        .await?;
        let transaction_id = half.unique_key.clone();
        let endpoint = inner.inst.queue_endpoint(&half.queue).await;
        let state = (self.executor)(
            HalfMessage {
                transaction_id: transaction_id.clone(),
                message: msg,
                half: half.clone(),
            },
            arg,
        )
        .await;
        let end = match (state, endpoint) {
            (TransactionState::Unknown, _) => EndOutcome::NotSent,
            (_, Err(e)) => EndOutcome::Failed(e),
            (_, Ok((addr, shard))) => {
                let req = EndTransactionRequest {
                    producer_group: inner.cfg.group.clone(),
                    resolution: state.into(),
                    half_queue_offset: half.queue_offset,
                    physical_offset: half_physical_offset(&half),
                    message_id: half.msg_id.clone(),
                    transaction_id: transaction_id.clone(),
                    from_transaction_check: false,
                };
                match end_transaction(inner, addr, shard, &req).await {
                    Ok(()) => EndOutcome::Acknowledged,
                    Err(e) => EndOutcome::Failed(e),
                }
            }
        };
        Ok(TransactionSendResult {
            transaction_id,
            half,
            state,
            end,
        })
    }

    // ---- Decisions sent later (a protocol edge relaying another client's decision) ----

    /// Sends the decision `state` (Commit or Rollback) for a half this producer stored
    /// earlier ([`TransactionSendResult::half`], whose executor answered Unknown), to the
    /// broker that stored it: for a client that decides after the send returned (ringmq's
    /// gRPC edge relays RocketMQ 5's EndTransaction this way). Unknown sends nothing.
    pub async fn end_later(
        &self,
        half: &SendResult,
        transaction_id: &str,
        state: TransactionState,
    ) -> Result<()> {
        if state == TransactionState::Unknown {
            return Ok(());
        }
        let inner = &self.producer.inner;
        let (addr, shard) = inner.inst.queue_endpoint(&half.queue).await?;
        let req = EndTransactionRequest {
            producer_group: inner.cfg.group.clone(),
            resolution: state.into(),
            half_queue_offset: half.queue_offset,
            physical_offset: half_physical_offset(half),
            message_id: half.msg_id.clone(),
            transaction_id: transaction_id.to_string(),
            from_transaction_check: false,
        };
        end_transaction(inner, addr, shard, &req).await
    }

    /// The plain producer underneath (same group and connections), for ordinary sends.
    pub fn producer(&self) -> &Producer {
        &self.producer
    }

    /// The client id this producer announces.
    pub fn client_id(&self) -> &str {
        self.producer.client_id()
    }

    /// The writable queues of a topic.
    pub async fn write_queues(&self, topic: &str) -> Result<Vec<MessageQueue>> {
        self.producer.write_queues(topic).await
    }

    /// Stops answering check-backs, stops the timers, unregisters the group from the
    /// brokers and closes every connection. Undecided halves are checked back with the
    /// group's other producers.
    pub async fn shutdown(&self) {
        let inner = &self.producer.inner;
        inner.inst.pool.inbox().unregister_checker(&inner.cfg.group);
        self.producer.shutdown().await;
    }
}

/// The half's CommitLog offset, from its offset message id.
fn half_physical_offset(half: &SendResult) -> u64 {
    ringmq_wire::record::parse_message_id(&half.msg_id).map_or(0, |(_, off)| off)
}
