//! A push consumer's listener call with message trace: a `SubBefore` per message before the
//! call, a `SubAfter` per message after it (none when the consumer is aborted mid-call).
//! Without tracing it is [`call_listener`] itself.

use super::listener::{call_listener, Called, ConsumeContext};
use super::push_state::Inner;
use crate::batch::MessageBatch;
use crate::trace::{consume_begin, consume_end};

/// RocketMQ's `ConsumeReturnType` ordinals written in `SubAfter`.
const CONTEXT_SUCCESS: i32 = 0;
const CONTEXT_EXCEPTION: i32 = 2;
const CONTEXT_FAILED: i32 = 4;

pub(crate) async fn call(inner: &Inner, batch: MessageBatch, ctx: ConsumeContext) -> Called {
    let Some(t) = &inner.trace else {
        return call_listener(&inner.listener, batch, ctx, &inner.aborted).await;
    };
    let span = consume_begin(t, &inner.group.name, &batch);
    let called = call_listener(&inner.listener, batch, ctx, &inner.aborted).await;
    let code = match called {
        Called::Success => CONTEXT_SUCCESS,
        Called::Retry => CONTEXT_FAILED,
        Called::Panicked => CONTEXT_EXCEPTION,
        Called::Aborted => return called,
    };
    consume_end(t, &inner.group.name, span, code);
    called
}
