//! The remoting edge on a shard's own port: requests name the shard's queues by their ids in
//! the shard's view (`net::shard_view`), and answers must name them so too. This file holds
//! the translations both ways that are more than one id: queue sets in lock bodies, receipt
//! and recall handles, and the QUEUEID of records in a pull or POP answer (the broker's
//! records carry the broker's ids; the bytes are patched in place, four bytes per record,
//! after the body was copied out of the log, which a shard port's connection asks for).
//!
//! Routes: [`split_route`] turns a broker with several shards into one broker per shard for
//! RocketMQ clients (`<brokerName>@<shard>` at the shard's own address, its share of each
//! topic's queues). Name servers and brokers both answer routes through it.

use std::collections::BTreeMap;

use ringmq_wire::command::route::{BrokerData, QueueData, TopicRoute};
use ringmq_wire::command::{MessageQueue, ReceiptHandle};
use ringmq_wire::recall::RecallHandle;
use ringmq_wire::record;

use crate::net::shard_view::{pseudo_name, split_name, ShardView};

/// The broker's queue of `topic` that the view's queue `local` is; unchanged without a view.
pub fn global(view: Option<ShardView>, topic: &str, local: u32) -> u32 {
    match view {
        Some(v) => v.global(topic, local),
        None => local,
    }
}

/// The view's id of the broker's queue `global`; unchanged without a view, or when another
/// shard owns it (a request never names one: the id is past this shard's queues).
pub fn local(view: Option<ShardView>, topic: &str, global: u32) -> u32 {
    match view {
        Some(v) => v.local(topic, global).unwrap_or(global),
        None => global,
    }
}

/// A lock body's queues, named by a shard's name (`<brokerName>@<shard>`) and its ids, as
/// the broker's; queues named otherwise are left as they are.
pub fn queues_to_broker(view: Option<ShardView>, queues: &mut [MessageQueue]) {
    let Some(v) = view else {
        return;
    };
    for q in queues {
        if let Some((broker, shard)) = split_name(&q.broker_name) {
            let sv = ShardView {
                shard,
                shard_count: v.shard_count,
            };
            q.queue_id = sv.global(&q.topic, q.queue_id);
            q.broker_name = broker.to_string();
        }
    }
}

/// The broker's queues as the shard that owns each names them.
pub fn queues_to_view(view: Option<ShardView>, queues: &mut [MessageQueue]) {
    let Some(v) = view else {
        return;
    };
    for q in queues {
        let shard = ringmq_wire::command::route::shard_of(&q.topic, q.queue_id, v.shard_count);
        let sv = ShardView {
            shard,
            shard_count: v.shard_count,
        };
        if let Some(j) = sv.local(&q.topic, q.queue_id) {
            q.queue_id = j;
            q.broker_name = sv.broker_name(&q.broker_name);
        }
    }
}

/// An ack's or invisible-time change's queue id and receipt handle (POP `extraInfo`) as a
/// client made them in the view, as the broker's. The records of one POP answer come from
/// one shard, the one keeping its checkpoint (the handle's revive shard, `reviveQid`), and
/// carry that shard's ids (see [`patch_records`]), even when the pop came in on another
/// shard's port. An unreadable handle is left for the broker to refuse.
pub fn receipt_to_broker(
    view: Option<ShardView>,
    topic: &str,
    queue_id: u32,
    extra_info: String,
) -> (u32, String) {
    let Some(v) = view else {
        return (queue_id, extra_info);
    };
    let Ok(mut h) = ReceiptHandle::parse(&extra_info) else {
        return (v.global(topic, queue_id), extra_info);
    };
    let keeper = ShardView {
        shard: h.revive_shard,
        shard_count: v.shard_count,
    };
    h.queue_id = keeper.global(topic, h.queue_id);
    if let Some((broker, _)) = split_name(&h.broker_name) {
        h.broker_name = broker.to_string();
    }
    (keeper.global(topic, queue_id), h.to_string())
}

/// A recall handle made on a shard's port names the shard's broker name: the broker's.
pub fn recall_to_broker(view: Option<ShardView>, handle: String) -> String {
    if view.is_none() {
        return handle;
    }
    match RecallHandle::decode(&handle) {
        Ok(mut h) => match split_name(&h.broker_name) {
            Some((broker, _)) => {
                h.broker_name = broker.to_string();
                h.encode()
            }
            None => handle,
        },
        Err(_) => handle,
    }
}

/// Writes the view's queue ids into the records of `body`: `queue` for every record (a
/// pull reads one queue), or each record's own id in the view (a POP reads several).
/// Stops at the first entry that is not a whole record.
pub fn patch_records(view: ShardView, body: &mut [u8], queue: Option<u32>) {
    let mut at = 0usize;
    while at < body.len() {
        let Ok(r) = record::decode_one_unverified(&body[at..]) else {
            return;
        };
        let len = r.len();
        let id = match queue {
            Some(q) => Some(q),
            None => view.local(r.topic, r.queue_id),
        };
        if let Some(id) = id {
            let p = at + record::pos::QUEUE_ID;
            body[p..p + 4].copy_from_slice(&id.to_be_bytes());
        }
        at += len;
    }
}

/// How many shards `b` announces addresses for (0 or 1: it is seen as one broker).
fn shards_announced(b: &BrokerData) -> u16 {
    let shards = b
        .replicas
        .values()
        .map(|r| r.shard_addresses.len())
        .max()
        .unwrap_or(0);
    u16::try_from(shards).unwrap_or(0)
}

/// The names RocketMQ clients know `b`'s shards by in routes (`<brokerName>@<shard>`); none
/// when it is seen as one broker.
pub fn shard_names(b: &BrokerData) -> Vec<String> {
    match shards_announced(b) {
        n if n > 1 => (0..n).map(|s| pseudo_name(&b.broker_name, s)).collect(),
        _ => Vec::new(),
    }
}

/// `route` as RocketMQ clients see it: a broker whose replicas have their own per-shard
/// addresses becomes one broker per shard (`<brokerName>@<shard>`, each replica at its
/// shard's address) with the shard's share of the queues; other brokers are unchanged.
pub fn split_route(route: &TopicRoute) -> TopicRoute {
    let mut brokers = Vec::with_capacity(route.brokers.len());
    let mut split: BTreeMap<&str, u16> = BTreeMap::new();
    for b in &route.brokers {
        let shards = shards_announced(b);
        if shards <= 1 {
            brokers.push(b.clone());
            continue;
        }
        split.insert(&b.broker_name, shards);
        for s in 0..shards {
            brokers.push(BrokerData {
                cluster: b.cluster.clone(),
                broker_name: pseudo_name(&b.broker_name, s),
                replicas: b
                    .replicas
                    .iter()
                    .map(|(&id, r)| {
                        let mut r = r.clone();
                        if let Some(a) = r.shard_addresses.get(usize::from(s)) {
                            r.address = a.clone();
                        }
                        (id, r)
                    })
                    .collect(),
            });
        }
    }
    let mut queues = Vec::with_capacity(route.queues.len());
    for q in &route.queues {
        let Some(&shards) = split.get(q.broker_name.as_str()) else {
            queues.push(q.clone());
            continue;
        };
        for s in 0..shards {
            let v = ShardView {
                shard: s,
                shard_count: shards,
            };
            let read = v.count(&route.topic, q.read_queue_count);
            let write = v.count(&route.topic, q.write_queue_count);
            if read == 0 && write == 0 {
                continue;
            }
            queues.push(QueueData {
                broker_name: pseudo_name(&q.broker_name, s),
                read_queue_count: read,
                write_queue_count: write,
                perm: q.perm,
                queue_shards: vec![s; read.max(write) as usize],
            });
        }
    }
    TopicRoute {
        topic: route.topic.clone(),
        brokers,
        queues,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringmq_wire::command::route::{BrokerReplica, BrokerRole, TopicConfig, MASTER_ID};

    fn route(shard_addresses: Vec<String>) -> TopicRoute {
        let cfg = TopicConfig::new("T", 5, 2);
        TopicRoute {
            topic: "T".into(),
            brokers: vec![BrokerData {
                cluster: "c".into(),
                broker_name: "broker-a".into(),
                replicas: BTreeMap::from([(
                    MASTER_ID,
                    BrokerReplica {
                        address: "127.0.0.1:10911".into(),
                        ha_address: String::new(),
                        role: BrokerRole::AsyncMaster,
                        shard_count: 2,
                        version: "0".into(),
                        shard_addresses,
                    },
                )]),
            }],
            queues: vec![QueueData::from_config("broker-a", &cfg)],
        }
    }

    #[test]
    fn a_broker_with_shard_ports_is_a_broker_per_shard() {
        let r = split_route(&route(vec!["127.0.0.1:1".into(), "127.0.0.1:2".into()]));
        let names: Vec<&str> = r.brokers.iter().map(|b| b.broker_name.as_str()).collect();
        assert_eq!(names, ["broker-a@0", "broker-a@1"]);
        assert_eq!(r.brokers[1].replicas[&MASTER_ID].address, "127.0.0.1:2");
        let total: u32 = r.queues.iter().map(|q| q.write_queue_count).sum();
        assert_eq!(total, 5);
        for q in &r.queues {
            let (_, s) = split_name(&q.broker_name).expect("a shard's name");
            let v = ShardView {
                shard: s,
                shard_count: 2,
            };
            assert_eq!(q.read_queue_count, v.count("T", 5));
        }
        // Without shard ports (one shard, or an older broker): unchanged.
        let plain = route(Vec::new());
        assert_eq!(split_route(&plain), plain);
    }

    #[test]
    fn records_get_the_views_ids() {
        let v = ShardView {
            shard: 1,
            shard_count: 2,
        };
        let g = v.global("T", 2);
        let msg = record::Message {
            topic: "T",
            queue_id: g,
            flag: 0,
            sys_flag: 0,
            born_timestamp_ms: 1,
            born_host: "127.0.0.1:1".parse().expect("an address"),
            store_host_v6: false,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: b"x",
            properties: b"",
        };
        let mut body = Vec::new();
        record::encode(&msg, &mut body).expect("encodes");
        record::encode(&msg, &mut body).expect("encodes");
        patch_records(v, &mut body, None);
        let ids: Vec<u32> = record::iter(&body)
            .map(|r| r.expect("a record").queue_id)
            .collect();
        assert_eq!(ids, [2, 2]);
        patch_records(v, &mut body, Some(7));
        assert!(record::iter(&body).all(|r| r.expect("a record").queue_id == 7));
    }

    #[test]
    fn lock_sets_cross_both_ways() {
        let v = Some(ShardView {
            shard: 0,
            shard_count: 2,
        });
        let mut qs = vec![MessageQueue {
            topic: "T".into(),
            broker_name: "broker-a@1".into(),
            queue_id: 1,
        }];
        queues_to_broker(v, &mut qs);
        assert_eq!(qs[0].broker_name, "broker-a");
        let g = qs[0].queue_id;
        assert_eq!(ringmq_wire::command::route::shard_of("T", g, 2), 1);
        queues_to_view(v, &mut qs);
        assert_eq!(qs[0].broker_name, "broker-a@1");
        assert_eq!(qs[0].queue_id, 1);
    }
}
