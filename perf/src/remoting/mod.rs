//! perf's RocketMQ remoting driver (`--protocol remoting`): producers and pull consumers
//! that speak RocketMQ's remoting protocol to the broker and name server ports, as
//! RocketMQ's clients do, so one tool measures both protocols at the same message size,
//! batch, in-flight count and rate.
//!
//! - [`conn`]: a connection pipelined by opaque.
//! - [`route`]: GET_ROUTEINFO_BY_TOPIC from the name server (JSON body).
//! - [`send`]: SEND_MESSAGE / SEND_BATCH_MESSAGE requests and their answers.
//! - [`pull`]: PULL_MESSAGE loops, one per queue, and their answers.
//!
//! Everything else of a run (topic creation, broker discovery, the node's CPU count, the
//! report) is the native run's, so the two protocols' figures come out the same way.

pub mod conn;
pub mod pull;
pub mod route;
pub mod send;

use crate::args::{Common, RecvOpts, SendOpts};

/// Refuses options the remoting driver does not implement (they need the native client's
/// delivery records, schedules, retries, locks or churn).
pub fn check_supported(
    c: &Common,
    send: Option<&SendOpts>,
    recv: Option<&RecvOpts>,
) -> Result<(), String> {
    let mut refused = Vec::new();
    if c.verify.is_some() {
        refused.push("--verify");
    }
    if let Some(s) = send {
        if s.scheduled() {
            refused.push("--delay/--delay-level");
        }
        if s.compress_over.is_some() {
            refused.push("--compress-over");
        }
        if s.trace {
            refused.push("--trace");
        }
    }
    if let Some(r) = recv {
        if r.fail_ratio.is_some() {
            refused.push("--fail-ratio");
        }
        if r.orderly {
            refused.push("--orderly");
        }
        if r.consumer_churn.is_some() {
            refused.push("--consumer-churn");
        }
        if r.pop {
            refused.push("--pop");
        }
    }
    if refused.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "--protocol remoting does not support {}",
            refused.join(", ")
        ))
    }
}
