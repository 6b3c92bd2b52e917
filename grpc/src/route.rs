//! QueryRoute and QueryAssignment: a topic's route from ringmq's name servers (through the
//! native admin client), shown as RocketMQ 5 message queues.
//!
//! - Queues: per broker group, read-only, write-only, read-write and no-permission queues
//!   numbered as RocketMQ's proxy numbers them (`min(read, write)` read-write queues, the
//!   rest read- or write-only), each with the topic's accepted message types: the topic
//!   attribute `message.type` (NORMAL, FIFO, DELAY, TRANSACTION, or MIXED = all four); a
//!   topic without the attribute accepts all four.
//! - Endpoints: this edge's own gRPC address for every broker. The edge reaches each
//!   broker over the native protocol, so clients need no other address (as with
//!   RocketMQ's proxy in cluster mode).
//! - QueryAssignment: one assignment per readable broker group with queue id -1 (POP picks
//!   the queue); FORBIDDEN when no queue is readable.

use ringmq_client::wire::command::{perm, TopicRoute, MASTER_ID};
use ringmq_client::{Admin, Error};

use crate::pb::{self, Code, MessageType, Permission};
use crate::status::{from_error, ok, status};

/// The topic attribute that names its accepted message types.
const MESSAGE_TYPE_ATTRIBUTE: &str = "message.type";

/// QueryRoute.
pub(crate) async fn query_route(
    admin: &Admin,
    endpoints: &pb::Endpoints,
    req: pb::QueryRouteRequest,
) -> pb::QueryRouteResponse {
    let topic = match topic_name(req.topic.as_ref()) {
        Ok(t) => t,
        Err(s) => return route_answer(s, Vec::new()),
    };
    let route = match admin.topic_route_data(&topic).await {
        Ok(r) => r,
        Err(e) => return route_answer(route_error(&topic, &e), Vec::new()),
    };
    let types = accepted_types(admin, &route, &topic).await;
    route_answer(ok(), message_queues(&route, &topic, &types, endpoints))
}

/// QueryAssignment.
pub(crate) async fn query_assignment(
    admin: &Admin,
    endpoints: &pb::Endpoints,
    req: pb::QueryAssignmentRequest,
) -> pb::QueryAssignmentResponse {
    let answer = |status, assignments| pb::QueryAssignmentResponse {
        status: Some(status),
        assignments,
    };
    let topic = match topic_name(req.topic.as_ref()) {
        Ok(t) => t,
        Err(s) => return answer(s, Vec::new()),
    };
    if req.group.as_ref().is_none_or(|g| g.name.is_empty()) {
        return answer(
            status(Code::IllegalConsumerGroup, "consumer group is empty"),
            Vec::new(),
        );
    }
    let route = match admin.topic_route_data(&topic).await {
        Ok(r) => r,
        Err(e) => return answer(route_error(&topic, &e), Vec::new()),
    };
    let assignments = assignments(&route, &topic, endpoints);
    if assignments.is_empty() {
        return answer(status(Code::Forbidden, "no readable queue"), Vec::new());
    }
    answer(ok(), assignments)
}

/// The topic's name, checked as RocketMQ's proxy checks it.
pub(crate) fn topic_name(r: Option<&pb::Resource>) -> Result<String, pb::Status> {
    let name = r.map(|r| r.name.as_str()).unwrap_or("");
    if name.is_empty() || name.len() > 127 || !name.chars().all(topic_char) {
        return Err(status(
            Code::IllegalTopic,
            format!("topic name {name:?} is empty, over 127 characters, or not [%A-Za-z0-9_-]"),
        ));
    }
    Ok(name.to_string())
}

fn topic_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '%' || c == '|'
}

fn route_answer(status: pb::Status, queues: Vec<pb::MessageQueue>) -> pb::QueryRouteResponse {
    pb::QueryRouteResponse {
        status: Some(status),
        message_queues: queues,
    }
}

fn route_error(topic: &str, e: &Error) -> pb::Status {
    match e {
        Error::NoRoute { .. } => {
            status(Code::TopicNotFound, format!("topic {topic} does not exist"))
        }
        e => from_error(e),
    }
}

/// The topic's accepted message types from its `message.type` attribute on a master that
/// has it; all four when none says (or none answers).
async fn accepted_types(admin: &Admin, route: &TopicRoute, topic: &str) -> Vec<MessageType> {
    for b in &route.brokers {
        let Some(addr) = b.master().and_then(|m| m.address.parse().ok()) else {
            continue;
        };
        if let Ok(Some(cfg)) = admin.topic_config(addr, topic).await {
            let value = cfg
                .attributes
                .get(MESSAGE_TYPE_ATTRIBUTE)
                .or_else(|| cfg.attributes.get("+message.type"));
            return parse_types(value.map(String::as_str));
        }
    }
    parse_types(None)
}

fn parse_types(attribute: Option<&str>) -> Vec<MessageType> {
    match attribute.map(str::to_ascii_uppercase).as_deref() {
        Some("NORMAL") => vec![MessageType::Normal],
        Some("FIFO") => vec![MessageType::Fifo],
        Some("DELAY") => vec![MessageType::Delay],
        Some("TRANSACTION") => vec![MessageType::Transaction],
        _ => vec![
            MessageType::Normal,
            MessageType::Fifo,
            MessageType::Delay,
            MessageType::Transaction,
        ],
    }
}

fn broker(name: &str, id: u64, endpoints: &pb::Endpoints) -> pb::Broker {
    pb::Broker {
        name: name.to_string(),
        id: i32::try_from(id).unwrap_or(i32::MAX),
        endpoints: Some(endpoints.clone()),
    }
}

fn resource(topic: &str) -> pb::Resource {
    pb::Resource {
        resource_namespace: String::new(),
        name: topic.to_string(),
    }
}

/// Every queue of every broker group's master, numbered as RocketMQ's proxy numbers them.
pub(crate) fn message_queues(
    route: &TopicRoute,
    topic: &str,
    types: &[MessageType],
    endpoints: &pb::Endpoints,
) -> Vec<pb::MessageQueue> {
    let mut out = Vec::new();
    for q in &route.queues {
        let Some(data) = route
            .brokers
            .iter()
            .find(|b| b.broker_name == q.broker_name)
        else {
            continue;
        };
        if data.master().is_none() {
            continue;
        }
        let b = broker(&q.broker_name, MASTER_ID, endpoints);
        let (r, w) = (perm::is_readable(q.perm), perm::is_writeable(q.perm));
        let (rc, wc) = (q.read_queue_count, q.write_queue_count);
        let (read_only, write_only, both, none) = match (r, w) {
            (true, true) => (rc - rc.min(wc), wc - rc.min(wc), rc.min(wc), 0),
            (false, true) => (0, wc, 0, 0),
            (true, false) => (rc, 0, 0, 0),
            (false, false) => (0, 0, 0, rc.max(wc).max(1)),
        };
        let mut id = 0i32;
        for (count, permission) in [
            (read_only, Permission::Read),
            (write_only, Permission::Write),
            (both, Permission::ReadWrite),
            (none, Permission::None),
        ] {
            for _ in 0..count {
                out.push(pb::MessageQueue {
                    topic: Some(resource(topic)),
                    id,
                    permission: permission as i32,
                    broker: Some(b.clone()),
                    accept_message_types: types.iter().map(|t| *t as i32).collect(),
                });
                id += 1;
            }
        }
    }
    out
}

/// One assignment per readable broker group (queue id -1: POP picks the queue).
pub(crate) fn assignments(
    route: &TopicRoute,
    topic: &str,
    endpoints: &pb::Endpoints,
) -> Vec<pb::Assignment> {
    route
        .queues
        .iter()
        .filter(|q| perm::is_readable(q.perm) && q.read_queue_count > 0)
        .filter(|q| {
            route
                .brokers
                .iter()
                .any(|b| b.broker_name == q.broker_name && b.master().is_some())
        })
        .map(|q| pb::Assignment {
            message_queue: Some(pb::MessageQueue {
                topic: Some(resource(topic)),
                id: -1,
                permission: if perm::is_writeable(q.perm) {
                    Permission::ReadWrite
                } else {
                    Permission::Read
                } as i32,
                broker: Some(broker(&q.broker_name, MASTER_ID, endpoints)),
                accept_message_types: Vec::new(),
            }),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringmq_client::wire::command::{BrokerData, BrokerReplica, BrokerRole, QueueData};

    fn route(perm: u8, read: u32, write: u32) -> TopicRoute {
        let mut replicas = std::collections::BTreeMap::new();
        replicas.insert(
            MASTER_ID,
            BrokerReplica {
                address: "127.0.0.1:10911".into(),
                ha_address: String::new(),
                role: BrokerRole::AsyncMaster,
                shard_count: 1,
                version: String::new(),
                shard_addresses: Vec::new(),
            },
        );
        TopicRoute {
            topic: "T".into(),
            brokers: vec![BrokerData {
                cluster: "c".into(),
                broker_name: "broker-a".into(),
                replicas,
            }],
            queues: vec![QueueData {
                broker_name: "broker-a".into(),
                read_queue_count: read,
                write_queue_count: write,
                perm,
                queue_shards: Vec::new(),
            }],
        }
    }

    #[test]
    fn queues_are_numbered_as_rocketmq_numbers_them() {
        let ep = pb::Endpoints::default();
        let qs = message_queues(
            &route(perm::READ_WRITE, 4, 2),
            "T",
            &[MessageType::Normal],
            &ep,
        );
        let perms: Vec<i32> = qs.iter().map(|q| q.permission).collect();
        assert_eq!(
            perms,
            vec![
                Permission::Read as i32,
                Permission::Read as i32,
                Permission::ReadWrite as i32,
                Permission::ReadWrite as i32
            ]
        );
        assert_eq!(
            qs.iter().map(|q| q.id).collect::<Vec<_>>(),
            vec![0, 1, 2, 3]
        );
        let none = message_queues(&route(0, 2, 2), "T", &[MessageType::Normal], &ep);
        assert_eq!(none.len(), 2);
        assert_eq!(none[0].permission, Permission::None as i32);
    }

    #[test]
    fn assignments_pop_any_queue() {
        let a = assignments(
            &route(perm::READ_WRITE, 8, 8),
            "T",
            &pb::Endpoints::default(),
        );
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].message_queue.as_ref().map(|q| q.id), Some(-1));
        assert!(assignments(&route(perm::WRITE, 8, 8), "T", &pb::Endpoints::default()).is_empty());
    }

    #[test]
    fn message_types_from_the_attribute() {
        assert_eq!(parse_types(Some("FIFO")), vec![MessageType::Fifo]);
        assert_eq!(parse_types(None).len(), 4);
        assert_eq!(parse_types(Some("MIXED")).len(), 4);
    }
}
