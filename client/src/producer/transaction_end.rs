//! The end of a transaction, shared by the transaction producer (`transaction.rs`, the
//! executor's decision) and its check-backs (`transaction_check.rs`, the checker's): the
//! decision ([`TransactionState`]), what a checker is asked ([`TransactionCheck`]), and the
//! END_TRANSACTION that carries a decision to the broker that stored the half
//! ([`end_transaction`]).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use ringmq_wire::code::RequestCode;
use ringmq_wire::command::transaction::{EndTransactionRequest, TransactionResolution};
use tokio::time::Instant;

use super::retry::BUSY_RETRY_PAUSE;
use super::Inner;
use crate::error::{Error, Outcome, Result};
use crate::message::ReceivedMessage;

/// How a local transaction ended (RocketMQ's `LocalTransactionState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransactionState {
    /// Deliver the message.
    Commit,
    /// Never deliver it.
    Rollback,
    /// Not known yet: the broker checks back later and the checker decides.
    Unknown,
}

impl From<TransactionState> for TransactionResolution {
    fn from(s: TransactionState) -> Self {
        match s {
            TransactionState::Commit => TransactionResolution::Commit,
            TransactionState::Rollback => TransactionResolution::Rollback,
            TransactionState::Unknown => TransactionResolution::Unknown,
        }
    }
}

/// What an executor or checker returns.
pub type TransactionFuture = Pin<Box<dyn Future<Output = TransactionState> + Send>>;
pub(super) type Checker = Arc<dyn Fn(TransactionCheck) -> TransactionFuture + Send + Sync>;

/// A broker's question about an undecided half, handed to the checker.
#[derive(Debug, Clone)]
pub struct TransactionCheck {
    /// The id [`HalfMessage::transaction_id`](super::HalfMessage::transaction_id) had.
    pub transaction_id: String,
    /// The broker that asked (and gets the answer).
    pub broker: SocketAddr,
    /// The half as stored, with its real `topic` and `queue_id` (`broker_name` is empty:
    /// the broker is named by address). Its properties include the broker's `REAL_TOPIC`,
    /// `REAL_QID` and `PGROUP`.
    pub message: ReceivedMessage,
}

/// Sends END_TRANSACTION to `addr` and waits for the answer; retried (within the send
/// timeout) unless the broker refused it: a decision that may have arrived is safe to send
/// again, as the broker answers the same decision "already committed / rolled back".
pub(super) async fn end_transaction(
    inner: &Inner,
    addr: SocketAddr,
    shard: Option<u16>,
    req: &EndTransactionRequest,
) -> Result<()> {
    let deadline = Instant::now() + inner.cfg.send_timeout;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let result = async {
            let answer = inner
                .inst
                .broker_call(
                    addr,
                    shard,
                    RequestCode::EndTransaction,
                    req,
                    &[],
                    inner.inst.cfg.request_timeout,
                )
                .await?;
            let status = answer.status()?;
            if status.message_stored() {
                Ok(())
            } else {
                Err(answer.error(status))
            }
        }
        .await;
        let e = match result {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        if e.outcome() == Outcome::Rejected
            || attempt > inner.cfg.retries
            || Instant::now() >= deadline
        {
            return Err(e);
        }
        let pause = match &e {
            Error::Backoff { retry_in, .. } => *retry_in,
            _ => BUSY_RETRY_PAUSE,
        };
        tokio::time::sleep_until((Instant::now() + pause).min(deadline)).await;
    }
}
