//! Telemetry: the bidirectional stream each client keeps open per endpoint. In: the
//! client's Settings (recorded in [`Clients`], answered with the merged Settings of
//! [`crate::settings`]), thread stack traces and verify-message results (logged). Out:
//! Settings, and transaction check-backs (`crate::transaction`, through the sender kept in
//! [`Clients`]). A Settings with neither publishing nor subscription ends the stream with
//! INVALID_ARGUMENT, as RocketMQ's proxy does.
//!
//! Each stream has a bounded outbound queue ([`TELEMETRY_QUEUE_MAX`]); a client that reads
//! nothing while its queue is full loses the stream. A stream whose first Settings does not
//! come within [`SETTINGS_WAIT`] is ended with INVALID_ARGUMENT (the SDKs send Settings as
//! soon as they open the stream), so a stream nobody configures holds nothing for long.
//!
//! With ACL on, each Settings is checked ([`SettingsCheck`]: the gate's authorization of
//! the topics and group it names) before it is recorded; a refusal ends the stream with the
//! check's gRPC status.
//!
//! Thread stack traces and verify-message results are the client's answers to
//! PrintThreadStackTraceCommand and VerifyMessageCommand. The edge never sends those
//! commands (nothing asks it to yet), so an answer is logged (nonce and size) and the
//! stream goes on.

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
/// How long a new Telemetry stream may go without its first Settings.
pub(crate) const SETTINGS_WAIT: std::time::Duration = std::time::Duration::from_secs(20);

/// May this client hold these Settings? (ACL on: the gate's authorization.)
pub(crate) type SettingsCheck =
    Box<dyn Fn(&pb::Settings) -> Result<(), tonic::Status> + Send + Sync + 'static>;

/// The outbound half of a Telemetry stream.
pub(crate) type Outbound =
    Pin<Box<dyn Stream<Item = Result<pb::TelemetryCommand, tonic::Status>> + Send + 'static>>;

/// Serves one Telemetry stream of `client_id` until the client closes it.
pub(crate) fn telemetry(
    clients: Arc<Clients>,
    client_id: String,
    inbound: Streaming<pb::TelemetryCommand>,
) -> Outbound {
    telemetry_checked(clients, client_id, inbound, None)
}

/// [`telemetry`], with each Settings checked by `check` first.
pub(crate) fn telemetry_checked(
    clients: Arc<Clients>,
    client_id: String,
    mut inbound: Streaming<pb::TelemetryCommand>,
    check: Option<SettingsCheck>,
) -> Outbound {
    let (tx, rx) = mpsc::channel(TELEMETRY_QUEUE_MAX);
    tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + SETTINGS_WAIT;
        let mut configured = false;
        loop {
            let next = if configured {
                inbound.next().await
            } else {
                match tokio::time::timeout_at(deadline, inbound.next()).await {
                    Ok(n) => n,
                    Err(_) => {
                        let _ = tx
                            .send(Err(tonic::Status::invalid_argument(format!(
                                "no Settings within {SETTINGS_WAIT:?} of opening Telemetry"
                            ))))
                            .await;
                        break;
                    }
                }
            };
            let Some(next) = next else { break };
            let cmd = match next {
                Ok(c) => c,
                Err(e) => {
                    log::debug!("telemetry of {client_id}: {e}");
                    break;
                }
            };
            if let (Some(Command::Settings(s)), Some(check)) = (&cmd.command, &check) {
                if let Err(refused) = check(s) {
                    let _ = tx.send(Err(refused)).await;
                    break;
                }
            }
            let settings = matches!(cmd.command, Some(Command::Settings(_)));
            let out = match answer(&clients, &client_id, cmd, &tx) {
                Ok(Some(c)) => Ok(for_client(c, &clients).await),
                Ok(None) => continue,
                Err(s) => Err(s),
            };
            let end = out.is_err();
            configured |= settings && !end;
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
            log::info!(
                "thread stack trace from {client_id}: nonce {}, {} bytes (not asked for: kept nowhere)",
                t.nonce,
                t.thread_stack_trace.as_ref().map_or(0, String::len)
            );
            Ok(None)
        }
        Some(Command::VerifyMessageResult(v)) => {
            log::info!(
                "verify-message result from {client_id}: nonce {}, status {:?} (not asked for: kept nowhere)",
                v.nonce,
                cmd.status.as_ref().map(|s| s.code)
            );
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
