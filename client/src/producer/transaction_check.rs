//! Check-backs of a transaction producer: the inbox hands each CHECK_TRANSACTION_STATE of
//! the producer's group to [`answer`] (a bounded channel), which runs the checker, at most
//! `in_flight_max` at once, and answers the broker that asked with END_TRANSACTION
//! (`from_transaction_check` set, the offsets of the broker's request).
//!
//! The task holds the producer only weakly and its checker calls are aborted with it, so a
//! dropped producer stops answering at once (as a dead process would). A checker that
//! panics answers nothing: the broker asks again at its next check.

use std::sync::Weak;

use ringmq_wire::command::transaction::EndTransactionRequest;
use ringmq_wire::properties::keys;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::transaction_end::{end_transaction, Checker, TransactionCheck, TransactionState};
use super::Inner;
use crate::error::{Error, Result};
use crate::message::ReceivedMessage;
use crate::net::inbox::CheckBack;

/// Answers the check-backs that arrive on `rx` until it closes (or the task is aborted).
pub(super) async fn answer(
    weak: Weak<Inner>,
    mut rx: mpsc::Receiver<CheckBack>,
    checker: Checker,
    in_flight_max: usize,
) {
    let mut running = JoinSet::new();
    loop {
        tokio::select! {
            got = rx.recv(), if running.len() < in_flight_max => {
                let Some(c) = got else { break };
                running.spawn(answer_one(weak.clone(), checker.clone(), c));
            }
            Some(done) = running.join_next(), if !running.is_empty() => {
                if let Err(e) = done {
                    if e.is_panic() {
                        log::warn!("the transaction checker panicked; the broker asks again later");
                    }
                }
            }
        }
    }
    while running.join_next().await.is_some() {}
}

async fn answer_one(weak: Weak<Inner>, checker: Checker, c: CheckBack) {
    let check = match check_of(&c) {
        Ok(check) => check,
        Err(e) => {
            log::warn!("{}: check-back with a bad half record: {e}", c.broker);
            return;
        }
    };
    let state = checker(check).await;
    let Some(inner) = weak.upgrade() else { return };
    if inner.check_open().is_err() {
        return;
    }
    let req = EndTransactionRequest {
        producer_group: inner.cfg.group.clone(),
        resolution: state.into(),
        half_queue_offset: c.request.half_queue_offset,
        physical_offset: c.request.physical_offset,
        message_id: c.request.message_id.clone(),
        transaction_id: c.request.transaction_id.clone(),
        from_transaction_check: true,
    };
    match end_transaction(&inner, c.broker, None, &req).await {
        Ok(()) => log::debug!(
            "{}: check-back of {} answered {state:?}",
            c.broker,
            c.request.transaction_id
        ),
        Err(e) if state == TransactionState::Unknown => log::debug!(
            "{}: answering Unknown to the check-back of {}: {e}",
            c.broker,
            c.request.transaction_id
        ),
        Err(e) => log::warn!(
            "{}: answering {state:?} to the check-back of {}: {e}",
            c.broker,
            c.request.transaction_id
        ),
    }
}

/// The checker's view of a check-back: the half with its real topic and queue.
fn check_of(c: &CheckBack) -> Result<TransactionCheck> {
    let r = ringmq_wire::record::decode_one(&c.record)?;
    let mut message = ReceivedMessage::from_record(&c.record, &r, "");
    if let Some(t) = r.property(keys::REAL_TOPIC) {
        message.topic = t.to_string();
    }
    if let Some(q) = r.property(keys::REAL_QID) {
        message.queue_id = q
            .parse()
            .map_err(|_| Error::InvalidMessage(format!("half with REAL_QID {q:?}")))?;
    }
    Ok(TransactionCheck {
        transaction_id: c.request.transaction_id.clone(),
        broker: c.broker,
        message,
    })
}
