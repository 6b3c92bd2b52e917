//! Telemetry: the bidirectional stream each client keeps open per endpoint. In: the
//! client's Settings (recorded in [`Clients`], answered with the merged Settings of
//! [`crate::settings`]), thread stack traces and verify-message results (logged). Out:
//! Settings, and transaction check-backs (`crate::transaction`, through the sender kept in
//! [`Clients`]). A Settings with neither publishing nor subscription ends the stream with
//! INVALID_ARGUMENT, as RocketMQ's proxy does.
//!
//! Each stream has a bounded outbound queue ([`TELEMETRY_QUEUE_MAX`]); a client that reads
//! nothing while its queue is full loses the stream.

use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::Streaming;

use crate::clients::{Clients, TelemetrySender};
use crate::pb::{self, telemetry_command::Command};
use crate::settings::{for_client, merged};
use crate::status::ok;

/// Commands queued for one client's Telemetry stream.
pub(crate) const TELEMETRY_QUEUE_MAX: usize = 16;

/// The outbound half of a Telemetry stream.
pub(crate) type Outbound =
    Pin<Box<dyn Stream<Item = Result<pb::TelemetryCommand, tonic::Status>> + Send + 'static>>;

/// Serves one Telemetry stream of `client_id` until the client closes it.
pub(crate) fn telemetry(
    clients: Arc<Clients>,
    client_id: String,
    mut inbound: Streaming<pb::TelemetryCommand>,
) -> Outbound {
    let (tx, rx) = mpsc::channel(TELEMETRY_QUEUE_MAX);
    tokio::spawn(async move {
        while let Some(next) = inbound.next().await {
            let cmd = match next {
                Ok(c) => c,
                Err(e) => {
                    log::debug!("telemetry of {client_id}: {e}");
                    break;
                }
            };
            let out = match answer(&clients, &client_id, cmd, &tx) {
                Ok(Some(c)) => Ok(for_client(c, &clients).await),
                Ok(None) => continue,
                Err(s) => Err(s),
            };
            let end = out.is_err();
            if tx.send(out).await.is_err() || end {
                break;
            }
        }
    });
    Box::pin(ReceiverStream::new(rx))
}

/// What one inbound command is answered with, if anything.
fn answer(
    clients: &Clients,
    client_id: &str,
    cmd: pb::TelemetryCommand,
    outbound: &TelemetrySender,
) -> Result<Option<pb::TelemetryCommand>, tonic::Status> {
    match cmd.command {
        Some(Command::Settings(s)) => {
            if s.pub_sub.is_none() {
                return Err(tonic::Status::invalid_argument(
                    "there is no publishing or subscription data in settings",
                ));
            }
            clients
                .put(client_id, s.clone(), Some(outbound.clone()))
                .map_err(|_| tonic::Status::resource_exhausted("too many clients"))?;
            Ok(Some(pb::TelemetryCommand {
                status: Some(ok()),
                command: Some(Command::Settings(merged(&s))),
            }))
        }
        Some(Command::ThreadStackTrace(t)) => {
            log::info!("thread stack trace from {client_id}: nonce {}", t.nonce);
            Ok(None)
        }
        Some(Command::VerifyMessageResult(v)) => {
            log::info!("verify-message result from {client_id}: nonce {}", v.nonce);
            Ok(None)
        }
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_without_pub_or_sub_are_refused() {
        let c = Clients::default();
        let cmd = pb::TelemetryCommand {
            status: None,
            command: Some(Command::Settings(pb::Settings::default())),
        };
        let (tx, _rx) = mpsc::channel(1);
        let e = answer(&c, "id", cmd, &tx).err().map(|s| s.code());
        assert_eq!(e, Some(tonic::Code::InvalidArgument));
        assert!(c.touch("id").is_none());
    }

    #[test]
    fn settings_are_recorded_and_answered_merged() {
        let c = Clients::default();
        let cmd = pb::TelemetryCommand {
            status: None,
            command: Some(Command::Settings(pb::Settings {
                pub_sub: Some(pb::settings::PubSub::Publishing(pb::Publishing::default())),
                ..Default::default()
            })),
        };
        let (tx, _rx) = mpsc::channel(1);
        let out = answer(&c, "id", cmd, &tx).expect("ok").expect("an answer");
        assert!(matches!(out.command, Some(Command::Settings(_))));
        assert!(c.touch("id").is_some());
    }
}
