//! Request code -> handler: the router. `net` only moves frames; this is where a frame's
//! request is decoded and checked, once, and handed to the feature that serves it. Requests
//! about a queue run on the shard that owns it (`shard::route`: forwarded once through the
//! owner's mailbox, errors made statuses in one place).

use std::rc::Rc;

use ringmq_wire::code::{RequestCode, Status};
use ringmq_wire::codec::Decode;
use ringmq_wire::command::{HeartbeatData, Request};
use ringmq_wire::frame::{self, PREFIX_BYTES};

use crate::acl::Caller;
use crate::broker::auth_admin::AuthRequest;
use crate::broker::groups::Channel;
use crate::broker::shard::route::{forward_or_refuse, route, store_error, Origin};
use crate::broker::shard::Shard;
use crate::broker::{
    acl_admin, admin, auth_admin, clients, pop, produce, pull, queries as oh, request_reply, retry,
};
use crate::net::reply::{Outcome, Reply};
use crate::store::commitlog::shard_of_offset;
use crate::store::CheckedBatch;

/// Handles one whole request frame. `caller` is who sent it (authorized here, before
/// anything is read or changed); `None` for requests the broker makes itself or that another
/// shard already authorized.
pub fn dispatch(
    shard: &Rc<Shard>,
    mut frame_bytes: Vec<u8>,
    origin: Origin,
    caller: Option<&Caller>,
) -> Outcome {
    let (code, header_end) = match frame::parse(&frame_bytes) {
        Ok(f) => (f.request_code(), PREFIX_BYTES + f.header.len()),
        Err(e) => return Reply::error(Status::MalformedRequest, e.to_string()).into(),
    };
    let code = match code {
        Ok(c) => c,
        Err(e) => return Reply::error(Status::RequestCodeNotSupported, e.to_string()).into(),
    };
    let (header, body) = frame_bytes.split_at_mut(header_end);
    let header = &header[PREFIX_BYTES..];
    let request = match Request::decode(code, header) {
        Ok(r) => r,
        Err(e) => {
            return Reply::error(
                Status::MalformedRequest,
                format!("{}: bad header: {e}", code.name()),
            )
            .into()
        }
    };
    if let (Some(acl), Some(caller)) = (&shard.broker.acl, caller) {
        if let Err(refusal) = acl.authorize(caller, &request, body) {
            return Reply::error(Status::NoPermission, refusal.remark).into();
        }
    }
    let local = |topic: &str, queue_id: u32| route(shard, topic, queue_id);
    match request {
        Request::SendMessage(h) | Request::SendBatchMessage(h) | Request::SendReplyMessage(h) => {
            // The one decode of the records (CRC included unless this process wrote them);
            // everything after takes the result.
            let checked = if origin.encoded_here {
                CheckedBatch::check_encoded_here(body)
            } else {
                CheckedBatch::check(body)
            };
            let checked = match checked {
                Ok(c) => c,
                Err(e) => return store_error(shard, e).into(),
            };
            if let Err(reply) = produce::check_before_auto_create(shard, &h, body, &checked) {
                return reply.into();
            }
            if let Err(o) = produce::ensure_topic(shard, &h) {
                return o;
            }
            match produce::owner_of_batch(shard, &h, body, &checked) {
                Ok(owner) if owner == shard.id && code == RequestCode::SendReplyMessage => {
                    match request_reply::send_reply(shard, h, body, &checked) {
                        Ok(h) => produce::send(shard, h, body, &checked),
                        Err(answer) => answer,
                    }
                }
                Ok(owner) if owner == shard.id => produce::send(shard, h, body, &checked),
                Ok(owner) => forward_or_refuse(shard, owner, frame_bytes, origin),
                Err(reply) => reply.into(),
            }
        }
        Request::PullMessage(h) => match local(&h.topic, h.queue_id) {
            Ok(()) => match pop::refuse_pull(shard, &h.consumer_group, &h.topic, h.queue_id) {
                Some(refused) => refused.into(),
                None => pull::pull(shard, h, origin.zero_copy),
            },
            Err(o) => o.redirect(shard, frame_bytes, origin),
        },
        Request::PopMessage(h) => pop::pop(shard, h, frame_bytes, origin),
        Request::AckMessage(h) => pop::ack(shard, h, frame_bytes, origin),
        Request::BatchAckMessage(h) => {
            let body = body.to_vec();
            pop::batch_ack(shard, h, &body, frame_bytes, origin)
        }
        Request::ChangeMessageInvisibleTime(h) => {
            pop::change_invisible_time(shard, h, frame_bytes, origin)
        }
        Request::GetPopStatus(h) => {
            if h.shard_id == shard.id {
                pop::status(shard).into()
            } else if h.shard_id < shard.broker.shard_count {
                forward_or_refuse(shard, h.shard_id, frame_bytes, origin)
            } else {
                Reply::error(Status::MessageIllegal, format!("no shard {}", h.shard_id)).into()
            }
        }
        Request::QueryConsumerOffset(h) => match local(&h.topic, h.queue_id) {
            Ok(()) => oh::query_offset(shard, &h).into(),
            Err(o) => o.redirect(shard, frame_bytes, origin),
        },
        Request::GetAllConsumerOffset(h) => {
            if h.shard_id == shard.id {
                oh::all_offsets(shard)
            } else if h.shard_id < shard.broker.shard_count {
                forward_or_refuse(shard, h.shard_id, frame_bytes, origin)
            } else {
                Reply::error(Status::MessageIllegal, format!("no shard {}", h.shard_id)).into()
            }
        }
        Request::UpdateConsumerOffset(h) | Request::InvokeBrokerToResetOffset(h) => {
            match local(&h.topic, h.queue_id) {
                Ok(()) => oh::update_offset(shard, &h).into(),
                Err(o) => o.redirect(shard, frame_bytes, origin),
            }
        }
        Request::GetMaxOffset(h) | Request::GetMinOffset(h) => match local(&h.topic, h.queue_id) {
            Ok(()) => oh::queue_offset(shard, &h, code == RequestCode::GetMaxOffset).into(),
            Err(o) => o.redirect(shard, frame_bytes, origin),
        },
        Request::SearchOffsetByTimestamp(h) => match local(&h.topic, h.queue_id) {
            Ok(()) => oh::search_offset(shard, &h).into(),
            Err(o) => o.redirect(shard, frame_bytes, origin),
        },
        Request::ViewMessageById(h) => {
            let owner = shard_of_offset(h.physical_offset);
            if owner == shard.id {
                admin::view_message(shard, h.physical_offset).into()
            } else if usize::from(owner) < shard.broker.mailboxes.len() {
                forward_or_refuse(shard, owner, frame_bytes, origin)
            } else {
                Reply::error(Status::QueryNotFound, "no such message id on this broker").into()
            }
        }
        Request::HeartBeat(_) => match HeartbeatData::decode(body) {
            Ok(hb) => {
                let channel = origin.conn.map(|conn| Channel {
                    shard: shard.id,
                    conn,
                });
                clients::heartbeat(shard, &hb, channel).into()
            }
            Err(e) => Reply::error(Status::MalformedRequest, format!("heartbeat body: {e}")).into(),
        },
        Request::UnregisterClient(h) => clients::unregister(shard, &h).into(),
        Request::LockBatchMq(_) => clients::lock_batch(shard, body).into(),
        Request::UnlockBatchMq(_) => clients::unlock_batch(shard, body).into(),
        Request::ConsumerSendMsgBack(h) => retry::send_back(shard, h, frame_bytes, origin),
        Request::GetConsumerListByGroup(h) => admin::consumer_list(shard, &h.consumer_group).into(),
        Request::GetProducerConnectionList(h) => {
            admin::producer_list(shard, &h.producer_group).into()
        }
        Request::GetBrokerRuntimeInfo(_) => admin::runtime_info(shard).into(),
        Request::QueryMessage(h) => crate::broker::query::query(shard, h, frame_bytes, origin),
        Request::GetBrokerConfig(_) => admin::broker_config(shard).into(),
        Request::UpdateBrokerConfig(_) => admin::update_broker_config(shard, body).into(),
        Request::GetAllSubscriptionGroupConfig(_) => admin::consumer_groups(shard).into(),
        Request::UpdateAndCreateSubscriptionGroup(h) => admin::update_group(shard, &h).into(),
        Request::DeleteSubscriptionGroup(h) => admin::delete_group(shard, &h).into(),
        Request::UpdateAndCreateTopic(h) => admin::create_topic(shard, &h).into(),
        Request::DeleteTopicInBroker(h) => admin::delete_topic(shard, &h.topic).into(),
        Request::GetAllTopicConfig(_) => admin::all_topics(shard).into(),
        Request::Hello(h) => admin::hello(shard, &h).into(),
        Request::GetScheduleStatus(_) => crate::broker::schedule::status(shard).into(),
        Request::GetTransactionStatus(_) => crate::broker::txn::status(shard).into(),
        Request::GetBrokerClusterAclConfig(_) => acl_admin::list(shard.broker.acl.as_ref()).into(),
        Request::UpdateAndCreateAclConfig(h) => {
            acl_admin::write(shard.broker.acl.as_ref(), &h, body).into()
        }
        Request::DeleteAclConfig(h) => {
            acl_admin::delete(shard.broker.acl.as_ref(), &h, caller).into()
        }
        Request::WhoAmI(_) => acl_admin::whoami(shard.broker.acl.as_ref(), caller).into(),
        Request::AuthSnapshot(_) => auth(shard, AuthRequest::Snapshot, body, caller),
        Request::AuthCreateUser(h) => auth(shard, AuthRequest::CreateUser(h), body, caller),
        Request::AuthUpdateUser(h) => auth(shard, AuthRequest::UpdateUser(h), body, caller),
        Request::AuthDeleteUser(h) => auth(shard, AuthRequest::DeleteUser(h), body, caller),
        Request::AuthGetUser(h) => auth(shard, AuthRequest::GetUser(h), body, caller),
        Request::AuthListUser(h) => auth(shard, AuthRequest::ListUser(h), body, caller),
        Request::AuthCreateAcl(h) | Request::AuthUpdateAcl(h) => {
            auth(shard, AuthRequest::PutAcl(h), body, caller)
        }
        Request::AuthDeleteAcl(h) => auth(shard, AuthRequest::DeleteAcl(h), body, caller),
        Request::AuthGetAcl(h) => auth(shard, AuthRequest::GetAcl(h), body, caller),
        Request::AuthListAcl(h) => auth(shard, AuthRequest::ListAcl(h), body, caller),
        // Not served on the broker port, on purpose: each is listed so that a new request
        // code is a compile error here until someone decides where it is served.
        Request::PutKvConfig(_)
        | Request::GetKvConfig(_)
        | Request::DeleteKvConfig(_)
        | Request::RegisterBroker(_)
        | Request::UnregisterBroker(_)
        | Request::GetRouteInfoByTopic(_)
        | Request::GetBrokerClusterInfo(_)
        | Request::GetAllTopicListFromNameserver(_)
        | Request::DeleteTopicInNamesrv(_) => {
            not_served(code, "name server requests go to a name server")
        }
        Request::HaSubscribe(_) | Request::HaTransfer(_) | Request::HaAck(_) => {
            not_served(code, "replication goes to the HA port")
        }
        Request::ControllerBrokerHeartbeat(_)
        | Request::ControllerAlterSyncStateSet(_)
        | Request::ControllerElectMaster(_)
        | Request::ControllerGetReplicaInfo(_)
        | Request::ControllerGetMetadataInfo(_)
        | Request::ControllerRaft(_) => not_served(
            code,
            "controller requests go to a controller (a name server with enableControllerInNamesrv=true, or `ringmq controller`)",
        ),
        Request::CheckTransactionState(_)
        | Request::NotifyConsumerIdsChanged(_)
        | Request::PushReplyMessageToClient(_) => {
            not_served(code, "the broker sends it to clients, it does not serve it")
        }
        Request::EndTransaction(h) => {
            crate::broker::txn::end_transaction(shard, h, frame_bytes, origin)
        }
        Request::RecallMessage(h) => crate::broker::recall::recall(shard, h, frame_bytes, origin),
    }
}

/// ACL 2.0's requests (`auth_admin`).
fn auth(shard: &Shard, r: AuthRequest, body: &[u8], caller: Option<&Caller>) -> Outcome {
    auth_admin::serve(shard.broker.acl.as_ref(), r, body, caller).into()
}

fn not_served(code: RequestCode, why: &str) -> Outcome {
    Reply::error(
        Status::RequestCodeNotSupported,
        format!("{} is not served on the broker port: {why}", code.name()),
    )
    .into()
}
