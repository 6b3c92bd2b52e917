//! One queue's offsets and messages: min, max and by-timestamp offsets, a group's committed
//! offset (read and set), and pulls under [`TOOLS_GROUP`], which never commits.

use std::time::Duration;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::command::{QueryConsumerOffsetRequest, UpdateConsumerOffsetRequest};

use super::{Admin, PULL_BYTES_MAX, READ_BATCH_MAX, TOOLS_GROUP};
use crate::consumer::{self, PullResult, PullStatus};
use crate::error::{Error, Result};
use crate::message::ReceivedMessage;
use crate::route::MessageQueue;

impl Admin {
    /// The oldest offset a queue still stores.
    pub async fn min_offset(&self, mq: &MessageQueue) -> Result<u64> {
        consumer::queue_offset(&self.inst, mq, false).await
    }

    /// One past the newest message of a queue.
    pub async fn max_offset(&self, mq: &MessageQueue) -> Result<u64> {
        consumer::queue_offset(&self.inst, mq, true).await
    }

    /// The first offset stored at or after `timestamp_ms`.
    pub async fn offset_at(&self, mq: &MessageQueue, timestamp_ms: i64) -> Result<u64> {
        consumer::search_offset(&self.inst, mq, timestamp_ms).await
    }

    /// A group's committed offset of a queue (`None`: never committed).
    pub async fn committed_offset(&self, group: &str, mq: &MessageQueue) -> Result<Option<u64>> {
        let header = QueryConsumerOffsetRequest {
            consumer_group: group.to_string(),
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
        };
        let answer = self
            .inst
            .queue_call(
                mq,
                RequestCode::QueryConsumerOffset,
                &header,
                self.inst.cfg.request_timeout,
            )
            .await?;
        consumer::committed_offset_in(answer)
    }

    /// Sets a group's committed offset of a queue.
    pub async fn commit_offset(&self, group: &str, mq: &MessageQueue, offset: u64) -> Result<()> {
        self.set_offset(RequestCode::UpdateConsumerOffset, group, mq, offset)
            .await
    }

    /// Moves `group`'s committed offset of `mq` to `offset` as an operator
    /// (INVOKE_BROKER_TO_RESET_OFFSET: with ACL on, an admin account).
    pub async fn reset_queue_offset(
        &self,
        group: &str,
        mq: &MessageQueue,
        offset: u64,
    ) -> Result<()> {
        self.set_offset(RequestCode::InvokeBrokerToResetOffset, group, mq, offset)
            .await
    }

    async fn set_offset(
        &self,
        code: RequestCode,
        group: &str,
        mq: &MessageQueue,
        offset: u64,
    ) -> Result<()> {
        let header = UpdateConsumerOffsetRequest {
            consumer_group: group.to_string(),
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            offset,
        };
        self.inst
            .queue_call(mq, code, &header, self.inst.cfg.request_timeout)
            .await?
            .expect(&[Status::Success])?;
        Ok(())
    }

    /// Up to `max` messages of a queue from `offset` (no long polling, nothing committed).
    pub async fn pull(&self, mq: &MessageQueue, offset: u64, max: u32) -> Result<PullResult> {
        consumer::pull_queue(
            &self.inst,
            TOOLS_GROUP,
            mq,
            offset,
            max.max(1),
            PULL_BYTES_MAX,
            &consumer::MessageSelector::all(),
            Duration::ZERO,
            None,
        )
        .await
    }

    /// Up to `count` messages of a queue from `offset`, in order (several pulls if needed);
    /// fewer when the queue ends. An offset below the queue's minimum is an error naming it.
    pub async fn read_messages(
        &self,
        mq: &MessageQueue,
        offset: u64,
        count: u32,
    ) -> Result<Vec<ReceivedMessage>> {
        let mut out = Vec::new();
        let mut at = offset;
        while (out.len() as u32) < count {
            let want = (count - out.len() as u32).min(READ_BATCH_MAX);
            let r = self.pull(mq, at, want).await?;
            match r.status {
                PullStatus::Found => {
                    if r.next_offset <= at {
                        break;
                    }
                    out.extend(r.messages.into_iter().take((count as usize) - out.len()));
                    at = r.next_offset;
                }
                PullStatus::NoMatchedMessage => at = r.next_offset.max(at + 1),
                PullStatus::NoNewMessage => break,
                PullStatus::OffsetIllegal => {
                    if out.is_empty() {
                        return Err(Error::NotFound {
                            what: format!(
                                "offset {at} is outside {mq} (min {}, max {})",
                                r.min_offset, r.max_offset
                            ),
                        });
                    }
                    break;
                }
            }
        }
        Ok(out)
    }

    /// Messages of `topic` stored in `[begin_ms, end_ms)` (store time, ms since the epoch),
    /// from every readable queue, oldest first, at most `max`: each queue's range comes from
    /// SEARCH_OFFSET_BY_TIMESTAMP at both ends, so only that range is read. A begin after the
    /// end is [`Error::Config`].
    pub async fn messages_in_time_range(
        &self,
        topic: &str,
        begin_ms: i64,
        end_ms: i64,
        max: u32,
    ) -> Result<Vec<ReceivedMessage>> {
        if end_ms < begin_ms {
            return Err(Error::Config(format!(
                "the time range ends ({end_ms} ms) before it begins ({begin_ms} ms)"
            )));
        }
        let route = self.topic_route(topic).await?;
        let mut out = Vec::new();
        for mq in &route.read_queues {
            let lo = self.offset_at(mq, begin_ms).await?;
            let hi = self.offset_at(mq, end_ms).await?;
            if hi <= lo {
                continue;
            }
            let want = u32::try_from(hi - lo).unwrap_or(u32::MAX).min(max);
            let msgs = self.read_messages(mq, lo, want).await?;
            out.extend(
                msgs.into_iter()
                    .filter(|m| (begin_ms..end_ms).contains(&m.store_timestamp_ms)),
            );
        }
        out.sort_by_key(|m| {
            (
                m.store_timestamp_ms,
                m.broker_name.clone(),
                m.queue_id,
                m.queue_offset,
            )
        });
        out.truncate(max as usize);
        Ok(out)
    }
}
