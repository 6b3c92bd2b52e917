//! Recall of scheduled messages (RocketMQ 5.3's RECALL_MESSAGE): a scheduled send's result
//! carries a recall handle ([`SendResult::recall_handle`](super::SendResult::recall_handle));
//! [`Producer::recall`](super::Producer::recall) sends it to the broker that stored the
//! message (named in the handle), which withdraws the message if it has not been delivered.
//!
//! A recall is idempotent (the broker answers a second one "already recalled"), so an
//! attempt whose answer was lost is sent again, within the producer's send timeout.

use std::net::SocketAddr;

use ringmq_wire::code::RequestCode;
use ringmq_wire::command::{RecallRequest, RecallResponse};
use ringmq_wire::recall::RecallHandle;
use tokio::time::Instant;

use super::retry::BUSY_RETRY_PAUSE;
use super::Inner;
use crate::error::{Error, Result};

/// Sends RECALL_MESSAGE for `handle` (sent as the request's topic: `topic`) and returns the
/// recalled message's id.
pub(super) async fn recall(inner: &Inner, topic: &str, handle: &str) -> Result<String> {
    inner.check_open()?;
    let parsed = RecallHandle::decode(handle)
        .map_err(|e| Error::InvalidMessage(format!("recall handle: {e}")))?;
    let req = RecallRequest {
        producer_group: inner.cfg.group.clone(),
        topic: topic.to_string(),
        recall_handle: handle.trim().to_string(),
    };
    let deadline = Instant::now() + inner.cfg.send_timeout;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let result = async {
            let addr = broker_addr(inner, &parsed).await?;
            let answer = inner
                .inst
                .broker_call(
                    addr,
                    None,
                    RequestCode::RecallMessage,
                    &req,
                    &[],
                    inner.inst.cfg.request_timeout,
                )
                .await?;
            let status = answer.status()?;
            // As a send: FLUSH_DISK_TIMEOUT and the slave statuses mean the recall is
            // stored on the broker that delivers.
            if !status.message_stored() {
                return Err(answer.error(status));
            }
            let fields: RecallResponse = answer.required_fields()?;
            Ok(fields.message_id)
        }
        .await;
        let e = match result {
            Ok(id) => return Ok(id),
            Err(e) => e,
        };
        if e.is_routing_error() {
            let _ = inner.inst.refresh_route(&parsed.topic).await;
        }
        // Not retried: a refusal (too late, a bad handle). Anything else could not have
        // recalled twice: a second recall of the same message answers "already recalled".
        if e.outcome() == crate::error::Outcome::Rejected
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

/// The master of the broker the handle names, from the topic's route.
async fn broker_addr(inner: &Inner, h: &RecallHandle) -> Result<SocketAddr> {
    let route = inner.inst.route(&h.topic).await?;
    if let Some(addr) = route.master(&h.broker_name) {
        return Ok(addr);
    }
    let route = inner.inst.refresh_route(&h.topic).await?;
    route.master(&h.broker_name).ok_or_else(|| Error::NoRoute {
        topic: h.topic.clone(),
        detail: format!(
            "broker {} (named in the recall handle) has no master in the topic's route",
            h.broker_name
        ),
    })
}
