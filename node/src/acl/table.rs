//! The one table from request to what it needs. The match names every request code and has
//! no wildcard arm, so a new code does not compile until someone decides its rule; codes the
//! wire does not know never reach it (they are answered REQUEST_CODE_NOT_SUPPORTED before).

use ringmq_wire::codec::Decode;
use ringmq_wire::command::send_back::RETRY_TOPIC_PREFIX;
use ringmq_wire::command::{HeartbeatData, LockBatchRequest, Request};

use super::file::Perm;

/// A resource a request touches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Res {
    Topic(String),
    Group(String),
}

impl Res {
    pub fn kind(&self) -> &'static str {
        match self {
            Res::Topic(_) => "topic",
            Res::Group(_) => "group",
        }
    }

    pub fn name(&self) -> &str {
        match self {
            Res::Topic(n) | Res::Group(n) => n,
        }
    }
}

/// What a request needs from its caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    /// Any caller the ACL let in (a signed account, or an address on the global white list).
    Authenticated,
    /// An account with `admin: true`.
    Admin,
    /// These permissions on these resources.
    Access(Vec<(Res, Perm)>),
    /// Never accepted from a client (the broker sends it; it does not serve it).
    Never,
}

fn topic(t: &str, p: Perm) -> (Res, Perm) {
    // A consumer group's retry topic is the group's resource, as in RocketMQ.
    match t.strip_prefix(RETRY_TOPIC_PREFIX) {
        Some(group) => (Res::Group(group.to_owned()), Perm::SUB),
        None => (Res::Topic(t.to_owned()), p),
    }
}

/// A POP request's topic: a pop retry topic (`%RETRY%<group>_<topic>`) is its base topic's
/// resource; the group is checked beside it.
fn pop_topic(g: &str, t: &str) -> (Res, Perm) {
    let base = t
        .strip_prefix(RETRY_TOPIC_PREFIX)
        .and_then(|rest| rest.strip_prefix(g))
        .and_then(|rest| rest.strip_prefix('_'));
    (Res::Topic(base.unwrap_or(t).to_owned()), Perm::SUB)
}

fn group(g: &str) -> (Res, Perm) {
    (Res::Group(g.to_owned()), Perm::SUB)
}

/// What `request` (with its `body`) needs. A body that does not decode needs admin: the
/// handler refuses it anyway, and nothing is learned about an unreadable request's resources.
pub fn need(request: &Request, body: &[u8]) -> Need {
    use Need::*;
    match request {
        Request::SendMessage(h) | Request::SendBatchMessage(h) | Request::SendReplyMessage(h) => {
            Access(vec![topic(&h.topic, Perm::PUB)])
        }
        Request::PullMessage(h) => {
            Access(vec![topic(&h.topic, Perm::SUB), group(&h.consumer_group)])
        }
        Request::PopMessage(h) => Access(vec![
            pop_topic(&h.consumer_group, &h.topic),
            group(&h.consumer_group),
        ]),
        Request::AckMessage(h) => Access(vec![
            pop_topic(&h.consumer_group, &h.topic),
            group(&h.consumer_group),
        ]),
        Request::BatchAckMessage(h) => Access(vec![
            pop_topic(&h.consumer_group, &h.topic),
            group(&h.consumer_group),
        ]),
        Request::ChangeMessageInvisibleTime(h) => Access(vec![
            pop_topic(&h.consumer_group, &h.topic),
            group(&h.consumer_group),
        ]),
        Request::QueryConsumerOffset(h) => {
            Access(vec![topic(&h.topic, Perm::SUB), group(&h.consumer_group)])
        }
        Request::UpdateConsumerOffset(h) => {
            Access(vec![topic(&h.topic, Perm::SUB), group(&h.consumer_group)])
        }
        Request::GetMaxOffset(h) | Request::GetMinOffset(h) => {
            Access(vec![topic(&h.topic, Perm::SUB)])
        }
        Request::SearchOffsetByTimestamp(h) => Access(vec![topic(&h.topic, Perm::SUB)]),
        // RocketMQ's RECALL_MESSAGE is a PUB action on the topic (the broker checks that the
        // handle names the same topic).
        Request::RecallMessage(h) => Access(vec![topic(&h.topic, Perm::PUB)]),
        Request::QueryMessage(h) => Access(vec![topic(&h.topic, Perm::SUB)]),
        Request::ConsumerSendMsgBack(h) => Access(vec![group(&h.consumer_group)]),
        Request::GetConsumerListByGroup(h) => Access(vec![group(&h.consumer_group)]),
        Request::UnregisterClient(h) => match &h.consumer_group {
            Some(g) if !g.is_empty() => Access(vec![group(g)]),
            _ => Authenticated,
        },
        Request::HeartBeat(_) => match HeartbeatData::decode(body) {
            Ok(hb) => {
                let mut v = Vec::new();
                for g in &hb.consumer_groups {
                    v.push(group(&g.group));
                    for s in &g.subscriptions {
                        v.push(topic(&s.topic, Perm::SUB));
                    }
                }
                if v.is_empty() {
                    Authenticated
                } else {
                    Access(v)
                }
            }
            Err(_) => Admin,
        },
        Request::LockBatchMq(_) | Request::UnlockBatchMq(_) => {
            match LockBatchRequest::decode(body) {
                Ok(req) => {
                    let mut v = vec![group(&req.consumer_group)];
                    for q in &req.queues {
                        v.push(topic(&q.topic, Perm::SUB));
                    }
                    Access(v)
                }
                Err(_) => Admin,
            }
        }
        // Producers' own requests about their transactions: the half message's topic is
        // only known once it is found, and RocketMQ checks producer groups nowhere.
        Request::EndTransaction(_) => Authenticated,
        Request::Hello(_) | Request::GetBrokerRuntimeInfo(_) => Authenticated,
        // Who the caller is: anyone the ACL let in may ask about itself.
        Request::WhoAmI(_) => Authenticated,
        // Name server reads.
        Request::GetRouteInfoByTopic(_)
        | Request::GetBrokerClusterInfo(_)
        | Request::GetAllTopicListFromNameserver(_)
        | Request::GetKvConfig(_)
        | Request::ControllerGetReplicaInfo(_)
        | Request::ControllerGetMetadataInfo(_) => Authenticated,
        // Administration, cluster membership and replication.
        Request::UpdateAndCreateTopic(_)
        | Request::DeleteTopicInBroker(_)
        | Request::DeleteTopicInNamesrv(_)
        | Request::UpdateAndCreateSubscriptionGroup(_)
        | Request::DeleteSubscriptionGroup(_)
        | Request::GetAllSubscriptionGroupConfig(_)
        | Request::GetProducerConnectionList(_)
        | Request::GetAllTopicConfig(_)
        | Request::UpdateBrokerConfig(_)
        | Request::GetBrokerConfig(_)
        | Request::GetAllConsumerOffset(_)
        | Request::InvokeBrokerToResetOffset(_)
        | Request::ViewMessageById(_)
        | Request::GetScheduleStatus(_)
        | Request::GetPopStatus(_)
        | Request::GetTransactionStatus(_)
        | Request::PutKvConfig(_)
        | Request::DeleteKvConfig(_)
        | Request::RegisterBroker(_)
        | Request::UnregisterBroker(_)
        | Request::HaSubscribe(_)
        | Request::HaTransfer(_)
        | Request::HaAck(_)
        // Controllers: brokers' heartbeats and SyncStateSet changes, elections, Raft.
        | Request::ControllerBrokerHeartbeat(_)
        | Request::ControllerAlterSyncStateSet(_)
        | Request::ControllerElectMaster(_)
        | Request::ControllerRaft(_)
        // The ACL file itself (never returns a secret key; changes it).
        | Request::UpdateAndCreateAclConfig(_)
        | Request::DeleteAclConfig(_)
        | Request::GetBrokerClusterAclConfig(_)
        // ACL 2.0's users and policies (with ACL 2.0 on: super users only, see
        // `v2::check`).
        | Request::AuthSnapshot(_)
        | Request::AuthCreateUser(_)
        | Request::AuthUpdateUser(_)
        | Request::AuthDeleteUser(_)
        | Request::AuthGetUser(_)
        | Request::AuthListUser(_)
        | Request::AuthCreateAcl(_)
        | Request::AuthUpdateAcl(_)
        | Request::AuthDeleteAcl(_)
        | Request::AuthGetAcl(_)
        | Request::AuthListAcl(_) => Admin,
        Request::CheckTransactionState(_)
        | Request::NotifyConsumerIdsChanged(_)
        | Request::PushReplyMessageToClient(_) => Never,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringmq_wire::code::RequestCode;

    #[test]
    fn admin_codes_need_admin_whatever_their_fields() {
        use ringmq_wire::codec::sample::{Gen, Sample};
        let admin_codes = [
            RequestCode::UpdateAndCreateTopic,
            RequestCode::DeleteTopicInBroker,
            RequestCode::DeleteTopicInNamesrv,
            RequestCode::UpdateBrokerConfig,
            RequestCode::UpdateAndCreateSubscriptionGroup,
            RequestCode::DeleteSubscriptionGroup,
            RequestCode::RegisterBroker,
            RequestCode::UnregisterBroker,
            RequestCode::PutKvConfig,
            RequestCode::DeleteKvConfig,
            RequestCode::HaSubscribe,
            RequestCode::UpdateAndCreateAclConfig,
            RequestCode::DeleteAclConfig,
            RequestCode::GetBrokerClusterAclConfig,
            RequestCode::InvokeBrokerToResetOffset,
        ];
        let mut seen = std::collections::HashSet::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            let bytes: Vec<u8> = (0..64)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            let req = Request::sample(&mut Gen::new(&bytes));
            let n = need(&req, &bytes);
            seen.insert(req.code());
            if admin_codes.contains(&req.code()) {
                assert_eq!(n, Need::Admin, "{}", req.code().name());
            }
            if req.code() == RequestCode::WhoAmI {
                assert_eq!(n, Need::Authenticated);
            }
        }
        assert_eq!(seen.len(), RequestCode::ALL.len(), "every code sampled");
    }

    #[test]
    fn a_send_to_a_retry_topic_needs_the_group() {
        assert_eq!(
            topic("%RETRY%g1", Perm::PUB),
            (Res::Group("g1".to_owned()), Perm::SUB)
        );
        assert_eq!(
            topic("orders", Perm::PUB),
            (Res::Topic("orders".to_owned()), Perm::PUB)
        );
    }
}
