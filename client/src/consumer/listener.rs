//! The push consumer's listener: what the application implements ([`MessageListener`]), what
//! it is told ([`ConsumeContext`]), and how one call runs: on a task of its own, so a panic
//! is caught and counts as a failure, and dropped (at its next await point) when the
//! consumer is aborted.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::watch;

use super::ConsumeResult;
use crate::message::ReceivedMessage;
use crate::route::MessageQueue;

/// What a listener is told besides the messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumeContext {
    /// The queue the messages were pulled from (for a retried message: the group's retry
    /// queue, while the message's `topic` is the original topic).
    pub queue: MessageQueue,
    /// 0 on first delivery, then 1, 2, ... for redeliveries of the same batch by this
    /// consumer.
    pub attempt: u32,
}

/// Consumes batches of messages. Implemented for async closures
/// `Fn(Vec<ReceivedMessage>, ConsumeContext) -> impl Future<Output = ConsumeResult>`.
/// A listener that blocks should move its work to `tokio::task::spawn_blocking`.
pub trait MessageListener: Send + Sync + 'static {
    fn consume(
        &self,
        messages: Vec<ReceivedMessage>,
        ctx: ConsumeContext,
    ) -> impl Future<Output = ConsumeResult> + Send;
}

impl<F, Fut> MessageListener for F
where
    F: Fn(Vec<ReceivedMessage>, ConsumeContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ConsumeResult> + Send,
{
    fn consume(
        &self,
        messages: Vec<ReceivedMessage>,
        ctx: ConsumeContext,
    ) -> impl Future<Output = ConsumeResult> + Send {
        self(messages, ctx)
    }
}

type BoxFuture = Pin<Box<dyn Future<Output = ConsumeResult> + Send + 'static>>;

/// A listener behind a pointer (the consumer's internals are not generic over it).
pub(crate) trait DynListener: Send + Sync {
    fn call(self: Arc<Self>, messages: Vec<ReceivedMessage>, ctx: ConsumeContext) -> BoxFuture;
}

pub(crate) struct Wrap<L>(pub L);

impl<L: MessageListener> DynListener for Wrap<L> {
    fn call(self: Arc<Self>, messages: Vec<ReceivedMessage>, ctx: ConsumeContext) -> BoxFuture {
        Box::pin(async move { self.0.consume(messages, ctx).await })
    }
}

/// How one listener call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Called {
    Success,
    /// Returned [`ConsumeResult::Retry`].
    Retry,
    Panicked,
    /// The consumer was aborted during the call (the call was dropped).
    Aborted,
}

/// Runs one listener call on a task of its own; `aborted` turning true drops it.
pub(crate) async fn call_listener(
    listener: &Arc<dyn DynListener>,
    messages: Vec<ReceivedMessage>,
    ctx: ConsumeContext,
    aborted: &watch::Sender<bool>,
) -> Called {
    let queue = ctx.queue.clone();
    let mut task = tokio::spawn(Arc::clone(listener).call(messages, ctx));
    let mut rx = aborted.subscribe();
    tokio::select! {
        r = &mut task => match r {
            Ok(ConsumeResult::Success) => Called::Success,
            Ok(ConsumeResult::Retry) => {
                log::debug!("listener asked to retry a batch of {queue}");
                Called::Retry
            }
            Err(e) => {
                log::warn!("listener failed on {queue}: {e}");
                Called::Panicked
            }
        },
        _ = rx.wait_for(|a| *a) => {
            task.abort();
            Called::Aborted
        }
    }
}
