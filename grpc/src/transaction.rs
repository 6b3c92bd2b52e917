//! Transactions over gRPC: the half message, the client's later decision, and the
//! broker's check-back, through the native [`TransactionProducer`].
//!
//! - A SendMessage of type TRANSACTION is sent as a native half by a transaction producer
//!   whose group is the topic's name (as RocketMQ's proxy registers gRPC producers); its
//!   executor answers Unknown, so nothing is decided at send time. The half's send result is
//!   kept by transaction id (the client's message id) until the client's EndTransaction.
//! - EndTransaction from the client (SOURCE_CLIENT): the kept half's decision goes to the
//!   broker that stored it ([`TransactionProducer::end_later`]).
//! - Check-back: the broker asks the native producer of the group (the topic); its checker
//!   sends RecoverOrphanedTransactionCommand on the Telemetry stream of a live gRPC producer
//!   of that topic and waits (at most [`CHECK_ANSWER_WAIT`]) for that client's
//!   EndTransaction (SOURCE_SERVER_CHECK), whose decision the native producer then sends.
//!   No producer of the topic, no answer in time: Unknown (the broker asks again later).
//!
//! Bounded: [`TXN_PRODUCERS_MAX`] topics with a transaction producer, [`HALVES_MAX`] kept
//! halves (the oldest dropped first: its transaction is decided by the check-back), and
//! [`CHECKS_MAX`] check-backs waiting for their client.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ringmq_client::{
    ClientConfig, Message, SendResult, TransactionCheck, TransactionProducer, TransactionState,
};
use tokio::sync::oneshot;

use crate::clients::Clients;
use crate::convert::received_to_pb;
use crate::pb::{self, telemetry_command::Command, Code, TransactionResolution, TransactionSource};
use crate::route::topic_name;
use crate::status::{from_error, ok, status};

/// Topics with a transaction producer of their own.
pub(crate) const TXN_PRODUCERS_MAX: usize = 256;
/// Halves kept for their client's decision.
pub(crate) const HALVES_MAX: usize = 65_536;
/// Check-backs waiting for a client's decision at once.
pub(crate) const CHECKS_MAX: usize = 4096;
/// How long a check-back waits for the client's decision.
pub(crate) const CHECK_ANSWER_WAIT: Duration = Duration::from_secs(10);

/// Kept halves: transaction id -> (topic, the half's send result), oldest first out.
#[derive(Default)]
struct Halves {
    map: HashMap<String, (String, SendResult)>,
    order: VecDeque<String>,
}

/// What the checkers share with the edge.
struct Shared {
    clients: Arc<Clients>,
    halves: Mutex<Halves>,
    /// Check-backs waiting for their client's EndTransaction, by transaction id.
    checks: Mutex<HashMap<String, oneshot::Sender<TransactionState>>>,
}

/// The edge's transactions (see the module docs).
pub(crate) struct Transactions {
    native: ClientConfig,
    producers: tokio::sync::Mutex<HashMap<String, TransactionProducer<()>>>,
    shared: Arc<Shared>,
}

impl Transactions {
    /// `native`: name servers and credentials of the edge's transaction producers.
    pub(crate) fn new(native: ClientConfig, clients: Arc<Clients>) -> Transactions {
        Transactions {
            native,
            producers: tokio::sync::Mutex::new(HashMap::new()),
            shared: Arc::new(Shared {
                clients,
                halves: Mutex::new(Halves::default()),
                checks: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Sends `msg` as a half of `topic`; the entry answers the transaction id.
    pub(crate) async fn send_half(&self, topic: &str, msg: Message) -> pb::SendResultEntry {
        let producer = match self.producer(topic).await {
            Ok(p) => p,
            Err(s) => {
                return pb::SendResultEntry {
                    status: Some(s),
                    ..Default::default()
                }
            }
        };
        let id = msg.unique_key.clone().unwrap_or_default();
        match producer.send_in_transaction(msg, ()).await {
            Ok(r) => {
                let entry = pb::SendResultEntry {
                    status: Some(ok()),
                    message_id: id,
                    transaction_id: r.transaction_id.clone(),
                    offset: i64::try_from(r.half.queue_offset).unwrap_or(i64::MAX),
                    recall_handle: String::new(),
                };
                self.shared.keep(r.transaction_id, topic, r.half);
                entry
            }
            Err(e) => pb::SendResultEntry {
                status: Some(from_error(&e)),
                ..Default::default()
            },
        }
    }

    /// EndTransaction.
    pub(crate) async fn end(&self, req: pb::EndTransactionRequest) -> pb::EndTransactionResponse {
        let answer = |s| pb::EndTransactionResponse { status: Some(s) };
        let topic = match topic_name(req.topic.as_ref()) {
            Ok(t) => t,
            Err(s) => return answer(s),
        };
        if req.transaction_id.is_empty() {
            return answer(status(
                Code::InvalidTransactionId,
                "transaction id is empty",
            ));
        }
        let state = match TransactionResolution::try_from(req.resolution) {
            Ok(TransactionResolution::Commit) => TransactionState::Commit,
            Ok(TransactionResolution::Rollback) => TransactionState::Rollback,
            _ => {
                return answer(status(
                    Code::BadRequest,
                    "the resolution is neither COMMIT nor ROLLBACK",
                ))
            }
        };
        if req.source == TransactionSource::SourceServerCheck as i32 {
            let waiting = self.shared.lock_checks().remove(&req.transaction_id);
            if let Some(tx) = waiting {
                let _ = tx.send(state);
                self.shared.take(&req.transaction_id);
                return answer(ok());
            }
        }
        let Some((half_topic, half)) = self.shared.take(&req.transaction_id) else {
            return answer(status(
                Code::InvalidTransactionId,
                "no undecided half with this transaction id here (the broker's check-back decides it)",
            ));
        };
        if half_topic != topic {
            return answer(status(
                Code::InvalidTransactionId,
                format!(
                    "transaction {} is of topic {half_topic}",
                    req.transaction_id
                ),
            ));
        }
        let producer = match self.producer(&topic).await {
            Ok(p) => p,
            Err(s) => return answer(s),
        };
        match producer.end_later(&half, &req.transaction_id, state).await {
            Ok(()) => answer(ok()),
            Err(e) => answer(from_error(&e)),
        }
    }

    /// Stops every transaction producer.
    pub(crate) async fn shutdown(&self) {
        for (_, p) in self.producers.lock().await.drain() {
            p.shutdown().await;
        }
    }

    /// The transaction producer of `topic` (its group), started on first use.
    async fn producer(&self, topic: &str) -> Result<TransactionProducer<()>, pb::Status> {
        let mut map = self.producers.lock().await;
        if let Some(p) = map.get(topic) {
            return Ok(p.clone());
        }
        if map.len() >= TXN_PRODUCERS_MAX {
            return Err(status(
                Code::TooManyRequests,
                format!("transactions on more than {TXN_PRODUCERS_MAX} topics"),
            ));
        }
        let shared = Arc::clone(&self.shared);
        let mut b = TransactionProducer::<()>::builder()
            .group(topic)
            .name_servers(&self.native.name_servers.join(";"))
            .tls(self.native.tls.clone())
            .executor(|_half, ()| async { TransactionState::Unknown })
            .checker(move |check| {
                let shared = Arc::clone(&shared);
                async move { shared.check(check).await }
            });
        if let Some(c) = &self.native.credentials {
            b = b.credentials(c.clone());
        }
        if let Some(p) = &self.native.in_process {
            b = b.in_process(p.clone());
        }
        let p = b.start().await.map_err(|e| from_error(&e))?;
        map.insert(topic.to_string(), p.clone());
        Ok(p)
    }
}

impl Shared {
    fn keep(&self, transaction_id: String, topic: &str, half: SendResult) {
        let mut h = self.halves.lock().unwrap_or_else(|p| p.into_inner());
        while h.map.len() >= HALVES_MAX {
            let Some(old) = h.order.pop_front() else {
                break;
            };
            h.map.remove(&old);
        }
        if h.map
            .insert(transaction_id.clone(), (topic.to_string(), half))
            .is_none()
        {
            h.order.push_back(transaction_id);
        }
    }

    fn take(&self, transaction_id: &str) -> Option<(String, SendResult)> {
        let mut h = self.halves.lock().unwrap_or_else(|p| p.into_inner());
        let out = h.map.remove(transaction_id);
        if out.is_some() {
            h.order.retain(|t| t != transaction_id);
        }
        out
    }

    fn lock_checks(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<TransactionState>>> {
        // Every update is one insert or remove: a poisoned map is still whole.
        self.checks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A check-back: asks a live gRPC producer of the topic and waits for its decision.
    async fn check(&self, check: TransactionCheck) -> TransactionState {
        let topic = check.message.topic.clone();
        let Some(tx) = self.clients.publisher_of(&topic) else {
            log::debug!(
                "check-back of {}: no gRPC producer of {topic} is connected",
                check.transaction_id
            );
            return TransactionState::Unknown;
        };
        let (answer_tx, answer_rx) = oneshot::channel();
        {
            let mut checks = self.lock_checks();
            if checks.len() >= CHECKS_MAX {
                return TransactionState::Unknown;
            }
            checks.insert(check.transaction_id.clone(), answer_tx);
        }
        let cmd = pb::TelemetryCommand {
            status: None,
            command: Some(Command::RecoverOrphanedTransactionCommand(
                pb::RecoverOrphanedTransactionCommand {
                    message: Some(received_to_pb(&check.message, topic, None, None)),
                    transaction_id: check.transaction_id.clone(),
                },
            )),
        };
        let state = match tx.try_send(Ok(cmd)) {
            Ok(()) => tokio::time::timeout(CHECK_ANSWER_WAIT, answer_rx)
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or(TransactionState::Unknown),
            Err(_) => TransactionState::Unknown,
        };
        self.lock_checks().remove(&check.transaction_id);
        state
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_decision_without_a_kept_half_is_an_invalid_transaction_id() {
        let t = Transactions::new(ClientConfig::default(), Arc::new(Clients::default()));
        let req = pb::EndTransactionRequest {
            topic: Some(pb::Resource {
                resource_namespace: String::new(),
                name: "T".into(),
            }),
            message_id: "id".into(),
            transaction_id: "tx".into(),
            resolution: TransactionResolution::Commit as i32,
            source: TransactionSource::SourceClient as i32,
            trace_context: String::new(),
        };
        let code = |r: pb::EndTransactionResponse| r.status.map(|s| s.code);
        assert_eq!(
            code(t.end(req.clone()).await),
            Some(Code::InvalidTransactionId as i32)
        );
        let unspecified = pb::EndTransactionRequest {
            resolution: TransactionResolution::Unspecified as i32,
            ..req
        };
        assert_eq!(
            code(t.end(unspecified).await),
            Some(Code::BadRequest as i32)
        );
    }
}
