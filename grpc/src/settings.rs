//! The Settings the server sends back on Telemetry: the client's own, merged with what
//! the server decides. The released clients read these fields without defaults, so every
//! one is filled:
//!
//! | client | field | value |
//! |---|---|---|
//! | producer | `backoff_policy` | 3 attempts, exponential 10 ms .. 1 s, ×2 |
//! | producer | `publishing.max_body_size` | 4 MiB |
//! | producer | `publishing.validate_message_type` | true |
//! | consumer | `subscription.receive_batch_size` | 32 |
//! | consumer | `subscription.long_polling_timeout` | 20 s |
//! | consumer | `subscription.fifo` | the group's orderly flag |
//! | consumer | `backoff_policy` | the group's retry limit + 1 attempts (17 by default), exponential 1 s .. 2 h, ×2 |
//! | both | `metric` | `{on: false}` |
//!
//! `fifo` and the attempts come from the group's settings on the brokers (the edge's group
//! cache, `groups.rs`: `ringmq-ctl group update G -o true -r N`, or mqadmin's
//! updateSubGroup), as RocketMQ's proxy takes them from its subscription group table;
//! `merged` fills the defaults and `for_client` the group's own.

use std::time::Duration;

use crate::clients::Clients;
use crate::convert::{duration, BODY_BYTES_MAX};
use crate::groups::GroupPolicy;
use crate::pb::{
    self, retry_policy, settings::PubSub, telemetry_command::Command, ExponentialBackoff,
    RetryPolicy,
};

/// Most messages one ReceiveMessage asks for (RocketMQ's `grpcClientConsumerLongPollingBatchSize`).
pub(crate) const RECEIVE_BATCH_SIZE: i32 = 32;
/// Longest poll of a ReceiveMessage.
pub(crate) const LONG_POLLING_MAX: Duration = Duration::from_secs(20);
/// Shortest poll of a ReceiveMessage.
pub(crate) const LONG_POLLING_MIN: Duration = Duration::from_secs(5);
/// Send attempts a producer makes (RocketMQ's `grpcClientProducerMaxAttempts`).
const PRODUCER_ATTEMPTS: i32 = 3;
/// Deliveries of a message before the dead-letter topic when the group's settings are not
/// known yet: the broker's default retry limit (16) plus the first.
const CONSUMER_ATTEMPTS: i32 = 17;

/// The merged settings of `raw` (a client's own, as it sent them).
pub(crate) fn merged(raw: &pb::Settings) -> pb::Settings {
    let mut s = raw.clone();
    match &mut s.pub_sub {
        Some(PubSub::Publishing(p)) => {
            p.max_body_size = BODY_BYTES_MAX as i32;
            p.validate_message_type = true;
            s.backoff_policy = Some(backoff(
                PRODUCER_ATTEMPTS,
                Duration::from_millis(10),
                Duration::from_secs(1),
            ));
        }
        Some(PubSub::Subscription(sub)) => {
            sub.receive_batch_size = Some(RECEIVE_BATCH_SIZE);
            sub.long_polling_timeout = Some(duration(LONG_POLLING_MAX));
            sub.fifo = Some(false);
            s.backoff_policy = Some(backoff(
                CONSUMER_ATTEMPTS,
                Duration::from_secs(1),
                Duration::from_secs(7200),
            ));
        }
        None => {}
    }
    s.metric = Some(pb::Metric {
        on: false,
        endpoints: None,
    });
    s
}

/// A Settings command of a consumer, with its group's `fifo` and attempts (from the
/// groups `clients` knows); any other command as it is.
pub(crate) async fn for_client(
    mut cmd: pb::TelemetryCommand,
    clients: &Clients,
) -> pb::TelemetryCommand {
    let Some(groups) = clients.groups() else {
        return cmd;
    };
    let Some(Command::Settings(s)) = &mut cmd.command else {
        return cmd;
    };
    let Some(PubSub::Subscription(sub)) = &s.pub_sub else {
        return cmd;
    };
    let Some(group) = sub
        .group
        .as_ref()
        .map(|g| g.name.clone())
        .filter(|g| !g.is_empty())
    else {
        return cmd;
    };
    let policy = groups.policy(&group).await;
    apply(s, policy);
    cmd
}

/// `policy` in a consumer's merged settings.
fn apply(s: &mut pb::Settings, policy: GroupPolicy) {
    if let Some(PubSub::Subscription(sub)) = &mut s.pub_sub {
        sub.fifo = Some(policy.orderly);
        s.backoff_policy = Some(backoff(
            policy.max_attempts(),
            Duration::from_secs(1),
            Duration::from_secs(7200),
        ));
    }
}

fn backoff(attempts: i32, initial: Duration, max: Duration) -> RetryPolicy {
    RetryPolicy {
        max_attempts: attempts,
        strategy: Some(retry_policy::Strategy::ExponentialBackoff(
            ExponentialBackoff {
                initial: Some(duration(initial)),
                max: Some(duration(max)),
                multiplier: 2.0,
            },
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn producer_settings_carry_every_field_the_clients_read() {
        let raw = pb::Settings {
            client_type: Some(pb::ClientType::Producer as i32),
            pub_sub: Some(PubSub::Publishing(pb::Publishing::default())),
            ..Default::default()
        };
        let s = merged(&raw);
        let Some(PubSub::Publishing(p)) = &s.pub_sub else {
            panic!("publishing kept")
        };
        assert_eq!(p.max_body_size, 4 * 1024 * 1024);
        assert!(p.validate_message_type);
        assert_eq!(s.backoff_policy.as_ref().map(|b| b.max_attempts), Some(3));
        assert_eq!(s.metric.as_ref().map(|m| m.on), Some(false));
    }

    #[test]
    fn consumer_settings_carry_every_field_the_clients_read() {
        let raw = pb::Settings {
            client_type: Some(pb::ClientType::SimpleConsumer as i32),
            pub_sub: Some(PubSub::Subscription(pb::Subscription::default())),
            ..Default::default()
        };
        let s = merged(&raw);
        let Some(PubSub::Subscription(sub)) = &s.pub_sub else {
            panic!("subscription kept")
        };
        assert_eq!(sub.receive_batch_size, Some(32));
        assert_eq!(sub.fifo, Some(false));
        assert_eq!(
            sub.long_polling_timeout.as_ref().map(|d| d.seconds),
            Some(20)
        );
        assert!(matches!(
            s.backoff_policy.and_then(|b| b.strategy),
            Some(retry_policy::Strategy::ExponentialBackoff(_))
        ));
    }

    #[test]
    fn a_groups_policy_sets_fifo_and_attempts() {
        let raw = pb::Settings {
            client_type: Some(pb::ClientType::PushConsumer as i32),
            pub_sub: Some(PubSub::Subscription(pb::Subscription::default())),
            ..Default::default()
        };
        let mut s = merged(&raw);
        apply(
            &mut s,
            GroupPolicy {
                orderly: true,
                retry_max_times: 2,
            },
        );
        let Some(PubSub::Subscription(sub)) = &s.pub_sub else {
            panic!("subscription kept")
        };
        assert_eq!(sub.fifo, Some(true));
        assert_eq!(s.backoff_policy.as_ref().map(|b| b.max_attempts), Some(3));
    }
}
