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
//! | consumer | `subscription.fifo` | false (see below) |
//! | consumer | `backoff_policy` | 17 attempts (16 retries + 1), exponential 1 s .. 2 h, ×2 |
//! | both | `metric` | `{on: false}` |
//!
//! `fifo` comes from the consumer group's orderly flag in RocketMQ; ringmq's group settings
//! have no such flag yet, so every group is concurrent and FIFO messages reach a
//! SimpleConsumer in any order (each message group still lands on one queue).

use std::time::Duration;

use crate::convert::{duration, BODY_BYTES_MAX};
use crate::pb::{self, retry_policy, settings::PubSub, ExponentialBackoff, RetryPolicy};

/// Most messages one ReceiveMessage asks for (RocketMQ's `grpcClientConsumerLongPollingBatchSize`).
pub(crate) const RECEIVE_BATCH_SIZE: i32 = 32;
/// Longest poll of a ReceiveMessage.
pub(crate) const LONG_POLLING_MAX: Duration = Duration::from_secs(20);
/// Shortest poll of a ReceiveMessage.
pub(crate) const LONG_POLLING_MIN: Duration = Duration::from_secs(5);
/// Send attempts a producer makes (RocketMQ's `grpcClientProducerMaxAttempts`).
const PRODUCER_ATTEMPTS: i32 = 3;
/// Deliveries of a message before the dead-letter topic: the broker's default retry limit
/// (16) plus the first.
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
}
