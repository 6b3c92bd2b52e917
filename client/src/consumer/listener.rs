//! The push consumer's listener: what the application implements ([`MessageListener`] for
//! owned messages, or [`BatchListener`] for a [`MessageBatch`] read in place), what it is told
//! ([`ConsumeContext`]), and how one call runs: in the consuming task, with a panic caught
//! (it counts as a failure), and dropped (at its next await point) when the consumer is
//! aborted.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::watch;

use super::ConsumeResult;
use crate::batch::MessageBatch;
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

/// Consumes batches of messages read in place ([`MessageBatch`]: the pulled bytes, shared;
/// no per-message copies or allocations unless the listener asks for them). Implemented for
/// async closures `Fn(MessageBatch, ConsumeContext) -> impl Future<Output = ConsumeResult>`.
/// The same calls, results, retries and ordering as a [`MessageListener`]; start it with
/// [`PushConsumerBuilder::start_batch`](super::PushConsumerBuilder::start_batch).
pub trait BatchListener: Send + Sync + 'static {
    fn consume(
        &self,
        batch: MessageBatch,
        ctx: ConsumeContext,
    ) -> impl Future<Output = ConsumeResult> + Send;
}

impl<F, Fut> BatchListener for F
where
    F: Fn(MessageBatch, ConsumeContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ConsumeResult> + Send,
{
    fn consume(
        &self,
        batch: MessageBatch,
        ctx: ConsumeContext,
    ) -> impl Future<Output = ConsumeResult> + Send {
        self(batch, ctx)
    }
}

type BoxFuture = Pin<Box<dyn Future<Output = ConsumeResult> + Send + 'static>>;

/// A listener behind a pointer (the consumer's internals are not generic over it).
pub(crate) trait DynListener: Send + Sync {
    fn call(self: Arc<Self>, batch: MessageBatch, ctx: ConsumeContext) -> BoxFuture;
}

/// A [`MessageListener`]: gets owned copies, made once per call.
pub(crate) struct Wrap<L>(pub L);

impl<L: MessageListener> DynListener for Wrap<L> {
    fn call(self: Arc<Self>, batch: MessageBatch, ctx: ConsumeContext) -> BoxFuture {
        Box::pin(async move { self.0.consume(batch.to_received(), ctx).await })
    }
}

/// A [`BatchListener`]: gets the batch itself.
pub(crate) struct WrapBatch<L>(pub L);

impl<L: BatchListener> DynListener for WrapBatch<L> {
    fn call(self: Arc<Self>, batch: MessageBatch, ctx: ConsumeContext) -> BoxFuture {
        Box::pin(async move { self.0.consume(batch, ctx).await })
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

/// Runs one listener call in the calling task (a task of its own cost a spawn and, often, a
/// wake-up of another worker per call); a panic is caught, `aborted` turning true drops it.
pub(crate) async fn call_listener(
    listener: &Arc<dyn DynListener>,
    batch: MessageBatch,
    ctx: ConsumeContext,
    aborted: &watch::Sender<bool>,
) -> Called {
    let queue = ctx.queue.clone();
    let mut call = CatchUnwind(Arc::clone(listener).call(batch, ctx));
    let mut rx = aborted.subscribe();
    tokio::select! {
        r = &mut call => match r {
            Ok(ConsumeResult::Success) => Called::Success,
            Ok(ConsumeResult::Retry) => {
                log::debug!("listener asked to retry a batch of {queue}");
                Called::Retry
            }
            Err(()) => {
                log::warn!("listener panicked on {queue}");
                Called::Panicked
            }
        },
        _ = rx.wait_for(|a| *a) => Called::Aborted,
    }
}

/// A listener call whose panic is an `Err` (it is not polled again after one).
struct CatchUnwind(BoxFuture);

impl Future for CatchUnwind {
    type Output = Result<ConsumeResult, ()>;

    fn poll(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let fut = &mut self.0;
        // The future is dropped, never polled again, once it panicked: no broken state of
        // it is observed.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(p) => p.map(Ok),
            Err(_) => std::task::Poll::Ready(Err(())),
        }
    }
}
