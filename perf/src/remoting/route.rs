//! A topic's queues as a RocketMQ client learns them: GET_ROUTEINFO_BY_TOPIC to the name
//! server over remoting, its JSON `TopicRouteData` read for each broker name's master
//! (`brokerDatas[].brokerAddrs["0"]`) and queue counts (`queueDatas[]`).

use std::sync::Arc;
use std::time::Duration;

use ringmq_client::security::Security;

use ringmq_client::wire::remoting::body::{JsonBody, TopicRouteData};
use ringmq_client::wire::remoting::code::{request as rc, response};
use ringmq_client::wire::remoting::frame::{Command, SerializeType};

use super::conn::Conn;
use crate::security::Target;

/// How long the name server may take to answer.
const ROUTE_TIMEOUT: Duration = Duration::from_secs(5);
/// The master's broker id in `brokerAddrs`.
const MASTER_ID: i64 = 0;

/// One broker name's queues of the topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerQueues {
    pub broker_name: String,
    /// The master's address.
    pub addr: String,
    pub write_queues: u32,
    pub read_queues: u32,
}

/// The topic's route from the first of the target's name servers ("h1:9876;h2:9876") that
/// answers.
pub async fn lookup(
    target: &Target,
    topic: &str,
    st: SerializeType,
) -> Result<Vec<BrokerQueues>, String> {
    let mut last = format!("no name server in {:?}", target.namesrv);
    for addr in target.name_servers() {
        match lookup_at(&addr, &target.security, topic, st).await {
            Ok(r) => return Ok(r),
            Err(e) => last = e,
        }
    }
    Err(last)
}

async fn lookup_at(
    addr: &str,
    security: &Arc<Security>,
    topic: &str,
    st: SerializeType,
) -> Result<Vec<BrokerQueues>, String> {
    let conn = Conn::connect(addr, security).await?;
    let mut ext = ringmq_client::wire::remoting::ext::ExtFields::new();
    ext.insert("topic", topic);
    let req = Command::request(rc::GET_ROUTEINFO_BY_TOPIC, 0, ext);
    let r = conn.request(req, st, &[], ROUTE_TIMEOUT).await?;
    if r.cmd.code != response::SUCCESS {
        return Err(format!(
            "route of {topic} from {addr}: code {} {}",
            r.cmd.code,
            r.cmd.remark.unwrap_or_default()
        ));
    }
    parse(&r.body).map_err(|e| format!("route of {topic} from {addr}: {e}"))
}

/// The masters and queue counts of a `TopicRouteData` body (broker names without a master
/// or without queues are left out).
pub fn parse(body: &[u8]) -> Result<Vec<BrokerQueues>, String> {
    let route = TopicRouteData::from_json(body).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for q in &route.queue_datas {
        let Some(b) = route
            .broker_datas
            .iter()
            .find(|b| b.broker_name == q.broker_name)
        else {
            continue;
        };
        let Some(addr) = b.broker_addrs.get(&MASTER_ID) else {
            continue;
        };
        let count = |n: i32| u32::try_from(n).unwrap_or(0);
        out.push(BrokerQueues {
            broker_name: q.broker_name.clone(),
            addr: addr.clone(),
            write_queues: count(q.write_queue_nums),
            read_queues: count(q.read_queue_nums),
        });
    }
    if out.is_empty() {
        return Err("no master with queues".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masters_and_queue_counts_are_read() {
        let body = br#"{"queueDatas":[{"brokerName":"b1","readQueueNums":8,"writeQueueNums":4,"perm":6,"topicSysFlag":0},
            {"brokerName":"b2","readQueueNums":2,"writeQueueNums":2,"perm":6}],
            "brokerDatas":[{"cluster":"c","brokerName":"b1","brokerAddrs":{"0":"127.0.0.1:10911","1":"127.0.0.1:10921"}},
            {"cluster":"c","brokerName":"b2","brokerAddrs":{"1":"127.0.0.1:10931"}}],
            "filterServerTable":{}}"#;
        let r = parse(body).expect("parses");
        assert_eq!(
            r,
            vec![BrokerQueues {
                broker_name: "b1".into(),
                addr: "127.0.0.1:10911".into(),
                write_queues: 4,
                read_queues: 8,
            }]
        );
        assert!(parse(br#"{"queueDatas":[],"brokerDatas":[]}"#).is_err());
        assert!(parse(b"not json").is_err());
    }
}
