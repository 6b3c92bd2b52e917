//! Consumer groups: what the masters know of them (subscriptions, live members, committed
//! offsets), a group's progress per queue (lag and owning member, by the client's average
//! allocation) and resetting its offsets.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::Empty;
use ringmq_wire::command::{
    ConsumerGroupList, ConsumerOffsetEntry, ConsumerOffsetTable, GetAllConsumerOffsetRequest,
    GetConsumerListRequest, GetPopStatusRequest, GetProducerListRequest, PopGroupStatus, PopStatus,
    ProducerList,
};

use super::{Admin, BrokerRef};
use crate::consumer::allocate_average;
use crate::consumer::group::members_in;
use crate::error::{Error, Result};
use crate::route::MessageQueue;

/// A consumer group as the brokers know it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupSummary {
    pub group: String,
    /// Live members (client ids, sorted), over every master.
    pub members: Vec<String>,
    /// Subscribed topics and their tag expressions.
    pub subscriptions: BTreeMap<String, String>,
    /// Topics for which the group has committed offsets.
    pub offset_topics: BTreeSet<String>,
    /// Broker names that know the group.
    pub brokers: BTreeSet<String>,
}

/// A consumer group's progress on one queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueProgress {
    pub queue: MessageQueue,
    /// One past the newest message on the broker.
    pub broker_max_offset: u64,
    /// The group's committed offset (`None`: never committed).
    pub committed_offset: Option<u64>,
    /// Messages not yet consumed: `broker_max_offset - committed_offset` (`None` without a
    /// committed offset).
    pub lag: Option<u64>,
    /// When the oldest message not yet consumed (the one at the committed offset) was
    /// stored, ms since the epoch; `None` with no lag, or when it could not be read (a
    /// retention-removed or unreadable message).
    pub oldest_unconsumed_ms: Option<i64>,
    /// The member that owns the queue now (average allocation, as the client computes it).
    pub member: Option<String>,
}

/// A consumer group's progress on its topics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupProgress {
    pub group: String,
    /// Live members (sorted), over the topics' masters.
    pub members: Vec<String>,
    pub queues: Vec<QueueProgress>,
}

impl GroupProgress {
    /// Sum of the queues' lags.
    pub fn total_lag(&self) -> u64 {
        self.queues.iter().filter_map(|q| q.lag).sum()
    }

    /// The queues each live member owns (members without queues included).
    pub fn assignment(&self) -> BTreeMap<String, Vec<MessageQueue>> {
        let mut out: BTreeMap<String, Vec<MessageQueue>> = self
            .members
            .iter()
            .map(|m| (m.clone(), Vec::new()))
            .collect();
        for q in &self.queues {
            if let Some(m) = &q.member {
                out.entry(m.clone()).or_default().push(q.queue.clone());
            }
        }
        out
    }
}

/// Where [`Admin::reset_offset`] moves a group's offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetTo {
    /// The oldest message still stored.
    Earliest,
    /// After the newest message (skip everything stored so far).
    Latest,
    /// The first message stored at or after this time (ms since the epoch).
    Timestamp(i64),
}

/// One queue's offset change made by [`Admin::reset_offset`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetReset {
    pub queue: MessageQueue,
    pub old: Option<u64>,
    pub new: u64,
}

impl Admin {
    /// The consumer groups one broker knows: live members and subscriptions.
    pub async fn subscription_groups(&self, addr: SocketAddr) -> Result<ConsumerGroupList> {
        self.call(
            addr,
            RequestCode::GetAllSubscriptionGroupConfig,
            &Empty,
            &[],
        )
        .await?
        .expect(&[Status::Success])?
        .decode_body()
    }

    /// Every committed offset one shard of a broker keeps.
    pub async fn consumer_offsets(
        &self,
        addr: SocketAddr,
        shard: u16,
    ) -> Result<Vec<ConsumerOffsetEntry>> {
        let table: ConsumerOffsetTable = self
            .call(
                addr,
                RequestCode::GetAllConsumerOffset,
                &GetAllConsumerOffsetRequest { shard_id: shard },
                &[],
            )
            .await?
            .expect(&[Status::Success])?
            .decode_body()?;
        Ok(table.entries)
    }

    /// A group's POP counts summed over every master's shards (zeros when it never popped).
    pub async fn pop_status(&self, group: &str) -> Result<PopGroupStatus> {
        let mut sum = PopGroupStatus {
            group: group.to_string(),
            ..PopGroupStatus::default()
        };
        for b in self
            .brokers()
            .await?
            .into_iter()
            .filter(BrokerRef::is_master)
        {
            for shard in 0..b.shard_count {
                let status: PopStatus = self
                    .call(
                        b.addr,
                        RequestCode::GetPopStatus,
                        &GetPopStatusRequest { shard_id: shard },
                        &[],
                    )
                    .await?
                    .expect(&[Status::Success])?
                    .decode_body()?;
                for g in status.groups.into_iter().filter(|g| g.group == group) {
                    sum.in_flight += g.in_flight;
                    sum.popped += g.popped;
                    sum.acked += g.acked;
                    sum.revived += g.revived;
                    sum.dead_lettered += g.dead_lettered;
                }
            }
        }
        Ok(sum)
    }

    /// Every consumer group the masters know: live ones (with members and subscriptions)
    /// and groups that only have committed offsets. Sorted by name.
    pub async fn group_list(&self) -> Result<Vec<GroupSummary>> {
        let mut groups: BTreeMap<String, GroupSummary> = BTreeMap::new();
        for b in self
            .brokers()
            .await?
            .into_iter()
            .filter(BrokerRef::is_master)
        {
            for g in self.subscription_groups(b.addr).await?.groups {
                let e = group_entry(&mut groups, &g.group);
                e.members.extend(g.members);
                for s in g.subscriptions {
                    e.subscriptions.insert(s.topic, s.expression);
                }
                e.brokers.insert(b.name.clone());
            }
            for shard in 0..b.shard_count {
                for o in self.consumer_offsets(b.addr, shard).await? {
                    let e = group_entry(&mut groups, &o.consumer_group);
                    e.offset_topics.insert(o.topic);
                    e.brokers.insert(b.name.clone());
                }
            }
        }
        let mut out: Vec<GroupSummary> = groups.into_values().collect();
        for g in &mut out {
            g.members.sort();
            g.members.dedup();
        }
        Ok(out)
    }

    /// A group's live members (sorted), asked of the first of `masters` that answers, as
    /// the client's rebalance does.
    pub async fn group_members(&self, group: &str, masters: &[SocketAddr]) -> Result<Vec<String>> {
        let req = GetConsumerListRequest {
            consumer_group: group.to_string(),
        };
        let mut last = None;
        for addr in masters {
            let answer = self
                .call(*addr, RequestCode::GetConsumerListByGroup, &req, &[])
                .await
                .and_then(|a| a.expect(&[Status::Success]));
            match answer {
                Ok(a) => return members_in(&a),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or(Error::NotFound {
            what: format!("no master to ask for the members of group {group}"),
        }))
    }

    /// A producer group's live producers on each master (client ids, most recently heard
    /// first), as each master's heartbeats saw them; masters without one are left out.
    pub async fn producer_connections(&self, group: &str) -> Result<Vec<(BrokerRef, Vec<String>)>> {
        let req = GetProducerListRequest {
            producer_group: group.to_string(),
        };
        let mut out = Vec::new();
        for b in self
            .brokers()
            .await?
            .into_iter()
            .filter(BrokerRef::is_master)
        {
            let list: ProducerList = self
                .call(b.addr, RequestCode::GetProducerConnectionList, &req, &[])
                .await?
                .expect(&[Status::Success])?
                .decode_body()?;
            if !list.client_ids.is_empty() {
                out.push((b, list.client_ids));
            }
        }
        Ok(out)
    }

    /// A group's progress per queue: broker max offset, committed offset, lag and the member
    /// that owns the queue. Topics: `topic`, or else every topic the group subscribes to or
    /// has committed offsets for.
    pub async fn group_progress(&self, group: &str, topic: Option<&str>) -> Result<GroupProgress> {
        let topics: Vec<String> = match topic {
            Some(t) => vec![t.to_string()],
            None => {
                let summary = self
                    .group_list()
                    .await?
                    .into_iter()
                    .find(|g| g.group == group)
                    .ok_or_else(|| Error::NotFound {
                        what: format!(
                            "no broker knows consumer group {group} (no live member, no committed offset)"
                        ),
                    })?;
                let mut t: BTreeSet<String> = summary.subscriptions.into_keys().collect();
                t.extend(summary.offset_topics);
                t.into_iter().collect()
            }
        };
        let mut progress = GroupProgress {
            group: group.to_string(),
            ..GroupProgress::default()
        };
        let mut all_members = BTreeSet::new();
        for topic in topics {
            let route = self.inst.fetch_route(&topic).await?;
            let members = self.group_members(group, &route.masters()).await?;
            let queues = route.read_queues.clone();
            let mut owner: BTreeMap<MessageQueue, String> = BTreeMap::new();
            for m in &members {
                for q in allocate_average(&queues, &members, m) {
                    owner.insert(q, m.clone());
                }
            }
            // Listed by broker and queue id (the route orders them by shard, as the
            // clients' allocation sees them).
            let mut listed = queues;
            listed.sort();
            for mq in listed {
                let broker_max_offset = self.max_offset(&mq).await?;
                let committed_offset = self.committed_offset(group, &mq).await?;
                let lag = committed_offset.map(|c| broker_max_offset.saturating_sub(c));
                let oldest_unconsumed_ms = match (committed_offset, lag) {
                    (Some(c), Some(l)) if l > 0 => self.store_time_at(&mq, c).await,
                    _ => None,
                };
                progress.queues.push(QueueProgress {
                    lag,
                    oldest_unconsumed_ms,
                    member: owner.get(&mq).cloned(),
                    queue: mq,
                    broker_max_offset,
                    committed_offset,
                });
            }
            all_members.extend(members);
        }
        progress.members = all_members.into_iter().collect();
        Ok(progress)
    }

    /// When the message at `offset` of a queue was stored (a one-message read as the tools
    /// group, which commits nothing); `None` when it cannot be read (removed by retention,
    /// or the account may not read it).
    async fn store_time_at(&self, mq: &MessageQueue, offset: u64) -> Option<i64> {
        let r = self.pull(mq, offset, 1).await.ok()?;
        r.messages
            .first()
            .filter(|m| m.queue_offset == offset)
            .map(|m| m.store_timestamp_ms)
    }

    /// Moves a group's committed offsets of every readable queue of `topic` to `to`.
    /// Stop the group's consumers first: running ones commit their positions over it.
    pub async fn reset_offset(
        &self,
        group: &str,
        topic: &str,
        to: ResetTo,
    ) -> Result<Vec<OffsetReset>> {
        let route = self.inst.fetch_route(topic).await?;
        if route.read_queues.is_empty() {
            return Err(Error::NoRoute {
                topic: topic.to_string(),
                detail: "no readable queue".into(),
            });
        }
        let mut out = Vec::new();
        let mut queues = route.read_queues.clone();
        queues.sort();
        for mq in queues.iter() {
            let new = match to {
                ResetTo::Earliest => self.min_offset(mq).await?,
                ResetTo::Latest => self.max_offset(mq).await?,
                ResetTo::Timestamp(t) => self.offset_at(mq, t).await?,
            };
            let old = self.committed_offset(group, mq).await?;
            self.reset_queue_offset(group, mq, new).await?;
            out.push(OffsetReset {
                queue: mq.clone(),
                old,
                new,
            });
        }
        Ok(out)
    }
}

fn group_entry<'a>(
    groups: &'a mut BTreeMap<String, GroupSummary>,
    name: &str,
) -> &'a mut GroupSummary {
    groups
        .entry(name.to_string())
        .or_insert_with(|| GroupSummary {
            group: name.to_string(),
            ..GroupSummary::default()
        })
}

impl Admin {
    /// Sets a consumer group's settings on every master, replacing what it had (as
    /// RocketMQ's updateSubGroup does): its retry limit (retries before the dead-letter
    /// topic, used when its consumers do not set their own) and whether it consumes orderly
    /// (RocketMQ's `consumeMessageOrderly`: RocketMQ 5's SDKs are told `fifo` and pop
    /// orderly). Returns the brokers changed.
    pub async fn set_group_settings(
        &self,
        group: &str,
        retry_max_times: u32,
        consume_message_orderly: bool,
    ) -> Result<Vec<BrokerRef>> {
        let h = ringmq_wire::command::SubscriptionGroupConfig {
            group: group.to_string(),
            retry_max_times,
            consume_message_orderly,
        };
        let masters: Vec<BrokerRef> = self
            .brokers()
            .await?
            .into_iter()
            .filter(BrokerRef::is_master)
            .collect();
        for b in &masters {
            self.call(
                b.addr,
                RequestCode::UpdateAndCreateSubscriptionGroup,
                &h,
                &[],
            )
            .await?
            .expect(&[Status::Success])?;
        }
        Ok(masters)
    }

    /// Returns a consumer group to the brokers' default settings on every master that has
    /// settings for it; returns those brokers.
    pub async fn delete_group_settings(&self, group: &str) -> Result<Vec<BrokerRef>> {
        let h = ringmq_wire::command::DeleteSubscriptionGroupRequest {
            group: group.to_string(),
        };
        let mut changed = Vec::new();
        for b in self
            .brokers()
            .await?
            .into_iter()
            .filter(BrokerRef::is_master)
        {
            let a = self
                .call(b.addr, RequestCode::DeleteSubscriptionGroup, &h, &[])
                .await?
                .expect(&[Status::Success, Status::SubscriptionNotExist])?;
            if a.status()? == Status::Success {
                changed.push(b);
            }
        }
        Ok(changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_totals_and_assignment() {
        let q = |id| MessageQueue::new("t", "b", id);
        let p = GroupProgress {
            group: "g".into(),
            members: vec!["c1".into(), "c2".into()],
            queues: vec![
                QueueProgress {
                    queue: q(0),
                    broker_max_offset: 10,
                    committed_offset: Some(4),
                    lag: Some(6),
                    oldest_unconsumed_ms: Some(1_000),
                    member: Some("c1".into()),
                },
                QueueProgress {
                    queue: q(1),
                    broker_max_offset: 3,
                    committed_offset: None,
                    lag: None,
                    oldest_unconsumed_ms: None,
                    member: Some("c1".into()),
                },
            ],
        };
        assert_eq!(p.total_lag(), 6);
        let a = p.assignment();
        assert_eq!(a["c1"], vec![q(0), q(1)]);
        assert!(a["c2"].is_empty());
    }
}
