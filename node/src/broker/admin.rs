//! Control-path requests any shard answers: HELLO, heartbeats and consumer lists, topic
//! create/update/delete/list, runtime info, and message lookup by id (on the owning shard).

use std::sync::atomic::Ordering;

use ringmq_wire::code::{Status, PROTOCOL_VERSION};
use ringmq_wire::codec::{Decode, Empty};
use ringmq_wire::command::route::perm;
use ringmq_wire::command::{
    BrokerConfigTable, BrokerRuntimeInfo, ConsumerGroupInfo, ConsumerGroupList, CreateTopicRequest,
    DeleteSubscriptionGroupRequest, HelloRequest, HelloResponse, SubscriptionGroupConfig,
};

use crate::broker::shard::route::encoded_body;
use crate::broker::shard::route::store_error;
use crate::broker::shard::Shard;
use crate::broker::Broker;
use crate::net::reply::{Body, Reply};
use crate::shard::mailbox::Mail;

pub fn hello(shard: &Shard, h: &HelloRequest) -> Reply {
    if h.protocol_version != PROTOCOL_VERSION {
        return Reply::error(
            Status::ProtocolVersionNotSupported,
            format!(
                "protocol version {} is not supported; this broker speaks {PROTOCOL_VERSION}",
                h.protocol_version
            ),
        );
    }
    let b = &shard.broker;
    Reply::ok(HelloResponse {
        protocol_version: PROTOCOL_VERSION,
        cluster: b.config.broker_cluster_name.clone(),
        broker_name: b.config.broker_name.clone(),
        broker_id: b.config.broker_id,
        shard_count: b.shard_count,
        shard_id: shard.id,
        frame_bytes_max: b.rt.frame_bytes_max as u32,
        tls_session: ringmq_wire::codec::Appended(true),
    })
}

pub fn consumer_list(shard: &Shard, group: &str) -> Reply {
    let groups = shard
        .broker
        .groups
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let list = ringmq_wire::command::ConsumerList {
        client_ids: groups.members(group, Broker::now_ms()),
    };
    encoded_body(list)
}

/// GET_PRODUCER_CONNECTION_LIST: a producer group's live members.
pub fn producer_list(shard: &Shard, group: &str) -> Reply {
    let groups = shard.broker.lock_groups();
    encoded_body(ringmq_wire::command::ProducerList {
        client_ids: groups.producers(group, Broker::now_ms()),
    })
}

pub fn runtime_info(shard: &Shard) -> Reply {
    let b = &shard.broker;
    let shards = b
        .counters
        .iter()
        .enumerate()
        .map(|(i, c)| c.snapshot(i as u16))
        .collect();
    let mut extra = std::collections::BTreeMap::new();
    extra.insert("version".to_string(), crate::VERSION.to_string());
    extra.insert("role".to_string(), b.effective_role().name().to_string());
    extra.insert("flushDiskType".to_string(), b.rt.flush.as_str().to_string());
    extra.insert(
        "uptime_ms".to_string(),
        (Broker::now_ms() - b.started_ms).to_string(),
    );
    if let Some(ms) = process_cpu_ms() {
        extra.insert("processCpuTimeMs".to_string(), ms.to_string());
    }
    extra.insert(
        "connections".to_string(),
        b.connections.load(Ordering::Relaxed).to_string(),
    );
    extra.insert("aclEnable".to_string(), b.acl.is_some().to_string());
    if let Some(acl) = &b.acl {
        for (reason, n) in acl.refusal_counts() {
            extra.insert(format!("acl.refused.{reason}"), n.to_string());
        }
        let (reloads, errors) = acl.reload_counts();
        extra.insert("acl.reloads".to_string(), reloads.to_string());
        extra.insert("acl.reload_errors".to_string(), errors.to_string());
    }
    for (i, c) in b.counters.iter().enumerate() {
        extra.insert(
            format!("shard.{i}.msgs_in_per_s"),
            c.msgs_in_per_s.load(Ordering::Relaxed).to_string(),
        );
        extra.insert(
            format!("shard.{i}.msgs_out_per_s"),
            c.msgs_out_per_s.load(Ordering::Relaxed).to_string(),
        );
        if b.is_master() {
            extra.insert(
                format!("shard.{i}.ha_slaves"),
                c.ha_slaves.load(Ordering::Relaxed).to_string(),
            );
            extra.insert(
                format!("shard.{i}.ha_lag_ms"),
                c.ha_lag_ms.load(Ordering::Relaxed).to_string(),
            );
        }
        extra.insert(
            format!("shard.{i}.ha_lag_bytes"),
            c.ha_lag_bytes.load(Ordering::Relaxed).to_string(),
        );
    }
    if let Ok(ratio) = shard.store.borrow().disk_used_ratio() {
        extra.insert(
            "disk_used_percent".to_string(),
            format!("{:.1}", ratio * 100.0),
        );
    }
    encoded_body(BrokerRuntimeInfo {
        broker_name: b.config.broker_name.clone(),
        broker_id: b.config.broker_id,
        shards,
        extra,
    })
}

/// User + system CPU time of this process in ms, from `/proc/self/stat` (USER_HZ is 100 on
/// every Linux ABI); `None` elsewhere. For clients that measure CPU per message.
fn process_cpu_ms() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/stat").ok()?;
    let mut f = text
        .get(text.rfind(')')? + 2..)?
        .split_whitespace()
        .skip(11);
    let ticks = f.next()?.parse::<u64>().ok()? + f.next()?.parse::<u64>().ok()?;
    Some(ticks * 10)
}

pub fn broker_config(shard: &Shard) -> Reply {
    let table = BrokerConfigTable {
        entries: crate::broker::live::entries(&shard.broker.live.config()),
    };
    encoded_body(table)
}

pub fn update_broker_config(shard: &Shard, body: &[u8]) -> Reply {
    let changes = match BrokerConfigTable::decode(body) {
        Ok(t) => t.entries,
        Err(e) => return Reply::error(Status::MalformedRequest, format!("config body: {e}")),
    };
    let old_perm = shard.broker.live.permission();
    match shard.broker.live.update(&changes) {
        Ok(()) => {
            log::info!("broker config changed: {changes:?}");
            if shard.broker.live.permission() != old_perm {
                // The route carries the permission: re-register at once.
                shard.broker.topics_changed.notify(usize::MAX);
            }
            Reply::ok(Empty)
        }
        Err(e) => Reply::error(Status::MessageIllegal, e),
    }
}

/// GET_ALL_SUBSCRIPTIONGROUP_CONFIG: groups with live members or settings.
pub fn consumer_groups(shard: &Shard) -> Reply {
    let b = &shard.broker;
    let mut names: std::collections::BTreeSet<String> = b
        .group_configs
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .names()
        .map(str::to_owned)
        .collect();
    let groups = b.lock_groups();
    names.extend(groups.names());
    let now = Broker::now_ms();
    let list = ConsumerGroupList {
        groups: names
            .into_iter()
            .map(|g| ConsumerGroupInfo {
                members: groups.members(&g, now),
                subscriptions: groups.subscriptions(&g),
                retry_max_times: b.retry_max_times(&g),
                consume_message_orderly: b.orderly(&g),
                group: g,
            })
            .collect(),
    };
    encoded_body(list)
}

/// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: a group's retry limit and orderly flag on this broker.
pub fn update_group(shard: &Shard, h: &SubscriptionGroupConfig) -> Reply {
    if let Err(e) = crate::limits::validate_group_name(&h.group) {
        return Reply::error(Status::MessageIllegal, e.to_string());
    }
    let set = shard
        .broker
        .group_configs
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .set(
            &h.group,
            crate::broker::group_config::GroupSettings {
                retry_max_times: h.retry_max_times,
                consume_message_orderly: h.consume_message_orderly,
            },
        );
    match set {
        Ok(()) => {
            log::info!(
                "consumer group {}: retry_max_times {}, consume_message_orderly {}",
                h.group,
                h.retry_max_times,
                h.consume_message_orderly
            );
            Reply::ok(Empty)
        }
        Err(e) => Reply::error(
            Status::SystemError,
            format!("saving consumer group settings: {e}"),
        ),
    }
}

/// DELETE_SUBSCRIPTIONGROUP: the group goes back to the broker's defaults.
pub fn delete_group(shard: &Shard, h: &DeleteSubscriptionGroupRequest) -> Reply {
    let deleted = shard
        .broker
        .group_configs
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .delete(&h.group);
    match deleted {
        Ok(true) => Reply::ok(Empty),
        Ok(false) => Reply::error(
            Status::SubscriptionNotExist,
            format!("consumer group {} has no settings on this broker", h.group),
        ),
        Err(e) => Reply::error(
            Status::SystemError,
            format!("saving consumer group settings: {e}"),
        ),
    }
}

pub fn create_topic(shard: &Shard, h: &CreateTopicRequest) -> Reply {
    let perm_bits = if h.perm == 0 {
        perm::READ_WRITE
    } else {
        h.perm
    };
    match shard.broker.topics.upsert(
        &h.topic,
        h.read_queue_count,
        h.write_queue_count,
        perm_bits,
        h.attributes.clone(),
        Broker::now_ms(),
    ) {
        Ok(cfg) => {
            log::info!(
                "topic {} set: {} read / {} write queues, perm {}",
                cfg.topic,
                cfg.read_queue_count,
                cfg.write_queue_count,
                cfg.perm
            );
            shard.broker.topics_changed.notify(usize::MAX);
            Reply::ok(cfg)
        }
        Err(e) => Reply::error(Status::MessageIllegal, e.to_string()),
    }
}

pub fn delete_topic(shard: &Shard, topic: &str) -> Reply {
    match shard.broker.topics.delete(topic, Broker::now_ms()) {
        Ok(true) => {
            for mb in &shard.broker.mailboxes {
                // A full mailbox only delays cleanup: the queues' files stay until retention.
                let _ = mb.try_send(Mail::DeleteTopic {
                    topic: topic.to_string(),
                });
            }
            shard.broker.topics_changed.notify(usize::MAX);
            log::info!("topic {topic} deleted");
            Reply::ok(Empty)
        }
        Ok(false) => Reply::error(
            Status::TopicNotExist,
            format!("topic {topic} does not exist"),
        ),
        Err(e) => Reply::error(Status::SystemError, e.to_string()),
    }
}

pub fn all_topics(shard: &Shard) -> Reply {
    encoded_body(shard.broker.topics.snapshot().to_wire())
}

pub fn view_message(shard: &Shard, physical_offset: u64) -> Reply {
    let result = shard.store.borrow().read_record(physical_offset);
    match result {
        Ok(bytes) => Reply::ok_body(Empty, Body::Bytes(bytes)),
        Err(e) => store_error(shard, e),
    }
}
